// Live fan-out: every client gets exactly what its filter matches, in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, produce, waitUntil, firstDisorder, gateway } from './lib/harness.mjs';
import { mix, expectedSeqs } from './lib/events.mjs';

let redis, tc;
gateway({}, (r, t) => { redis = r; tc = t; });

const ALL = ['messages', 'tools', 'lifecycle', 'values', 'custom:progress', 'updates'];
const seqsOf = (c) => c.events.map((e) => e.seq);

test('3 clients, 3 filters, 5,000 events at full speed: exact, ordered, once', async () => {
  const filters = [
    { channels: ['messages', 'lifecycle'] },
    { channels: ['custom:progress', 'values'], namespaces: [['researcher']] },
    { channels: ALL, depth: 0 },
  ];
  const clients = await Promise.all(filters.map(() => connect(tc.url('fan1'))));
  await Promise.all(clients.map((c, i) => c.request({ id: 1, method: 'subscription.subscribe', params: filters[i] })));
  const events = mix(5000);
  const { seqs } = await produce(redis.url, 'fan1', events);
  assert.deepEqual(seqs, Array.from({ length: 5000 }, (_, i) => i + 1));
  const want = filters.map((f) => expectedSeqs(f, events));
  await waitUntil(() => clients.every((c, i) => c.events.length >= want[i].length), 20000, 'all events');
  await new Promise((r) => setTimeout(r, 200)); // nothing extra may follow
  clients.forEach((c, i) => {
    assert.equal(firstDisorder(seqsOf(c)), null);
    assert.deepEqual(seqsOf(c), want[i], `client ${i}`);
  });
  // The event frames carry the protocol envelope and the producer's JSON.
  const e = clients[2].events[0];
  assert.equal(e.type, 'event');
  assert.match(e.eventId, /^[0-9a-f]+:1$/);
  assert.equal(e.method, 'lifecycle');
  assert.equal(typeof e.params.timestamp, 'number');
  await Promise.all(clients.map((c) => c.close()));
});

// An event goes out to every subscriber of its thread in one turn of the gateway's loop: they are
// written in the order they subscribed, not the newest first.
test('each event is written to the subscribers in the order they subscribed', async () => {
  await produce(redis.url, 'order1', mix(1)); // the thread has a history: the six are live from their subscribe
  const arrivals = []; // [client, seq], in the order the frames reached this process
  const clients = [];
  for (let i = 0; i < 6; i++) {
    // Uncompressed: ws inflates on libuv's thread pool, which can hand frames of two sockets on out of order.
    const c = await connect(tc.url('order1'), { perMessageDeflate: false });
    assert.equal((await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } })).type, 'success');
    c.ws.on('message', (data) => {
      const msg = JSON.parse(data.toString());
      if (msg.type === 'event') arrivals.push([i, msg.seq]);
    });
    clients.push(c);
  }
  await waitUntil(() => clients.every((c) => c.events.length === 1), 5000, 'the replay');
  await new Promise((r) => setTimeout(r, 200)); // each one's replay reads on until it has gone live
  const events = mix(11).slice(1);
  for (const [k, ev] of events.entries()) { // one at a time: each reaches all six before the next is sent
    await produce(redis.url, 'order1', [ev]);
    await waitUntil(() => clients.every((c) => c.events.length === k + 2), 5000, `event ${k + 2}`);
  }
  // From the second live event: one that came while a subscriber's replay still read on reached it
  // through that read (each subscriber's own), not the fan-out.
  for (let seq = 3; seq <= 11; seq++) {
    assert.deepEqual(arrivals.filter(([, s]) => s === seq).map(([i]) => i), [0, 1, 2, 3, 4, 5], `event ${seq}`);
  }
  await Promise.all(clients.map((c) => c.close()));
});

test('subscribing mid-publish gets the run from its start, then live, with no gap', async () => {
  for (let round = 0; round < 8; round++) {
    const thread = `race${round}`;
    const events = mix(1500);
    const producing = produce(redis.url, thread, events);
    await new Promise((r) => setTimeout(r, 5 + round * 7));
    const c = await connect(tc.url(thread));
    const reply = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } });
    assert.equal(reply.type, 'success');
    await producing;
    await waitUntil(() => c.events.length >= 1500, 10000, `round ${round}`);
    assert.deepEqual(seqsOf(c), Array.from({ length: 1500 }, (_, i) => i + 1), `round ${round}`);
    await c.close();
  }
});

test('the very last event arrives when publishing stops right after the subscribe', async () => {
  for (let round = 0; round < 10; round++) {
    const thread = `last${round}`;
    await produce(redis.url, thread, mix(50));
    const c = await connect(tc.url(thread));
    const subscribed = c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } });
    // One more event, racing the subscribe's replay and the doorbell SUBSCRIBE.
    await produce(redis.url, thread, [{ method: 'tasks', params: { namespace: [], data: { last: true } } }]);
    await subscribed;
    await waitUntil(() => c.events.length >= 1, 5000, `round ${round}`);
    assert.deepEqual(seqsOf(c), [51]);
    assert.equal(c.events[0].params.data.last, true);
    await c.close();
  }
});

