// The Agent Protocol store as the gateway drives it: FCALL threadcast_store
// 1 {tc:store} <op> <args-json> against a real redis-server with
// threadcast's function libraries (protocol/redis/) loaded, for every op (store.put, store.get,
// store.delete, store.search, store.namespaces), the keys they keep, TTLs,
// and every 422 (a missing item is 200 null). The bodies are what @langchain/langgraph-sdk
// 1.15.0's Client.store sends (client/store/index.js).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, stopAll, redisClient, loadLibrary, sleep } from './lib/harness.mjs';

let redis, rc;
before(async () => {
  redis = await startRedis();
  rc = redisClient(redis.port);
  await loadLibrary(rc);
});
after(async () => {
  rc.close();
  await stopAll();
  await redis.cleanup();
});

/** One call: [status, parsed body (null for ""), raw body]. */
async function call(op, args) {
  const r = await rc.cmd('FCALL', 'threadcast_store', 1, '{tc:store}', op,
    typeof args === 'string' ? args : JSON.stringify(args));
  if (r instanceof Error) throw r;
  assert.equal(r.length, 2, `reply of ${op}`);
  return [r[0], r[1] === '' ? null : JSON.parse(r[1]), r[1]];
}
const put = (namespace, key, value, extra = {}) => call('store.put', { query: {}, body: { namespace, key, value, ...extra } });
const get = (namespace, key, query = {}) => call('store.get', { query: { namespace: namespace.join('.'), key, ...query }, body: null });
const del = (namespace, key) => call('store.delete', { query: {}, body: { namespace, key } });
const search = (body) => call('store.search', { query: {}, body: { limit: 10, offset: 0, ...body } });
const namespaces = (body) => call('store.namespaces', { query: {}, body: { limit: 100, offset: 0, ...body } });
const keysOf = (items) => items.map((i) => `${i.namespace.join('/')}:${i.key}`);
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

async function expect422(op, args, detail) {
  const [status, body] = await call(op, args);
  assert.deepEqual([status, body], [422, { detail }], `${op} ${JSON.stringify(args).slice(0, 200)}`);
}

test('put, get, delete: the item round-trips byte for byte, and delete leaves no key behind', async () => {
  const ns = ['rt', 'user-1'];
  // Numbers past double precision and empty arrays survive: the value is kept as sent.
  const raw = '{"query":{},"body":{"namespace":["rt","user-1"],"key":"prefs","value":' +
    '{"big":12345678901234567890,"empty":[],"obj":{},"s":"h\\u00e9llo \\"q\\" ✓","f":1.5e-7},"index":false,"ttl":null}}';
  assert.deepEqual(await call('store.put', raw), [204, null, '']);
  const [status, item, text] = await get(ns, 'prefs');
  assert.equal(status, 200);
  assert.ok(text.includes('"value":{"big":12345678901234567890,"empty":[],"obj":{},"s":"h\\u00e9llo \\"q\\" ✓","f":1.5e-7}'), text);
  assert.deepEqual(item.namespace, ns);
  assert.equal(item.key, 'prefs');
  assert.equal(item.value.s, 'héllo "q" ✓');
  assert.match(item.created_at, ISO);
  assert.equal(item.created_at, item.updated_at);
  assert.ok(Math.abs(Date.parse(item.created_at) - Date.now()) < 5000);

  const member = '/rt/user-1\nprefs';
  assert.equal(await rc.cmd('ZSCORE', '{tc:store}:items', member), '0');
  assert.equal(await rc.cmd('HGET', '{tc:store}:nscount', '/rt/user-1'), '1');
  assert.equal(await rc.cmd('PTTL', `{tc:store}:i:${member}`), -1);

  // The value's text is found however the call's JSON is spaced, past
  // strings holding braces, brackets and quotes, and a repeated member counts
  // once, the last one (as JSON.parse and cjson read it).
  const spaced = ' { "now" : 1 , "body" : { "value" : {"old":1} , "key" : "spaced" , "namespace" : [ "rt" , "user-1" ] ,' +
    ' "value" : { "x" : [ 1 , "}]" , { "y" : "\\\\\\"}" } ] , "z" : { } } , "extra" : [ "value" ] } , "query" : { } } ';
  assert.equal(JSON.parse(spaced).body.value.x[2].y, '\\"}');
  assert.equal((await call('store.put', spaced))[0], 204);
  const [, sp, spText] = await get(ns, 'spaced');
  assert.ok(spText.includes('"value":{ "x" : [ 1 , "}]" , { "y" : "\\\\\\"}" } ] , "z" : { } },'), spText);
  assert.deepEqual(sp.value, JSON.parse(spaced).body.value);
  assert.equal(sp.created_at, '1970-01-01T00:00:00.001Z');
  await del(ns, 'spaced');

  assert.deepEqual(await del(ns, 'prefs'), [204, null, '']);
  assert.deepEqual((await get(ns, 'prefs')).slice(0, 2), [200, null], 'a missing item is null, as the reference server answers');
  assert.deepEqual(await del(ns, 'prefs'), [204, null, ''], 'deleting an absent item is not an error');
  assert.equal(await rc.cmd('EXISTS', `{tc:store}:i:${member}`), 0);
  assert.equal(await rc.cmd('ZSCORE', '{tc:store}:items', member), null);
  assert.equal(await rc.cmd('HGET', '{tc:store}:nscount', '/rt/user-1'), null);
  assert.equal(await rc.cmd('ZSCORE', '{tc:store}:ns', '/rt/user-1'), null);
});

