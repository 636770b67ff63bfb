// HTTP routes: health, readiness, metrics, and which WebSocket upgrades are accepted
// or refused before the upgrade.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { connect, gateway, exchange, sleep } from './lib/harness.mjs';

// HTTP routes: health, readiness, metrics, and refusals before the upgrade.
describe('HTTP routes and refusals before the upgrade', () => {
  let redis, tc;
  gateway({}, (r, t) => { redis = r; tc = t; });

  test('GET /healthz answers 200 JSON', async () => {
    const r = await tc.http('/healthz');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /application\/json/);
    assert.equal((await r.json()).status, 'ok');
  });

  test('GET /readyz is 200 with Redis up', async () => {
    let body;
    for (let i = 0; i < 50; i++) {
      const r = await tc.http('/readyz');
      body = await r.json();
      if (r.status === 200) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.equal(body.ready, true);
    assert.equal(body.redis, 'up');
    assert.equal(body.draining, false);
  });

  test('GET /metrics is Prometheus text that counts connections', async () => {
    const c = await connect(tc.url('m1'));
    const text = await (await tc.http('/metrics')).text();
    assert.match(text, /^# TYPE threadcast_events_delivered_total counter$/m);
    assert.match(text, /^threadcast_connections\{transport="websocket"\} 1$/m);
    assert.match(text, /^threadcast_redis_rtt_seconds_bucket\{le="\+Inf"\} \d+$/m);
    await c.close();
  });

  test('unknown paths are 404 JSON, wrong methods 405', async () => {
    let r = await tc.http('/nope');
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error, 'not_found');
    r = await tc.http('/healthz', { method: 'POST', body: 'x' });
    assert.equal(r.status, 405);
    r = await tc.http('/threads/t1/commands');
    assert.equal(r.status, 405);
  });

  test('a plain GET of the stream path asks for an upgrade (426)', async () => {
    const r = await tc.http('/threads/t1/stream');
    assert.equal(r.status, 426);
    assert.equal((await r.json()).error, 'upgrade_required');
  });

  test('WebSocket upgrades: bad path 404, bad thread id 400, good ids accepted', async () => {
    await assert.rejects(connect(`ws://127.0.0.1:${tc.port}/nope`), (e) => e.status === 404);
    await assert.rejects(connect(tc.url('bad%7Bid')), (e) => e.status === 400);
    await assert.rejects(connect(tc.url('x'.repeat(129))), (e) => e.status === 400);
    const ok1 = await connect(tc.url('x'.repeat(128)));
    const ok2 = await connect(tc.url('a.b_c:d-E9'));
    const r = await ok2.request({ id: 1, method: 'nope', params: {} });
    assert.equal(r.error, 'unknown_command');
    await ok1.close();
    await ok2.close();
  });
});

// Spec §1: HTTP routing and which WebSocket upgrades are accepted.
describe('spec §1: HTTP routing and accepted upgrades', () => {
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
});

// Request bodies without a Content-Length: chunked ones are decoded (libwebsockets 4.1 passes
// their framing through), a POST with neither has an empty body; either way lws 4.1 would wait
// for more body, so the answer says connection: close and the gateway hangs up.
describe('request bodies without a length', () => {
  let tc;
  gateway({ args: ['--auth', 'off', '--max-frame-bytes', '4096'] }, (_r, t) => { tc = t; });

  /** Writes the pieces (a pause between them) and reads until the gateway closes (or 5 s). */
  function raw(pieces) {
    return new Promise((resolve, reject) => {
      const s = net.createConnection({ port: tc.port, host: '127.0.0.1' });
      let text = '';
      const timer = setTimeout(() => { s.destroy(); resolve({ text, closed: false }); }, 5000);
      s.on('data', (d) => { text += d; });
      s.on('end', () => { clearTimeout(timer); s.destroy(); resolve({ text, closed: true }); });
      s.on('error', reject);
      s.on('connect', async () => {
        for (const p of pieces) { s.write(p); await sleep(30); }
      });
    });
  }
  const head = (more = '') => `POST /threads HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n${more}\r\n`;
  const status = (r) => Number(/^HTTP\/1\.1 (\d+)/.exec(r.text)?.[1]);
  const body = (r) => JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4));

  test('a chunked body in pieces, with a chunk extension and a trailer, is read whole; then the connection closes', async () => {
    const r = await raw([head('Transfer-Encoding: chunked\r\n'), '5;ext=1\r\n{"met\r\n', 'F\r\nadata":{"k":2}}\r\n', '0\r\nX-Trailer: 1\r\n\r\n']);
    assert.equal(status(r), 200, r.text);
    assert.deepEqual(body(r).metadata, { k: 2 });
    assert.match(r.text, /\r\nconnection: close\r\n/i);
    assert.equal(r.closed, true);
  });

  test('a chunked EventStreamRequest starts its SSE stream', async () => {
    const req = JSON.stringify({ channels: ['lifecycle'] });
    const r = await raw([`POST /threads/chunky/stream HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n`,
      `${req.length.toString(16)}\r\n${req}\r\n0\r\n\r\n`]);
    assert.equal(status(r), 200, r.text);
    assert.match(r.text, /content-type: text\/event-stream/i);
  });

  test('a POST with neither Content-Length nor Transfer-Encoding has an empty body', async () => {
    const r = await raw([head()]);
    assert.equal(status(r), 200, r.text);
    assert.deepEqual(body(r).metadata, {});
    assert.equal(r.closed, true);
  });

  test('bad framing is refused precisely, and the connection closed', async () => {
    const cases = [
      [[head('Transfer-Encoding: chunked\r\n'), 'zz\r\n'], 400, /chunked encoding is malformed/],
      [[head('Transfer-Encoding: chunked\r\n'), '2\n{}\r\n0\r\n\r\n'], 400, /chunked encoding is malformed/], // bare LF
      [[head('Transfer-Encoding: gzip\r\n'), 'x'], 501, /only Transfer-Encoding .* is chunked/],
      [[head('Transfer-Encoding: chunked\r\nContent-Length: 5\r\n'), '0\r\n\r\n'], 400, /both Content-Length and Transfer-Encoding/],
      [[head('Transfer-Encoding: chunked\r\n'), `1001\r\n${'x'.repeat(10)}`], 413, /at most 4096 bytes/],
      [[head('Transfer-Encoding: chunked\r\n'), `800\r\n${'x'.repeat(2048)}\r\n`, `800\r\n${'x'.repeat(2048)}\r\n`, `1\r\nx\r\n0\r\n\r\n`], 413, /at most 4096 bytes/],
    ];
    for (const [pieces, code, re] of cases) {
      const r = await raw(pieces);
      assert.equal(status(r), code, r.text);
      assert.match(body(r).detail, re);
      assert.equal(r.closed, true, `closed after ${code}`);
    }
  });

  test('requests with a Content-Length keep the connection for the next one', async () => {
    const one = '{"metadata":{"n":1}}';
    const r = await raw([`${head(`Content-Length: ${one.length}\r\n`)}${one}`, `GET /ok HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n`]);
    assert.equal((r.text.match(/HTTP\/1\.1 200 /g) ?? []).length, 2, r.text);
    assert.doesNotMatch(r.text.split('\r\n\r\n')[0], /connection: close/i);
  });
});
