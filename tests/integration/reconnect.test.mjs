// subscription.reconnect: resume on any instance; trimmed history and lost
// history are reported instead of being papered over.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, produce, waitUntil, redisClient, sse } from './lib/harness.mjs';
import { mix, expectedSeqs } from './lib/events.mjs';

let redis, a, b, rc;
before(async () => {
  redis = await startRedis();
  [a, b] = await Promise.all([startThreadcast({ redisUrl: redis.url }), startThreadcast({ redisUrl: redis.url })]);
  await Promise.all([a, b].map((t) => t.ready()));
  rc = redisClient(redis.port);
});
after(async () => {
  const reports = [...a.sanitizerReports(), ...b.sanitizerReports()];
  rc.close();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, []);
});

const FILTER = { channels: ['messages', 'tools', 'lifecycle', 'values', 'custom:progress', 'updates'] };

test('SIGKILL the instance mid-stream; reconnect on another ends with the complete sequence', async () => {
  const thread = 'kill1';
  // (Uncompressed: compressed, the 3,700 events after the 300th fit in the
  // socket buffers and all arrive after the kill, leaving nothing to resume.)
  const c1 = await connect(a.url(thread), { perMessageDeflate: false });
  const sub = await c1.request({ id: 1, method: 'subscription.subscribe', params: FILTER });
  const events = mix(4000);
  const producing = produce(redis.url, thread, events);
  await waitUntil(() => c1.events.length >= 300, 10000, 'first events');
  a.proc.kill('SIGKILL');
  await c1.closed;
  const seen = c1.events.map((e) => e.seq);
  const last = c1.events.at(-1);
  const c2 = await connect(b.url(thread));
  const r = await c2.request({ id: 1, method: 'subscription.reconnect',
    params: { runId: 'any', lastEventId: last.eventId, subscriptions: [sub.result.subscriptionId] } });
  assert.equal(r.type, 'success');
  assert.equal(r.result.restored, true);
  assert.ok(!('missedEvents' in r.result));
  await producing;
  await waitUntil(() => seen.length + c2.events.length >= 4000, 15000, 'rest of the events');
  const union = [...seen, ...c2.events.map((e) => e.seq)];
  assert.deepEqual(union, Array.from({ length: 4000 }, (_, i) => i + 1));
  assert.equal(c2.events[0].seq, last.seq + 1);
  // The restored subscription is the same one: unsubscribing it works here.
  const u = await c2.request({ id: 2, method: 'subscription.unsubscribe', params: { subscriptionId: sub.result.subscriptionId } });
  assert.equal(u.type, 'success');
  await c2.close();
});

test('reconnect restores only what its subscriptions match, and reports namespaces', async () => {
  const thread = 'recon2';
  const events = [
    { method: 'lifecycle', params: { namespace: [], data: { event: 'started', graphName: 'agent' } } },
    ...mix(200, { start: false }),
    { method: 'lifecycle', params: { namespace: ['researcher'], data: { event: 'running', graphName: 'r' } } },
  ];
  await produce(redis.url, thread, events);
  const c1 = await connect(b.url(thread));
  const f = { channels: ['tools'], namespaces: [['researcher']] };
  const sub = await c1.request({ id: 1, method: 'subscription.subscribe', params: f });
  const want = expectedSeqs(f, events);
  await waitUntil(() => c1.events.length >= want.length, 5000, 'replay');
  const mid = c1.events[Math.floor(want.length / 2)];
  await c1.close();
  const c2 = await connect(b.url(thread));
  const r = await c2.request({ id: 1, method: 'subscription.reconnect',
    params: { runId: 'r', lastEventId: mid.eventId, subscriptions: [sub.result.subscriptionId] } });
  assert.equal(r.result.restored, true);
  // The latest lifecycle status of every namespace of the run.
  const latest = new Map();
  for (const e of events) if (e.method === 'lifecycle') latest.set(JSON.stringify(e.params.namespace), e.params.data.event);
  const cur = new Map(r.result.currentNamespaces.map((n) => [JSON.stringify(n.namespace), n.status]));
  assert.deepEqual(cur, latest);
  const rest = want.filter((s) => s > mid.seq);
  await waitUntil(() => c2.events.length >= rest.length, 5000, 'rest');
  assert.deepEqual(c2.events.map((e) => e.seq), rest);
  await c2.close();
});