test('labels and keys with "/", "%", newlines and non-ASCII stay apart and come back as they were', async () => {
  const a = ['enc', 'a/b'], b = ['enc', 'a', 'b'], c = ['enc', '50%', 'x\ny'];
  await put(a, 'k\n1', { which: 'a' });
  await put(b, 'k\n1', { which: 'b' });
  await put(c, 'ключ', { which: 'c' });
  assert.equal((await get(a, 'k\n1'))[1].value.which, 'a');
  assert.equal((await get(b, 'k\n1'))[1].value.which, 'b');
  const [, item] = await get(c, 'ключ');
  assert.deepEqual([item.namespace, item.key, item.value.which], [c, 'ключ', 'c']);
  // Byte order of the encodings: /enc/50%25/x%0Ay, /enc/a%2Fb, /enc/a/b.
  assert.deepEqual((await namespaces({ prefix: ['enc'] }))[1].namespaces, [c, a, b]);
});

test('overwriting keeps created_at and moves updated_at; timestamps are ISO-8601 UTC with ms', async () => {
  const ns = ['ow'];
  const t1 = Date.UTC(2024, 1, 29, 23, 59, 59, 7);
  const t2 = t1 + 1001; // across the leap day into March
  await call('store.put', { query: {}, body: { namespace: ns, key: 'k', value: { v: 1 } }, now: t1 });
  await call('store.put', { query: {}, body: { namespace: ns, key: 'k', value: { v: 2 } }, now: t2 });
  const [, item] = await get(ns, 'k');
  assert.deepEqual(item.value, { v: 2 });
  assert.equal(item.created_at, '2024-02-29T23:59:59.007Z');
  assert.equal(item.updated_at, '2024-03-01T00:00:00.008Z');
  assert.equal(await rc.cmd('HGET', '{tc:store}:nscount', '/ow'), '1', 'an overwrite is not a second item');
  // The calendar, against JavaScript's, across leap years and centuries.
  for (const t of [0, 951782400000, 951868799999, 4107542400000, 4102444799999, 1709251199999,
    253402300799999, 1234567890123, Date.now()]) {
    await call('store.put', { query: {}, body: { namespace: ns, key: `t${t}`, value: {} }, now: t });
    assert.equal((await get(ns, `t${t}`))[1].created_at, new Date(t).toISOString());
  }
});

