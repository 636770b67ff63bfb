// Command framing: exactly one reply per command, with its id; precise errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, waitUntil } from './lib/harness.mjs';

let redis, tc, c;
before(async () => {
  redis = await startRedis();
  tc = await startThreadcast({ redisUrl: redis.url, args: ['--max-subscriptions', '3'] });
  await tc.ready();
  c = await connect(tc.url('cmd1'));
});
after(async () => {
  const reports = tc.sanitizerReports();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, [], tc.stderr);
});

/** Sends raw text and resolves with the next id:null error. */
async function rawNullId(text) {
  const before = c.nullIdErrors.length;
  c.sendRaw(text);
  await waitUntil(() => c.nullIdErrors.length > before, 3000, `reply to ${text}`);
  return c.nullIdErrors[before];
}

test('unknown method → unknown_command naming it', async () => {
  const r = await c.request({ id: 1, method: 'nope', params: {} });
  assert.deepEqual([r.type, r.id, r.error], ['error', 1, 'unknown_command']);
  assert.match(r.message, /nope/);
});

test('malformed frames get invalid_argument with id null', async () => {
  for (const text of ['{"id":3', 'hello', '{"id":1}}', '[1,2]', '42', '"x"', '{"id":1,"method":"x"} {"id":2}']) {
    const r = await rawNullId(text);
    assert.equal(r.error, 'invalid_argument', text);
    assert.equal(r.id, null);
  }
});

test('unusable ids get id null', async () => {
  for (const id of ['"x"', '-1', '1.5', '9007199254740992', 'null', 'true', '{}']) {
    const r = await rawNullId(`{"id":${id},"method":"nope"}`);
    assert.equal(r.error, 'invalid_argument', id);
    assert.match(r.message, /\bid\b/);
  }
  const r = await rawNullId('{"method":"nope"}');
  assert.match(r.message, /id is required/);
});

test('the largest and smallest ids are echoed exactly', async () => {
  const before = c.raw.length;
  const r = await c.request({ id: 9007199254740991, method: 'nope' });
  assert.equal(r.id, 9007199254740991);
  assert.ok(c.raw.slice(before).some((t) => t.includes('"id":9007199254740991')));
  assert.equal((await c.request({ id: 0, method: 'nope' })).id, 0);
});

test('method and params shape errors carry the id', async () => {
  let r = await c.request({ id: 5 });
  assert.deepEqual([r.id, r.error], [5, 'invalid_argument']);
  assert.match(r.message, /method is required/);
  r = await c.request({ id: 6, method: 7 });
  assert.match(r.message, /method must be a string/);
  r = await c.request({ id: 7, method: 'subscription.subscribe', params: [] });
  assert.match(r.message, /params must be an object/);
});

test('subscription.subscribe validates and names the field', async () => {
  const cases = [
    [{}, /params.channels is required/],
    [{ channels: [] }, /params.channels/],
    [{ channels: ['bogus'] }, /params.channels\[0\]/],
    [{ channels: ['messages', 5] }, /params.channels\[1\]/],
    [{ channels: ['messages'], namespaces: 'x' }, /params.namespaces/],
    [{ channels: ['messages'], namespaces: [['a', 1]] }, /params.namespaces\[0\]/],
    [{ channels: ['messages'], depth: -1 }, /params.depth/],
    [{ channels: ['messages'], depth: '2' }, /params.depth/],
  ];
  let id = 100;
  for (const [params, re] of cases) {
    const r = await c.request({ id: ++id, method: 'subscription.subscribe', params });
    assert.equal(r.error, 'invalid_argument', JSON.stringify(params));
    assert.match(r.message, re);
  }
  const r = await c.request({ id: ++id, method: 'subscription.subscribe' });
  assert.match(r.message, /params is required/);
});

test('subscribe/unsubscribe round trip and the per-connection limit', async () => {
  const d = await connect(tc.url('cmd2'));
  const all = ['values', 'updates', 'messages', 'tools', 'lifecycle', 'input', 'checkpoints', 'tasks', 'custom', 'custom:progress'];
  const a = await d.request({ id: 1, method: 'subscription.subscribe', params: { channels: all, namespaces: [[], ['a', 'b']], depth: 0 } });
  assert.equal(a.type, 'success');
  assert.equal(typeof a.result.subscriptionId, 'string');
  assert.equal(a.result.replayedEvents, 0);
  const b = await d.request({ id: 2, method: 'subscription.subscribe', params: { channels: all, namespaces: [[], ['a', 'b']], depth: 0 } });
  assert.notEqual(b.result.subscriptionId, a.result.subscriptionId);
  await d.request({ id: 3, method: 'subscription.subscribe', params: { channels: ['tools'] } });
  const over = await d.request({ id: 4, method: 'subscription.subscribe', params: { channels: ['tools'] } });
  assert.equal(over.error, 'invalid_argument');
  assert.match(over.message, /limit/);
  const un = await d.request({ id: 5, method: 'subscription.unsubscribe', params: { subscriptionId: a.result.subscriptionId } });
  assert.equal(un.type, 'success');
  const again = await d.request({ id: 6, method: 'subscription.unsubscribe', params: { subscriptionId: a.result.subscriptionId } });
  assert.equal(again.error, 'no_such_subscription');
  const ok = await d.request({ id: 7, method: 'subscription.subscribe', params: { channels: ['tools'] } });
  assert.equal(ok.type, 'success');
  assert.match((await d.request({ id: 8, method: 'subscription.unsubscribe', params: {} })).message, /params.subscriptionId is required/);
  assert.match((await d.request({ id: 9, method: 'subscription.unsubscribe', params: { subscriptionId: 5 } })).message, /must be a string/);
  // Another connection does not hold this connection's subscriptions.
  const other = await c.request({ id: 10, method: 'subscription.unsubscribe', params: { subscriptionId: b.result.subscriptionId } });
  assert.equal(other.error, 'no_such_subscription');
  await d.close();
});

test('a burst of 10,000 commands is answered in order, each once', async () => {
  const d = await connect(tc.url('burst'));
  const n = 10000;
  for (let i = 0; i < n; i++) d.sendRaw(`{"id":${i},"method":"nope"}`);
  await waitUntil(() => d.frames.length >= n, 20000, 'all replies');
  assert.equal(d.frames.length, n);
  d.frames.forEach((f, i) => assert.equal(f.id, i));
  assert.equal(d.ws.readyState, 1);
  await d.close();
});

test('50 connections × 200 commands each all get their replies', async () => {
  const clients = await Promise.all(Array.from({ length: 50 }, (_, i) => connect(tc.url(`many${i % 5}`))));
  for (const d of clients) for (let i = 0; i < 200; i++) d.sendRaw(`{"id":${i},"method":"nope"}`);
  await waitUntil(() => clients.every((d) => d.frames.length >= 200), 20000, 'replies');
  for (const d of clients) {
    assert.deepEqual(d.frames.map((f) => f.id), Array.from({ length: 200 }, (_, i) => i));
    await d.close();
  }
});