test('reconnect validates its params', async () => {
  const c = await connect(b.url('recon-bad'));
  const cases = [
    [{}, 'invalid_argument', /params.runId/],
    [{ runId: 'r', lastEventId: 'nope' }, 'invalid_argument', /lastEventId/],
    [{ runId: 'r', lastEventId: 5 }, 'invalid_argument', /lastEventId/],
    [{ runId: 'r', subscriptions: ['not-an-id'] }, 'no_such_subscription', /not-an-id/],
    [{ runId: 'r', subscriptions: 'x' }, 'invalid_argument', /params.subscriptions/],
  ];
  let id = 0;
  for (const [params, code, re] of cases) {
    const r = await c.request({ id: ++id, method: 'subscription.reconnect', params });
    assert.equal(r.error, code, JSON.stringify(params));
    assert.match(r.message, re);
  }
  await c.close();
});

test('trimmed history: restored false with the exact missedEvents', async () => {
  const thread = 'trim1';
  const c1 = await connect(b.url(thread));
  const sub = await c1.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } });
  await produce(redis.url, thread, [{ method: 'tasks', params: { namespace: [], data: 1 } }]);
  await waitUntil(() => c1.events.length >= 1, 5000, 'first');
  const lastSeen = c1.events[0];
  await c1.close();
  // MAXLEN ~ trims whole stream nodes (100 entries each by default).
  await produce(redis.url, thread, Array.from({ length: 1000 }, (_, i) => ({ method: 'tasks', params: { namespace: [], data: i } })),
    { args: ['--maxlen', '10'] });
  const oldest = Number((await rc.cmd('XRANGE', `tc:{${thread}}:events`, '-', '+', 'COUNT', '1'))[0][0].split('-')[0]);
  assert.ok(oldest > 2, `stream was trimmed (oldest ${oldest})`);
  const c2 = await connect(b.url(thread));
  const r = await c2.request({ id: 1, method: 'subscription.reconnect',
    params: { runId: 'r', lastEventId: lastSeen.eventId, subscriptions: [sub.result.subscriptionId] } });
  assert.equal(r.result.restored, false);
  assert.equal(r.result.missedEvents, oldest - lastSeen.seq - 1);
  await waitUntil(() => c2.events.length >= 1001 - oldest + 1, 5000, 'kept history');
  assert.equal(c2.events[0].seq, oldest);
  assert.equal(c2.events.at(-1).seq, 1001);
  await c2.close();
});

test('lost history (FLUSHALL, new epoch): restored false without a count, new history from its start', async () => {
  const thread = 'epoch1';
  await produce(redis.url, thread, mix(30));
  const c1 = await connect(b.url(thread));
  const sub = await c1.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['lifecycle', 'messages'] } });
  await waitUntil(() => c1.events.length >= 5, 5000, 'events');
  const old = c1.events.at(-1);
  await c1.close();
  await rc.cmd('FLUSHALL');
  const fresh = mix(40);
  await produce(redis.url, thread, fresh);
  const c2 = await connect(b.url(thread));
  const r = await c2.request({ id: 1, method: 'subscription.reconnect',
    params: { runId: 'r', lastEventId: old.eventId, subscriptions: [sub.result.subscriptionId] } });
  assert.equal(r.result.restored, false);
  assert.ok(!('missedEvents' in r.result));
  const want = expectedSeqs({ channels: ['lifecycle', 'messages'] }, fresh);
  await waitUntil(() => c2.events.length >= want.length, 5000, 'new history');
  assert.deepEqual(c2.events.map((e) => e.seq), want);
  assert.notEqual(c2.events[0].eventId.split(':')[0], old.eventId.split(':')[0]);
  await c2.close();
});

