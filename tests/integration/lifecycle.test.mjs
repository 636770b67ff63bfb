// Start-up, Redis availability and orderly stop: signals, draining, /readyz following
// Redis, and the log format. (Configuration errors: config.test.mjs.)
import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, freePort, waitUntil, produce, sse } from './lib/harness.mjs';

// Start-up, Redis availability and orderly stop.
describe('start-up, Redis availability and orderly stop', () => {
  after(async () => { await stopAll(); });

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
});

// Spec §6–7 and the log format: signals, and /readyz following Redis.
describe('spec §6–7: signals, /readyz following Redis, the log format', () => {
  const started = [];
  const redises = [];
  async function gatewayOn(redisUrl, args = []) {
    const tc = await startThreadcast({ redisUrl, args });
    started.push(tc);
    return tc;
  }
  async function redisOn(opts) {
    const r = await startRedis(opts);
    redises.push(r);
    return r;
  }

  after(async () => {
    const reports = started.flatMap((t) => t.sanitizerReports().map((re) => `${re}: ${t.stderr}`));
    await stopAll();
    for (const r of redises) await r.cleanup();
    assert.deepEqual(reports, []);
  });

  async function readyz(tc) {
    const r = await tc.http('/readyz');
    return { status: r.status, body: await r.json() };
  }

  test('SIGTERM with two open WebSockets: both see 1001, exit 0, "stopped" logged, every log line JSON', async () => {
    const redis = await redisOn();
    const tc = await gatewayOn(redis.url, ['--log-level', 'debug']);
    await waitUntil(async () => (await readyz(tc)).status === 200, 10000, 'ready');
    const a = await connect(tc.url('spec-sig-a'));
    const b = await connect(tc.url('spec-sig-b'));
    assert.equal((await a.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } })).type, 'success');
    assert.equal((await b.request({ id: 1, method: 'nope', params: {} })).error, 'unknown_command');
    b.sendRaw('{"id":'); // some error paths in the log too
    const stopped = tc.stop('SIGTERM');
    const [ca, cb] = await Promise.all([a.closed, b.closed]);
    assert.equal(ca.code, 1001);
    assert.equal(cb.code, 1001);
    assert.deepEqual(await stopped, { code: 0, signal: null });
    assert.ok(tc.logs.some((l) => l.msg === 'stopped'), tc.stderr);
    assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
    const lines = tc.stderr.split('\n').filter((l) => l.length);
    assert.ok(lines.length >= 3, tc.stderr);
    for (const line of lines) {
      let o;
      assert.doesNotThrow(() => { o = JSON.parse(line); }, `not JSON: ${line}`);
      assert.equal(typeof o, 'object', line);
      assert.ok(o && !Array.isArray(o), line);
      assert.equal(typeof o.ts, 'string', line);
      assert.equal(typeof o.level, 'string', line);
      assert.equal(typeof o.msg, 'string', line);
      assert.ok(!Number.isNaN(Date.parse(o.ts)), `ts is a date: ${line}`);
    }
    assert.ok(tc.stderr.endsWith('\n'), 'the last log line is complete');
  });

  test('SIGINT with no clients exits 0', async () => {
    const redis = await redisOn();
    const tc = await gatewayOn(redis.url);
    assert.deepEqual(await tc.stop('SIGINT'), { code: 0, signal: null });
    assert.ok(tc.logs.some((l) => l.msg === 'stopped'), tc.stderr);
    assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
  });

  test('Redis absent at start: threadcast serves, /readyz follows Redis down → up → down → up', async () => {
    const port = await freePort();
    const tc = await gatewayOn(`redis://127.0.0.1:${port}`, ['--redis-backoff-max', '200']);
    assert.equal((await tc.http('/healthz')).status, 200);
    // Between reconnect attempts Redis reads "down"; while an attempt is in
    // flight (a fraction of a millisecond here) "connecting". Both are 503.
    let r;
    const seen = [];
    await waitUntil(async () => {
      r = await readyz(tc);
      seen.push(r);
      return r.body.redis === 'down' || seen.length >= 20;
    }, 3000, '/readyz with redis down');
    for (const x of seen) {
      assert.equal(x.status, 503, JSON.stringify(x));
      assert.equal(x.body.ready, false, JSON.stringify(x));
      assert.ok(['down', 'connecting'].includes(x.body.redis), JSON.stringify(x));
    }
    assert.equal(r.body.redis, 'down', JSON.stringify(seen));

    let redis = await redisOn({ port });
    await waitUntil(async () => (r = await readyz(tc)).status === 200, 5000, '/readyz 200 after redis started');
    assert.equal(r.body.redis, 'up');
    assert.equal(r.body.ready, true);

    await redis.stop();
    await waitUntil(async () => (r = await readyz(tc)).status === 503, 5000, '/readyz 503 after redis stopped');
    assert.equal(r.body.ready, false);
    assert.notEqual(r.body.redis, 'up');

    redis = await redisOn({ port });
    await waitUntil(async () => (r = await readyz(tc)).status === 200, 5000, '/readyz 200 after redis restarted');
    assert.equal(r.body.redis, 'up');

    // And it serves WebSockets throughout.
    const c = await connect(tc.url('spec-redis'));
    assert.equal((await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } })).type, 'success');
    const stopped = tc.stop('SIGTERM');
    assert.equal((await c.closed).code, 1001);
    assert.deepEqual(await stopped, { code: 0, signal: null });
  });
});
