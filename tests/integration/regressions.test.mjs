// Regressions found by using threadcast as its users do (issue 15). Each
// test failed before its fix.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, produce, redisClient, sse, sleep } from './lib/harness.mjs';

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

async function waitFor(fn, ms = 5000) {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(20);
  }
}
