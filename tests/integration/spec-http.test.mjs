// Spec §1: HTTP routing and which WebSocket upgrades are accepted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, gateway, exchange } from './lib/harness.mjs';

let tc;
gateway({}, (_r, t) => { tc = t; });

/** Connects, checks the socket really serves commands, closes it. */
async function usable(thread) {
  const c = await connect(tc.url(thread));
  const replies = await exchange(c, [JSON.stringify({ id: 1, method: 'nope', params: {} })]);
  assert.deepEqual(replies.map((r) => [r.id, r.error]), [[1, 'unknown_command']], thread);
  await c.close();
}

test('GET /healthz → 200 JSON with status ok', async () => {
  const r = await tc.http('/healthz');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  const body = await r.json();
  assert.equal(body.status, 'ok');
});

test('GET /readyz → 200 {ready:true, redis:"up", draining:false} with Redis up', async () => {
  const r = await tc.http('/readyz');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  const body = await r.json();
  assert.equal(body.ready, true);
  assert.equal(body.redis, 'up');
  assert.equal(body.draining, false);
});

test('unknown paths → 404 JSON with error not_found', async () => {
  // (/threads and /threads/:id are the REST API's since issue 17: rest-http.test.mjs)
  for (const p of ['/nope', '/', '/threads/t1/x/y', '/threads/t1/streamx', '/healthz/x']) {
    const r = await tc.http(p);
    assert.equal(r.status, 404, p);
    assert.match(r.headers.get('content-type'), /^application\/json/, p);
    assert.equal((await r.json()).error, 'not_found', p);
  }
});

test('POST /healthz → 405', async () => {
  const r = await tc.http('/healthz', { method: 'POST', body: '{}' });
  assert.equal(r.status, 405);
  await r.arrayBuffer();
});

test('GET /threads/t1/stream without Upgrade → 426 JSON upgrade_required', async () => {
  const r = await tc.http('/threads/t1/stream');
  assert.equal(r.status, 426);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.equal((await r.json()).error, 'upgrade_required');
});

test('WebSocket upgrade to an unknown path → HTTP 404', async () => {
  await assert.rejects(connect(`ws://127.0.0.1:${tc.port}/nope`), (e) => e.status === 404);
  await assert.rejects(connect(`ws://127.0.0.1:${tc.port}/threads/t1`), (e) => e.status === 404);
});

test('WebSocket upgrade with a bad thread id → HTTP 400', async () => {
  await assert.rejects(connect(tc.url('bad%7Bid')), (e) => e.status === 400);
  await assert.rejects(connect(tc.url('a'.repeat(129))), (e) => e.status === 400);
  await assert.rejects(connect(tc.url('a%20b')), (e) => e.status === 400);
  await assert.rejects(connect(tc.url('a%2Fb')), (e) => e.status === 400);
});

test('thread ids of [A-Za-z0-9._:-]{1,128} are accepted and served', async () => {
  await usable('a'.repeat(128));
  await usable('a.b_c:d-e');
  await usable('AZaz09._:-');
  await usable('x');
  await usable('-');
  await usable(':');
});
