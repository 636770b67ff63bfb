// Commands: exactly one reply per command, with its id (null when the id itself is
// missing or unusable); precise errors naming the field; bursts answered in order.
// Each describe block runs on a redis-server and threadcast of its own.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, waitUntil, exchange } from './lib/harness.mjs';

// Command framing: exactly one reply per command, with its id; precise errors.
describe('command framing and errors (--max-subscriptions 3)', () => {
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
});

// Spec §2: command framing. Every command gets exactly one reply frame,
// carrying its id, or id null when the id itself is missing or unusable.
describe('spec §2: command framing, one reply per command', () => {
  let redis, tc, c;
  const started = [];

  before(async () => {
    redis = await startRedis();
    tc = await startThreadcast({ redisUrl: redis.url });
    started.push(tc);
    await waitUntil(async () => (await tc.http('/readyz')).status === 200, 10000, 'ready');
    c = await connect(tc.url('spec-cmd'));
  });

  after(async () => {
    const reports = started.flatMap((t) => t.sanitizerReports().map((re) => `${re}: ${t.stderr}`));
    await stopAll();
    await redis.cleanup();
    assert.deepEqual(reports, []);
  });

  /** One text in, exactly one reply out. */
  async function one(text) {
    const replies = await exchange(c, [text]);
    assert.equal(replies.length, 1, `exactly one reply to ${text}: ${JSON.stringify(replies)}`);
    return replies[0];
  }

  test('unknown method → one unknown_command error with the id, naming the method', async () => {
    const r = await one('{"id":1,"method":"nope","params":{}}');
    assert.deepEqual(Object.keys(r).sort(), ['error', 'id', 'message', 'type']);
    assert.equal(r.type, 'error');
    assert.equal(r.id, 1);
    assert.equal(r.error, 'unknown_command');
    assert.equal(typeof r.message, 'string');
    assert.match(r.message, /nope/);
  });

  test('frames that are not one JSON object → invalid_argument with id null', async () => {
    const texts = ['{"id":3', 'hello', '{"id":1}}', '[1,2]', '[{"id":1,"method":"nope"}]', '[]', '42', '"str"',
      'null', '{"id":1,"method":"nope"} {"id":2,"method":"nope"}'];
    const replies = await exchange(c, texts);
    assert.equal(replies.length, texts.length, JSON.stringify(replies));
    replies.forEach((r, i) => {
      assert.equal(r.type, 'error', texts[i]);
      assert.equal(r.id, null, texts[i]);
      assert.equal(r.error, 'invalid_argument', texts[i]);
      assert.equal(typeof r.message, 'string', texts[i]);
    });
  });

  test('missing or unusable ids → invalid_argument with id null', async () => {
    const texts = [
      '{"method":"nope","params":{}}',
      '{"id":"x","method":"nope","params":{}}',
      '{"id":-1,"method":"nope","params":{}}',
      '{"id":1.5,"method":"nope","params":{}}',
      '{"id":9007199254740992,"method":"nope","params":{}}',
    ];
    const replies = await exchange(c, texts);
    assert.equal(replies.length, texts.length, JSON.stringify(replies));
    replies.forEach((r, i) => {
      assert.deepEqual([r.type, r.id, r.error], ['error', null, 'invalid_argument'], texts[i]);
      assert.match(r.message, /\bid\b/, texts[i]);
    });
  });

  test('id 9007199254740991 is echoed exactly, id 0 is valid', async () => {
    const start = c.raw.length;
    const r = await one('{"id":9007199254740991,"method":"nope","params":{}}');
    assert.equal(r.error, 'unknown_command');
    assert.equal(r.id, 9007199254740991);
    assert.ok(c.raw[start].includes('"id":9007199254740991'), c.raw[start]);
    const z = await one('{"id":0,"method":"nope","params":{}}');
    assert.deepEqual([z.id, z.error], [0, 'unknown_command']);
  });

  test('method missing or not a string → invalid_argument with the id', async () => {
    const texts = ['{"id":11,"params":{}}', '{"id":12,"method":7,"params":{}}', '{"id":13,"method":null,"params":{}}',
      '{"id":14,"method":["nope"],"params":{}}', '{"id":15,"method":{},"params":{}}'];
    const replies = await exchange(c, texts);
    assert.deepEqual(replies.map((r) => [r.type, r.id, r.error]),
      [11, 12, 13, 14, 15].map((id) => ['error', id, 'invalid_argument']));
    for (const r of replies) assert.match(r.message, /method/);
  });

  test('params not an object → invalid_argument with the id', async () => {
    const texts = ['{"id":21,"method":"subscription.subscribe","params":[]}',
      '{"id":22,"method":"subscription.subscribe","params":"x"}',
      '{"id":23,"method":"subscription.subscribe","params":5}',
      '{"id":24,"method":"nope","params":true}'];
    const replies = await exchange(c, texts);
    assert.deepEqual(replies.map((r) => [r.type, r.id, r.error]),
      [21, 22, 23, 24].map((id) => ['error', id, 'invalid_argument']));
    for (const r of replies) assert.match(r.message, /params/);
  });

  test('the connection keeps serving after every kind of bad frame', async () => {
    const r = await one('{"id":31,"method":"subscription.subscribe","params":{"channels":["messages"]}}');
    assert.deepEqual([r.type, r.id], ['success', 31]);
    assert.equal(c.ws.readyState, 1);
  });

  test('runtime methods with agent commands switched off → not_supported with the id', async () => {
    const off = await startThreadcast({ redisUrl: redis.url, args: ['--commands', 'off'] });
    started.push(off);
    const d = await connect(off.url('spec-cmd-off'));
    const methods = ['run.start', 'input.respond', 'input.inject', 'state.get', 'state.listCheckpoints', 'state.fork'];
    const replies = await exchange(d, methods.map((method, i) => JSON.stringify({ id: 100 + i, method, params: {} })));
    assert.deepEqual(replies.map((r) => [r.type, r.id, r.error]),
      methods.map((_m, i) => ['error', 100 + i, 'not_supported']));
    replies.forEach((r, i) => assert.match(r.message, new RegExp(methods[i].replace('.', '\\.'))));
    await d.close();
    assert.deepEqual(await off.stop(), { code: 0, signal: null });
  });

  test('agent.getTree and subscription.reconnect are answered by the gateway once, with the id', async () => {
    const replies = await exchange(c, [
      '{"id":41,"method":"agent.getTree","params":{}}',
      '{"id":42,"method":"subscription.reconnect","params":{}}',
    ]);
    assert.deepEqual(replies.map((r) => r.id), [41, 42]);
    assert.deepEqual(replies.map((r) => r.error), ['no_such_run', 'invalid_argument']);
  });
});