test('replayedEvents counts the replay, which starts at the last run start', async () => {
  const thread = 'replay1';
  const early = [
    { method: 'values', params: { namespace: [], data: { v: 'baseline' } } },
    { method: 'tasks', params: { namespace: [], data: 'old run' } },
  ];
  await produce(redis.url, thread, [...mix(20), ...early, ...mix(30)]);
  // seqs: 1..20 first run, 21 values, 22 tasks, 23 new run start .. 52
  const c = await connect(tc.url(thread));
  const r = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['values', 'lifecycle', 'tasks'] } });
  const want = [21, ...expectedSeqs({ channels: ['values', 'lifecycle', 'tasks'] }, mix(30), 22)];
  await waitUntil(() => c.events.length >= want.length, 5000, 'replay');
  assert.equal(r.result.replayedEvents, want.length);
  assert.equal(r.meta.appliedThroughSeq, 52);
  assert.deepEqual(seqsOf(c), want);
  assert.equal(c.events[0].params.data.v, 'baseline'); // the older values snapshot comes first
  // The reply came before any replayed event.
  assert.equal(c.frames[0].type, 'success');
  await c.close();
});

test('overlapping subscriptions on one connection: each event once', async () => {
  const thread = 'overlap1';
  const c = await connect(tc.url(thread));
  await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } });
  await c.request({ id: 2, method: 'subscription.subscribe', params: { channels: ['messages', 'tools'] } });
  const events = mix(600);
  await produce(redis.url, thread, events);
  const want = expectedSeqs({ channels: ['messages', 'tools'] }, events);
  await waitUntil(() => c.events.length >= want.length, 10000, 'events');
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(seqsOf(c), want);
  await c.close();
});

test('a subscription added later replays what no other subscription sent, then both go live', async () => {
  const thread = 'later1';
  const c = await connect(tc.url(thread));
  await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } });
  const first = mix(300);
  await produce(redis.url, thread, first);
  const wantMsgs = expectedSeqs({ channels: ['messages'] }, first);
  await waitUntil(() => c.events.length >= wantMsgs.length, 5000, 'first part');
  const mark = c.frames.length;
  const r = await c.request({ id: 2, method: 'subscription.subscribe', params: { channels: ['tools'] } });
  const wantTools = expectedSeqs({ channels: ['tools'] }, first);
  assert.equal(r.result.replayedEvents, wantTools.length);
  const second = mix(300, { start: false });
  await produce(redis.url, thread, second);
  const wantLive = expectedSeqs({ channels: ['messages', 'tools'] }, second, 300);
  await waitUntil(() => c.events.length >= wantMsgs.length + wantTools.length + wantLive.length, 5000, 'second part');
  const after = c.frames.slice(mark).filter((f) => f.type === 'event').map((f) => f.seq);
  assert.deepEqual(after, [...wantTools, ...wantLive]);
  const all = seqsOf(c);
  assert.equal(new Set(all).size, all.length, 'no event twice');
  await c.close();
});

test('unsubscribe stops delivery at once', async () => {
  const thread = 'unsub1';
  const c = await connect(tc.url(thread));
  const a = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tools'] } });
  await c.request({ id: 2, method: 'subscription.subscribe', params: { channels: ['messages'] } });
  await produce(redis.url, thread, mix(60));
  await waitUntil(() => c.events.some((e) => e.method === 'tools'), 5000, 'tools');
  await waitUntil(() => c.events.length >= expectedSeqs({ channels: ['tools', 'messages'] }, mix(60)).length, 5000, 'all');
  const u = await c.request({ id: 3, method: 'subscription.unsubscribe', params: { subscriptionId: a.result.subscriptionId } });
  assert.equal(u.type, 'success');
  const mark = c.frames.indexOf(c.frames.find((f) => f.id === 3));
  await produce(redis.url, thread, mix(120, { start: false }));
  await new Promise((r) => setTimeout(r, 300));
  const after = c.frames.slice(mark + 1);
  assert.ok(after.length > 0, 'messages still flow');
  assert.ok(after.every((f) => f.method === 'messages'), 'no tools event after the unsubscribe reply');
  await c.close();
});

test('agent.getTree reflects lifecycle events; an empty thread has no run', async () => {
  const thread = 'tree1';
  await produce(redis.url, thread, [
    { method: 'lifecycle', params: { namespace: [], data: { event: 'started', graphName: 'agent' } } },
    { method: 'lifecycle', params: { namespace: ['researcher'], data: { event: 'started', graphName: 'researcher' } } },
    { method: 'lifecycle', params: { namespace: ['researcher', 'deep'], data: { event: 'running', graphName: 'digger' } } },
    { method: 'lifecycle', params: { namespace: ['researcher'], data: { event: 'completed' } } },
  ]);
  const c = await connect(tc.url(thread));
  const r = await c.request({ id: 1, method: 'agent.getTree', params: {} });
  assert.deepEqual(r.result.tree, {
    namespace: [], status: 'started', graphName: 'agent',
    children: [{ namespace: ['researcher'], status: 'completed', graphName: 'researcher',
      children: [{ namespace: ['researcher', 'deep'], status: 'running', graphName: 'digger' }] }],
  });
  const wrong = await c.request({ id: 2, method: 'agent.getTree', params: { runId: 'nope' } });
  assert.equal(wrong.error, 'no_such_run');
  const d = await connect(tc.url('tree-empty'));
  assert.equal((await d.request({ id: 1, method: 'agent.getTree', params: {} })).error, 'no_such_run');
  await c.close();
  await d.close();
});
