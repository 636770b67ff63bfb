// The Agent Protocol REST API's records (issue 17) as the gateway and the
// workers reach them: FCALL threadcast_rest against a real redis-server with
// threadcast's function libraries (protocol/redis/) loaded, no gateway. Every op, what it stores,
// the rest.run / rest.cancel entries it hands to workers, the multitask
// strategies, thread statuses, stateless runs, search, bad input and TTLs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, stopAll, redisClient, loadLibrary, sleep } from './lib/harness.mjs';
import { systemAssistantId } from './lib/rest.mjs';

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

const K = '{tc:commands}';

/** One op: {status, body (parsed, null for ""), extra (parsed or undefined)}. */
async function call(op, args) {
  const r = await rc.cmd('FCALL', 'threadcast_rest', 1, K, op, JSON.stringify(args));
  if (r instanceof Error) throw r;
  return { status: r[0], body: r[1] === '' ? null : JSON.parse(r[1]), extra: r[2] === undefined ? undefined : JSON.parse(r[2]) };
}
/** An op that must fail with status and a detail matching re. */
async function refused(op, args, status, re) {
  const r = await call(op, args);
  assert.equal(r.status, status, `${op} ${JSON.stringify(args)} → ${JSON.stringify(r.body)}`);
  assert.deepEqual(Object.keys(r.body), ['detail']);
  assert.match(r.body.detail, re);
  return r;
}
let n = 0;
const uid = (p) => `${p}-${++n}`;
const register = (a, worker = 'w1', live = 60000) =>
  rc.cmd('FCALL', 'threadcast_register', 2, `${K}:w:${a}`, `${K}:assistants`, a, worker, live);
