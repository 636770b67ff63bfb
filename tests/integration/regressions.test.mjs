// Regressions found by using threadcast as its users do (issue 15). Each
// test failed before its fix.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { assemble, messageText } from '../../protocol/js/messages.js';
import { startRedis, startThreadcast, startAgent, connect, stopAll, produce, redisClient, sse, sleep, waitUntil, repoRoot } from './lib/harness.mjs';

let redis, tc, rc, agent;
before(async () => {
  redis = await startRedis();
  tc = await startThreadcast({ redisUrl: redis.url });
  agent = await startAgent(redis.url, { name: 'reg' });
  await tc.ready();
  rc = redisClient(redis.port);
});
after(async () => {
  const reports = tc.sanitizerReports();
  rc.close();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, []);
  assert.doesNotMatch(agent.stderr, /AddressSanitizer|runtime error/);
});

async function xrangeCalls() {
  const info = await rc.cmd('INFO', 'commandstats');
  const m = /cmdstat_xrange:calls=(\d+)/.exec(info);
  return m ? Number(m[1]) : 0;
}

const lifecycle = { method: 'lifecycle', params: { namespace: [], data: { event: 'started', graphName: 'g' } } };
const message = { method: 'messages', params: { namespace: [], data: { event: 'message-start', role: 'ai', id: 'm1' } } };

// Bug 1: the browser client's ordinary reconnect on a quiet thread used to
// stall the connection and spin on XRANGE until a new event arrived.
test('subscription.reconnect at the head of an idle thread goes live at once', async () => {
  const thread = 'idle-head';
  await produce(redis.url, thread, [lifecycle, message, message]);
  const epoch = await rc.cmd('HGET', `tc:{${thread}}:meta`, 'epoch');
  const c = await connect(tc.url(thread));
  const r = await c.request({ id: 1, method: 'subscription.reconnect',
    params: { runId: 'r', lastEventId: `${epoch}:3`, subscriptions: [] } });
  assert.equal(r.type, 'success');
  assert.equal(r.result.restored, true);
  const before = await xrangeCalls();
  // A later command is answered...
  const tree = await Promise.race([c.request({ id: 2, method: 'agent.getTree', params: {} }), sleep(3000)]);
  assert.ok(tree, 'the command after the reconnect was never answered');
  assert.equal(tree.result.tree.graphName, 'g');
  // ... the gateway does not keep reading the stream ...
  await sleep(500);
  assert.ok(await xrangeCalls() - before < 5, 'the gateway keeps issuing XRANGE');
  // ... and the next event is delivered live.
  const sub = await c.request({ id: 3, method: 'subscription.subscribe', params: { channels: ['messages'] } });
  assert.equal(sub.type, 'success');
  await produce(redis.url, thread, [message]);
  await waitFor(() => c.events.some((e) => e.seq === 4));
  await c.close();
});

// Bug 1, SSE form: Last-Event-ID at the head.
test('an SSE stream resumed at the head goes live', async () => {
  const thread = 'idle-head-sse';
  await produce(redis.url, thread, [lifecycle, message]);
  const epoch = await rc.cmd('HGET', `tc:{${thread}}:meta`, 'epoch');
  const s = await sse(`http://127.0.0.1:${tc.port}/threads/${thread}/stream?channels=messages`,
    { headers: { accept: 'text/event-stream', 'last-event-id': `${epoch}:2` } });
  assert.equal(s.status, 200);
  const before = await xrangeCalls();
  await sleep(500);
  assert.ok(await xrangeCalls() - before < 5, 'the gateway keeps issuing XRANGE');
  await produce(redis.url, thread, [message]);
  await waitFor(() => s.events.some((e) => e.data.seq === 3));
  s.close();
});

const isRootEnd = (e) => e.method === 'lifecycle' && e.params.namespace.length === 0 &&
  ['completed', 'interrupted'].includes(e.params.data.event);

/** Messages as the client library's assembler puts them together. */
function messages(events) {
  return assemble(events).map((m) => ({ role: m.role, status: m.status, text: messageText(m) }));
}