test('search: namespace prefix at label boundaries, byte order, filters, limit and offset', async () => {
  for (let i = 1; i <= 12; i++) {
    await put(['s', 'u1'], `n${String(i).padStart(2, '0')}`, { kind: i % 2 ? 'odd' : 'even', i, tags: { t: i % 3 } });
  }
  await put(['s', 'u1', 'archive'], 'old', { kind: 'odd', i: 100 });
  await put(['s', 'u2'], 'x', { kind: 'even', i: 200, tags: { t: 0 } });
  await put(['s', 'u1x'], 'not-under-u1', { kind: 'odd', i: 300 });
  await put(['s', 'u1-'], 'not-under-u1-either', { kind: 'odd', i: 301 });

  // The SDK's default: limit 10, offset 0.
  let [status, body] = await search({ namespace_prefix: ['s', 'u1'] });
  assert.equal(status, 200);
  assert.deepEqual(keysOf(body.items), Array.from({ length: 10 }, (_, i) => `s/u1:n${String(i + 1).padStart(2, '0')}`));
  [, body] = await search({ namespace_prefix: ['s', 'u1'], offset: 10 });
  assert.deepEqual(keysOf(body.items), ['s/u1:n11', 's/u1:n12', 's/u1/archive:old']);
  [, body] = await search({ namespace_prefix: ['s', 'u1'], limit: 2, offset: 3 });
  assert.deepEqual(keysOf(body.items), ['s/u1:n04', 's/u1:n05']);
  assert.deepEqual(Object.keys(body.items[0]).sort(), ['created_at', 'key', 'namespace', 'updated_at', 'value']);

  // In the byte order of the member, encoded namespace "\n" key: /s/u1\n…, /s/u1-\n…, /s/u1/archive\n…, /s/u1x\n…
  [, body] = await search({ namespace_prefix: ['s'], limit: 1000, filter: { kind: 'odd', i: { $gte: 11 } } });
  assert.deepEqual(keysOf(body.items), ['s/u1:n11', 's/u1-:not-under-u1-either', 's/u1/archive:old', 's/u1x:not-under-u1']);
  [, body] = await search({ namespace_prefix: [], limit: 1000, filter: { i: 200 } });
  assert.deepEqual(keysOf(body.items), ['s/u2:x']);

  // Operators and deep equality.
  const only = async (filter) => keysOf((await search({ namespace_prefix: ['s', 'u1'], limit: 100, filter }))[1].items);
  assert.deepEqual(await only({ i: { $gt: 3, $lt: 6 } }), ['s/u1:n04', 's/u1:n05']);
  assert.deepEqual(await only({ i: { $lte: 2 }, kind: { $ne: 'odd' } }), ['s/u1:n02']);
  assert.deepEqual(await only({ i: { $in: [1, 12, 999] } }), ['s/u1:n01', 's/u1:n12']);
  assert.deepEqual((await only({ i: { $nin: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] } })), ['s/u1:n11', 's/u1:n12', 's/u1/archive:old']);
  assert.deepEqual(await only({ tags: { t: 0 }, kind: 'odd' }), ['s/u1:n03', 's/u1:n09']);
  assert.deepEqual(await only({ i: { $eq: 7 } }), ['s/u1:n07']);
  assert.deepEqual(await only({ i: { $gt: 'a' } }), [], 'a number is not ordered against a string');
  assert.deepEqual(await only({ missing: null }), [], 'an absent field is not null');
  assert.deepEqual(await only({ kind: 'none' }), []);
  // Filtered pagination counts matches, not items examined.
  [, body] = await search({ namespace_prefix: ['s', 'u1'], filter: { kind: 'even' }, limit: 2, offset: 2 });
  assert.deepEqual(keysOf(body.items), ['s/u1:n06', 's/u1:n08']);
  // A query needs a vector index, which the store has not: it is ignored.
  [, body] = await search({ namespace_prefix: ['s', 'u2'], query: 'anything' });
  assert.deepEqual(keysOf(body.items), ['s/u2:x']);
  [, body] = await search({ namespace_prefix: ['nothing', 'here'] });
  assert.deepEqual(body, { items: [] });
});

