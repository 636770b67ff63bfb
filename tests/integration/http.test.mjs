// HTTP routes: health, readiness, metrics, and refusals before the upgrade.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, gateway } from './lib/harness.mjs';

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