// Bug 2: run.start while a run is active used to return the running run's id
// and drop the input; the CDDL (4a) says it goes into the running graph.
// input.inject used to emit a lone message-start.
test('run.start on an active run injects its input, as a whole message', async () => {
  // A thread of its own, with a slow agent, so that the run is still active.
  const r2 = await startRedis();
  const tc2 = await startThreadcast({ redisUrl: r2.url });
  const slow = await startAgent(r2.url, { name: 'slow', args: ['--token-delay-ms', '100'] });
  await tc2.ready();
  const d = await connect(tc2.url('inject2'));
  await d.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages', 'lifecycle'] } });
  const run = await d.request({ id: 2, method: 'run.start',
    params: { assistant_id: 'agent', input: { messages: [{ role: 'user', content: 'a long question' }] } } });
  await waitUntil(() => d.events.some((e) => e.method === 'messages' && e.params.data.event === 'content-block-delta'), 15000, 'tokens');
  const again = await d.request({ id: 3, method: 'run.start',
    params: { assistant_id: 'agent', input: { messages: [{ role: 'user', content: 'and one more thing' }] } } });
  assert.equal(again.type, 'success');
  assert.equal(again.result.run_id, run.result.run_id, 'the running run, not a new one');
  const inj = await d.request({ id: 4, method: 'input.inject', params: { namespace: [], message: { role: 'user', content: 'psst' } } });
  assert.equal(inj.type, 'success');
  await waitUntil(() => d.events.some(isRootEnd), 60000, 'the run to end');
  const texts = messages(d.events);
  const injected = texts.filter((m) => m.text === 'and one more thing' || m.text === 'psst');
  assert.equal(injected.length, 2, JSON.stringify(texts));
  for (const m of texts) assert.equal(m.status, 'finished', `a whole message: ${JSON.stringify(m)}`);
  // One run started on the thread, no second.
  assert.equal(d.events.filter((e) => e.method === 'lifecycle' && e.params.namespace.length === 0 &&
    e.params.data.event === 'started').length, 1);
  await d.close();
  await slow.kill('SIGTERM');
  await tc2.stop();
  await r2.cleanup();
  assert.deepEqual(tc2.sanitizerReports(), []);
});

// Bug 3: a refused upgrade was answered "HTTP/1.0 …" to an HTTP/1.1 request;
// Python's websockets rejected it unread and never saw retry-after.
test('a refused upgrade is a valid HTTP/1.1 answer that a strict client reads', async () => {
  const full = await startThreadcast({ redisUrl: redis.url, args: ['--max-connections', '1'] });
  await full.ready();
  const hold = await connect(full.url('full1'));
  const py = `
import asyncio, sys, websockets
async def main(url):
    try:
        async with websockets.connect(url):
            print("OPEN")
    except websockets.exceptions.InvalidStatusCode as e:  # websockets 10 (Debian 12)
        print("STATUS", e.status_code, e.headers.get("retry-after"))
    except getattr(websockets.exceptions, "InvalidStatus", ()) as e:  # 14 and later (Debian 13)
        print("STATUS", e.response.status_code, e.response.headers.get("retry-after"))
    except Exception as e:
        print("ERROR", type(e).__name__, e)
asyncio.run(main(sys.argv[1]))
`;
  const run = (url) => spawnSync('/usr/bin/python3', ['-c', py, url], { encoding: 'utf8', timeout: 20000 }).stdout.trim();
  assert.equal(run(`ws://127.0.0.1:${full.port}/threads/full2/stream`), 'STATUS 503 1');
  assert.equal(run(`ws://127.0.0.1:${full.port}/threads/bad%7Bid/stream`), 'STATUS 400 None');
  assert.equal(run(`ws://127.0.0.1:${full.port}/nowhere`), 'STATUS 404 None');
  await hold.close();
  await full.stop();
  assert.deepEqual(full.sanitizerReports(), []);
});

// Bug 4: lastEventId: null was taken as absent; the CDDL types it as optional text.
test('subscription.reconnect with lastEventId null is refused', async () => {
  const c = await connect(tc.url('null1'));
  for (const [id, params] of [[1, { runId: 'r', lastEventId: null }], [2, { run_id: 'r', last_event_id: null }]]) {
    const r = await c.request({ id, method: 'subscription.reconnect', params });
    assert.equal(r.error, 'invalid_argument');
    assert.match(r.message, /lastEventId|last_event_id/);
  }
  await c.close();
});

// Bug 5: no_such_namespace was never sent.
test('state.get for a namespace the graph does not have: no_such_namespace', async () => {
  const c = await connect(tc.url('ns1'));
  const r = await c.request({ id: 1, method: 'state.get', params: { namespace: ['nowhere'] } });
  assert.equal(r.error, 'no_such_namespace');
  const ok = await c.request({ id: 2, method: 'state.get', params: { namespace: [] } });
  assert.equal(ok.type, 'success');
  await c.close();
});