test('namespaces: prefix and suffix with "*", max_depth, limit and offset, in byte order', async () => {
  for (const ns of [['ns', 'a'], ['ns', 'a', 'x'], ['ns', 'a', 'y', 'deep'], ['ns', 'b', 'x'], ['ns', 'a-b'], ['nsz', 'q']]) {
    await put(ns, 'k', {});
  }
  const list = async (body) => {
    const [status, res] = await namespaces(body);
    assert.equal(status, 200);
    return res.namespaces.map((n) => n.join('/'));
  };
  // Byte order of the encodings: "-" sorts before "/".
  assert.deepEqual(await list({ prefix: ['ns'] }), ['ns/a', 'ns/a-b', 'ns/a/x', 'ns/a/y/deep', 'ns/b/x']);
  assert.deepEqual(await list({ prefix: ['ns', 'a'] }), ['ns/a', 'ns/a/x', 'ns/a/y/deep']);
  assert.deepEqual(await list({ prefix: ['ns', '*', 'x'] }), ['ns/a/x', 'ns/b/x']);
  assert.deepEqual(await list({ prefix: ['*', 'a', 'y'] }), ['ns/a/y/deep']);
  assert.deepEqual(await list({ prefix: ['ns'], suffix: ['x'] }), ['ns/a/x', 'ns/b/x']);
  assert.deepEqual(await list({ prefix: ['ns'], suffix: ['*', 'deep'] }), ['ns/a/y/deep']);
  assert.deepEqual(await list({ suffix: ['q'] }), ['nsz/q']);
  // Cut to max_depth, each once, and sorted again: /md/a-b comes before
  // /md/a/x, but /md/a (cut) before /md/a-b.
  assert.deepEqual(await list({ prefix: ['ns'], max_depth: 2 }), ['ns/a', 'ns/a-b', 'ns/b']);
  await put(['md', 'a-b'], 'k', {});
  await put(['md', 'a', 'x'], 'k', {});
  assert.deepEqual(await list({ prefix: ['md'] }), ['md/a-b', 'md/a/x']);
  assert.deepEqual(await list({ prefix: ['md'], max_depth: 2 }), ['md/a', 'md/a-b']);
  assert.deepEqual(await list({ prefix: ['ns'], max_depth: 1 }), ['ns']);
  assert.deepEqual(await list({ prefix: ['ns'], limit: 2, offset: 1 }), ['ns/a-b', 'ns/a/x']);
  assert.deepEqual(await list({ prefix: ['ns'], offset: 5 }), []);
  assert.deepEqual(await list({ prefix: ['ns', 'zzz'] }), []);
  const all = await list({ prefix: null, suffix: null, max_depth: null, limit: 1000 });
  assert.ok(all.includes('ns/a') && all.includes('nsz/q'));
  // A namespace is listed while it has items.
  await del(['nsz', 'q'], 'k');
  assert.deepEqual(await list({ prefix: ['nsz'] }), []);
});

test('TTL in minutes: an item expires, a read refreshes it unless refresh_ttl is false, and the indexes forget it', async () => {
  const ttl = 0.01; // 600 ms
  await put(['ttl'], 'gone', { v: 1 }, { ttl });
  await put(['ttl'], 'refreshed', { v: 2 }, { ttl });
  await put(['ttl'], 'read-only', { v: 3 }, { ttl });
  await put(['ttl'], 'searched', { v: 4 }, { ttl });
  await put(['ttl'], 'kept', { v: 5 });
  const pttl = Number(await rc.cmd('PTTL', '{tc:store}:i:/ttl\ngone'));
  assert.ok(pttl > 300 && pttl <= 600, `PTTL ${pttl}`);
  assert.equal(Number(await rc.cmd('ZSCORE', '{tc:store}:expiry', '/ttl\ngone')),
    Number(await rc.cmd('HGET', '{tc:store}:i:/ttl\ngone', 'expires_at')));
  await sleep(350);
  assert.equal((await get(['ttl'], 'refreshed'))[0], 200); // refresh_ttl defaults to true
  assert.equal((await get(['ttl'], 'read-only', { refresh_ttl: 'false' }))[0], 200);
  const [, found] = await search({ namespace_prefix: ['ttl'], filter: { v: 4 } }); // refresh_ttl defaults to true
  assert.deepEqual(keysOf(found.items), ['ttl:searched']);
  await sleep(450); // 800 ms after the puts, 450 after the reads
  assert.deepEqual((await get(['ttl'], 'gone')).slice(0, 2), [200, null]);
  assert.deepEqual((await get(['ttl'], 'read-only')).slice(0, 2), [200, null]);
  assert.equal((await get(['ttl'], 'refreshed', { refresh_ttl: 'false' }))[0], 200);
  const [, left] = await search({ namespace_prefix: ['ttl'], refresh_ttl: false });
  assert.deepEqual(keysOf(left.items), ['ttl:kept', 'ttl:refreshed', 'ttl:searched']);
  await sleep(400); // now the refreshed ones are past their TTL too
  const [, last] = await search({ namespace_prefix: ['ttl'] });
  assert.deepEqual(keysOf(last.items), ['ttl:kept']);
  for (const key of ['gone', 'refreshed', 'read-only', 'searched']) {
    assert.equal(await rc.cmd('ZSCORE', '{tc:store}:items', `/ttl\n${key}`), null, key);
    assert.equal(await rc.cmd('ZSCORE', '{tc:store}:expiry', `/ttl\n${key}`), null, key);
    assert.equal(await rc.cmd('EXISTS', `{tc:store}:i:/ttl\n${key}`), 0, key);
  }
  assert.equal(await rc.cmd('HGET', '{tc:store}:nscount', '/ttl'), '1');
});

