// Spec §2: command framing. Every command gets exactly one reply frame,
// carrying its id, or id null when the id itself is missing or unusable.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, waitUntil, exchange } from './lib/harness.mjs';

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