// Bug 6: an unsubscribe waited behind a replay in flight.
test('unsubscribe during its own replay stops the delivery at once', async () => {
  const thread = 'unsub1';
  const many = Array.from({ length: 9000 }, (_, i) => ({ method: 'messages', params: { namespace: [], data: { i, pad: 'x'.repeat(200) } } }));
  await produce(redis.url, thread, many);
  const c = await connect(tc.url(thread));
  c.ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } }));
  const sub = await new Promise((res) => c.pending.set(1, res));
  const unsub = c.request({ id: 2, method: 'subscription.unsubscribe', params: { subscriptionId: sub.result.subscriptionId } });
  const r = await unsub;
  assert.equal(r.type, 'success');
  const replyAt = c.frames.indexOf(r);
  assert.equal(sub.result.replayedEvents, 9000);
  assert.ok(c.events.length < 9000, `all ${c.events.length} replayed events came before the unsubscribe was served`);
  assert.equal(c.frames.slice(replyAt + 1).filter((f) => f.type === 'event').length, 0, 'no event after the reply');
  await c.close();
});

/** Every reply came before any event; each event of the run once, in seq order; the end last. */
async function oneReplay(c, run) {
  await waitUntil(() => c.events.length >= run.length, 5000, 'the replay');
  await sleep(100);
  const firstEvent = c.frames.findIndex((f) => f.type === 'event');
  assert.ok(c.frames.slice(firstEvent).every((f) => f.type === 'event'), 'no reply after the first event');
  assert.deepEqual(c.events.map((e) => e.seq), run.map((_, i) => i + 1));
  assert.equal(c.events.at(-1).params.data.event, 'completed');
}

// Bug 8: the official client resubscribes all its filters at once after a
// reconnect and reacts to a run's end as soon as it sees it. Replayed one
// subscription after another, the first one's replay carried the run's end
// before the later ones' events, and the SDK closed its message streams
// with half a message (seen as a flaky SDK test: the gateway killed mid-run).
test('subscribes sent together are answered together, then one replay in seq order', async () => {
  const thread = 'burst-subs';
  const ev = (method, data, namespace = []) => ({ method, params: { namespace, data } });
  const run = [
    ev('lifecycle', { event: 'started', graph_name: 'g' }),
    ev('messages', { event: 'message-start', role: 'ai', id: 'm1' }),
    ev('values', { n: 1 }),
    ev('messages', { event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: 'hi' } }),
    ev('lifecycle', { event: 'started' }, ['sub:1']),
    ev('messages', { event: 'message-finish' }),
    ev('values', { n: 2 }),
    ev('lifecycle', { event: 'completed', graph_name: 'g' }),
  ];
  await produce(redis.url, thread, run);
  const c = await connect(`ws://127.0.0.1:${tc.port}/threads/${thread}/stream/events`);
  const filters = [['lifecycle', 'input'], ['values', 'lifecycle', 'input'], ['messages', 'lifecycle', 'input']];
  // As the SDK does: three sends in one tick (one or several TCP segments).
  const replies = filters.map((channels, i) => new Promise((res) => c.pending.set(i + 1, res)));
  c.ws._socket.cork();
  filters.forEach((channels, i) => c.ws.send(JSON.stringify({ id: i + 1, method: 'subscription.subscribe', params: { channels } })));
  process.nextTick(() => c.ws._socket.uncork());
  const got = await Promise.all(replies);
  assert.deepEqual(got.map((r) => r.type), ['success', 'success', 'success']);
  const matching = (channels) => run.filter((e) => channels.includes(e.method)).length;
  assert.deepEqual(got.map((r) => r.result.replayed_events), filters.map(matching));
  await oneReplay(c, run);

  // A bad one in the burst stops the joining: replies stay in command order.
  const d = await connect(`ws://127.0.0.1:${tc.port}/threads/${thread}/stream/events`);
  const order = [];
  d.ws.on('message', (m) => { const f = JSON.parse(m); if (f.type !== 'event') order.push([f.id, f.type]); });
  d.ws._socket.cork();
  d.ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['lifecycle'] } }));
  d.ws.send(JSON.stringify({ id: 2, method: 'subscription.subscribe', params: { channels: ['bogus'] } }));
  d.ws.send(JSON.stringify({ id: 3, method: 'subscription.subscribe', params: { channels: ['values'] } }));
  process.nextTick(() => d.ws._socket.uncork());
  await waitUntil(() => order.length >= 3, 5000, 'three replies');
  assert.deepEqual(order, [[1, 'success'], [2, 'error'], [3, 'success']]);
  await c.close();
  await d.close();
});