test('TTL: expired items leave the indexes on any later call, and a put without ttl makes an item permanent', async () => {
  await put(['ttl2', 'only'], 'k', {}, { ttl: 0.005 });
  await put(['ttl2'], 'p', {}, { ttl: 0.005 });
  await put(['ttl2'], 'p', { again: true }); // no ttl: permanent now
  assert.equal(await rc.cmd('PTTL', '{tc:store}:i:/ttl2\np'), -1);
  assert.equal(await rc.cmd('HGET', '{tc:store}:i:/ttl2\np', 'expires_at'), null);
  await sleep(500);
  await put(['elsewhere'], 'k', {}); // any call sweeps
  assert.equal(await rc.cmd('ZSCORE', '{tc:store}:ns', '/ttl2/only'), null);
  assert.equal(await rc.cmd('HGET', '{tc:store}:nscount', '/ttl2/only'), null);
  assert.equal(await rc.cmd('ZCARD', '{tc:store}:expiry'), 0);
  assert.deepEqual((await namespaces({ prefix: ['ttl2'] }))[1].namespaces, [['ttl2']]);
  assert.deepEqual((await get(['ttl2'], 'p'))[1].value, { again: true });
  // Re-created after expiring, an item is new: created_at is not the old one.
  await call('store.put', { query: {}, body: { namespace: ['ttl3'], key: 'k', value: {}, ttl: 0.005 } });
  const [, first] = await get(['ttl3'], 'k');
  await sleep(400);
  await put(['ttl3'], 'k', {});
  const [, second] = await get(['ttl3'], 'k');
  assert.ok(second.created_at > first.created_at, `${second.created_at} > ${first.created_at}`);
});