test('a live connection whose thread history is reset is closed with 1012', async () => {
  const thread = 'epoch2';
  await produce(redis.url, thread, mix(10));
  const c = await connect(b.url(thread));
  await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks', 'lifecycle'] } });
  await waitUntil(() => c.events.length >= 1, 5000, 'replay');
  await rc.cmd('DEL', `tc:{${thread}}:meta`, `tc:{${thread}}:events`);
  await produce(redis.url, thread, [{ method: 'tasks', params: { namespace: [], data: 'new history' } }]);
  const { code, reason } = await c.closed;
  assert.equal(code, 1012);
  assert.match(reason, /reset/);
});

test('--max-replay bounds every replay: the newest events come, the rest is counted as missed', async () => {
  const capped = await startThreadcast({ redisUrl: redis.url, args: ['--max-replay', '50'] });
  await capped.ready();
  const thread = 'cap1';
  await produce(redis.url, thread, [
    { method: 'lifecycle', params: { namespace: [], data: { event: 'started', graphName: 'g' } } },
    ...Array.from({ length: 199 }, (_, i) => ({ method: 'tasks', params: { namespace: [], data: i } })),
  ]);
  const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
  // subscribe: the run has 200 events; the last 50 are replayed, 150 missed.
  const c = await connect(capped.url(thread));
  const sub = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks', 'lifecycle'] } });
  assert.equal(sub.result.replayedEvents, 50);
  assert.equal(sub.result.missedEvents, 150);
  await waitUntil(() => c.events.length >= 50, 5000, 'the capped replay');
  await produce(redis.url, thread, [{ method: 'tasks', params: { namespace: [], data: 'live' } }]);
  await waitUntil(() => c.events.length >= 51, 5000, 'the live event');
  assert.deepEqual(c.events.map((e) => e.seq), range(151, 201));
  const epoch = c.events[0].eventId.split(':')[0];
  // reconnect from seq 10: 191 events behind, 141 of them missed.
  const r = await connect(capped.url(thread));
  const rr = await r.request({ id: 1, method: 'subscription.reconnect',
    params: { runId: 'r', lastEventId: `${epoch}:10`, subscriptions: [sub.result.subscriptionId] } });
  assert.equal(rr.result.restored, false);
  assert.equal(rr.result.missedEvents, 141);
  await waitUntil(() => r.events.length >= 50, 5000, 'the capped reconnect');
  assert.deepEqual(r.events.map((e) => e.seq), range(152, 201));
  // Within the bound nothing changes: restored, everything after the id.
  const ok = await connect(capped.url(thread));
  const ro = await ok.request({ id: 1, method: 'subscription.reconnect',
    params: { runId: 'r', lastEventId: `${epoch}:180`, subscriptions: [sub.result.subscriptionId] } });
  assert.equal(ro.result.restored, true);
  assert.ok(!('missedEvents' in ro.result));
  await waitUntil(() => ok.events.length >= 21, 5000, 'the reconnect');
  assert.deepEqual(ok.events.map((e) => e.seq), range(181, 201));
  // SSE: the same bound, told with a resync event first.
  const s = await sse(`http://127.0.0.1:${capped.port}/threads/${thread}/stream?channels=tasks&since=1`,
    { headers: { accept: 'text/event-stream' } });
  await waitUntil(() => s.events.length >= 51, 5000, 'the capped SSE replay');
  assert.equal(s.events[0].event, 'resync');
  assert.deepEqual(s.events[0].data, { restored: false, missedEvents: 150 });
  assert.deepEqual(s.events.slice(1).map((e) => e.data.seq), range(152, 201));
  s.close();
  const metrics = await (await capped.http('/metrics')).text();
  assert.match(metrics, /threadcast_replays_capped_total 3\n/);
  await Promise.all([c.close(), r.close(), ok.close()]);
  await capped.stop();
  assert.deepEqual(capped.sanitizerReports(), [], capped.stderr);
});
