// Start-up, configuration, Redis availability and orderly stop.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startRedis, startThreadcast, connect, stopAll, freePort, waitUntil, threadcastBin, produce, sse } from './lib/harness.mjs';

after(async () => { await stopAll(); });

function run(args, env = {}) {
  return spawnSync(threadcastBin, args, { env: { THREADCAST_AUTH: 'off', ...process.env, ...env }, encoding: 'utf8', timeout: 10000 });
}

test('bad configuration exits 2 with a message naming the setting', () => {
  let r = run(['--port', 'abc']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--port/);
  r = run([], { THREADCAST_PORT: '99999' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /THREADCAST_PORT/);
  r = run(['--log-level', 'loud']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--log-level/);
  r = run(['--redis-url', 'http://x']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /redis/);
  r = run(['--nope']);
  assert.equal(r.status, 2);
  r = run(['--commands', 'maybe']);
  assert.equal(r.status, 2);
  r = run(['--help']);
  assert.equal(r.status, 0);
  assert.match(r.stdout, /THREADCAST_REDIS_URL/);
});

test('SIGTERM closes WebSockets with 1001 and exits 0 with everything freed', async () => {
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url });
  await tc.ready();
  const a = await connect(tc.url('t1'));
  const b = await connect(tc.url('t2'));
  await a.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } });
  const { code, signal } = await tc.stop('SIGTERM');
  assert.equal((await a.closed).code, 1001);
  assert.equal((await b.closed).code, 1001);
  assert.equal(signal, null);
  assert.equal(code, 0);
  assert.ok(tc.logs.some((l) => l.msg === 'stopped'), tc.stderr);
  assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
  // Every line is one JSON object with ts, level, msg.
  for (const line of tc.stderr.split('\n').filter(Boolean)) {
    const o = JSON.parse(line);
    assert.ok(o.ts && o.level && o.msg, line);
  }
  await redis.cleanup();
});

test('SIGINT without clients exits 0', async () => {
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url });
  assert.deepEqual(await tc.stop('SIGINT'), { code: 0, signal: null });
  await redis.cleanup();
});

test('draining refuses new upgrades and turns /readyz unready', async () => {
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url,
    args: ['--drain-timeout', '3000', '--max-queue-bytes', '16000000'] });
  // A subscribe before Redis is ready is refused; this test needs it to work.
  await tc.ready();
  // A client that stopped reading, with megabytes queued for it, keeps the
  // drain open long enough to look around.
  const a = await connect(tc.url('d1'));
  assert.equal((await a.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } })).type, 'success');
  a.ws._socket.pause();
  const big = 'z'.repeat(16000);
  await produce(redis.url, 'd1', Array.from({ length: 500 }, () => ({ method: 'tasks', params: { namespace: [], data: big } })));
  await waitUntil(async () => /threadcast_events_delivered_total 500/.test(await (await tc.http('/metrics')).text()), 20000, 'queued');
  tc.proc.kill('SIGTERM');
  await tc.waitLog((l) => l.msg === 'draining');
  const r = await tc.http('/readyz');
  assert.equal(r.status, 503);
  assert.equal((await r.json()).draining, true);
  await assert.rejects(connect(tc.url('d2')), (e) => e.status === 503);
  assert.equal((await tc.stop()).code, 0);
  await redis.cleanup();
});

test('Redis down at start is not fatal; /readyz follows Redis', async () => {
  const port = await freePort();
  const tc = await startThreadcast({ redisUrl: `redis://127.0.0.1:${port}`,
    args: ['--redis-backoff-max', '200', '--redis-ping-interval', '200'] });
  let r = await tc.http('/readyz');
  assert.equal(r.status, 503);
  assert.equal((await r.json()).redis, 'down');
  assert.equal(r.headers.get('retry-after'), '1');
  // While Redis is away a WebSocket subscribe is answered with an error, and
  // an SSE stream is refused before its head: 503, told when to retry.
  const ws = await connect(tc.url('down1'));
  const reply = await ws.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } });
  assert.equal(reply.error, 'unknown_error');
  assert.match(reply.message, /Redis\) is unavailable; retry/);
  const s = await sse(`http://127.0.0.1:${tc.port}/threads/down1/stream?channels=tasks`, { headers: { accept: 'text/event-stream' } });
  assert.equal(s.status, 503);
  assert.equal(s.headers.get('retry-after'), '1');
  assert.equal(JSON.parse(s.body).error, 'unavailable');
  const redis = await startRedis({ port });
  await tc.ready();
  // The same connection subscribes once Redis is back.
  assert.equal((await ws.request({ id: 2, method: 'subscription.subscribe', params: { channels: ['tasks'] } })).type, 'success');
  await ws.close();
  await redis.stop();
  await waitUntil(async () => (await tc.http('/readyz')).status === 503, 5000, 'unready');
  const again = await startRedis({ port });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready again');
  assert.equal((await tc.stop()).code, 0);
  assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
  await again.cleanup();
  await redis.cleanup();
});