test('store.put: every invalid field is a 422 that names it, and changes nothing', async () => {
  const before = await rc.cmd('DBSIZE');
  const p = (body) => ({ query: {}, body });
  const ok = { namespace: ['v'], key: 'k', value: {} };
  await expect422('store.put', p(null), 'body must be a JSON object');
  await expect422('store.put', { query: {} }, 'body must be a JSON object');
  await expect422('store.put', p('x'), 'body must be a JSON object');
  await expect422('store.put', p({ ...ok, namespace: undefined }), 'namespace must be an array of strings');
  await expect422('store.put', p({ ...ok, namespace: 'v' }), 'namespace must be an array of strings');
  await expect422('store.put', p({ ...ok, namespace: ['v', 1] }), 'namespace must be an array of strings');
  await expect422('store.put', p({ ...ok, namespace: [] }), 'namespace must have at least one label');
  await expect422('store.put', p({ ...ok, namespace: ['v', ''] }), 'namespace[1] is empty: namespace labels cannot be empty');
  await expect422('store.put', p({ ...ok, namespace: ['v', 'a.b'] }),
    'namespace[1] ("a.b") contains a period: namespace labels cannot contain periods');
  await expect422('store.put', p({ ...ok, namespace: Array(33).fill('l') }), 'namespace has 33 labels; the limit is 32');
  await expect422('store.put', p({ ...ok, namespace: ['v', 'x'.repeat(257)] }), 'namespace[1] is 257 bytes; the limit is 256');
  await expect422('store.put', p({ ...ok, key: undefined }), 'key must be a string');
  await expect422('store.put', p({ ...ok, key: 5 }), 'key must be a string');
  await expect422('store.put', p({ ...ok, key: '' }), 'key must not be empty');
  await expect422('store.put', p({ ...ok, key: 'é'.repeat(513) }), 'key is 1026 bytes; the limit is 1024');
  await expect422('store.put', p({ ...ok, value: undefined }), 'value must be a JSON object');
  await expect422('store.put', p({ ...ok, value: null }), 'value must be a JSON object');
  await expect422('store.put', p({ ...ok, value: [1] }), 'value must be a JSON object');
  await expect422('store.put', p({ ...ok, value: [] }), 'value must be a JSON object');
  await expect422('store.put', p({ ...ok, value: 'text' }), 'value must be a JSON object');
  const big = { s: 'x'.repeat(1048576 - 8) }; // {"s":"…"} is 8 bytes more
  await expect422('store.put', p({ ...ok, value: { ...big, t: 1 } }), 'value is 1048582 bytes of JSON; the limit is 1048576');
  await expect422('store.put', p({ ...ok, index: 'text' }), 'index must be false, null or an array of field paths');
  await expect422('store.put', p({ ...ok, index: true }), 'index must be false, null or an array of field paths');
  const ttlMsg = 'ttl must be a number of minutes greater than 0 and at most 5256000, or null';
  await expect422('store.put', p({ ...ok, ttl: 0 }), ttlMsg);
  await expect422('store.put', p({ ...ok, ttl: -1 }), ttlMsg);
  await expect422('store.put', p({ ...ok, ttl: '5' }), ttlMsg);
  await expect422('store.put', p({ ...ok, ttl: 5256001 }), ttlMsg);
  assert.equal(await rc.cmd('DBSIZE'), before, 'a rejected put writes nothing');
  // At the limits, accepted.
  assert.equal((await call('store.put', p({ namespace: Array(32).fill('y'.repeat(256)), key: 'k'.repeat(1024), value: big,
    index: ['s', 'a.b'], ttl: 5256000 })))[0], 204);
  assert.equal((await call('store.put', p({ ...ok, index: null })))[0], 204);
  const [, item] = await get(Array(32).fill('y'.repeat(256)), 'k'.repeat(1024));
  assert.equal(item.value.s.length, 1048576 - 8);
});

test('store.get, store.delete: 422 for bad query parameters and bodies', async () => {
  const g = (query) => ({ query, body: null });
  await expect422('store.get', g({ key: 'k' }), 'query parameter namespace is required');
  await expect422('store.get', { body: null }, 'query parameter namespace is required');
  await expect422('store.get', g({ namespace: ['a', 'b'], key: 'k' }), 'query parameter namespace must be given once');
  await expect422('store.get', g({ namespace: '', key: 'k' }), 'query parameter namespace must have at least one label');
  await expect422('store.get', g({ namespace: 'a..b', key: 'k' }),
    'query parameter namespace[1] is empty: namespace labels cannot be empty');
  await expect422('store.get', g({ namespace: 'a.', key: 'k' }),
    'query parameter namespace[1] is empty: namespace labels cannot be empty');
  await expect422('store.get', g({ namespace: Array(33).fill('l').join('.'), key: 'k' }),
    'query parameter namespace has 33 labels; the limit is 32');
  await expect422('store.get', g({ namespace: 'a' }), 'query parameter key is required');
  await expect422('store.get', g({ namespace: 'a', key: ['k', 'l'] }), 'query parameter key must be given once');
  await expect422('store.get', g({ namespace: 'a', key: '' }), 'query parameter key must not be empty');
  await expect422('store.get', g({ namespace: 'a', key: 'k', refresh_ttl: 'maybe' }),
    'query parameter refresh_ttl must be true or false');
  for (const yes of ['true', 'TRUE', '1', 'yes', 'false', '0', 'no']) {
    assert.deepEqual((await call('store.get', g({ namespace: 'a', key: 'k', refresh_ttl: yes }))).slice(1), [null, 'null'], yes);
  }
  await expect422('store.delete', { query: {}, body: null }, 'body must be a JSON object');
  await expect422('store.delete', { query: {}, body: { key: 'k' } }, 'namespace must be an array of strings');
  await expect422('store.delete', { query: {}, body: { namespace: ['a.b'], key: 'k' } },
    'namespace[0] ("a.b") contains a period: namespace labels cannot contain periods');
  await expect422('store.delete', { query: {}, body: { namespace: ['a'] } }, 'key must be a string');
});

