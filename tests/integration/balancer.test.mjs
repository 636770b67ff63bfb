// Two threadcast instances behind a real HAProxy (deploy/haproxy.cfg):
// clients resume through the balancer when an instance dies or drains.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { startRedis, startThreadcast, startHaproxy, stopAll, produce, waitUntil, sleep } from './lib/harness.mjs';

after(stopAll);


/**
 * A client that subscribes once and, whenever its connection drops,
 * reconnects through the balancer with subscription.reconnect and its last
 * eventId, as the client library does.
 */
function resumingClient(url, filter) {
  const c = { seqs: [], reconnects: 0, subId: null, lastId: null, stopped: false };
  const open = () => {
    const ws = new WebSocket(url);
    ws.on('message', (d) => {
      const m = JSON.parse(d);
      if (m.type === 'event') { c.seqs.push(m.seq); c.lastId = m.eventId; }
      else if (m.type === 'success' && m.result.subscriptionId) c.subId = m.result.subscriptionId;
    });
    ws.on('open', () => {
      if (!c.subId) ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: filter }));
      else ws.send(JSON.stringify({ id: 2, method: 'subscription.reconnect',
        params: { runId: 'r', lastEventId: c.lastId, subscriptions: [c.subId] } }));
    });
    ws.on('error', () => {});
    ws.on('close', () => {
      if (c.stopped) return;
      c.reconnects++;
      setTimeout(open, 50 + Math.random() * 200);
    });
    c.ws = ws;
  };
  open();
  c.stop = () => { c.stopped = true; c.ws.close(); };
  return c;
}

async function scenario(stopSignal) {
  const redis = await startRedis();
  const a = await startThreadcast({ redisUrl: redis.url, args: ['--drain-spread', '1000'] });
  const b = await startThreadcast({ redisUrl: redis.url });
  await Promise.all([a.ready(), b.ready()]);
  const lb = await startHaproxy([a.port, b.port]);
  const thread = `lb-${stopSignal}`;
  const clients = [];
  for (let i = 0; i < 200; i++) clients.push(resumingClient(`ws://127.0.0.1:${lb}/threads/${thread}/stream`, { channels: ['tasks'] }));
  await waitUntil(() => clients.every((c) => c.subId), 15000, 'subscriptions');
  const total = 3000;
  const producing = (async () => {
    for (let i = 0; i < total / 100; i++) {
      await produce(redis.url, thread, Array.from({ length: 100 }, (_, k) => ({ method: 'tasks', params: { namespace: [], data: i * 100 + k } })));
      await sleep(150);
    }
  })();
  await waitUntil(() => clients.every((c) => c.seqs.length >= 500), 20000, 'first events');
  a.proc.kill(stopSignal);
  const stopped = a.stop(stopSignal);
  await producing;
  // Catching up 200 × 3000 events takes ≈ 30 s under ASan with both cores busy elsewhere: the bound is generous.
  await waitUntil(() => clients.every((c) => c.seqs.length >= total), 90000, 'every client complete');
  const want = Array.from({ length: total }, (_, i) => i + 1);
  for (const c of clients) assert.deepEqual(c.seqs, want);
  const moved = clients.filter((c) => c.reconnects > 0).length;
  assert.ok(moved > 0, 'some clients were on the stopped instance');
  for (const c of clients) c.stop();
  const exit = await stopped;
  await redis.cleanup();
  return { exit, moved, a, b };
}

test('SIGKILL one of two instances: 200 clients resume through HAProxy with the complete sequence', async () => {
  const { exit, moved } = await scenario('SIGKILL');
  assert.equal(exit.signal, 'SIGKILL');
  assert.ok(moved >= 20, `${moved} clients moved`);
});

test('SIGTERM drains one instance under load: zero events lost, exit 0', async () => {
  const { exit, moved, a } = await scenario('SIGTERM');
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(moved >= 20, `${moved} clients moved`);
  assert.ok(a.logs.some((l) => l.msg === 'draining'));
  assert.deepEqual(a.sanitizerReports(), [], a.stderr);
});

test('SIGTERM with a grace: /readyz fails at once, new requests are served until the grace ends, then refused; exit 0', async () => {
  const redis = await startRedis();
  const gw = await startThreadcast({ redisUrl: redis.url, env: { THREADCAST_DRAIN_GRACE: '2000' } });
  await gw.ready();
  const open = new WebSocket(`ws://127.0.0.1:${gw.port}/threads/grace/stream`);
  await new Promise((r) => open.once('open', r));
  const closed = new Promise((r) => open.once('close', (code) => r(code)));
  const t0 = Date.now();
  gw.proc.kill('SIGTERM');
  await gw.waitLog((l) => l.msg === 'draining');
  const ready = await gw.http('/readyz');
  assert.equal(ready.status, 503);
  assert.equal((await ready.json()).draining, true);
  // Within the grace: a new WebSocket is upgraded, a new request answered.
  const late = new WebSocket(`ws://127.0.0.1:${gw.port}/threads/grace/stream`);
  await new Promise((resolve, reject) => { late.once('open', resolve); late.once('error', reject); });
  assert.equal((await gw.http('/healthz')).status, 200);
  assert.ok(!gw.logs.some((l) => /refusing new connections/.test(l.msg)), 'still in the grace');
  // After it: both sockets are closed going away (1001), new upgrades refused (503).
  assert.equal(await closed, 1001);
  assert.ok(Date.now() - t0 >= 1900, `closed ${Date.now() - t0} ms after SIGTERM, not before the grace ended`);
  const refused = await new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/threads/grace/stream`);
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode));
    ws.once('error', () => resolve('gone'));
    ws.once('open', () => resolve('open'));
  });
  assert.ok(refused === 503 || refused === 'gone', `a new upgrade after the grace: ${refused}`);
  late.close();
  await waitUntil(() => gw.exitCode !== null || gw.signal !== null, 10000, 'the drained gateway to exit');
  assert.deepEqual({ code: gw.exitCode, signal: gw.signal }, { code: 0, signal: null });
  await redis.cleanup();
});

test('a rolling restart through HAProxy: SIGTERM one of two instances under steady requests, none fails', async () => {
  const redis = await startRedis();
  // The grace outlasts deploy/haproxy.cfg's health checks (inter 1 s, fall 2).
  const a = await startThreadcast({ redisUrl: redis.url, env: { THREADCAST_DRAIN_GRACE: '4000' } });
  const b = await startThreadcast({ redisUrl: redis.url });
  await Promise.all([a.ready(), b.ready()]);
  const lb = await startHaproxy([a.port, b.port]);
  const failures = [];
  let requests = 0;
  let stopping = false;
  const load = (async () => {
    while (!stopping) { // one POST a time, as an SDK client starting runs would; bounded by the test
      const res = await fetch(`http://127.0.0.1:${lb}/threads`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
        .catch((e) => ({ status: e.message }));
      requests++;
      if (res.status !== 200) failures.push(res.status);
      await sleep(20);
    }
  })();
  await sleep(500);
  const stopped = a.stop('SIGTERM');
  const exit = await stopped;
  stopping = true;
  await load;
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(requests > 50, `${requests} requests`);
  assert.deepEqual(failures, [], `of ${requests} requests`);
  await redis.cleanup();
});
