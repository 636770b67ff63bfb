// One protocol, two spellings: the route picks what threadcast writes, and
// commands are read in either. /threads/:id/stream speaks the seed's
// camelCase (or 0.0.21 with ?protocol=0.0.21); /threads/:id/stream/events and
// /threads/:id/commands speak 0.0.21's snake_case. Events are stored as the
// producer wrote them and respelled once per spelling in use.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { startRedis, startThreadcast, connect, stopAll, produce, sse, waitUntil, redisClient } from './lib/harness.mjs';

let redis, tc, rc;
before(async () => {
  redis = await startRedis();
  tc = await startThreadcast({ redisUrl: redis.url });
  await tc.ready();
  rc = redisClient(redis.port);
});
after(async () => {
  const reports = tc.sanitizerReports();
  rc.close();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, []);
});

const events = (lc) => [
  { method: 'lifecycle', params: { namespace: [], data: lc } },
  { method: 'tools', params: { namespace: [], data: { event: 'tool-started', tool_call_id: 'c1', tool_name: 'search',
    input: { tool_call_id: 'user data stays' } } } },
  // Raw text: a number JavaScript cannot hold must reach the client as written.
  '{"method":"values","params":{"namespace":[],"data":{"graph_name":"state keys are the user\'s","n":12345678901234567890}}}',
  { method: 'input.requested', params: { namespace: [], data: { interruptId: 'i1', payload: { interruptId: 'kept' } } } },
];

const url = (thread, path = 'stream', q = '') => `ws://127.0.0.1:${tc.port}/threads/${thread}/${path}${q}`;

async function subscribeAll(u, spelling) {
  const c = await connect(u);
  const params = { channels: ['lifecycle', 'tools', 'values', 'input'] };
  const r = await c.request({ id: 1, method: 'subscription.subscribe', params });
  assert.equal(r.type, 'success');
  assert.ok(r.result[spelling === 'seed' ? 'subscriptionId' : 'subscription_id'], JSON.stringify(r));
  assert.ok(r.meta[spelling === 'seed' ? 'appliedThroughSeq' : 'applied_through_seq'] !== undefined);
  return c;
}

test('the seed route and the 0.0.21 routes each read the same stored events in their own spelling', async () => {
  const thread = 'sp1';
  await produce(redis.url, thread, events({ event: 'started', graph_name: 'agent', cause: { type: 'toolCall', tool_call_id: 'c0' } }));
  const seed = await subscribeAll(url(thread), 'seed');
  const v21 = await subscribeAll(url(thread, 'stream/events'), '0.0.21');
  const asked = await subscribeAll(url(thread, 'stream', '?protocol=0.0.21'), '0.0.21');
  await waitUntil(() => [seed, v21, asked].every((c) => c.events.length === 4), 5000, 'the replays');
  const [sl, st, sv, si] = seed.events;
  assert.ok(sl.eventId && !sl.event_id);
  assert.deepEqual(sl.params.data, { event: 'started', graphName: 'agent', cause: { type: 'toolCall', toolCallId: 'c0' } });
  assert.deepEqual(st.params.data, { event: 'tool-started', toolCallId: 'c1', toolName: 'search', input: { tool_call_id: 'user data stays' } });
  assert.equal(si.params.data.interruptId, 'i1');
  assert.deepEqual(si.params.data.payload, { interruptId: 'kept' });
  for (const c of [v21, asked]) {
    const [l, t, , i] = c.events;
    assert.ok(l.event_id && !l.eventId);
    assert.equal(l.event_id, sl.eventId);
    assert.deepEqual(l.params.data, { event: 'started', graph_name: 'agent', cause: { type: 'toolCall', tool_call_id: 'c0' } });
    assert.deepEqual(t.params.data.tool_call_id, 'c1');
    assert.equal(i.params.data.interrupt_id, 'i1');
    assert.deepEqual(i.params.data.payload, { interruptId: 'kept' }, 'payloads are the user\'s');
  }
  // Values are the graph's state: byte for byte on every route, big numbers included.
  for (const c of [seed, v21]) {
    const raw = c.raw.find((t) => t.includes('"method":"values"'));
    assert.match(raw, /"graph_name":"state keys are the user's","n":12345678901234567890/);
  }
  // Live events too.
  await produce(redis.url, thread, [{ method: 'lifecycle', params: { namespace: [], data: { event: 'completed', graphName: 'agent' } } }]);
  await waitUntil(() => seed.events.length === 5 && v21.events.length === 5, 5000, 'live');
  assert.equal(seed.events[4].params.data.graphName, 'agent');
  assert.equal(v21.events[4].params.data.graph_name, 'agent');
  for (const c of [seed, v21, asked]) await c.close();
});