test('store.search, store.namespaces: 422 for bad fields', async () => {
  const s = (body) => ({ query: {}, body });
  await expect422('store.search', s(null), 'body must be a JSON object');
  await expect422('store.search', s({ namespace_prefix: 'a' }), 'namespace_prefix must be an array of strings');
  await expect422('store.search', s({ namespace_prefix: ['a', ''] }), 'namespace_prefix[1] is empty: namespace labels cannot be empty');
  await expect422('store.search', s({ namespace_prefix: ['a.b'] }),
    'namespace_prefix[0] ("a.b") contains a period: namespace labels cannot contain periods');
  const limitMsg = 'limit must be an integer from 1 to 1000';
  for (const limit of [0, 1001, 1.5, '10', true]) await expect422('store.search', s({ namespace_prefix: [], limit }), limitMsg);
  await expect422('store.search', s({ namespace_prefix: [], offset: -1 }), 'offset must be an integer >= 0');
  await expect422('store.search', s({ namespace_prefix: [], offset: 0.5 }), 'offset must be an integer >= 0');
  await expect422('store.search', s({ namespace_prefix: [], filter: [1] }), 'filter must be a JSON object');
  await expect422('store.search', s({ namespace_prefix: [], filter: 'x' }), 'filter must be a JSON object');
  await expect422('store.search', s({ namespace_prefix: [], filter: { n: { $regex: 'a' } } }),
    'filter.n: unknown operator $regex (expected $eq, $ne, $gt, $gte, $lt, $lte, $in or $nin)');
  await expect422('store.search', s({ namespace_prefix: [], filter: { n: { $in: 3 } } }), 'filter.n.$in must be an array');
  await expect422('store.search', s({ namespace_prefix: [], filter: { n: { $nin: { a: 1 } } } }), 'filter.n.$nin must be an array');
  await expect422('store.search', s({ namespace_prefix: [], query: 5 }), 'query must be a string or null');
  await expect422('store.search', s({ namespace_prefix: [], refresh_ttl: 'yes' }), 'refresh_ttl must be true, false or null');
  assert.equal((await call('store.search', s({ namespace_prefix: [], limit: 1000, filter: null, query: null })))[0], 200);

  await expect422('store.namespaces', s(null), 'body must be a JSON object');
  await expect422('store.namespaces', s({ prefix: 'a' }), 'prefix must be an array of strings');
  await expect422('store.namespaces', s({ prefix: ['a.b'] }),
    'prefix[0] ("a.b") contains a period: namespace labels cannot contain periods');
  await expect422('store.namespaces', s({ suffix: [''] }), 'suffix[0] is empty: namespace labels cannot be empty');
  await expect422('store.namespaces', s({ max_depth: 0 }), 'max_depth must be an integer >= 1');
  await expect422('store.namespaces', s({ max_depth: '2' }), 'max_depth must be an integer >= 1');
  await expect422('store.namespaces', s({ limit: 1001 }), limitMsg);
  await expect422('store.namespaces', s({ offset: -1 }), 'offset must be an integer >= 0');
});

test('a call the gateway got wrong is a Redis error, not a reply', async () => {
  const r = (...a) => rc.cmd('FCALL', 'threadcast_store', ...a);
  assert.match(String(await r(1, '{tc:store}', 'store.nope', '{}')), /unknown store op "store.nope"/);
  assert.match(String(await r(1, '{tc:commands}', 'store.get', '{}')), /takes the one key \{tc:store\}/);
  assert.match(String(await r(1, '{tc:store}', 'store.get', 'not json')), /args must be a JSON object/);
  assert.match(String(await r(1, '{tc:store}', 'store.get')), /args must be a JSON object/);
});

