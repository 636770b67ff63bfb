// Spec §3–4: subscription.subscribe and subscription.unsubscribe, with
// --max-subscriptions 3. (commands.test.mjs checks their params and the limit too, on
// its own gateway.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, gateway, exchange, produce, waitUntil } from './lib/harness.mjs';

let redis, tc;
gateway({ args: ['--max-subscriptions', '3'] }, (r, t) => { redis = r; tc = t; });

let threadNo = 0;
const fresh = () => connect(tc.url(`spec-sub-${++threadNo}`));
const sub = (c, id, params) => c.request({ id, method: 'subscription.subscribe', params });
const unsub = (c, id, params) => c.request({ id, method: 'subscription.unsubscribe', params });

test('subscribe {channels:["messages"]} → success with a subscriptionId and replayedEvents 0', async () => {
  const c = await fresh();
  const replies = await exchange(c, [JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } })]);
  assert.equal(replies.length, 1);
  const [r] = replies;
  assert.equal(r.type, 'success');
  assert.equal(r.id, 1);
  assert.equal(typeof r.result.subscriptionId, 'string');
  assert.ok(r.result.subscriptionId.length > 0);
  assert.equal(r.result.replayedEvents, 0);
  await c.close();
});

test('two subscribes with the same filter get two distinct ids', async () => {
  const c = await fresh();
  const a = await sub(c, 1, { channels: ['messages'] });
  const b = await sub(c, 2, { channels: ['messages'] });
  assert.equal(a.type, 'success');
  assert.equal(b.type, 'success');
  assert.notEqual(a.result.subscriptionId, b.result.subscriptionId);
  await c.close();
});

test('bad subscribe params → invalid_argument naming the field', async () => {
  const c = await fresh();
  const cases = [
    [undefined, /params/],
    [{}, /channels/],
    [{ channels: [] }, /channels/],
    [{ channels: ['bogus'] }, /channels\[0\]/],
    [{ channels: [5] }, /channels\[0\]/],
    [{ channels: 'messages' }, /channels/],
    [{ channels: ['messages'], namespaces: 'x' }, /namespaces/],
    [{ channels: ['messages'], namespaces: [['a', 1]] }, /namespaces/],
    [{ channels: ['messages'], depth: -1 }, /depth/],
    [{ channels: ['messages'], depth: '2' }, /depth/],
  ];
  const texts = cases.map(([params], i) => JSON.stringify({ id: 10 + i, method: 'subscription.subscribe', params }));
  const replies = await exchange(c, texts);
  assert.equal(replies.length, cases.length, JSON.stringify(replies));
  replies.forEach((r, i) => {
    assert.deepEqual([r.type, r.id, r.error], ['error', 10 + i, 'invalid_argument'], texts[i]);
    assert.match(r.message, cases[i][1], `${texts[i]} → ${r.message}`);
  });
  // None of those counted as a subscription: the limit of 3 is still free.
  for (let i = 0; i < 3; i++) assert.equal((await sub(c, 30 + i, { channels: ['tools'] })).type, 'success');
  await c.close();
});

test('every channel, nested namespaces and depth 0 are accepted', async () => {
  const c = await fresh();
  const all = ['custom', 'custom:progress', 'input', 'values', 'updates', 'messages', 'tools', 'lifecycle', 'checkpoints', 'tasks'];
  const r = await sub(c, 1, { channels: all, namespaces: [[], ['a', 'b']], depth: 0 });
  assert.equal(r.type, 'success', JSON.stringify(r));
  assert.equal(r.result.replayedEvents, 0);
  assert.equal((await unsub(c, 2, { subscriptionId: r.result.subscriptionId })).type, 'success');
  // Each channel on its own, too (unsubscribing to stay under the limit).
  let id = 10;
  for (const ch of all) {
    const s = await sub(c, ++id, { channels: [ch] });
    assert.equal(s.type, 'success', `${ch}: ${JSON.stringify(s)}`);
    assert.equal((await unsub(c, ++id, { subscriptionId: s.result.subscriptionId })).type, 'success', ch);
  }
  await c.close();
});