// Bug 8 again, under load: the SDK's three subscribes left its `ws` client
// apart (each compressed on its own), the first was answered and replayed
// before the others arrived, and the run's end reached the SDK first. A
// subscribe whose replay holds the end of the run now waits a moment for
// the rest of its burst.
test('subscribes of one burst that arrive milliseconds apart are still replayed as one, the end last', async () => {
  const ev = (method, data) => ({ method, params: { namespace: [], data } });
  const run = [
    ev('lifecycle', { event: 'started', graph_name: 'g' }),
    ev('messages', { event: 'message-start', role: 'ai', id: 'm1' }),
    ev('values', { n: 1 }),
    ev('messages', { event: 'message-finish' }),
    ev('lifecycle', { event: 'completed', graph_name: 'g' }),
  ];
  const filters = [['lifecycle', 'input'], ['values', 'lifecycle', 'input'], ['messages', 'lifecycle', 'input']];
  // A gateway and Redis of its own: the only XRANGEs are this test's replays.
  const redis2 = await startRedis();
  const tc2 = await startThreadcast({ redisUrl: redis2.url });
  await tc2.ready();
  const rc2 = redisClient(redis2.port);
  const xranges = async () => Number(/cmdstat_xrange:calls=(\d+)/.exec(await rc2.cmd('INFO', 'commandstats'))?.[1] ?? 0);
  const held = async () => Number(/threadcast_replays_held_total (\d+)/.exec(await (await tc2.http('/metrics')).text())[1]);
  const subscriber = async (thread, events) => {
    await produce(redis2.url, thread, events);
    const c = await connect(`ws://127.0.0.1:${tc2.port}/threads/${thread}/stream/events`);
    c.send = (i) => c.ws.send(JSON.stringify({ id: i + 1, method: 'subscription.subscribe', params: { channels: filters[i] } }));
    c.replies = () => c.frames.filter((f) => f.type === 'success').length;
    return c;
  };
  // The first subscribe alone; the others once its replay has counted the
  // run (its XRANGE seen in Redis' stats): without the wait its answer and
  // replay would be on their way by then.
  const c = await subscriber('burst-subs-apart', run);
  const heldBefore = await held();
  const before = await xranges();
  c.send(0);
  const end = Date.now() + 5000;
  while ((await xranges()) === before) assert.ok(Date.now() < end, 'the first subscribe\'s count');
  c.send(1);
  c.send(2);
  await waitUntil(() => c.replies() === 3, 5000, 'three replies');
  await oneReplay(c, run);
  assert.equal(await held(), heldBefore + 1, 'the answer waited once for its burst');

  // While the run goes on nothing waits: the first is answered and replayed
  // on its own, with no wait counted, and the others after it.
  const live = run.slice(0, 2);
  const d = await subscriber('burst-subs-live', live);
  d.send(0);
  await waitUntil(() => d.replies() === 1 && d.frames.some((f) => f.type === 'event'), 5000, 'the first reply and its event');
  assert.equal(await held(), heldBefore + 1, 'a subscribe to a running run does not wait');
  d.send(1);
  d.send(2);
  await waitUntil(() => d.replies() === 3, 5000, 'three replies');
  const order = d.frames.map((f) => (f.type === 'event' ? `event ${f.seq}` : `${f.type} ${f.id}`));
  // (The first filter wants only the lifecycle event.)
  assert.deepEqual(order.slice(0, 3), ['success 1', 'event 1', 'success 2']);
  await c.close();
  await d.close();
  rc2.close();
  await tc2.stop();
  await redis2.cleanup();
  assert.deepEqual(tc2.sanitizerReports(), []);
});

// Bug 7: scripts/run --port 9000 printed URLs with port 8080.
test('scripts/run prints the port it was given', () => {
  const out = (args, env = {}) => spawnSync('bash', ['-c', `source scripts/lib.sh; tc_port_of "$@"`, 'x', ...args],
    { cwd: repoRoot, encoding: 'utf8', env: { ...process.env, ...env } }).stdout.trim();
  assert.equal(out(['--port', '9000']), '9000');
  assert.equal(out(['--log-level', 'debug', '--port=9001']), '9001');
  assert.equal(out([]), '8080');
  assert.equal(out([], { THREADCAST_PORT: '7000' }), '7000');
  assert.equal(out(['--port', '9002'], { THREADCAST_PORT: '7000' }), '9002');
  const run = spawnSync('grep', ['-c', 'tc_port_of', 'scripts/run'], { cwd: repoRoot, encoding: 'utf8' });
  assert.ok(Number(run.stdout) >= 1, 'scripts/run uses it');
});

async function waitFor(fn, ms = 5000) {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(20);
  }
}