test('search examines at most 10,000 items of its prefix', async () => {
  const n = 10005;
  const puts = [];
  for (let i = 0; i < n; i++) puts.push(put(['big'], `k${String(i).padStart(5, '0')}`, { i }));
  for (const [status] of await Promise.all(puts)) assert.equal(status, 204);
  const find = async (i) => keysOf((await search({ namespace_prefix: ['big'], filter: { i } }))[1].items);
  assert.deepEqual(await find(9999), ['big:k09999']);
  assert.deepEqual(await find(10000), [], 'the 10,001st item is past what one search examines');
  const [, page] = await search({ namespace_prefix: ['big'], limit: 1000, offset: 9995 });
  assert.deepEqual(keysOf(page.items), [9995, 9996, 9997, 9998, 9999].map((i) => `big:k0${i}`));
  // Namespaces likewise scan at most 10,000 namespaces: one here.
  assert.deepEqual((await namespaces({ prefix: ['big'] }))[1].namespaces, [['big']]);
});

test('store.truncate (the test-only wipe) takes every item and index, however many', async () => {
  await put(['wipe', 'x'], 'k', { v: 1 }, { ttl: 5 });
  assert.ok(await rc.cmd('ZCARD', '{tc:store}:items') > 10000, 'the items of the test before are still there');
  assert.deepEqual((await call('store.truncate', { query: {}, body: null })).slice(1), [{ ok: true }, '{"ok":true}']);
  assert.deepEqual(await rc.cmd('KEYS', '{tc:store}:*'), []);
  assert.deepEqual((await search({ namespace_prefix: [] }))[1], { items: [] });
  assert.deepEqual((await namespaces({}))[1], { namespaces: [] });
  assert.equal((await put(['wipe'], 'again', { v: 2 }))[0], 204, 'the store works on');
  assert.deepEqual((await namespaces({}))[1], { namespaces: [['wipe']] });
});

test('the SDK Client.store through a gateway: put, get, search, listNamespaces, delete, and its errors', async () => {
  const { Client } = await import('@langchain/langgraph-sdk');
  const tc = await startThreadcast({ redisUrl: redis.url });
  await tc.ready();
  try {
    const client = new Client({ apiUrl: `http://127.0.0.1:${tc.port}`, callerOptions: { maxRetries: 0 } });
    const ns = ['sdk', 'user-7'];
    assert.equal(await client.store.putItem(ns, 'profile', { name: 'Ada', langs: ['en', 'fr'], n: 3 }), undefined);
    await client.store.putItem(ns, 'session', { name: 'S', n: 9 }, { ttl: 5, index: false });
    await client.store.putItem(['sdk', 'user-8'], 'profile', { name: 'Bob', n: 1 });
    const item = await client.store.getItem(ns, 'profile', { refreshTtl: false });
    assert.deepEqual(item.namespace, ns);
    assert.deepEqual(item.value, { name: 'Ada', langs: ['en', 'fr'], n: 3 });
    assert.equal(item.createdAt, item.created_at);
    assert.match(item.updatedAt, ISO);
    const found = await client.store.searchItems(['sdk'], { filter: { n: { $gte: 3 } }, query: 'ignored' });
    assert.deepEqual(found.items.map((i) => i.key), ['profile', 'session']);
    const page = await client.store.searchItems(['sdk'], { limit: 1, offset: 2 });
    assert.deepEqual(page.items.map((i) => i.namespace), [['sdk', 'user-8']]);
    assert.deepEqual(await client.store.listNamespaces({ prefix: ['sdk'] }), { namespaces: [['sdk', 'user-7'], ['sdk', 'user-8']] });
    assert.deepEqual(await client.store.listNamespaces({ prefix: ['sdk'], maxDepth: 1 }), { namespaces: [['sdk']] });
    assert.deepEqual(await client.store.listNamespaces({ suffix: ['user-8'] }), { namespaces: [['sdk', 'user-8']] });
    await client.store.deleteItem(ns, 'profile');
    assert.equal(await client.store.getItem(ns, 'profile'), null, 'the SDK gives null for a missing item');
    await assert.rejects(client.store.putItem(['sdk', ''], 'k', {}), /422.*namespace\[1\] is empty/s);
    await assert.rejects(client.store.searchItems(['sdk'], { limit: 5000 }), /422.*limit must be an integer from 1 to 1000/s);
  } finally {
    const reports = tc.sanitizerReports();
    await tc.stop();
    assert.deepEqual(reports, [], tc.stderr);
  }
});