test('--max-subscriptions 3: the 4th is refused naming the limit; an unsubscribe frees a slot', async () => {
  const c = await fresh();
  const ids = [];
  for (let i = 1; i <= 3; i++) {
    const r = await sub(c, i, { channels: ['messages'] });
    assert.equal(r.type, 'success');
    ids.push(r.result.subscriptionId);
  }
  const over = await sub(c, 4, { channels: ['messages'] });
  assert.deepEqual([over.type, over.id, over.error], ['error', 4, 'invalid_argument']);
  assert.match(over.message, /limit/);
  assert.match(over.message, /\b3\b/);
  assert.equal((await unsub(c, 5, { subscriptionId: ids[1] })).type, 'success');
  assert.equal((await sub(c, 6, { channels: ['tools'] })).type, 'success');
  assert.equal((await sub(c, 7, { channels: ['tools'] })).error, 'invalid_argument');
  // The limit is per connection: another connection has its own 3.
  const d = await fresh();
  for (let i = 1; i <= 3; i++) assert.equal((await sub(d, i, { channels: ['tasks'] })).type, 'success');
  await d.close();
  await c.close();
});

test('unsubscribe: success once, then no_such_subscription; bad ids are invalid_argument', async () => {
  const c = await fresh();
  const { result } = await sub(c, 1, { channels: ['messages'] });
  const replies = await exchange(c, [
    JSON.stringify({ id: 2, method: 'subscription.unsubscribe', params: { subscriptionId: result.subscriptionId } }),
    JSON.stringify({ id: 3, method: 'subscription.unsubscribe', params: { subscriptionId: result.subscriptionId } }),
    JSON.stringify({ id: 4, method: 'subscription.unsubscribe', params: {} }),
    JSON.stringify({ id: 5, method: 'subscription.unsubscribe', params: { subscriptionId: 5 } }),
    JSON.stringify({ id: 6, method: 'subscription.unsubscribe' }),
    JSON.stringify({ id: 7, method: 'subscription.unsubscribe', params: { subscriptionId: 'never-issued' } }),
  ]);
  assert.deepEqual(replies.map((r) => [r.id, r.type, r.error]), [
    [2, 'success', undefined],
    [3, 'error', 'no_such_subscription'],
    [4, 'error', 'invalid_argument'],
    [5, 'error', 'invalid_argument'],
    [6, 'error', 'invalid_argument'],
    [7, 'error', 'no_such_subscription'],
  ]);
  assert.match(replies[2].message, /subscriptionId/);
  assert.match(replies[3].message, /subscriptionId/);
  await c.close();
});

test("a subscription id is not on another connection, and that connection cannot remove it", async () => {
  const a = await fresh();
  const b = await connect(tc.url(`spec-sub-${threadNo}`)); // same thread, other connection
  const { result } = await sub(a, 1, { channels: ['messages'] });
  const r = await unsub(b, 1, { subscriptionId: result.subscriptionId });
  assert.deepEqual([r.type, r.id, r.error], ['error', 1, 'no_such_subscription']);
  assert.equal((await unsub(a, 2, { subscriptionId: result.subscriptionId })).type, 'success');
  await a.close();
  await b.close();
});

test('a namespace segment without ":" takes the task-suffixed segments of that node, as the reference server matches', async () => {
  const c = await fresh();
  const thread = `spec-sub-${threadNo}`;
  const r = await sub(c, 1, { channels: ['updates'], namespaces: [['gp_two'], ['tools:1', 'inner']] });
  assert.equal(r.type, 'success');
  const namespaces = [['gp_two:6e1f'], ['gp_two:6e1f', 'child:2'], ['gp_twox:1'], ['gp'], [], ['other', 'gp_two:1'],
    ['tools:1', 'inner:9'], ['tools:2', 'inner'], ['tools', 'inner']];
  await produce(redis.url, thread, namespaces.map((namespace, i) => ({ method: 'updates', params: { namespace, data: { i } } })));
  await waitUntil(() => c.events.length >= 3, 5000, 'the matching events');
  await exchange(c, []); // and nothing else queued behind them
  assert.deepEqual(c.events.map((e) => e.params.namespace), [['gp_two:6e1f'], ['gp_two:6e1f', 'child:2'], ['tools:1', 'inner:9']]);
  await c.close();
});