/** A stream's entries: [{id, thread, method, params (parsed), corr, reply, deadline}]. */
async function entries(stream) {
  const rows = await rc.cmd('XRANGE', stream, '-', '+');
  return rows.map(([id, f]) => {
    const e = { id };
    for (let i = 0; i < f.length; i += 2) e[f[i]] = f[i + 1];
    e.params = JSON.parse(e.params);
    return e;
  });
}
const forRun = async (stream, rid, method) => (await entries(stream)).filter((e) => e.corr === rid && e.method === method);
const hash = async (key) => {
  const flat = await rc.cmd('HGETALL', key);
  const h = {};
  for (let i = 0; i < flat.length; i += 2) h[flat[i]] = flat[i + 1];
  return h;
};
const createThread = async (body = {}) => {
  const r = await call('threads.create', { body, ids: { thread_id: uid('t') } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
};
const createRun = (tid, body, extra = {}) => call('runs.create', {
  path: { thread_id: tid }, query: {}, body, ids: { run_id: uid('r'), thread_id: uid('s') }, after_seq: 0, ...extra,
});
const started = (rid) => call('run.started', { body: { run_id: rid } });
const finished = (rid, body = {}) => call('run.finished', { body: { run_id: rid, status: 'success', ...body } });

test('the libraries register threadcast_rest beside the other functions', async () => {
  const fns = {};
  for (const lib of await rc.cmd('FUNCTION', 'LIST')) fns[lib[1]] = lib[5].map((f) => f[1]).sort();
  assert.deepEqual(fns, { threadcast: ['threadcast_append', 'threadcast_append_batch', 'threadcast_range', 'threadcast_register', 'threadcast_submit'],
    threadcast_store: ['threadcast_store'], threadcast_rest: ['threadcast_rest'] });
});

test('a malformed call from the gateway is a Redis error, not a reply', async () => {
  await assert.rejects(call('threads.frobnicate', {}), /ERR threadcast: unknown op threads\.frobnicate/);
  const bad = await rc.cmd('FCALL', 'threadcast_rest', 1, K, 'threads.get', 'not json');
  assert.match(String(bad), /ERR threadcast: args must be a JSON object/);
  const wrongKey = await rc.cmd('FCALL', 'threadcast_rest', 1, 'tc:commands', 'threads.get', '{}');
  assert.match(String(wrongKey), /usage: FCALL threadcast_rest 1 \{tc:commands\}/);
  await assert.rejects(call('threads.create', { body: {} }), /args\.ids\.thread_id must be a fresh id/);
  await assert.rejects(call('threads.get', { path: {} }), /args\.path\.thread_id is required/);
});

test('threads: create, get, patch, delete; ids, timestamps, metadata kept as sent', async () => {
  const now = 1732400000123;
  const tid = uid('thread');
  const meta = { empty: [], obj: {}, big: 12345678901234567, s: 'é/"x', nested: { a: [1, { b: null }] } };
  // Sent as text: JavaScript itself cannot hold 12345678901234567.
  const args = JSON.stringify({ body: { thread_id: tid, metadata: meta }, ids: { thread_id: 'unused' }, now })
    .replace('12345678901234568', '12345678901234567');
  const sent = await rc.cmd('FCALL', 'threadcast_rest', 1, K, 'threads.create', args);
  const c = { status: sent[0], body: JSON.parse(sent[1]) };
  assert.equal(c.status, 200);
  assert.deepEqual(c.body, {
    thread_id: tid, created_at: new Date(now).toISOString(), updated_at: new Date(now).toISOString(),
    state_updated_at: new Date(now).toISOString(), metadata: meta, status: 'idle', values: {}, interrupts: {}, config: {},
  });
  // The JSON text itself: [] stays [], 17 digits stay 17 digits.
  const raw = await rc.cmd('FCALL', 'threadcast_rest', 1, K, 'threads.get', JSON.stringify({ path: { thread_id: tid } }));
  assert.match(raw[1], /"empty":\[\],"obj":\{\},"big":12345678901234567/);

  await refused('threads.create', { body: { thread_id: tid }, ids: { thread_id: 'x' } }, 409, new RegExp(`thread "${tid}" already exists`));
  const same = await call('threads.create', { body: { thread_id: tid, if_exists: 'do_nothing', metadata: { other: 1 } }, ids: { thread_id: 'x' } });
  assert.equal(same.status, 200);
  assert.deepEqual(same.body.metadata, meta, 'do_nothing returns the thread as it is');

  const gen = await call('threads.create', { body: null, ids: { thread_id: 'fresh-id-1' } });
  assert.equal(gen.body.thread_id, 'fresh-id-1', 'no thread_id: the fresh id the gateway made');
  assert.deepEqual(gen.body.metadata, {});

  const later = now + 5000;
  const p = await call('threads.patch', { path: { thread_id: tid }, body: { metadata: { big: 1, added: [] } }, now: later });
  assert.equal(p.status, 200);
  assert.deepEqual(p.body.metadata, { ...meta, big: 1, added: [] }, 'metadata is merged at the top level');
  assert.equal(p.body.updated_at, new Date(later).toISOString());
  assert.equal(p.body.created_at, new Date(now).toISOString());
  assert.deepEqual((await call('threads.get', { path: { thread_id: tid } })).body, p.body);

  await refused('threads.patch', { path: { thread_id: 'nope' }, body: { metadata: {} } }, 404, /^Thread with ID nope not found$/);
  const d = await call('threads.delete', { path: { thread_id: tid } });
  assert.equal(d.status, 204);
  assert.equal(d.body, null);
  assert.deepEqual(d.extra, { cancel: [] });
  await refused('threads.get', { path: { thread_id: tid } }, 404, new RegExp(`^Thread with ID ${tid} not found$`));
  await refused('threads.delete', { path: { thread_id: tid } }, 404, /not found/);
  assert.equal(await rc.cmd('ZSCORE', `${K}:threads`, tid), null);
});

test('args may be laid out with any whitespace; keys with escapes are read', async () => {
  const tid = uid('ws');
  const args = { body: { thread_id: tid, metadata: { 'a\"b': [ ], 'c\\d': { e: 'f,}]' }, '\u00e9': 1 } }, ids: { thread_id: 'x' } };
  const r = await rc.cmd('FCALL', 'threadcast_rest', 1, K, 'threads.create', JSON.stringify(args, null, 3).replace(/\[\]/g, '[ \n ]'));
  assert.equal(r[0], 200, r[1]);
  assert.deepEqual(JSON.parse(r[1]).metadata, { 'a"b': [], 'c\\d': { e: 'f,}]' }, 'é': 1 });
  const p = await call('threads.patch', { path: { thread_id: tid }, body: { metadata: { 'a"b': 2 } } });
  assert.deepEqual(p.body.metadata, { 'a"b': 2, 'c\\d': { e: 'f,}]' }, 'é': 1 }, 'a key with an escape is the same key');
  await refused('threads.create', { body: [], ids: { thread_id: uid('ws') } }, 422, /^the request body must be a JSON object$/);
});

test('ISO timestamps are right across dates (leap days, year ends, far future)', async () => {
  for (const ms of [0, 951782400000, 951868799999, 1709164800000, 1735689599999, 4102444800000, 253402300799999, 32503680000001]) {
    const r = await call('threads.create', { body: {}, ids: { thread_id: uid('iso') }, now: ms });
    assert.equal(r.body.created_at, new Date(ms).toISOString());
  }
});

test('bad input gets 422 naming the field', async () => {
  const ids = { thread_id: uid('bad') };
  const bad = [
    [{ thread_id: 'has space' }, /^thread_id must be 1 to 128 characters/],
    [{ thread_id: 'x'.repeat(129) }, /^thread_id must be/],
    [{ thread_id: 7 }, /^thread_id must be/],
    [{ metadata: [1] }, /^metadata must be an object$/],
    [{ metadata: [] }, /^metadata must be an object$/],
    [{ metadata: 'x' }, /^metadata must be an object$/],
    [{ if_exists: 'overwrite' }, /^if_exists must be "raise" or "do_nothing"$/],
    [{ ttl: -1 }, /^ttl must be a number of minutes above 0/],
    [{ ttl: { ttl: 5, strategy: 'keep_latest' } }, /^ttl\.strategy must be "delete"$/],
    [{ ttl: { strategy: 'delete' } }, /^ttl\.ttl must be a number of minutes/],
    [{ supersteps: 'x' }, /^supersteps must be an array of \{"updates": \[\.\.\.\]\}$/],
    [{ supersteps: [{ updates: 3 }] }, /^supersteps\[0\]\.updates must be an array$/],
    [{ supersteps: [{ updates: [] }, { updates: [{ as_node: 1 }] }] }, /^supersteps\[1\]\.updates\[0\] must be \{values\?, command\?, as_node\?\}$/],
  ];
  for (const [body, re] of bad) await refused('threads.create', { body, ids }, 422, re);
  await refused('threads.create', { body: { supersteps: [{ updates: [] }] }, ids }, 400, new RegExp(`^Thread ${ids.thread_id} has no graph ID$`));
  await refused('threads.create', { body: { supersteps: [{ updates: [] }], metadata: { graph_id: 'no-graph' } }, ids }, 404, /^Graph "no-graph" not found$/);
  await refused('threads.create', { body: [1, 2], ids }, 422, /^the request body must be a JSON object$/);
  await refused('threads.create', { body: 'x', ids }, 422, /^the request body must be a JSON object$/);
  assert.equal(await rc.cmd('EXISTS', `${K}:t:${ids.thread_id}`), 0, 'nothing was created');

  const search = [
    [{ limit: 0 }, /^limit must be an integer from 1 to 1000$/],
    [{ limit: 1001 }, /^limit must be an integer from 1 to 1000$/],
    [{ limit: 2.5 }, /^limit must be/],
    [{ offset: -1 }, /^offset must be an integer from 0 to 10000$/],
    [{ status: 'running' }, /^status must be "idle", "busy", "interrupted" or "error"$/],
    [{ sort_by: 'name' }, /^sort_by must be "thread_id", "status", "created_at" or "updated_at"$/],
    [{ sort_order: 'up' }, /^sort_order must be "asc" or "desc"$/],
    [{ ids: 'a' }, /^ids must be an array of strings$/],
    [{ ids: Array.from({ length: 1001 }, (_, i) => `i${i}`) }, /^ids has 1001 entries; at most 1000$/],
    [{ metadata: 3 }, /^metadata must be an object$/],
    [{ values: [1] }, /^values must be an object$/],
    [{ extract: { a: 'values.a' } }, /^extract is not supported$/],
  ];
  for (const [body, re] of search) await refused('threads.search', { body }, 422, re);

  await register('agent422');
  const t = await createThread();
  const runs = [
    [{}, /^assistant_id is required$/],
    [{ assistant_id: '' }, /^assistant_id must be 1 to 128 printable characters, no spaces$/],
    [{ assistant_id: 'a b' }, /^assistant_id must be/],
    [{ assistant_id: 'agent422', stream_mode: 'everything' }, /^stream_mode "everything" is not one of values, messages/],
    [{ assistant_id: 'agent422', stream_mode: [] }, /^stream_mode must be a stream mode or a non-empty array of them$/],
    [{ assistant_id: 'agent422', multitask_strategy: 'queue' }, /^multitask_strategy must be one of "enqueue", "interrupt", "reject", "rollback"$/],
    [{ assistant_id: 'agent422', on_completion: 'drop' }, /^on_completion must be one of "delete", "keep"$/],
    [{ assistant_id: 'agent422', if_not_exists: 'maybe' }, /^if_not_exists must be one of "create", "reject"$/],
    [{ assistant_id: 'agent422', on_disconnect: 'x' }, /^on_disconnect must be one of "cancel", "continue"$/],
    [{ assistant_id: 'agent422', after_seconds: -1 }, /^after_seconds must be a number from 0 to 86400$/],
    [{ assistant_id: 'agent422', config: [] }, /^config must be an object$/],
    [{ assistant_id: 'agent422', config: { configurable: 3 } }, /^config\.configurable must be an object$/],
    [{ assistant_id: 'agent422', config: { tags: [1] } }, /^config\.tags must be an array of strings$/],
    [{ assistant_id: 'agent422', config: { recursion_limit: 0 } }, /^config\.recursion_limit must be a positive integer$/],
    [{ assistant_id: 'agent422', command: 'go' }, /^command must be an object$/],
    [{ assistant_id: 'agent422', context: [1] }, /^context must be an object$/],
    [{ assistant_id: 'agent422', metadata: [1] }, /^metadata must be an object$/],
    [{ assistant_id: 'agent422', interrupt_before: 'node' }, /^interrupt_before must be "\*" or an array of node names$/],
    [{ assistant_id: 'agent422', stream_subgraphs: 'yes' }, /^stream_subgraphs must be true or false$/],
    [{ assistant_id: 'agent422', checkpoint_id: 5 }, /^checkpoint_id must be a string$/],
    [{ assistant_id: 'agent422', feedback_keys: 'k' }, /^feedback_keys must be an array of strings$/],
  ];
  for (const [body, re] of runs) await refused('runs.create', { path: { thread_id: t.thread_id }, body, ids: { run_id: uid('r') } }, 422, re);
  assert.equal(await rc.cmd('ZCARD', `${K}:t:${t.thread_id}:runs`), 0, 'no run was recorded');
  assert.equal(await rc.cmd('EXISTS', `${K}:a:agent422`), 0, 'nothing reached a worker');

  await refused('runs.list', { path: { thread_id: t.thread_id }, query: { limit: '0' } }, 422, /^query parameter limit must be an integer from 1 to 1000$/);
  await refused('runs.list', { path: { thread_id: t.thread_id }, query: { limit: 'ten' } }, 422, /^query parameter limit must be/);
  await refused('runs.list', { path: { thread_id: t.thread_id }, query: { status: 'done' } }, 422, /^query parameter status must be pending, running/);
  await refused('runs.list', { path: { thread_id: t.thread_id }, query: { limit: ['1', '2'] } }, 422, /^query parameter limit must be given once$/);
  await refused('runs.cancel', { path: { thread_id: t.thread_id, run_id: 'r' }, query: { action: 'stop' } }, 422, /^query parameter action must be "interrupt" or "rollback"$/);
  await refused('runs.cancel', { path: { thread_id: t.thread_id, run_id: 'r' }, query: { wait: 'maybe' } }, 422, /^query parameter wait must be 0, 1, true or false$/);
  await refused('run.finished', { body: { run_id: 'r', status: 'done' } }, 422, /^status must be "success", "error", "interrupted" or "timeout"$/);
  await refused('run.finished', { body: { status: 'success' } }, 422, /^run_id is required$/);
  await refused('run.finished', { body: { run_id: 'r', status: 'success', interrupts: [1] } }, 422, /^interrupts must be an object$/);
  await refused('run.started', { body: { run_id: 'r', after_seq: -2 } }, 422, /^after_seq must be an integer$/);
  await refused('assistants.search', { body: { limit: 5000 } }, 422, /^limit must be an integer from 1 to 1000$/);
  await refused('assistants.search', { body: { sort_by: 'version' } }, 422, /^sort_by must be "assistant_id", "graph_id", "name", "created_at" or "updated_at"$/);
  await refused('assistants.search', { body: { graph_id: 1 } }, 422, /^graph_id must be a string$/);
});

test('threads.create with supersteps: the thread, and extra naming the graph a worker applies them with', async () => {
  const g = uid('ssgraph');
  await register(g);
  const tid = uid('ss');
  const supersteps = [{ updates: [{ values: { n: [] }, as_node: '__input__' }] }, { updates: [{ command: { resume: 1 } }] }];
  const r = await call('threads.create', { body: { thread_id: tid, metadata: { graph_id: g }, supersteps }, ids: { thread_id: 'x' } });
  assert.deepEqual([r.status, r.body.thread_id, r.body.metadata, r.extra], [200, tid, { graph_id: g }, { supersteps: true, graph_id: g }]);
  const again = await call('threads.create', { body: { thread_id: tid, metadata: { graph_id: g }, supersteps, if_exists: 'do_nothing' }, ids: { thread_id: 'x' } });
  assert.deepEqual(again.extra, { supersteps: true, graph_id: g }, 'an existing thread (do_nothing) gets them too, as the reference server');
  const none = await call('threads.create', { body: { supersteps: [] }, ids: { thread_id: uid('ss') } });
  assert.deepEqual([none.status, none.extra], [200, undefined], 'no supersteps: a plain create');
});

test('assistants: each graph the workers registered has a system assistant, with what they stored', async () => {
  const a = uid('asst');
  const sys = systemAssistantId(a);
  await refused('assistants.get', { path: { assistant_id: a } }, 404, /^Assistant not found$/);
  await register(a, 'w1');
  await rc.cmd('HSET', `${K}:ainfo:${a}`, 'graph', '{"nodes":[{"id":"__start__"}],"edges":[]}', 'graph_xray', '{"nodes":[],"edges":[],"xray":1}',
    'schemas', '{"graph_id":"x","input_schema":{"type":"object","properties":{}}}', 'name', 'My agent', 'created_at', '2024-11-23T00:00:00.000Z',
    'config', '{"configurable":{"model_name":"openai"}}', 'context', '{"model":"unknown"}',
    'subgraphs', '{"p":{"state":{"title":"p"}},"p|c":{"state":{"title":"c"}},"q":{"state":{}},"p|c|d":{"state":[]}}');
  const g = await call('assistants.get', { path: { assistant_id: a }, now: 1732400000000 });
  assert.equal(g.status, 200);
  assert.deepEqual(g.body, {
    assistant_id: sys, graph_id: a, name: a, config: { configurable: { model_name: 'openai' } }, context: { model: 'unknown' },
    metadata: { created_by: 'system' }, version: 1, created_at: '2024-11-23T22:13:20.000Z', updated_at: '2024-11-23T22:13:20.000Z',
    description: null,
  }, 'asked for by its graph id: the graph\'s config and context, as its workers registered them');
  assert.deepEqual((await call('assistants.get', { path: { assistant_id: sys } })).body, g.body, 'and by its own id');
  const graph = await rc.cmd('FCALL', 'threadcast_rest', 1, K, 'assistants.graph', JSON.stringify({ path: { assistant_id: sys } }));
  assert.deepEqual(graph, [200, '{"nodes":[{"id":"__start__"}],"edges":[]}'], 'stored text, [] kept');
  for (const xray of ['true', '1', '2']) {
    assert.deepEqual((await call('assistants.graph', { path: { assistant_id: a }, query: { xray } })).body, { nodes: [], edges: [], xray: 1 });
  }
  assert.deepEqual((await call('assistants.graph', { path: { assistant_id: a }, query: { xray: 'false' } })).body.nodes, [{ id: '__start__' }]);
  // A worker that drew depths (the Python worker: xray=n is n levels deep there): xray=1 is that drawing.
  await rc.cmd('HSET', `${K}:ainfo:${a}`, 'graph_xray_1', '{"nodes":[],"edges":[],"xray":"one level"}');
  assert.deepEqual((await call('assistants.graph', { path: { assistant_id: a }, query: { xray: '1' } })).body.xray, 'one level');
  for (const xray of ['true', '2']) {
    assert.deepEqual((await call('assistants.graph', { path: { assistant_id: a }, query: { xray } })).body.xray, 1, `xray=${xray}: every level`);
  }
  assert.deepEqual((await call('assistants.schemas', { path: { assistant_id: a } })).body,
    { graph_id: 'x', input_schema: { type: 'object', properties: {} } });
  // Subgraphs as LangGraph's getSubgraphs picks them: the top level, every level (recurse), one namespace.
  const sub = async (namespace, recurse) => {
    const r = await rc.cmd('FCALL', 'threadcast_rest', 1, K, 'assistants.subgraphs',
      JSON.stringify({ path: { assistant_id: a, ...(namespace ? { namespace } : {}) }, query: recurse ? { recurse } : {} }));
    assert.equal(r[0], 200);
    return Object.keys(JSON.parse(r[1]));
  };
  assert.deepEqual(await sub(), ['p', 'q']);
  assert.deepEqual(await sub(undefined, 'true'), ['p', 'p|c', 'q', 'p|c|d'], 'parents first, in the order registered');
  assert.deepEqual(await sub('p'), ['p']);
  assert.deepEqual(await sub('p', 'true'), ['p']);
  assert.deepEqual(await sub('p|c'), [], 'a nested namespace needs recurse');
  assert.deepEqual(await sub('p|c', 'true'), ['p|c']);
  assert.deepEqual(await sub('nope', 'true'), []);
  const flat = await rc.cmd('FCALL', 'threadcast_rest', 1, K, 'assistants.subgraphs', JSON.stringify({ path: { assistant_id: a }, query: { recurse: 'true' } }));
  assert.match(flat[1], /"p\|c\|d":\{"state":\[\]\}/, 'each schema as stored');

  const b = uid('bsst');
  await register(b, 'w2');
  assert.deepEqual((await call('assistants.graph', { path: { assistant_id: b } })).body, {}, 'nothing stored: {}');
  assert.deepEqual((await call('assistants.schemas', { path: { assistant_id: b } })).body, {});
  assert.deepEqual((await call('assistants.subgraphs', { path: { assistant_id: b }, query: {} })).body, {});
  const bs = (await call('assistants.get', { path: { assistant_id: b } })).body;
  assert.deepEqual([bs.name, bs.config, bs.context], [b, {}, {}], 'named after its graph; nothing configured');

  // A record outlives its workers (runs then find none); the wildcard is no graph.
  const dead = uid('dead');
  await register(dead, 'w3', 1);
  await register('*', 'wild');
  await sleep(5);
  const all = (await call('assistants.search', { body: { limit: 1000 } })).body.map((x) => x.assistant_id);
  for (const x of [a, b, dead]) assert.ok(all.includes(systemAssistantId(x)), x);
  assert.ok(!all.includes('*') && !all.includes(systemAssistantId('*')), 'the wildcard is not an assistant');
  assert.equal((await call('assistants.get', { path: { assistant_id: dead } })).status, 200);

  const ids = (r) => r.body.map((x) => x.assistant_id);
  assert.deepEqual(ids(await call('assistants.search', { body: { graph_id: b } })), [systemAssistantId(b)]);
  assert.deepEqual(ids(await call('assistants.search', { body: { name: a.toUpperCase() } })), [sys], 'name: a case-insensitive substring');
  assert.deepEqual((await call('assistants.search', { body: { metadata: { k: 1 } } })).body, []);
  assert.ok(ids(await call('assistants.search', { body: { metadata: { created_by: 'system' }, limit: 1000 } })).includes(sys));
  const byId = ids(await call('assistants.search', { body: { sort_by: 'assistant_id', sort_order: 'asc', limit: 1000 } }));
  assert.deepEqual(byId, [...byId].sort());
  const page = (await call('assistants.search', { body: { sort_by: 'assistant_id', sort_order: 'asc', limit: 1, offset: 1 } })).body;
  assert.deepEqual(page.map((x) => x.assistant_id), [byId[1]]);
  await rc.cmd('DEL', `${K}:w:*`);
});

test('a run goes to its assistant\'s workers as a rest.run entry; started and finished move it and its thread', async () => {
  const a = uid('agent');
  const t = await createThread({ metadata: { owner: 'me' } });
  await refused('runs.create', { path: { thread_id: t.thread_id }, body: { assistant_id: a }, ids: { run_id: 'r0' } }, 404,
    new RegExp(`^No assistant found for "${a}"\\. Make sure the assistant ID is for a valid assistant or a valid graph ID\\.$`));
  await register(a);
  const sys = systemAssistantId(a);
  await refused('runs.create', { path: { thread_id: 'no-such-thread' }, body: { assistant_id: a }, ids: { run_id: 'r0' } }, 404, /^Thread with ID no-such-thread not found$/);

  const body = {
    assistant_id: a, input: { messages: [{ role: 'user', content: 'hi' }], empty: [] }, config: { configurable: { x: 1 }, tags: ['t'] },
    context: { user: 'u' }, metadata: { m: 1 }, stream_mode: ['values', 'messages-tuple'], stream_subgraphs: true,
    interrupt_before: '*', checkpoint: { checkpoint_id: 'cp-1' }, unknown_field: 'ignored',
  };
  const c = await call('runs.create', { path: { thread_id: t.thread_id }, query: {}, body, ids: { run_id: 'run-a1', thread_id: 'x' }, after_seq: 41, now: 1732400000000 });
  assert.equal(c.status, 200);
  assert.equal(c.extra, undefined);
  assert.deepEqual(c.body, {
    run_id: 'run-a1', thread_id: t.thread_id, assistant_id: sys, created_at: '2024-11-23T22:13:20.000Z', updated_at: '2024-11-23T22:13:20.000Z',
    status: 'pending', metadata: { m: 1 }, multitask_strategy: 'reject',
    kwargs: {
      input: body.input, config: body.config, context: body.context, stream_mode: ['values', 'messages-tuple'], stream_subgraphs: true,
      interrupt_before: '*', checkpoint_id: 'cp-1', checkpoint: { checkpoint_id: 'cp-1' },
    },
  });
  const [e] = await entries(`${K}:a:${a}`);
  assert.equal(e.thread, t.thread_id);
  assert.equal(e.method, 'rest.run');
  assert.equal(e.corr, 'run-a1');
  assert.equal(e.reply, '');
  assert.equal(e.deadline, '0');
  assert.deepEqual(e.params, {
    run_id: 'run-a1', thread_id: t.thread_id, assistant_id: sys, graph_id: a, metadata: { m: 1 }, on_completion: 'keep', temporary: false, after_seconds: 0,
    ...c.body.kwargs,
  });
  const rec = await hash(`${K}:r:run-a1`);
  assert.equal(rec.after_seq, '41');
  assert.equal(rec.stream, `${K}:a:${a}`);
  assert.equal(await rc.cmd('GET', `${K}:t:${t.thread_id}:active`), 'run-a1');
  let th = (await call('threads.get', { path: { thread_id: t.thread_id } })).body;
  assert.equal(th.status, 'busy');
  assert.deepEqual(th.metadata, { owner: 'me', graph_id: a, assistant_id: sys }, 'the thread records the graph it runs, and its assistant');
  const got = await call('runs.get', { path: { thread_id: t.thread_id, run_id: 'run-a1' } });
  assert.deepEqual(got.body, c.body);
  assert.deepEqual(got.extra, { after_seq: 41 }, 'runs.get tells the gateway where the run\'s events start');
  await refused('runs.get', { path: { thread_id: 'other', run_id: 'run-a1' } }, 404, /^Thread with ID other not found$/);
  const other = await createThread();
  await refused('runs.get', { path: { thread_id: other.thread_id, run_id: 'run-a1' } }, 404, /run "run-a1" not found on thread/);

  await refused('runs.delete', { path: { thread_id: t.thread_id, run_id: 'run-a1' } }, 409, /run "run-a1" is pending on thread .*; cancel it first/);
  const s = await call('run.started', { body: { run_id: 'run-a1', after_seq: 42 } });
  assert.equal(s.status, 200);
  assert.equal(s.body.status, 'running');
  assert.equal((await hash(`${K}:r:run-a1`)).after_seq, '42');
  const f = await call('run.finished', { body: { run_id: 'run-a1', status: 'success', values: { messages: [], n: 12345678901234567 } } });
  assert.equal(f.status, 200);
  assert.equal(f.body.status, 'success');
  assert.equal(f.extra, undefined, 'nothing was queued');
  th = (await call('threads.get', { path: { thread_id: t.thread_id } })).body;
  assert.equal(th.status, 'idle');
  assert.deepEqual(th.values, { messages: [], n: 12345678901234567 });
  assert.equal(await rc.cmd('EXISTS', `${K}:t:${t.thread_id}:active`), 0);
  const again = await call('run.finished', { body: { run_id: 'run-a1', status: 'error' } });
  assert.equal(again.body.status, 'success', 'a second report changes nothing');
  await refused('run.started', { body: { run_id: 'run-a1' } }, 409, /run "run-a1" is success; it must not start/);
  await refused('run.finished', { body: { run_id: 'gone', status: 'success' } }, 404, /run "gone" not found/);

  // Worker reports may also come as the args themselves.
  const r2 = (await createRun(t.thread_id, { assistant_id: a })).body.run_id;
  assert.equal((await call('run.started', { run_id: r2 })).body.status, 'running');
  assert.equal((await call('run.finished', { run_id: r2, status: 'success' })).body.status, 'success');

  const list = await call('runs.list', { path: { thread_id: t.thread_id }, query: { limit: '10', offset: '0' } });
  assert.deepEqual(list.body.map((r) => r.run_id), [r2, 'run-a1'], 'newest first');
  assert.deepEqual((await call('runs.list', { path: { thread_id: t.thread_id }, query: { limit: '1', offset: '1' } })).body.map((r) => r.run_id), ['run-a1']);
  assert.deepEqual((await call('runs.list', { path: { thread_id: t.thread_id }, query: { status: 'running' } })).body, []);
  assert.deepEqual((await call('runs.list', { path: { thread_id: other.thread_id }, query: {} })).body, []);
  await refused('runs.list', { path: { thread_id: 'nope' }, query: {} }, 404, /^Thread with ID nope not found$/);

  const d = await call('runs.delete', { path: { thread_id: t.thread_id, run_id: 'run-a1' } });
  assert.equal(d.status, 204);
  await refused('runs.get', { path: { thread_id: t.thread_id, run_id: 'run-a1' } }, 404, /not found/);
  assert.equal(await rc.cmd('ZSCORE', `${K}:t:${t.thread_id}:runs`, 'run-a1'), null);
});

test('run.adopted: a run a worker started over the protocol becomes a running run of the thread; a thread without a record records nothing', async () => {
  const t = await createThread({ metadata: { owner: 'me' } });
  const args = { run_id: 'adopted-1', thread_id: t.thread_id, assistant_id: 'asst-1', graph_id: 'g-adopt', after_seq: 7, kwargs: { config: { configurable: { a: 1 } } } };
  const r = await call('run.adopted', args);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual({ ...r.body, created_at: undefined, updated_at: undefined }, {
    run_id: 'adopted-1', thread_id: t.thread_id, assistant_id: 'asst-1', status: 'running', metadata: {},
    kwargs: { config: { configurable: { a: 1 } } }, multitask_strategy: 'reject', created_at: undefined, updated_at: undefined });
  const got = await call('runs.get', { path: { thread_id: t.thread_id, run_id: 'adopted-1' } });
  assert.equal(got.body.status, 'running');
  assert.deepEqual(got.extra, { after_seq: 7 }, 'where its events start, for a run stream joining it');
  let th = (await call('threads.get', { path: { thread_id: t.thread_id } })).body;
  assert.equal(th.status, 'busy');
  assert.deepEqual(th.metadata, { owner: 'me', graph_id: 'g-adopt', assistant_id: 'asst-1' });
  assert.equal((await call('run.adopted', { ...args, assistant_id: 'other' })).body.assistant_id, 'asst-1', 'reported again: the run as it is');
  assert.equal(await rc.cmd('EXISTS', `${K}:t:${t.thread_id}:active`), 0, 'no REST run is handed over');

  const f = await call('run.finished', { body: { run_id: 'adopted-1', status: 'success', values: { n: 1 } } });
  assert.equal(f.body.status, 'success');
  th = (await call('threads.get', { path: { thread_id: t.thread_id } })).body;
  assert.equal(th.status, 'idle');
  assert.deepEqual(th.values, { n: 1 });
  assert.deepEqual((await call('runs.list', { path: { thread_id: t.thread_id }, query: {} })).body.map((x) => x.run_id), ['adopted-1']);

  const none = await call('run.adopted', { ...args, run_id: 'adopted-2', thread_id: 'no-record' });
  assert.deepEqual([none.status, none.body], [200, null]);
  assert.equal(await rc.cmd('EXISTS', `${K}:r:adopted-2`), 0);
  for (const f of ['run_id', 'thread_id', 'assistant_id', 'graph_id']) {
    await refused('run.adopted', { ...args, [f]: undefined }, 422, new RegExp(`^${f} is required$`));
  }
  await refused('run.adopted', { ...args, after_seq: 'x' }, 422, /^after_seq must be an integer$/);
  await refused('run.adopted', { ...args, kwargs: [1] }, 422, /^kwargs must be an object$/);
});

test('routing: the wildcard workers take an assistant nobody else serves; a missing thread may be created', async () => {
  const a = uid('wildonly');
  await register('*', 'wild-1');
  const t = await createThread();
  const r = await createRun(t.thread_id, { assistant_id: a });
  assert.equal(r.status, 200);
  const got = await forRun('tc:commands', r.body.run_id, 'rest.run');
  assert.equal(got.length, 1);
  assert.equal(got[0].params.assistant_id, a);
  await rc.cmd('DEL', `${K}:w:*`);

  const b = uid('agent');
  await register(b);
  const tid = uid('made');
  const made = await createRun(tid, { assistant_id: b, if_not_exists: 'create' });
  assert.equal(made.status, 200);
  const th = (await call('threads.get', { path: { thread_id: tid } })).body;
  assert.equal(th.status, 'busy');
  assert.deepEqual(th.metadata, { graph_id: b, assistant_id: systemAssistantId(b) });
  await refused('runs.create', { path: { thread_id: 'bad id!' }, body: { assistant_id: b, if_not_exists: 'create' }, ids: { run_id: 'x' } }, 422, /^thread_id must be/);
});

test('multitask: reject refuses, enqueue waits for run.finished, interrupt and rollback cancel and go first', async () => {
  const a = uid('agent');
  await register(a);
  const stream = `${K}:a:${a}`;
  const t = (await createThread()).thread_id;
  const r1 = (await createRun(t, { assistant_id: a })).body.run_id;
  await started(r1);

  await refused('runs.create', { path: { thread_id: t }, body: { assistant_id: a }, ids: { run_id: 'rej' } }, 409,
    new RegExp(`thread "${t}" is busy with run "${r1}"; multitask_strategy "reject"`));
  assert.equal((await call('runs.get', { path: { thread_id: t, run_id: 'rej' } })).status, 404, 'a rejected run is not recorded');

  const q1 = await createRun(t, { assistant_id: a, multitask_strategy: 'enqueue', input: { n: 1 } });
  assert.equal(q1.status, 200);
  assert.equal(q1.body.status, 'pending');
  assert.equal(q1.body.multitask_strategy, 'enqueue');
  assert.deepEqual(await forRun(stream, q1.body.run_id, 'rest.run'), [], 'an enqueued run waits');
  assert.deepEqual(await rc.cmd('LRANGE', `${K}:t:${t}:queue`, 0, -1), [q1.body.run_id]);

  // interrupt: the active run is cancelled; the new run goes in front of the queue.
  const i1 = await createRun(t, { assistant_id: a, multitask_strategy: 'interrupt' });
  assert.equal(i1.status, 200);
  const [cancel] = await forRun(stream, r1, 'rest.cancel');
  assert.deepEqual(cancel.params, { run_id: r1, thread_id: t, action: 'interrupt' });
  assert.equal(cancel.thread, t);
  assert.deepEqual(await rc.cmd('LRANGE', `${K}:t:${t}:queue`, 0, -1), [i1.body.run_id, q1.body.run_id]);

  const f1 = await finished(r1, { status: 'interrupted' });
  assert.equal(f1.body.status, 'interrupted');
  assert.deepEqual(f1.extra, { dispatched: i1.body.run_id });
  assert.equal((await forRun(stream, i1.body.run_id, 'rest.run')).length, 1);
  assert.equal(await rc.cmd('GET', `${K}:t:${t}:active`), i1.body.run_id);
  assert.equal((await call('threads.get', { path: { thread_id: t } })).body.status, 'busy', 'busy again with the next run');

  // rollback: the cancelled run's record goes once the worker reports it.
  await started(i1.body.run_id);
  const rb = await createRun(t, { assistant_id: a, multitask_strategy: 'rollback' });
  const [rbCancel] = await forRun(stream, i1.body.run_id, 'rest.cancel');
  assert.deepEqual(rbCancel.params, { run_id: i1.body.run_id, thread_id: t, action: 'rollback' });
  const f2 = await finished(i1.body.run_id, { status: 'interrupted', values: { v: 'should not stick' } });
  assert.deepEqual(f2.extra, { dispatched: rb.body.run_id });
  await refused('runs.get', { path: { thread_id: t, run_id: i1.body.run_id } }, 404, /not found/);
  assert.deepEqual((await call('threads.get', { path: { thread_id: t } })).body.values, {}, 'a rolled back run leaves no values');

  // enqueue: run.finished hands the next queued run over.
  await started(rb.body.run_id);
  const f3 = await finished(rb.body.run_id, { values: { v: 3 } });
  assert.deepEqual(f3.extra, { dispatched: q1.body.run_id });
  const [qe] = await forRun(stream, q1.body.run_id, 'rest.run');
  assert.deepEqual(qe.params.input, { n: 1 });
  await started(q1.body.run_id);
  const f4 = await finished(q1.body.run_id);
  assert.equal(f4.extra, undefined);
  const th = (await call('threads.get', { path: { thread_id: t } })).body;
  assert.equal(th.status, 'idle');
  assert.deepEqual(th.values, { v: 3 }, 'a run that reports no values keeps the last ones');
});

test('runs.cancel: a queued run never reaches a worker; an active one gets a rest.cancel entry', async () => {
  const a = uid('agent');
  await register(a);
  const stream = `${K}:a:${a}`;
  const t = (await createThread()).thread_id;
  const r1 = (await createRun(t, { assistant_id: a })).body.run_id;
  const q1 = (await createRun(t, { assistant_id: a, multitask_strategy: 'enqueue' })).body.run_id;
  const q2 = (await createRun(t, { assistant_id: a, multitask_strategy: 'enqueue' })).body.run_id;

  const c1 = await call('runs.cancel', { path: { thread_id: t, run_id: q1 }, query: { wait: '0', action: 'interrupt' } });
  assert.equal(c1.status, 200);
  assert.equal(c1.body.status, 'interrupted');
  assert.equal((await call('runs.get', { path: { thread_id: t, run_id: q1 } })).body.status, 'interrupted');
  const c2 = await call('runs.cancel', { path: { thread_id: t, run_id: q2 }, query: { action: 'rollback' } });
  assert.equal(c2.status, 200);
  await refused('runs.get', { path: { thread_id: t, run_id: q2 } }, 404, /not found/);
  assert.deepEqual(await rc.cmd('LRANGE', `${K}:t:${t}:queue`, 0, -1), []);
  await refused('run.started', { body: { run_id: q1 } }, 409, /is interrupted; it must not start/);

  assert.equal((await started(r1)).status, 200);
  const c3 = await call('runs.cancel', { path: { thread_id: t, run_id: r1 }, query: { wait: '1' } });
  assert.equal(c3.status, 202, 'a running run: its worker stops it');
  assert.equal(c3.body.run_id, r1);
  const [e] = await forRun(stream, r1, 'rest.cancel');
  assert.deepEqual(e.params, { run_id: r1, thread_id: t, action: 'interrupt' });
  const f = await finished(r1, { status: 'interrupted' });
  assert.equal(f.extra, undefined, 'the cancelled runs are not dispatched');
  const c4 = await call('runs.cancel', { path: { thread_id: t, run_id: r1 }, query: {} });
  assert.equal(c4.status, 200, 'a finished run: nothing to cancel');
  assert.equal(c4.body.status, 'interrupted');
  assert.equal((await forRun(stream, r1, 'rest.cancel')).length, 1);
  await refused('runs.cancel', { path: { thread_id: t, run_id: 'nope' }, query: {} }, 404, /run "nope" not found/);
});

test('runs.cancel of a run handed to a worker but not started: over at once, the thread free for the next', async () => {
  const a = uid('agent');
  await register(a);
  const stream = `${K}:a:${a}`;
  const t = (await createThread()).thread_id;
  const r1 = (await createRun(t, { assistant_id: a, after_seconds: 60 })).body.run_id;
  const q1 = (await createRun(t, { assistant_id: a, multitask_strategy: 'enqueue' })).body.run_id;
  assert.equal(await rc.cmd('GET', `${K}:t:${t}:active`), r1);
  const c = await call('runs.cancel', { path: { thread_id: t, run_id: r1 }, query: {} });
  assert.equal(c.status, 200);
  assert.equal(c.body.status, 'interrupted');
  assert.equal((await call('runs.get', { path: { thread_id: t, run_id: r1 } })).body.status, 'interrupted');
  assert.deepEqual((await call('runs.list', { path: { thread_id: t }, query: { status: 'interrupted' } })).body.map((r) => r.run_id), [r1]);
  const [e] = await forRun(stream, r1, 'rest.cancel');
  assert.deepEqual(e.params, { run_id: r1, thread_id: t, action: 'interrupt' }, 'the worker waiting with it is told');
  assert.equal((await hash(`${K}:r:${r1}`)).cancel, 'interrupt', 'and finds the mark if the entry went elsewhere');
  await refused('run.started', { body: { run_id: r1 } }, 409, /is interrupted; it must not start/);
  assert.equal(await rc.cmd('GET', `${K}:t:${t}:active`), q1, 'the next queued run is handed over');
  assert.equal((await forRun(stream, q1, 'rest.run')).length, 1);
  assert.equal((await call('threads.get', { path: { thread_id: t } })).body.status, 'busy');
  assert.equal((await call('run.finished', { body: { run_id: r1, status: 'interrupted' } })).body.status, 'interrupted', 'the worker\'s report changes nothing');
  assert.equal(await rc.cmd('GET', `${K}:t:${t}:active`), q1);

  // Alone, with rollback: the run is gone and the thread idle.
  const t2 = (await createThread()).thread_id;
  const r2 = (await createRun(t2, { assistant_id: a, after_seconds: 60 })).body.run_id;
  assert.equal((await call('runs.cancel', { path: { thread_id: t2, run_id: r2 }, query: { action: 'rollback' } })).status, 200);
  await refused('runs.get', { path: { thread_id: t2, run_id: r2 } }, 404, /not found/);
  assert.equal((await call('threads.get', { path: { thread_id: t2 } })).body.status, 'idle');
  assert.equal(await rc.cmd('EXISTS', `${K}:t:${t2}:active`), 0);
});

test('thread status follows its runs: error, interrupted, idle', async () => {
  const a = uid('agent');
  await register(a);
  const t = (await createThread()).thread_id;
  const get = async () => (await call('threads.get', { path: { thread_id: t } })).body;
  let r = (await createRun(t, { assistant_id: a })).body.run_id;
  await started(r);
  await finished(r, { status: 'error', error: { error: 'ValueError', message: 'boom' } });
  let th = await get();
  assert.equal(th.status, 'error');
  assert.deepEqual(th.error, { error: 'ValueError', message: 'boom' });
  assert.equal((await call('runs.get', { path: { thread_id: t, run_id: r } })).body.status, 'error');

  r = (await createRun(t, { assistant_id: a })).body.run_id;
  await started(r);
  const interrupts = { task1: [{ id: 'i1', value: 'approve?' }] };
  await finished(r, { status: 'success', interrupts, values: { step: 1 } });
  th = await get();
  assert.equal(th.status, 'interrupted');
  assert.deepEqual(th.interrupts, interrupts);
  assert.equal(th.error, undefined);

  // interrupt_before/after: nodes left to run, no interrupt values: the thread waits too.
  r = (await createRun(t, { assistant_id: a })).body.run_id;
  await started(r);
  await finished(r, { status: 'success', interrupts: {}, next: ['approve'], values: { step: 1 } });
  assert.equal((await get()).status, 'interrupted');

  r = (await createRun(t, { assistant_id: a, command: { resume: 'yes' } })).body.run_id;
  await started(r);
  await finished(r, { status: 'timeout' });
  assert.equal((await get()).status, 'error', 'a timed-out run leaves the thread in error');

  // A run that failed in a node leaves that node to run: still an error, not an interrupt (as the reference server).
  r = (await createRun(t, { assistant_id: a })).body.run_id;
  await started(r);
  await finished(r, { status: 'error', error: { error: 'CustomError', message: 'no' }, interrupts: {}, next: ['agent'] });
  assert.deepEqual([(await get()).status, (await get()).error], ['error', { error: 'CustomError', message: 'no' }]);

  r = (await createRun(t, { assistant_id: a })).body.run_id;
  assert.equal((await get()).status, 'busy');
  await started(r);
  await finished(r, { values: { step: 2 } });
  th = await get();
  assert.equal(th.status, 'idle');
  assert.deepEqual(th.interrupts, {});
  assert.deepEqual(th.values, { step: 2 });
});

test('stateless runs: a temporary thread is deleted when its run finishes, unless on_completion is keep', async () => {
  const a = uid('agent');
  await register(a);
  const tid = uid('stateless');
  const c = await call('runs.create', { path: { thread_id: tid }, body: { assistant_id: a, input: {} }, ids: { run_id: uid('r'), thread_id: tid }, stateless: true });
  assert.equal(c.status, 200);
  const rid = c.body.run_id;
  const [e] = await forRun(`${K}:a:${a}`, rid, 'rest.run');
  assert.equal(e.params.temporary, true);
  assert.equal(e.params.on_completion, 'delete');
  assert.equal((await call('threads.get', { path: { thread_id: tid } })).body.status, 'busy');
  await started(rid);
  const f = await finished(rid, { values: { x: 1 } });
  assert.equal(f.status, 200);
  assert.deepEqual(f.extra, { thread_deleted: true });
  await refused('threads.get', { path: { thread_id: tid } }, 404, /not found/);
  assert.equal(await rc.cmd('EXISTS', `${K}:r:${rid}`, `${K}:t:${tid}:runs`, `${K}:t:${tid}:active`), 0);
  assert.equal(await rc.cmd('ZSCORE', `${K}:threads`, tid), null);

  const kept = uid('stateless');
  const k = await call('runs.create', { path: { thread_id: kept }, body: { assistant_id: a, on_completion: 'keep' }, ids: { run_id: uid('r'), thread_id: kept }, stateless: true });
  const [ke] = await forRun(`${K}:a:${a}`, k.body.run_id, 'rest.run');
  assert.equal(ke.params.temporary, false);
  assert.equal(ke.params.on_completion, 'keep');
  await started(k.body.run_id);
  const kf = await finished(k.body.run_id);
  assert.equal(kf.extra, undefined);
  assert.equal((await call('threads.get', { path: { thread_id: kept } })).body.status, 'idle');
});

test('deleting a thread deletes its runs and queue and cancels its active run', async () => {
  const a = uid('agent');
  await register(a);
  const t = (await createThread()).thread_id;
  const r1 = (await createRun(t, { assistant_id: a })).body.run_id;
  const q = (await createRun(t, { assistant_id: a, multitask_strategy: 'enqueue' })).body.run_id;
  await started(r1);
  const d = await call('threads.delete', { path: { thread_id: t } });
  assert.equal(d.status, 204);
  assert.deepEqual(d.extra, { cancel: [r1] });
  const [e] = await forRun(`${K}:a:${a}`, r1, 'rest.cancel');
  assert.deepEqual(e.params, { run_id: r1, thread_id: t, action: 'interrupt' });
  assert.equal(await rc.cmd('EXISTS', `${K}:r:${r1}`, `${K}:r:${q}`, `${K}:t:${t}`, `${K}:t:${t}:runs`, `${K}:t:${t}:queue`, `${K}:t:${t}:active`), 0);
  await refused('run.finished', { body: { run_id: r1, status: 'interrupted' } }, 404, /not found/);
});

test('threads.copy makes a new thread with the fresh id, metadata, values and interrupts', async () => {
  const a = uid('agent');
  await register(a);
  const src = await createThread({ metadata: { k: [] } });
  const r = (await createRun(src.thread_id, { assistant_id: a })).body.run_id;
  await started(r);
  await finished(r, { values: { m: [1] }, interrupts: { t: [] } });
  const nid = uid('copy');
  const c = await call('threads.copy', { path: { thread_id: src.thread_id }, ids: { thread_id: nid } });
  assert.equal(c.status, 200);
  assert.equal(c.body.thread_id, nid);
  assert.equal(c.body.status, 'idle');
  assert.deepEqual(c.body.metadata, { k: [], graph_id: a, assistant_id: systemAssistantId(a) });
  assert.deepEqual(c.body.values, { m: [1] });
  assert.deepEqual(c.body.interrupts, { t: [] });
  assert.deepEqual((await call('runs.list', { path: { thread_id: nid }, query: {} })).body, [], 'runs are not copied');
  await refused('threads.copy', { path: { thread_id: 'nope' }, ids: { thread_id: uid('copy') } }, 404, /^Thread with ID nope not found$/);
  await refused('threads.copy', { path: { thread_id: src.thread_id }, ids: { thread_id: nid } }, 409, /already exists/);
});

test('threads.search: metadata, values, status and ids filters; sort; pagination', async () => {
  const a = uid('agent');
  await register(a);
  const tag = uid('tag');
  const made = [];
  for (let i = 0; i < 6; i++) {
    const r = await call('threads.create', {
      body: { thread_id: `${tag}-${i}`, metadata: { tag, i, parity: i % 2 ? 'odd' : 'even', deep: { x: i % 3 } } },
      ids: { thread_id: 'x' }, now: 1800000000000 + i * 1000,
    });
    made.push(r.body.thread_id);
  }
  const ids = (r) => r.body.map((x) => x.thread_id);
  const s = (body) => call('threads.search', { body: { metadata: { tag }, ...body } });
  assert.deepEqual(ids(await s({ limit: 10 })), [...made].reverse(), 'created_at desc by default');
  assert.deepEqual(ids(await s({ sort_order: 'asc', limit: 3 })), made.slice(0, 3));
  assert.deepEqual(ids(await s({ limit: 2, offset: 2 })), [made[3], made[2]]);
  assert.deepEqual(ids(await s({ metadata: { tag, parity: 'odd' } })), [made[5], made[3], made[1]]);
  assert.deepEqual(ids(await s({ metadata: { tag, deep: { x: 0 } } })), [made[3], made[0]], 'nested metadata is matched by containment');
  assert.deepEqual(ids(await s({ metadata: { tag, parity: null } })), [], 'null matches nothing');
  assert.deepEqual(ids(await s({ sort_by: 'thread_id', sort_order: 'asc', limit: 2 })), made.slice(0, 2));
  assert.deepEqual(ids(await s({ sort_by: 'thread_id', sort_order: 'desc', limit: 2, offset: 1 })), [made[4], made[3]]);
  assert.deepEqual(ids(await s({ ids: [made[1], made[4], 'no-such'], sort_order: 'asc' })), [made[1], made[4]]);
  assert.deepEqual(ids(await s({ ids: [] })), [...made].reverse(), 'no ids: no filter (as the reference server)');

  // status and values, after runs on two of them
  const r = (await createRun(made[2], { assistant_id: a }, { now: 1800000100000 })).body.run_id;
  await started(r);
  await call('run.finished', { body: { run_id: r, status: 'success', values: { answer: 42, list: ['a'] } }, now: 1800000100001 });
  await createRun(made[4], { assistant_id: a }, { now: 1800000200000 });
  assert.deepEqual(ids(await s({ status: 'busy' })), [made[4]]);
  assert.deepEqual(ids(await s({ status: 'idle', limit: 2 })), [made[5], made[3]]);
  // values: a thread with values must contain them; one without passes (as the reference server).
  assert.deepEqual(ids(await s({ values: { answer: 42 } })), [...made].reverse());
  assert.deepEqual(ids(await s({ values: { answer: 41 } })), [made[5], made[4], made[3], made[1], made[0]]);
  assert.deepEqual(ids(await s({ values: { list: ['a'] }, status: 'idle' })), [made[5], made[3], made[2], made[1], made[0]]);
  const byUpdated = ids(await s({ sort_by: 'updated_at', sort_order: 'desc', limit: 2 }));
  assert.deepEqual(byUpdated, [made[4], made[2]], 'the two touched last');
  const byStatus = ids(await s({ sort_by: 'status', sort_order: 'asc' }));
  assert.equal(byStatus[0], made[4], '"busy" sorts first');
  assert.deepEqual(ids(await call('threads.search', { body: { metadata: { graph_id: a } } })).sort(), [made[2], made[4]].sort());
});

test('TTL: a thread with a ttl takes its runs with it, and search forgets it', async () => {
  const a = uid('agent');
  await register(a);
  const tid = uid('ttl');
  const c = await call('threads.create', { body: { thread_id: tid, ttl: { ttl: 0.01, strategy: 'delete' } }, ids: { thread_id: 'x' } });
  assert.equal(c.status, 200);
  const rid = (await createRun(tid, { assistant_id: a, multitask_strategy: 'enqueue' })).body.run_id;
  const q = (await createRun(tid, { assistant_id: a, multitask_strategy: 'enqueue' })).body.run_id;
  for (const k of [`${K}:t:${tid}`, `${K}:t:${tid}:runs`, `${K}:t:${tid}:queue`, `${K}:t:${tid}:active`, `${K}:r:${rid}`, `${K}:r:${q}`]) {
    const ttl = await rc.cmd('PTTL', k);
    assert.ok(ttl > 0 && ttl <= 600, `${k} expires with the thread (${ttl} ms)`);
  }
  const expires = Number((await hash(`${K}:t:${tid}`)).expires_at);
  assert.equal(await rc.cmd('PEXPIRETIME', `${K}:r:${rid}`), expires);

  // A ttl as a bare number of minutes, and a PATCH that sets one.
  const t2 = uid('ttl');
  await call('threads.create', { body: { thread_id: t2, ttl: 5 }, ids: { thread_id: 'x' } });
  const pttl = await rc.cmd('PTTL', `${K}:t:${t2}`);
  assert.ok(pttl > 299000 && pttl <= 300000, String(pttl));
  const t3 = (await createThread()).thread_id;
  const r3 = (await createRun(t3, { assistant_id: a })).body.run_id;
  assert.equal(await rc.cmd('PTTL', `${K}:r:${r3}`), -1, 'no ttl, no expiry');
  await call('threads.patch', { path: { thread_id: t3 }, body: { ttl: { ttl: 1 } } });
  for (const k of [`${K}:t:${t3}`, `${K}:r:${r3}`, `${K}:t:${t3}:active`]) {
    const ttl = await rc.cmd('PTTL', k);
    assert.ok(ttl > 59000 && ttl <= 60000, `${k}: ${ttl}`);
  }

  await sleep(700);
  await refused('threads.get', { path: { thread_id: tid } }, 404, /not found/);
  assert.equal(await rc.cmd('EXISTS', `${K}:r:${rid}`, `${K}:r:${q}`), 0);
  assert.notEqual(await rc.cmd('ZSCORE', `${K}:threads`, tid), null, 'still indexed until a search looks');
  const found = (await call('threads.search', { body: { limit: 1000 } })).body.map((x) => x.thread_id);
  assert.ok(!found.includes(tid));
  assert.equal(await rc.cmd('ZSCORE', `${K}:threads`, tid), null, 'the search dropped it from the index');
  await refused('run.finished', { body: { run_id: rid, status: 'success' } }, 404, /not found/);
});

test('bounds: at most 100 runs wait on a thread; after_seconds is passed on with dispatch_at', async () => {
  const a = uid('agent');
  await register(a);
  const t = (await createThread()).thread_id;
  const now = 1800000000000;
  const first = await createRun(t, { assistant_id: a, after_seconds: 2.5 }, { now });
  assert.deepEqual(first.extra, { dispatch_at: now + 2500 });
  const [e] = await forRun(`${K}:a:${a}`, first.body.run_id, 'rest.run');
  assert.equal(e.params.after_seconds, 2.5);
  for (let i = 0; i < 100; i++) {
    const r = await createRun(t, { assistant_id: a, multitask_strategy: 'enqueue' });
    assert.equal(r.status, 200);
  }
  await refused('runs.create', { path: { thread_id: t }, body: { assistant_id: a, multitask_strategy: 'enqueue' }, ids: { run_id: 'over' } }, 409,
    new RegExp(`thread "${t}" already has 100 runs waiting`));
  await refused('runs.create', { path: { thread_id: t }, body: { assistant_id: a, multitask_strategy: 'interrupt' }, ids: { run_id: 'over' } }, 409, /100 runs waiting/);
  assert.equal(await rc.cmd('LLEN', `${K}:t:${t}:queue`), 100);
  assert.equal((await call('runs.list', { path: { thread_id: t }, query: { limit: '1000' } })).body.length, 101);
});

test('a thread keeps at most 1000 runs: the oldest finished ones make room', async () => {
  const a = uid('agent');
  await register(a);
  const t = (await createThread()).thread_id;
  // 1000 finished runs written directly, as if the thread had run that long.
  const args = [];
  for (let i = 0; i < 1000; i++) {
    const rid = `old-${t}-${String(i).padStart(4, '0')}`;
    await rc.cmd('HSET', `${K}:r:${rid}`, 'run_id', rid, 'thread_id', t, 'assistant_id', a, 'status', 'success', 'created_at', i, 'updated_at', i);
    args.push(i, rid);
  }
  await rc.cmd('ZADD', `${K}:t:${t}:runs`, ...args);
  const r = await createRun(t, { assistant_id: a });
  assert.equal(r.status, 200);
  assert.equal(await rc.cmd('ZCARD', `${K}:t:${t}:runs`), 1000);
  assert.equal(await rc.cmd('EXISTS', `${K}:r:old-${t}-0000`), 0, 'the oldest went');
  assert.equal(await rc.cmd('EXISTS', `${K}:r:old-${t}-0001`), 1);
});

test('assistants: create, patch (a version each), versions, latest, delete; the reference server\'s words', async () => {
  const g = uid('graph');
  await register(g);
  const now = 1732400000000;
  const create = (body, id = uid('as')) => call('assistants.create', { body, ids: { assistant_id: id }, now });
  await refused('assistants.create', { body: {}, ids: { assistant_id: 'x' } }, 422, /^graph_id is required$/);
  await refused('assistants.create', { body: { graph_id: 'nobody-serves-it' }, ids: { assistant_id: 'x' } }, 404, /^Graph "nobody-serves-it" not found$/);
  await refused('assistants.create', { body: { graph_id: g, config: [] }, ids: { assistant_id: 'x' } }, 422, /^config must be an object$/);
  await refused('assistants.create', { body: { graph_id: g, config: { tags: 'x' } }, ids: { assistant_id: 'x' } }, 422, /^config\.tags must be/);
  await refused('assistants.create', { body: { graph_id: g, metadata: 'x' }, ids: { assistant_id: 'x' } }, 422, /^metadata must be an object$/);
  await refused('assistants.create', { body: { graph_id: g, name: 3 }, ids: { assistant_id: 'x' } }, 422, /^name must be a string$/);
  await refused('assistants.create', { body: { graph_id: g, assistant_id: 'a b' }, ids: { assistant_id: 'x' } }, 422, /^assistant_id must be/);
  await refused('assistants.create', { body: { graph_id: g, if_exists: 'replace' }, ids: { assistant_id: 'x' } }, 422, /^if_exists must be one of "do_nothing", "raise"$/);

  const id = uid('as');
  const c = await create({ graph_id: g, config: { configurable: { model_name: 'gpt', big: 12345678901234567 } }, context: { tone: 'dry' },
    metadata: { team: 'x' }, description: 'foo' }, id);
  assert.equal(c.status, 200);
  assert.deepEqual(c.body, {
    assistant_id: id, graph_id: g, name: 'Untitled', config: { configurable: { model_name: 'gpt', big: 12345678901234568 } },
    context: { tone: 'dry' }, metadata: { team: 'x' }, version: 1, created_at: '2024-11-23T22:13:20.000Z',
    updated_at: '2024-11-23T22:13:20.000Z', description: 'foo',
  });
  assert.equal((await create({ graph_id: g, name: '' })).body.name, g, 'an empty name is the graph\'s');
  assert.equal((await create({ graph_id: g, assistant_id: 'chosen-id', name: 'woof' })).body.assistant_id, 'chosen-id');
  await refused('assistants.create', { body: { graph_id: g, assistant_id: id }, ids: { assistant_id: 'x' } }, 409, /^Assistant already exists$/);
  const same = await call('assistants.create', { body: { graph_id: g, assistant_id: id, if_exists: 'do_nothing', name: 'other' }, ids: { assistant_id: 'x' } });
  assert.deepEqual(same.body, c.body, 'do_nothing: the one there');
  await refused('assistants.create', { body: { graph_id: g, assistant_id: systemAssistantId(g) }, ids: { assistant_id: 'x' } }, 409, /exists/);

  // PATCH: given members replace, metadata merges; every PATCH is a version, even an empty one.
  const p = await call('assistants.patch', { path: { assistant_id: id }, body: { metadata: { name: 'woof' }, description: 'bar' }, now: now + 1000 });
  assert.deepEqual([p.body.version, p.body.metadata, p.body.description, p.body.config.configurable.model_name, p.body.updated_at],
    [2, { team: 'x', name: 'woof' }, 'bar', 'gpt', '2024-11-23T22:13:21.000Z']);
  assert.equal((await call('assistants.patch', { path: { assistant_id: id }, body: { config: { configurable: { foo: 'bar' } } } })).body.version, 3);
  assert.equal((await call('assistants.patch', { path: { assistant_id: id }, body: null })).body.version, 4);
  await refused('assistants.patch', { path: { assistant_id: 'nobody' }, body: {} }, 404, /^Assistant not found$/);
  await refused('assistants.patch', { path: { assistant_id: id }, body: { graph_id: 'nobody-serves-it' } }, 404, /^Graph "nobody-serves-it" not found$/);
  const got = (await call('assistants.get', { path: { assistant_id: id } })).body;
  assert.deepEqual([got.version, got.config, got.context, got.metadata], [4, { configurable: { foo: 'bar' } }, { tone: 'dry' }, { team: 'x', name: 'woof' }]);

  const versions = async (body = {}) => (await call('assistants.versions', { path: { assistant_id: id }, body })).body;
  assert.deepEqual((await versions()).map((v) => v.version), [4, 3, 2, 1], 'newest first');
  assert.deepEqual(Object.keys((await versions())[0]), ['assistant_id', 'version', 'graph_id', 'config', 'context', 'metadata', 'created_at', 'name', 'description']);
  assert.deepEqual((await versions({ limit: 1 })).map((v) => v.version), [4]);
  assert.deepEqual((await versions({ offset: 2 })).map((v) => v.version), [2, 1]);
  assert.deepEqual((await versions({ metadata: { name: 'woof' } })).map((v) => v.version), [4, 3, 2]);
  assert.deepEqual((await versions())[3].config, { configurable: { model_name: 'gpt', big: 12345678901234568 } });
  await refused('assistants.versions', { path: { assistant_id: id }, body: { metadata: { name: 'nope' } } }, 404, new RegExp(`^Assistant "${id}" not found\\.$`));
  await refused('assistants.versions', { path: { assistant_id: 'nobody' }, body: {} }, 404, /^Assistant "nobody" not found\.$/);
  await refused('assistants.versions', { path: { assistant_id: id }, body: { limit: 0 } }, 422, /^limit must be/);
  assert.deepEqual((await call('assistants.versions', { path: { assistant_id: g }, body: {} })).body.map((v) => v.assistant_id),
    [systemAssistantId(g)], 'a graph id: its system assistant\'s');

  // latest: back to version 1 (config, context, metadata, name, description); the next PATCH is 5.
  const l = await call('assistants.latest', { path: { assistant_id: id }, body: { version: 1 } });
  assert.deepEqual([l.body.version, l.body.metadata, l.body.description, l.body.config.configurable.model_name], [1, { team: 'x' }, 'foo', 'gpt']);
  assert.equal((await call('assistants.patch', { path: { assistant_id: id }, body: {} })).body.version, 5);
  await refused('assistants.latest', { path: { assistant_id: id }, body: { version: 9 } }, 404, /^Assistant version not found$/);
  await refused('assistants.latest', { path: { assistant_id: id }, body: { version: 'x' } }, 422, /^version must be a positive integer$/);
  await refused('assistants.latest', { path: { assistant_id: 'nobody' }, body: { version: 1 } }, 404, /^Assistant not found$/);

  // delete: 200 [id]; delete_threads=true takes the threads whose metadata names it.
  const t1 = await createThread({ metadata: { assistant_id: id } });
  const t2 = await createThread({ metadata: { assistant_id: 'someone-else' } });
  const d = await call('assistants.delete', { path: { assistant_id: id }, query: { delete_threads: 'true' } });
  assert.deepEqual([d.status, d.body], [200, [id]]);
  await refused('assistants.get', { path: { assistant_id: id } }, 404, /^Assistant not found$/);
  await refused('threads.get', { path: { thread_id: t1.thread_id } }, 404, /not found/);
  assert.equal((await call('threads.get', { path: { thread_id: t2.thread_id } })).status, 200);
  assert.equal(await rc.cmd('EXISTS', `${K}:as:${id}`, `${K}:av:${id}`), 0);
  const keep = await createThread({ metadata: { assistant_id: 'chosen-id' } });
  await call('assistants.delete', { path: { assistant_id: 'chosen-id' }, query: {} });
  assert.equal((await call('threads.get', { path: { thread_id: keep.thread_id } })).status, 200, 'without delete_threads the threads stay');
  await refused('assistants.delete', { path: { assistant_id: id }, query: {} }, 404, /^Assistant not found$/);
});

test('assistants.search and count: filters, sort, select, the reference server\'s page headers', async () => {
  const g = uid('sgraph');
  await register(g);
  const tag = uid('tag');
  const made = [];
  for (let i = 0; i < 4; i++) {
    const r = await call('assistants.create', { body: { graph_id: g, name: `Bot ${i}`, metadata: { tag, odd: i % 2 === 1 } },
      ids: { assistant_id: `${tag}-${i}` }, now: 1800000000000 + i * 1000 });
    made.push(r.body.assistant_id);
  }
  const search = (body) => call('assistants.search', { body: { metadata: { tag }, ...body } });
  const ids = (r) => r.body.map((x) => x.assistant_id);
  assert.deepEqual(ids(await search({})), [...made].reverse(), 'created_at desc by default');
  assert.deepEqual(ids(await search({ sort_by: 'name', sort_order: 'asc', limit: 2 })), made.slice(0, 2));
  assert.deepEqual(ids(await search({ metadata: { tag, odd: true } })), [made[3], made[1]]);
  assert.deepEqual(ids(await search({ name: 'BOT 2' })), [made[2]]);
  assert.deepEqual(ids(await call('assistants.search', { body: { graph_id: g, limit: 1000 } })).sort(), [...made, systemAssistantId(g)].sort());
  assert.deepEqual((await search({ select: ['assistant_id', 'name', 'nope'], limit: 1 })).body, [{ assistant_id: made[3], name: 'Bot 3' }]);
  // X-Pagination-Total as the reference server counts it: offset + matches, one more when they fill the page.
  assert.deepEqual((await search({ limit: 10 })).extra, { pagination_total: 4 });
  assert.deepEqual((await search({ limit: 4 })).extra, { pagination_total: 5, pagination_next: 4 });
  assert.deepEqual((await search({ limit: 2, offset: 2 })).extra, { pagination_total: 6 });
  assert.deepEqual((await search({ offset: 10 })).extra, { pagination_total: 10 });
  await refused('assistants.search', { body: { select: 'name' } }, 422, /^select must be an array/);
  const count = async (body) => (await call('assistants.count', { body })).body;
  assert.equal(await count({ metadata: { tag } }), 4);
  assert.equal(await count({ metadata: { tag }, name: 'bot 1' }), 1);
  assert.equal(await count({ graph_id: g }), 5, 'and its system assistant');
  assert.ok(await count(null) >= 5);
  await refused('assistants.count', { body: { graph_id: 3 } }, 422, /^graph_id must be a string$/);
});

test('runs.create: the assistant\'s config and context under the run\'s; the thread keeps the config', async () => {
  const g = uid('cgraph');
  await register(g);
  await rc.cmd('HSET', `${K}:ainfo:${g}`, 'context', '{"model":"unknown"}');
  const a = (await call('assistants.create', {
    body: { graph_id: g, config: { configurable: { model_name: 'gpt', keep: 1 }, tags: ['a'], recursion_limit: 5 }, context: { model: 'anthropic', tone: 'dry' } },
    ids: { assistant_id: uid('as') } })).body.assistant_id;
  const t = (await createThread()).thread_id;
  const r = await createRun(t, { assistant_id: a, config: { configurable: { model_name: 'claude' }, tags: ['b'] }, context: { model: 'openai' } });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.kwargs.config, { configurable: { model_name: 'claude', keep: 1 }, tags: ['b'], recursion_limit: 5 });
  assert.deepEqual(r.body.kwargs.context, { model: 'openai', tone: 'dry' });
  assert.equal(r.body.assistant_id, a);
  const [e] = await forRun(`${K}:a:${g}`, r.body.run_id, 'rest.run');
  assert.deepEqual([e.params.assistant_id, e.params.graph_id, e.params.config, e.params.context],
    [a, g, r.body.kwargs.config, r.body.kwargs.context], 'the worker gets them in rest.run');
  const th = (await call('threads.get', { path: { thread_id: t } })).body;
  assert.deepEqual(th.metadata, { graph_id: g, assistant_id: a });
  assert.deepEqual(th.config, r.body.kwargs.config);
  await finished(r.body.run_id);

  // Without a config or context of its own, the run takes the assistant's (the system one's: what the workers registered).
  const bare = await createRun(t, { assistant_id: g });
  assert.deepEqual([bare.body.kwargs.config, bare.body.kwargs.context], [undefined, { model: 'unknown' }]);
  await finished(bare.body.run_id);
  const plain = await createRun(t, { assistant_id: a, input: null });
  assert.deepEqual([plain.body.kwargs.config.tags, plain.body.kwargs.context], [['a'], { model: 'anthropic', tone: 'dry' }]);
  await finished(plain.body.run_id);
  // A context that is not an object is the assistant's, whatever the run says (as the reference server).
  const s = (await call('assistants.create', { body: { graph_id: g, context: 'fixed' }, ids: { assistant_id: uid('as') } })).body.assistant_id;
  assert.equal((await createRun(t, { assistant_id: s, context: { x: 1 } })).body.kwargs.context, 'fixed');
});

test('threads.count: the search\'s filters, every thread', async () => {
  const tag = uid('ctag');
  for (let i = 0; i < 5; i++) await createThread({ metadata: { tag, even: i % 2 === 0 } });
  const count = async (body) => (await call('threads.count', { body })).body;
  assert.equal(await count({ metadata: { tag } }), 5);
  assert.equal(await count({ metadata: { tag, even: true } }), 3);
  assert.equal(await count({ metadata: { tag }, status: 'busy' }), 0);
  assert.equal(await count({ metadata: { tag }, values: { x: 1 } }), 5, 'threads without values pass');
  assert.ok(await count(null) >= 5);
  await refused('threads.count', { body: { status: 'sleeping' } }, 422, /^status must be/);
});

test('internal.truncate: threads with their runs, runs alone, assistants but the system ones', async () => {
  const g = uid('tgraph');
  await register(g);
  const t = (await createThread()).thread_id;
  const r = (await createRun(t, { assistant_id: g })).body.run_id;
  const a = (await call('assistants.create', { body: { graph_id: g }, ids: { assistant_id: uid('as') } })).body.assistant_id;
  assert.deepEqual((await call('internal.truncate', { body: { runs: true } })).body, { ok: true });
  assert.equal(await rc.cmd('EXISTS', `${K}:r:${r}`), 0);
  assert.equal((await call('threads.get', { path: { thread_id: t } })).status, 200, 'runs only: the thread stays');
  const [cancel] = await forRun(`${K}:a:${g}`, r, 'rest.cancel');
  assert.equal(cancel.params.action, 'interrupt', 'its active run is told to stop');
  await call('internal.truncate', { body: { threads: true, assistants: true } });
  assert.equal(await rc.cmd('ZCARD', `${K}:threads`), 0);
  await refused('threads.get', { path: { thread_id: t } }, 404, /not found/);
  await refused('assistants.get', { path: { assistant_id: a } }, 404, /^Assistant not found$/);
  assert.equal((await call('assistants.get', { path: { assistant_id: g } })).status, 200, 'the system assistants stay');
  await refused('internal.truncate', { body: { threads: 'yes' } }, 422, /^threads must be true or false$/);
});

// ---- a Python graph's records: the Python server's (protocol/README.md, "Two servers") ----

test('a Python graph (language python in its ainfo): its run as the Python server records it, its worker handed the request', async () => {
  const g = uid('pygraph');
  await register(g);
  await rc.cmd('HSET', `${K}:ainfo:${g}`, 'language', 'python', 'run_metadata', '{"run_attempt":1,"langgraph_plan":"developer"}',
    'config', '{"configurable":{"model":"fake"},"tags":["sys"]}', 'context', '{"model":"fake"}');
  const sys = systemAssistantId(g);
  // No flavor from the gateway (the JavaScript default): the graph decides, and the reply says so.
  const t = await createThread({ metadata: { owner: 'me' } });
  const body = { assistant_id: g, input: { q: 1 }, config: { tags: ['run'] }, context: { persona: 'poet' }, metadata: { m: 1 }, checkpoint_id: 'cp-1' };
  const c = await call('runs.create', { path: { thread_id: t.thread_id }, query: {}, body,
    ids: { run_id: 'py-r1', thread_id: 'x', request_id: 'req-1' }, after_seq: 0, now: 1732400000000 });
  assert.equal(c.status, 200, JSON.stringify(c.body));
  assert.deepEqual(c.extra, { flavor: 'python' });
  const metadata = { created_by: 'system', owner: 'me', graph_id: g, assistant_id: sys, m: 1 };
  assert.deepEqual(c.body, {
    run_id: 'py-r1', thread_id: t.thread_id, assistant_id: sys, created_at: '2024-11-23T22:13:20.000Z', updated_at: '2024-11-23T22:13:20.000Z',
    status: 'pending', metadata, multitask_strategy: 'enqueue', langsmith_session_name: null,
    kwargs: {
      input: { q: 1 }, command: null,
      config: {
        configurable: {
          model: 'fake', persona: 'poet', __context_provided__: true, checkpoint_id: 'cp-1', langgraph_auth_user: null,
          langgraph_auth_user_id: '', langgraph_auth_permissions: [], langgraph_request_id: 'req-1',
          __request_start_time_ms__: 1732400000000, __after_seconds__: 0, run_id: 'py-r1', thread_id: t.thread_id, graph_id: g,
          assistant_id: sys, user_id: '',
        },
        tags: ['run'], metadata,
      },
      context: { model: 'fake', persona: 'poet' }, stream_mode: ['values'], interrupt_before: null, interrupt_after: null, webhook: null,
      feedback_keys: null, temporary: false, subgraphs: false, resumable: false, checkpoint_during: true, durability: 'async',
    },
  });
  // The worker gets the request as it came, the assistant and the thread to layer it with, the request's id and start.
  const [e] = await forRun(`${K}:a:${g}`, 'py-r1', 'rest.run');
  assert.deepEqual(e.params, {
    run_id: 'py-r1', thread_id: t.thread_id, assistant_id: sys, graph_id: g, metadata, on_completion: 'keep', temporary: false, after_seconds: 0,
    input: { q: 1 }, config: { tags: ['run'] }, context: { persona: 'poet' }, stream_mode: ['values'], checkpoint_id: 'cp-1',
    assistant: { config: { configurable: { model: 'fake' }, tags: ['sys'] }, context: { model: 'fake' }, metadata: { created_by: 'system' } },
    thread: { config: {}, metadata: { owner: 'me' } }, request_id: 'req-1', request_start_ms: 1732400000000,
  });
  const h = await hash(`${K}:r:py-r1`);
  assert.equal(h.language, 'python');
  // The thread: its config the assistant's, the thread's and the request's, with their configurables only.
  const th = (await call('threads.get', { path: { thread_id: t.thread_id } })).body;
  assert.deepEqual(th.config, { configurable: { model: 'fake' }, tags: ['run'] });
  assert.equal(th.status, 'busy');

  // Both configurable and context: the Python server's 400, nothing made.
  await refused('runs.create', { path: { thread_id: t.thread_id }, body: { assistant_id: g, config: { configurable: { a: 1 } }, context: { b: 2 } },
    ids: { run_id: 'py-r0' } }, 400, /^Cannot specify both configurable and context\./);
  assert.equal(await rc.cmd('EXISTS', `${K}:r:py-r0`), 0);

  // Started: the metadata the run streams with and the node counter, as langgraph dev's records show them.
  const s = await started('py-r1');
  assert.deepEqual(s.body.kwargs.config.metadata, { ...metadata, run_attempt: 1, langgraph_plan: 'developer' });
  assert.ok('__pregel_node_finished' in s.body.kwargs.config.configurable);
  // Cancelled: the thread's error names the cancel.
  const cancel = await call('runs.cancel', { path: { thread_id: t.thread_id, run_id: 'py-r1' }, query: { action: 'interrupt' } });
  assert.deepEqual([cancel.status, cancel.body], [202, null]);
  await finished('py-r1', { status: 'interrupted', values: { q: 2 }, interrupts: {}, next: ['n'] });
  const after = (await call('threads.get', { path: { thread_id: t.thread_id } })).body;
  assert.deepEqual([after.status, after.values, after.error, after.interrupts],
    ['interrupted', { q: 2 }, { error: 'UserInterrupt', message: 'interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel' }, {}]);
  await refused('runs.cancel', { path: { thread_id: t.thread_id, run_id: 'py-r1' }, query: {} }, 404, /^No matching runs to cancel\./);
  await refused('runs.get', { path: { thread_id: t.thread_id, run_id: 'nope' }, query: {} }, 404, /^Not Found$/);
});

test('a Python graph\'s multitask: the reject words, the superseded run\'s error; the gateway\'s flavor makes new threads and copies', async () => {
  const g = uid('pygraph');
  await register(g);
  await rc.cmd('HSET', `${K}:ainfo:${g}`, 'language', 'python');
  const tid = uid('pt');
  const t = await call('threads.create', { body: { thread_id: tid }, ids: { thread_id: 'unused' }, flavor: 'python' });
  assert.deepEqual(t.body, { thread_id: tid, created_at: t.body.created_at, updated_at: t.body.updated_at, state_updated_at: t.body.updated_at,
    metadata: {}, status: 'idle', config: {}, values: null });
  assert.equal(t.extra, undefined, 'the gateway said python: no need to say it again');
  await refused('threads.create', { body: { thread_id: tid }, ids: {}, flavor: 'python' }, 409, new RegExp(`^Thread with ID ${tid} already exists$`));
  const a = await createRun(tid, { assistant_id: g }, { flavor: 'python' });
  assert.equal(a.body.multitask_strategy, 'enqueue');
  await refused('runs.create', { path: { thread_id: tid }, body: { assistant_id: g, multitask_strategy: 'reject' }, ids: { run_id: uid('r') } }, 409,
    /^Thread is already running a task\. Wait for it to finish or choose a different multitask strategy\.$/);
  const b = await createRun(tid, { assistant_id: g, multitask_strategy: 'rollback' });
  assert.equal(b.status, 200);
  const run = await hash(`${K}:r:${a.body.run_id}`);
  assert.deepEqual([run.cancel, run.cancel_reason], ['rollback', `superseded by run ${b.body.run_id} (multitask_strategy=rollback)`]);
  await finished(a.body.run_id, { status: 'interrupted' });
  const mid = (await call('threads.get', { path: { thread_id: tid } })).body;
  assert.deepEqual([mid.status, mid.values, mid.error],
    ['busy', null, { error: 'UserRollback', message: `superseded by run ${b.body.run_id} (multitask_strategy=rollback)` }]);
  assert.equal(await rc.cmd('EXISTS', `${K}:r:${a.body.run_id}`), 0, 'rolled back: deleted');
  await started(b.body.run_id);
  await finished(b.body.run_id, { values: { done: true }, interrupts: {} });
  // A copy, as the Python server copies: the metadata, no values, no config.
  const copy = await call('threads.copy', { path: { thread_id: tid }, ids: { thread_id: uid('copy') } });
  assert.deepEqual(Object.keys(copy.body), ['thread_id', 'created_at', 'updated_at', 'state_updated_at', 'metadata', 'status', 'config']);
  assert.deepEqual([copy.body.metadata, copy.body.config], [{ graph_id: g, assistant_id: systemAssistantId(g) }, {}]);
  // Without a flavor and on a graph of no language, the JavaScript server's, as always.
  const js = await createThread();
  assert.deepEqual(Object.keys(js), ['thread_id', 'created_at', 'updated_at', 'state_updated_at', 'metadata', 'status', 'values', 'interrupts', 'config']);
});