test('commands are read in either spelling on every route; answers and errors in the route\'s', async () => {
  const thread = 'sp2';
  await produce(redis.url, thread, events({ event: 'started', graphName: 'g' }));
  const seed = await connect(url(thread));
  const v21 = await connect(url(thread, 'stream/events'));
  for (const [c, field, graph] of [[seed, 'runId', 'graphName'], [v21, 'run_id', 'graph_name']]) {
    for (const params of [{ runId: 'nope' }, { run_id: 'nope' }]) {
      const r = await c.request({ id: 1, method: 'agent.getTree', params });
      assert.equal(r.error, 'no_such_run');
    }
    const tree = await c.request({ id: 2, method: 'agent.getTree', params: {} });
    assert.equal(tree.result.tree[graph], 'g');
    const bad = await c.request({ id: 3, method: 'subscription.reconnect', params: {} });
    assert.equal(bad.message, `params.${field} is required`);
    const run = await c.request({ id: 4, method: 'run.start', params: { input: 1 } });
    assert.equal(run.message, `params.${field === 'runId' ? 'assistantId' : 'assistant_id'} is required`);
  }
  // subscription.reconnect with snake params on the seed route, camel on 0.0.21.
  const head = seed.frames.length;
  const epoch = await rc.cmd('HGET', `tc:{${thread}}:meta`, 'epoch');
  const r1 = await seed.request({ id: 5, method: 'subscription.reconnect', params: { run_id: 'r', last_event_id: `${epoch}:2` } });
  assert.deepEqual([r1.result.restored, 'currentNamespaces' in r1.result], [true, true], JSON.stringify(r1));
  const r2 = await v21.request({ id: 5, method: 'subscription.reconnect', params: { runId: 'r', lastEventId: `${epoch}:1`, subscriptions: [] } });
  assert.deepEqual([r2.result.restored, 'current_namespaces' in r2.result], [true, true], JSON.stringify(r2));
  assert.ok(seed.frames.length > head);
  await seed.close();
  await v21.close();
});

test('SSE on /threads/:id/stream/events: 0.0.21 envelopes, and the resync event spelled so', async () => {
  const thread = 'sp3';
  await produce(redis.url, thread, events({ event: 'started', graphName: 'g' }));
  const s = await sse(`http://127.0.0.1:${tc.port}/threads/${thread}/stream/events`, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ channels: ['lifecycle', 'tools'] }) });
  assert.equal(s.status, 200);
  await waitUntil(() => s.events.length === 2, 5000, 'events');
  assert.ok(s.events[0].data.event_id);
  assert.equal(s.events[0].data.params.data.graph_name, 'g');
  s.close();
  // History lost: the resync event says missed_events.
  await rc.cmd('XTRIM', `tc:{${thread}}:events`, 'MINID', '4');
  const epoch = await rc.cmd('HGET', `tc:{${thread}}:meta`, 'epoch');
  const t = await sse(`http://127.0.0.1:${tc.port}/threads/${thread}/stream/events`, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'last-event-id': `${epoch}:1` },
    body: JSON.stringify({ channels: ['lifecycle', 'tools', 'input'] }) });
  await waitUntil(() => t.events.length >= 1, 5000, 'resync');
  assert.deepEqual(t.events[0], { event: 'resync', data: { restored: false, missed_events: 2 } });
  t.close();
});

test('a refused WebSocket on a 0.0.21 route is accepted and closed with 4000 + the HTTP status', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tc-spell-'));
  writeFileSync(path.join(dir, 'secret'), 'a-secret-that-is-long-enough-for-hs256');
  const authed = await startThreadcast({ redisUrl: redis.url,
    env: { THREADCAST_AUTH: 'jwt', THREADCAST_JWT_KEY: path.join(dir, 'secret'), THREADCAST_JWT_ALG: 'HS256' } });
  await authed.ready();
  // With no token the seed route answers HTTP 401 ...
  const seedWs = new WebSocket(`ws://127.0.0.1:${authed.port}/threads/t/stream`);
  const status = await new Promise((r) => { seedWs.on('unexpected-response', (_, res) => r(res.statusCode)); seedWs.on('error', () => {}); });
  assert.equal(status, 401);
  // ... the 0.0.21 route upgrades and closes with 4401, which its client reads as "do not retry".
  const ws = new WebSocket(`ws://127.0.0.1:${authed.port}/threads/t/stream/events`);
  const closed = await new Promise((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
  assert.equal(closed.code, 4401);
  assert.match(closed.reason, /unauthorized/);
  await authed.stop();
  assert.deepEqual(authed.sanitizerReports(), []);
  // A bad thread id on the 0.0.21 route: 4400.
  const bad = new WebSocket(url('bad%7Bid', 'stream/events'));
  const c2 = await new Promise((r) => bad.on('close', (code) => r(code)));
  assert.equal(c2, 4400);
});

test('GET /threads/:id/state: the hydration the official client asks for; 404 for an unknown thread', async () => {
  const missing = await tc.http('/threads/never-written/state');
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).error, 'not_found');
  const thread = 'sp4';
  await produce(redis.url, thread, [
    { method: 'lifecycle', params: { namespace: [], data: { event: 'started', graph_name: 'agent' } } },
    { method: 'values', params: { namespace: [], data: { messages: [{ role: 'human', content: 'hi' }] } } },
    { method: 'checkpoints', params: { namespace: [], timestamp: 1795000000123, data: { id: 'ck2', parent_id: 'ck1', step: 3, source: 'loop' } } },
    { method: 'input.requested', params: { namespace: [], data: { interrupt_id: 'int-1', payload: { question: 'ok?' } } } },
    { method: 'lifecycle', params: { namespace: [], data: { event: 'interrupted' } } },
  ]);
  let r = await tc.http(`/threads/${thread}/state`);
  assert.equal(r.status, 200);
  let st = await r.json();
  assert.deepEqual(st.values, { messages: [{ role: 'human', content: 'hi' }] });
  assert.deepEqual(st.checkpoint, { thread_id: thread, checkpoint_ns: '', checkpoint_id: 'ck2' });
  assert.deepEqual(st.parent_checkpoint, { thread_id: thread, checkpoint_ns: '', checkpoint_id: 'ck1' });
  assert.equal(st.metadata.step, 3);
  assert.equal(st.created_at, '2026-11-18T11:06:40.123Z');
  assert.deepEqual(st.next, ['agent']);
  assert.deepEqual(st.tasks.map((t) => t.interrupts), [[{ id: 'int-1', value: { question: 'ok?' } }]]);
  assert.deepEqual(st.interrupts, [{ id: 'int-1', value: { question: 'ok?' } }]);
  // Answered (input.answered, 0.0.21) and completed: nothing pending.
  await produce(redis.url, thread, [
    { method: 'input.answered', params: { namespace: [], data: { interrupt_ids: ['int-1'] } } },
    { method: 'lifecycle', params: { namespace: [], data: { event: 'completed' } } },
  ]);
  st = await (await tc.http(`/threads/${thread}/state`)).json();
  assert.deepEqual([st.next, st.tasks, st.interrupts], [[], [], []]);
  // input.answered is on the input channel.
  const c = await connect(url(thread, 'stream/events'));
  await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['input'] } });
  await produce(redis.url, thread, [{ method: 'lifecycle', params: { namespace: [], data: { event: 'started' } } },
    { method: 'input.answered', params: { namespace: [], data: { interrupt_ids: [] } } }]);
  await waitUntil(() => c.events.some((e) => e.method === 'input.answered'), 5000, 'input.answered');
  await c.close();
});
