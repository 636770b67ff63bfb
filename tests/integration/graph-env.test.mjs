// What the LangGraph worker gives a graph, as the reference server
// (@langchain/langgraph-api) gives it (issue 26): the forms a graph may be
// exported in (a StateGraph, a compiled graph, a Promise, a factory of the
// run's config) and a langgraph.json; the config, context and metadata a run
// is run with (the graph's defaults from LANGGRAPH_CONFIG under the run's
// own), the run's metadata in its checkpoints; the store (config.store,
// runtime.store), which is the REST API's store; the SDK logger; a run's
// after_seconds; a failure left on the run and the thread; threads created
// with supersteps. Through @langchain/langgraph-sdk against two gateways
// behind HAProxy and two workers serving lib/env-graphs.mjs.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startWorker, stopAll, waitUntil, sleep } from './lib/harness.mjs';
import { restStack, randomUUID } from './lib/rest.mjs';
import { assistantLayer, checkpointMetadata, mergeRun, streamMetadata, systemAssistantId } from '../../src/worker/config.js';
import { ServedGraph, graphDefaults, serveGraphs } from '../../src/worker/graphs.js';
import { Relay, toJson } from '../../src/worker/relay.js';
import { createRequire } from 'node:module';
import { registerSdkLogger } from '../../src/worker/logger.js';
import { ThreadcastStore } from '../../src/worker/store.js';
import { Redis } from '../../src/worker/test/fixtures.js';

after(stopAll);

const here = path.dirname(fileURLToPath(import.meta.url));
const envGraphs = path.join(here, 'lib/env-graphs.mjs');
const lgUrl = pathToFileURL(path.join(here, '../../src/worker/node_modules/@langchain/langgraph/dist/index.js')).href;

/** The SDK's error for a call that failed: its HTTP status (or null when it succeeded). */
async function statusOf(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return e.status ?? e.message;
  }
}

describe('the worker\'s parts that need no Redis', () => {
  test('toJson: LangChain messages as plain dicts, wherever they are; plain data exactly as JSON.stringify writes it', () => {
    const { AIMessage, HumanMessage } = createRequire(path.join(path.dirname(fileURLToPath(import.meta.url)), '../../src/worker/package.json'))('@langchain/core/messages');
    const delta = { method: 'messages', params: { namespace: ['a:1'], node: 'model', data: { event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: 'hé "x"\n' } }, tags: [], n: null } };
    assert.equal(toJson(delta), JSON.stringify(delta));
    const state = { messages: [new HumanMessage({ content: 'hi', id: 'h1' }), { nested: [new AIMessage({ content: 'yo', id: 'a1' })] }], big: 12n, at: new Date(0) };
    const out = JSON.parse(toJson(state));
    assert.deepEqual(out.messages[0], { ...out.messages[0], type: 'human', content: 'hi', id: 'h1' });
    assert.equal(out.messages[0].lc, undefined, 'not the {"lc":1,…} constructor form');
    assert.deepEqual([out.messages[1].nested[0].type, out.messages[1].nested[0].content, out.messages[1].nested[0].id], ['ai', 'yo', 'a1']);
    assert.equal(out.big, '12');
    assert.equal(out.at, '1970-01-01T00:00:00.000Z');
    // Deeper than the quick check looks: still written the careful way.
    let deep = { m: new AIMessage({ content: 'deep', id: 'd1' }) };
    for (let i = 0; i < 70; i++) deep = { d: deep };
    let o = JSON.parse(toJson(deep));
    for (let i = 0; i < 70; i++) o = o.d;
    assert.equal(o.m.type, 'ai');
    assert.equal(o.m.content, 'deep');
  });

  test('the relay: settle() resolves once every event pushed before it is appended; after a failed append nothing more is taken', async () => {
    const calls = [];
    let answer = async () => 1;
    const redis = { call: (...args) => { const done = answer(); calls.push({ args, done }); return done; } };
    const relay = new Relay({ redis, thread: 't', assistant: 'g', runId: 'r', log: () => {} });
    let release;
    answer = () => new Promise((r) => { release = () => r(1); });
    const ev = (i) => ({ method: 'custom', params: { namespace: [], data: { i } } });
    await relay.push(ev(1));
    await relay.push(ev(2));
    let settled = false;
    const settling = relay.settle().then(() => { settled = true; });
    await sleep(50);
    assert.equal(calls.length, 1, 'one append under way');
    assert.equal(settled, false, 'not settled while it is');
    release();
    await settling;
    const sent = calls.flatMap((c) => c.args.filter((a) => typeof a === 'string' && a.startsWith('{')).map((a) => JSON.parse(a).params.data.i));
    assert.deepEqual(sent, [1, 2]);
    answer = async () => { throw new Error('ERR threadcast: something no retry fixes'); };
    await relay.push(ev(3));
    await assert.rejects(relay.settle(), /something no retry fixes/);
    await assert.rejects(relay.push(ev(4)), /something no retry fixes/, 'the next event is refused, not appended after a hole');
  });

  test('the relays of runs that flush in the same tick send their appends together, in one pipeline; each run gets its own answer', async () => {
    const direct = [];
    const pipelines = [];
    // FCALL threadcast_append_batch 1 <thread> <count> <event>… : run b's is refused.
    const answer = (args) => (args[3] === 'b' ? [new Error('ERR threadcast: something no retry fixes for b'), null] : [null, 1]);
    const redis = {
      call: async (...args) => { direct.push(args); const [err, v] = answer(args); if (err) throw err; return v; },
      pipeline: () => {
        const cmds = [];
        const p = { call: (...args) => { cmds.push(args); return p; }, exec: async () => cmds.map(answer) };
        pipelines.push(cmds);
        return p;
      },
    };
    const relays = ['a', 'b', 'c'].map((thread) => new Relay({ redis, thread, assistant: 'g', runId: `r-${thread}`, log: () => {} }));
    const ev = (i) => ({ method: 'custom', params: { namespace: [], data: { i } } });
    // Three runs whose events arrive in the same tick (as when their last appends were answered in one read).
    for (const [k, r] of relays.entries()) await r.push(ev(k));
    const outcomes = await Promise.allSettled(relays.map((r) => r.settle()));
    assert.equal(pipelines.length, 1, 'one pipeline for the tick');
    assert.equal(direct.length, 0, 'no append of its own');
    assert.deepEqual(pipelines[0].map((args) => args[3]), ['a', 'b', 'c'], 'each run\'s append, in the order the runs flushed');
    assert.deepEqual(pipelines[0].map((args) => JSON.parse(args[5]).params.data.i), [0, 1, 2]);
    assert.equal(outcomes[0].status, 'fulfilled');
    assert.equal(outcomes[1].status, 'rejected', 'the refused append fails its own run');
    assert.match(String(outcomes[1].reason?.message), /no retry fixes for b/);
    assert.equal(outcomes[2].status, 'fulfilled', 'and no other');
    // A run alone in its tick sends its append as a call of its own.
    await relays[0].push(ev(3));
    await relays[0].settle();
    assert.equal(pipelines.length, 1);
    assert.equal(direct.length, 1);
    assert.equal(JSON.parse(direct[0][5]).params.data.i, 3);
    // A client that throws instead of rejecting: every run of the tick gets the error, none hangs.
    const broken = { call: () => { throw new Error('connection is closed'); }, pipeline: () => { throw new Error('connection is closed'); } };
    const two = ['d', 'e'].map((thread) => new Relay({ redis: broken, thread, assistant: 'g', runId: `r-${thread}`, log: () => {} }));
    for (const r of two) await r.push(ev(4));
    for (const r of two) await assert.rejects(r.settle(), /connection is closed/);
  });

  test('a relay\'s append leaves at the end of the work that queued its event, before the event loop\'s next turn', async () => {
    const calls = [];
    const redis = { call: async (...args) => { calls.push(args); return 1; } };
    const relay = new Relay({ redis, thread: 't', assistant: 'g', runId: 'r', log: () => {} });
    // A timer that fires with the token, as a model's pace does, and another run's timer due
    // at the same time, which the loop runs next (the same timers phase).
    const seen = await new Promise((resolve) => {
      setTimeout(() => {
        relay.push({ method: 'custom', params: { namespace: [], data: { i: 1 } } });
        relay.push({ method: 'custom', params: { namespace: [], data: { i: 2 } } });
      }, 1);
      setTimeout(() => resolve(calls.length), 1);
    });
    assert.equal(seen, 1, 'one append, sent before the loop ran anything else');
    assert.deepEqual(calls[0].slice(5, 7).map((e) => JSON.parse(e).params.data.i), [1, 2], 'with both events of that work');
    await relay.settle();
  });

  test('a run\'s config, context and metadata: assistant, thread, run, merged member by member', async () => {
    const ids = { run_id: 'r1', thread_id: 't1', graph_id: 'g', assistant_id: 'g' };
    const defaults = { configurable: { model_name: 'openai', tier: 'free' }, recursion_limit: 7, context: { model: 'unknown', temperature: 0 } };
    // The graph's own assistant: its defaults, metadata created_by system.
    const system = await assistantLayer({ assistant_id: 'g' }, 'g', defaults);
    assert.deepEqual(system, { config: { configurable: { model_name: 'openai', tier: 'free' }, recursion_limit: 7 },
      context: { model: 'unknown', temperature: 0 }, metadata: { created_by: 'system' } });
    assert.deepEqual(await assistantLayer({ assistant_id: await systemAssistantId('g') }, 'g', defaults), system,
      'the reference\'s id of the system assistant (uuid5 of the graph id) is the same assistant');
    assert.deepEqual(await assistantLayer({ assistant_id: 'someone-else' }, 'g', defaults), { config: {}, context: undefined, metadata: {} },
      'another assistant of the graph does not get the graph\'s defaults');
    const given = await assistantLayer({ assistant_id: 'a1', assistant: { config: { configurable: { tier: 'team' } }, context: { model: 'x' }, metadata: { owner: 'o' } } }, 'g', defaults);
    assert.deepEqual(given, { config: { configurable: { tier: 'team' } }, context: { model: 'x' }, metadata: { owner: 'o' } });

    const { config, context } = mergeRun(system, { config: { configurable: { tier: 'thread', region: 'eu' } }, metadata: { topic: 't' } },
      { config: { configurable: { tier: 'run', run_id: 'spoofed' }, tags: ['a'], metadata: { dropped: true } }, context: { temperature: 1 }, metadata: { purpose: 'p' } }, ids);
    assert.deepEqual(config.configurable, { model_name: 'openai', tier: 'run', region: 'eu', run_id: 'r1', thread_id: 't1', graph_id: 'g', assistant_id: 'g' });
    assert.deepEqual(config.metadata, { created_by: 'system', topic: 't', purpose: 'p' }, 'the run\'s config.metadata is replaced, as the reference does');
    assert.equal(config.recursion_limit, 7);
    assert.deepEqual(config.tags, ['a']);
    assert.deepEqual(context, { model: 'unknown', temperature: 1 });
    assert.deepEqual(mergeRun({ config: {}, context: undefined, metadata: {} }, {}, {}, ids).context, {}, 'no context at all is {}');

    const md = streamMetadata({ purpose: 'p' });
    assert.equal(md.purpose, 'p');
    assert.equal(md.run_attempt, 1);
    assert.match(md.langgraph_version, /^\d+\.\d+\.\d+/);
    assert.equal(md.langgraph_plan, 'developer');
    assert.equal(md.langgraph_host, 'self-hosted');

    assert.deepEqual(checkpointMetadata({ configurable: { thread_id: 't', checkpoint_ns: '', checkpoint_id: 'c', run_id: 'r', __pregel_x: 1, user_id: 'u', fn: () => 1 },
      metadata: { purpose: 'p', run_id: 'r' } }, { source: 'loop', step: 1, parents: {} }),
    { user_id: 'u', purpose: 'p', run_id: 'r', source: 'loop', step: 1, parents: {} });
  });

  test('graph exports: a StateGraph, a compiled graph, a Promise, a factory, a wrapper with .graph; anything else is refused', async () => {
    const { StateGraph, Annotation, START, END } = await import(lgUrl);
    const S = Annotation.Root({ n: Annotation() });
    const builder = (node = 'a') => new StateGraph(S).addNode(node, () => ({ n: 1 })).addEdge(START, node).addEdge(node, END);
    const dynamic = async (config) => builder(config.configurable?.nodeName ?? 'default').compile();
    const env = { saver: { tag: 'saver' }, store: { tag: 'store' } };
    const compiled = builder().compile();
    const graphs = await serveGraphs({ b: builder(), c: compiled, p: Promise.resolve(builder()), f: dynamic, w: { builder: {}, graph: compiled, compile: null } },
      env, { f: { configurable: { nodeName: 'x' } } });
    for (const id of ['b', 'c', 'p', 'w']) {
      const g = await graphs.get(id).build();
      assert.equal(graphs.get(id).isFactory, false, id);
      assert.equal(g.checkpointer, env.saver, `${id} gets the worker's checkpointer`);
      assert.equal(g.store, env.store, `${id} gets the worker's store`);
      assert.ok(g.nodes.a, id);
      assert.ok(g.subgraphPaths instanceof Set);
    }
    assert.equal(await graphs.get('w').build(), compiled, 'the wrapper is unwrapped');
    const f = graphs.get('f');
    assert.equal(f.isFactory, true);
    assert.deepEqual(f.defaults, { configurable: { nodeName: 'x' } });
    const one = await f.build({ configurable: { nodeName: 'one' } });
    const two = await f.build({ configurable: {} });
    assert.ok(one.nodes.one && two.nodes.default, 'a factory is called again for each config');
    assert.equal(one.store, env.store);
    await assert.rejects(serveGraphs({ x: 42 }, env, {}), /graph "x" is number, not a graph/);
    await assert.rejects(serveGraphs({ x: { some: 'object' } }, env, {}), /neither a StateGraph nor a compiled graph/);
    await assert.rejects(serveGraphs({}, env, {}), /at least one graph/);
    await assert.rejects(new ServedGraph('f', () => 7, {}, env).build(), /graph "f" is number/);
    assert.deepEqual(graphDefaults('{"g": {"context": {"a": 1}}}'), { g: { context: { a: 1 } } });
    assert.deepEqual(graphDefaults(''), {});
    assert.throws(() => graphDefaults('{"g": 1}'), /object of objects/);
    assert.throws(() => graphDefaults('nope'), /not JSON/);
  });

  test('the SDK logger: the reference\'s methods, child loggers, one JSON line each; registered once', () => {
    const lines = [];
    const key = Symbol.for('langgraph.api.sdk-logger');
    const before = globalThis[key];
    delete globalThis[key];
    try {
      const logger = registerSdkLogger((level, msg, fields) => lines.push({ level, msg, ...fields }));
      assert.equal(registerSdkLogger(() => {}), logger, 'a logger already there is kept');
      for (const m of ['error', 'warn', 'help', 'data', 'info', 'debug', 'prompt', 'http', 'verbose', 'input', 'silly']) {
        assert.equal(typeof logger[m], 'function', m);
      }
      assert.equal(logger.warn('Hello, world!', { random: 123 }), logger, 'chainable, as winston is');
      logger.child({ node: 'agent' }).info({ message: 'an info object', n: 2 });
      logger.log('debug', 'by level', 'extra');
      assert.deepEqual(lines, [
        { level: 'warn', msg: 'Hello, world!', source: 'graph', random: 123 },
        { level: 'info', msg: 'an info object', source: 'graph', node: 'agent', n: 2 },
        { level: 'debug', msg: 'by level', source: 'graph', meta: ['extra'] },
      ]);
    } finally {
      if (before) globalThis[key] = before;
      else delete globalThis[key];
    }
  });
});

describe('graphs behind two gateways and two workers', () => {
  let s;
  let client;
  const defaults = { settings: { configurable: { model_name: 'openai', tier: 'free' }, context: { model: 'unknown' } } };
  before(async () => {
    s = await restStack({ graphs: envGraphs, workerEnv: { LANGGRAPH_CONFIG: JSON.stringify(defaults) } });
    client = s.client();
  });
  after(async () => { await s?.done(); });

  test('a graph factory is built for each run from the run\'s config, and for state commands from the thread\'s last run', async () => {
    const visited = async (config) => (await client.runs.wait(null, 'dynamic', { input: { visited: [] }, ...(config ? { config } : {}) })).visited;
    assert.deepEqual(await visited(), ['default']);
    assert.deepEqual(await visited({ configurable: { nodeName: 'runtime' } }), ['runtime']);
    assert.deepEqual(await visited(), ['default'], 'built again: nothing kept from the last run');

    const thread = (await client.threads.create()).thread_id;
    await client.runs.wait(thread, 'dynamic', { input: { visited: [] }, config: { configurable: { nodeName: 'assistant' } } });
    // The thread's graph has the node "assistant": an update as that node is accepted.
    await client.threads.updateState(thread, { values: { visited: ['update'] }, asNode: 'assistant' });
    const state = await client.threads.getState(thread);
    assert.deepEqual(state.values.visited, ['assistant', 'update']);
    assert.deepEqual(state.next, []);
    const history = await client.threads.getHistory(thread);
    assert.equal(history[0].metadata.source, 'update');
  });

  test('a Promise of a graph; the run\'s config, context and metadata reach it, over the graph\'s LANGGRAPH_CONFIG defaults', async () => {
    const thread = (await client.threads.create({ metadata: { owner: 'me' } })).thread_id;
    const out = await client.runs.wait(thread, 'settings', { input: { question: 'q' }, config: { configurable: { tier: 'pro' } },
      context: { model: 'anthropic' }, metadata: { purpose: 'testing' } });
    const run = (await client.runs.list(thread))[0];
    const { configurable, context, metadata } = out.seen;
    assert.equal(configurable.model_name, 'openai', 'the default the run does not override');
    assert.equal(configurable.tier, 'pro', 'the run\'s own value wins');
    assert.equal(configurable.run_id, run.run_id);
    assert.equal(configurable.thread_id, thread);
    assert.equal(configurable.graph_id, 'settings');
    assert.match(run.assistant_id, /^[0-9a-f-]{36}$/, 'the graph\'s own assistant, by its uuid as the reference names it');
    assert.equal(configurable.assistant_id, run.assistant_id);
    assert.deepEqual(context, { model: 'anthropic' });
    assert.equal(metadata.purpose, 'testing');
    assert.equal(metadata.created_by, 'system', 'the graph\'s own assistant\'s metadata');
    assert.equal(metadata.run_attempt, 1);
    assert.match(metadata.langgraph_version, /^\d+\.\d+\.\d+/);
    assert.equal(metadata.run_id, run.run_id);

    const plain = await client.runs.wait(null, 'settings', { input: { question: 'q' } });
    assert.deepEqual(plain.seen.context, { model: 'unknown' }, 'no context given: the graph\'s default');
    assert.equal(plain.seen.configurable.tier, 'free');
  });

  test('a run\'s metadata is in every checkpoint it writes: history filtered by it finds that run\'s checkpoints only', async () => {
    const thread = (await client.threads.create()).thread_id;
    await client.runs.wait(thread, 'settings', { input: { question: 'one' } });
    await client.runs.wait(thread, 'settings', { input: { question: 'two' }, metadata: { run_tag: 'second' }, config: { configurable: { user_id: 'u2' } } });
    const { run_id: second, assistant_id: assistant } = (await client.runs.list(thread))[0];
    const all = await client.threads.getHistory(thread, { limit: 100 });
    const tagged = await client.threads.getHistory(thread, { metadata: { run_tag: 'second' }, limit: 100 });
    assert.equal(all.length, 6, 'two runs of three checkpoints (input, start, the node)');
    assert.equal(tagged.length, 3);
    for (const c of tagged) {
      assert.equal(c.metadata.run_id, second);
      assert.equal(c.metadata.user_id, 'u2', 'configurable members are metadata too');
      assert.equal(c.metadata.graph_id, 'settings');
      assert.equal(c.metadata.assistant_id, assistant);
      assert.equal(c.metadata.created_by, 'system');
    }
    assert.deepEqual(tagged.map((c) => c.metadata.source), ['loop', 'loop', 'input']);
    assert.deepEqual(tagged.slice(0, 2).map((c) => c.values.question), ['two', 'two']);
    assert.equal((await client.threads.getHistory(thread, { metadata: { user_id: 'u2' }, limit: 100 })).length, 3);
  });

  test('the store: what a graph puts the REST store serves, and what a client puts a graph reads (config.store, runtime.store)', async () => {
    const ns = ['graph-env', randomUUID().slice(0, 8)];
    await client.store.putItem(ns, 'from-client', { said: 'by the client', n: 1 });
    for (const graph of ['memory', 'memory_runtime']) {
      const key = `from-${graph}`;
      const out = await client.runs.wait(null, graph, { input: { ops: [
        { op: 'get', namespace: ns, key: 'from-client' },
        { op: 'put', namespace: ns, key, value: { said: `by ${graph}`, n: 2 } },
        { op: 'get', namespace: ns, key: 'absent' },
      ] } });
      assert.equal(out.error, null, JSON.stringify(out.error));
      const [got, , absent] = out.results;
      assert.deepEqual(got.value, { said: 'by the client', n: 1 });
      assert.deepEqual(got.namespace, ns);
      assert.equal(got.key, 'from-client');
      assert.ok(Date.parse(got.createdAt) <= Date.parse(got.updatedAt));
      assert.equal(absent, null, 'a missing item is null');
      const item = await client.store.getItem(ns, key);
      assert.deepEqual(item.value, { said: `by ${graph}`, n: 2 }, 'the REST store has what the graph put');
    }
    const out = await client.runs.wait(null, 'memory', { input: { ops: [
      { op: 'search', namespace: [ns[0]], filter: { n: { $gte: 2 } } },
      { op: 'search', namespace: ns, limit: 1, offset: 1 },
      { op: 'delete', namespace: ns, key: 'from-client' },
      { op: 'search', namespace: ns },
    ] } });
    assert.equal(out.error, null, JSON.stringify(out.error));
    const [filtered, page, , rest] = out.results;
    assert.deepEqual(filtered.map((i) => i.key).sort(), ['from-memory', 'from-memory_runtime']);
    assert.deepEqual(page.map((i) => i.key), ['from-memory'], 'limit and offset in the store\'s order');
    assert.deepEqual(rest.map((i) => i.key).sort(), ['from-memory', 'from-memory_runtime'], 'the delete took the item away');
    const gone = await client.store.getItem(ns, 'from-client').catch((e) => e.status);
    assert.ok(gone === null || gone === 404, `the deleted item is gone: ${JSON.stringify(gone)}`);
    const search = await client.store.searchItems(ns);
    assert.equal(search.items.length, 2);
    // LangGraph 1.7's AsyncBatchedStore, which wraps every graph's store, has no listNamespaces
    // (under the reference server too): the worker's store itself has it.
    const listed = await client.runs.wait(null, 'memory', { input: { ops: [{ op: 'namespaces', prefix: [ns[0]] }] } });
    assert.match(listed.error?.message ?? '', /batch. method is not implemented on .AsyncBatchedStore/);
  });

  test('relays on a real Redis client: the appends of one tick go in one pipeline, each lands in its own thread in order, a fenced one fails its run only', async () => {
    const ioredis = new Redis(s.redis.url);
    try {
      let pipelines = 0;
      const pipeline = ioredis.pipeline.bind(ioredis);
      ioredis.pipeline = (...a) => { pipelines++; return pipeline(...a); };
      const threads = [randomUUID(), randomUUID(), randomUUID()];
      const relays = threads.map((thread, i) => new Relay({ redis: ioredis, thread, assistant: 'g', runId: `r${i}`, log: () => {},
        appendOpts: i === 2 ? ['FENCE', 'a-worker-that-holds-no-lock'] : [] }));
      const ev = (i) => ({ method: 'custom', params: { namespace: [], data: { i } } });
      for (const r of relays) { r.started(); await r.push(ev(1)); await r.push(ev(2)); }
      const outcomes = await Promise.allSettled(relays.map((r) => r.settle()));
      assert.equal(pipelines, 1, 'one pipeline for the three runs');
      assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'fulfilled', 'rejected']);
      assert.match(String(outcomes[2].reason?.message), /FENCED/);
      for (const [k, thread] of threads.entries()) {
        const entries = await ioredis.xrange(`tc:{${thread}}:events`, '-', '+');
        const got = entries.map(([, f]) => JSON.parse(f[f.indexOf('e') + 1])).map((e) => e.method === 'custom' ? e.params.data.i : e.params.data.event);
        assert.deepEqual(got, k === 2 ? [] : ['started', 1, 2], `thread ${k}`);
      }
    } finally {
      ioredis.disconnect();
    }
  });

  test('the worker\'s store on its own: one round trip per batch, reads before writes, listNamespaces, errors', async () => {
    const ioredis = new Redis(s.redis.url);
    try {
      const store = new ThreadcastStore({ client: ioredis });
      const ns = ['direct', randomUUID().slice(0, 8)];
      await store.put(ns, 'a', { v: 1 });
      const [before, , absent] = await store.batch([
        { namespace: ns, key: 'a' },
        { namespace: ns, key: 'a', value: { v: 2 } },
        { namespace: ns, key: 'b' },
        { namespace: ns, key: 'a', value: { v: 3 } },
        { namespace: [...ns, 'deeper'], key: 'c', value: { v: 4 } },
      ]);
      assert.deepEqual(before.value, { v: 1 }, 'a batch\'s reads see the store as it was');
      assert.equal(absent, null);
      assert.deepEqual((await store.get(ns, 'a')).value, { v: 3 }, 'the last write of a key wins');
      assert.ok((await store.get(ns, 'a')).createdAt instanceof Date);
      assert.deepEqual(await store.listNamespaces({ prefix: ns }), [ns, [...ns, 'deeper']]);
      assert.deepEqual(await store.listNamespaces({ prefix: ns, maxDepth: 2 }), [ns]);
      assert.deepEqual(await store.listNamespaces({ prefix: ['direct', '*'], suffix: ['deeper'] }), [[...ns, 'deeper']]);
      assert.deepEqual((await store.search(ns, { filter: { v: 4 } })).map((i) => [i.key, i.score]), [['c', undefined]]);
      await store.delete(ns, 'a');
      assert.equal(await store.get(ns, 'a'), null);
      assert.deepEqual((await client.store.searchItems(ns)).items.map((i) => i.key), ['c'], 'the REST store agrees');
      await assert.rejects(store.search(ns, { limit: 0 }), { name: 'StoreError', status: 422, message: 'limit must be an integer from 1 to 1000' });
      await assert.rejects(store.put(ns, '', { v: 1 }), { name: 'StoreError', message: 'key must not be empty' });
    } finally {
      ioredis.disconnect();
    }
  });

  test('the store\'s limits and errors are the REST API\'s: a graph gets them as exceptions', async () => {
    const ns = ['graph-env-limits'];
    const fails = async (op) => (await client.runs.wait(null, 'memory', { input: { ops: [op] } })).error;
    assert.deepEqual(await fails({ op: 'put', namespace: ns, key: 'big', repeat: 1048576 }),
      { name: 'StoreError', message: 'value is 1048584 bytes of JSON; the limit is 1048576' });
    assert.deepEqual(await fails({ op: 'put', namespace: ns, key: 'k'.repeat(1025), value: { a: 1 } }),
      { name: 'StoreError', message: 'key is 1025 bytes; the limit is 1024' });
    assert.deepEqual(await fails({ op: 'search', namespace: ns, limit: 1001 }),
      { name: 'StoreError', message: 'limit must be an integer from 1 to 1000' });
    assert.equal((await fails({ op: 'put', namespace: ['a.b'], key: 'k', value: { a: 1 } })).name, 'InvalidNamespaceError');
    assert.equal((await fails({ op: 'get', namespace: ['a.b'], key: 'k' })).name, 'InvalidNamespaceError');
    assert.equal(await client.store.getItem(ns, 'big'), null, 'nothing was written');
  });

  test('the SDK logger: a graph that asks for it as it is imported loads, and its lines are the worker\'s log lines', async () => {
    for (const w of s.workers) assert.ok(w.logs.some((l) => l.msg === 'env-graphs loaded' && l.source === 'graph' && l.graphs === 6), w.stderr);
    await client.runs.wait(null, 'logs', { input: { question: 'who speaks?' } });
    await waitUntil(() => s.workers.some((w) => w.logs.some((l) => l.msg === 'a graph speaks' && l.level === 'warn' && l.question === 'who speaks?')),
      5000, 'the graph\'s log line');
    assert.ok(s.workers.some((w) => w.logs.some((l) => l.msg === 'from a child' && l.part === 'child' && l.n === 2)));
  });

  test('after_seconds: a run starts no earlier than asked; state updates are refused while it waits; cancelled then, it never runs', async () => {
    const thread = (await client.threads.create()).thread_id;
    const t0 = Date.now();
    const run = await client.runs.create(thread, 'settings', { input: { question: 'later' }, afterSeconds: 2 });
    await sleep(800);
    assert.equal((await client.runs.get(thread, run.run_id)).status, 'pending');
    assert.deepEqual((await client.threads.getState(thread)).values, {}, 'nothing ran yet');
    const refused = await statusOf(client.threads.updateState(thread, { values: { question: 'meanwhile' }, asNode: 'look' }));
    assert.equal(refused, 409, 'an update while a run is pending is refused, as the reference refuses it');
    const out = await client.runs.join(thread, run.run_id);
    assert.ok(Date.now() - t0 >= 2000, `ran after ${Date.now() - t0} ms`);
    assert.equal(out.question, 'later');
    const history = await client.threads.getHistory(thread);
    assert.ok(Date.parse(history.at(-1).created_at) - Date.parse(run.created_at) >= 1900, 'its first checkpoint is 2 s after the run was created');

    const other = (await client.threads.create()).thread_id;
    const delayed = await client.runs.create(other, 'settings', { input: { question: 'never' }, afterSeconds: 5 });
    await sleep(300);
    await client.runs.cancel(other, delayed.run_id);
    await waitUntil(async () => (await client.runs.get(other, delayed.run_id)).status === 'interrupted', 4000, 'the waiting run interrupted');
    assert.equal((await client.threads.get(other)).status, 'idle');
    await sleep(5000);
    assert.deepEqual(await client.threads.getHistory(other), [], 'it never ran');
  });

  test('a graph that throws: the run is "error" with the exception\'s class and message, the thread "error"', async () => {
    const thread = (await client.threads.create()).thread_id;
    const run = await client.runs.create(thread, 'settings', { input: { question: 'fail' } });
    await client.runs.join(thread, run.run_id);
    assert.equal((await client.runs.get(thread, run.run_id)).status, 'error');
    const t = await client.threads.get(thread);
    assert.equal(t.status, 'error', 'not "interrupted": the node that failed is no interrupt');
    assert.deepEqual(t.error, { error: 'CustomError', message: 'the graph failed on purpose' });
    assert.deepEqual(t.interrupts, {});
    const parts = [];
    for await (const p of client.runs.joinStream(thread, run.run_id, { lastEventId: '-1' })) parts.push(p);
    const err = parts.find((p) => p.event === 'error');
    assert.ok(err, JSON.stringify(parts.map((p) => p.event)));
    assert.match(JSON.stringify(err.data), /the graph failed on purpose/);
  });

  test('threads.create with supersteps writes them as the thread\'s history, as the run it copies wrote it', async () => {
    const thread = (await client.threads.create()).thread_id;
    const parts = [];
    for await (const p of client.runs.stream(thread, 'settings', { input: { question: 'copied' }, streamMode: ['updates'] })) parts.push(p);
    const history = await client.threads.getHistory(thread);
    const clone = await client.threads.create({ graphId: 'settings', supersteps: [
      { updates: [{ asNode: '__input__', values: history.at(-2).values }] },
      { updates: [{ asNode: '__start__', values: history.at(-2).values }] },
      ...parts.filter((p) => p.event === 'updates').map(({ data }) => ({ updates: Object.entries(data).map(([asNode, values]) => ({ asNode, values })) })),
    ] });
    assert.equal(clone.metadata.graph_id, 'settings');
    const copied = await client.threads.getHistory(clone.thread_id);
    assert.deepEqual(copied.map(({ next, values }) => ({ next, values })), history.map(({ next, values }) => ({ next, values })));

    assert.equal(await statusOf(client.threads.create({ supersteps: [{ updates: [{ asNode: '__input__', values: {} }] }] })), 400,
      'supersteps need the thread\'s graph (Thread <id> has no graph ID)');
    assert.equal(await statusOf(client.threads.create({ graphId: 'settings', supersteps: [{ updates: [] }] })), 422);
    assert.equal(await statusOf(client.threads.create({ graphId: 'settings', supersteps: [{ updates: [{ asNode: 'nowhere', values: {} }] }] })), 422);
  });

  test('a chat model\'s answer stays a string in the state: the graph that loops until content === "end" ends',
    async () => {
      const out = await client.runs.wait(null, 'chat', { input: { messages: [{ role: 'user', content: 'hi' }] }, config: { recursion_limit: 10 } });
      assert.deepEqual(out.messages.map((m) => m.content), ['hi', 'begin', 'end']);
    });

  test('schemas as the reference server gives them: a TypeScript graph\'s types read from its source, a zod graph\'s registry extras', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tc-schemas-'));
    try {
      // The project's packages, as a langgraph.json project has them beside its graphs.
      symlinkSync(path.join(here, '../../src/worker/node_modules'), path.join(dir, 'node_modules'));
      writeFileSync(path.join(dir, 'graphs.mts'), `
        import { Annotation, StateGraph, START, END } from '@langchain/langgraph';
        import { withLangGraph } from '@langchain/langgraph/zod';
        import { z } from 'zod/v3';
        const State = Annotation.Root({ topic: Annotation<string>, votes: Annotation<number[]> });
        const Config = Annotation.Root({ tier: Annotation<'free' | 'pro'> });
        export const typed = new StateGraph(State, Config)
          .addNode('vote', () => ({ votes: [1] })).addEdge(START, 'vote').addEdge('vote', END).compile();
        const Registered = z.object({
          lines: withLangGraph(z.array(z.string()), { reducer: { schema: z.string(), fn: (a: string[], b: string) => [...a, b] },
            default: () => [], jsonSchemaExtra: { langgraph_type: 'messages' } }),
          n: z.number().default(0),
        });
        export const registered = new StateGraph(Registered)
          .addNode('count', () => ({ n: 1 })).addEdge(START, 'count').addEdge('count', END).compile();
      `);
      writeFileSync(path.join(dir, 'langgraph.json'), JSON.stringify({ graphs: { ts_typed: './graphs.mts:typed', ts_registered: './graphs.mts:registered' } }));
      const tsx = path.join(here, '../../src/worker/node_modules/tsx/dist/loader.mjs');
      const w = await startWorker(s.redis.url, { name: 'schemas-w', args: ['--config', path.join(dir, 'langgraph.json')],
        // It reads the sources' types before it registers (seconds; more on a busy machine).
        env: { NODE_OPTIONS: `--import ${pathToFileURL(tsx).href}` }, readyMs: 90000 });
      try {
        assert.ok(w.logs.some((l) => l.msg === 'graph schemas read from their sources' && l.graphs.includes('ts_typed')), w.stderr);
        const typed = await client.assistants.getSchemas((await client.assistants.search({ graphId: 'ts_typed' }))[0].assistant_id);
        assert.deepEqual(typed.state_schema.properties.topic, { type: 'string' });
        assert.deepEqual(typed.state_schema.properties.votes, { type: 'array', items: { type: 'number' } });
        assert.deepEqual(typed.config_schema.properties.tier.enum?.sort(), ['free', 'pro'], JSON.stringify(typed.config_schema));
        assert.deepEqual(typed.context_schema, typed.config_schema, 'as the reference: one schema for both');
        const registered = await client.assistants.getSchemas((await client.assistants.search({ graphId: 'ts_registered' }))[0].assistant_id);
        assert.equal(registered.state_schema.properties.lines.langgraph_type, 'messages', JSON.stringify(registered.state_schema));
        assert.deepEqual(registered.state_schema.properties.n, { type: 'number', default: 0 });
      } finally {
        await w.kill('SIGTERM');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('langgraph.json: its graphs ("./file:export"), its env (a .env file) and LANGGRAPH_CONFIG; what it cannot serve is named', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tc-lgjson-'));
    try {
      writeFileSync(path.join(dir, 'graph.mjs'), `
        const { StateGraph, Annotation, START, END } = await import(${JSON.stringify(lgUrl)});
        const S = Annotation.Root({ out: Annotation() });
        const C = Annotation.Root({ voice: Annotation() });
        const build = (name) => new StateGraph(S, C)
          .addNode(name, (_s, config) => ({ out: { voice: config.context?.voice ?? null, greeting: config.configurable?.greeting ?? null,
            env: process.env.TC_FROM_DOTENV ?? null } }))
          .addEdge(START, name).addEdge(name, END);
        export const compiled = build('speak').compile();
        export default (config) => build(config.configurable?.node ?? 'factory_default');
      `);
      writeFileSync(path.join(dir, '.env'), `TC_FROM_DOTENV=from the env file\nLANGGRAPH_CONFIG='${JSON.stringify({
        cfg_speak: { configurable: { greeting: 'hello' }, context: { voice: 'calm' } } })}'\n`);
      writeFileSync(path.join(dir, 'langgraph.json'), JSON.stringify({
        node_version: '20', graphs: { cfg_speak: './graph.mjs:compiled', cfg_factory: { path: './graph.mjs' } },
        env: '.env', ui: { x: './ui.tsx' }, http: { app: './http.mts:app' } }));
      const w = await startWorker(s.redis.url, { name: 'cfg-w', args: ['--config', path.join(dir, 'langgraph.json')] });
      try {
        assert.ok(w.logs.some((l) => l.level === 'warn' && /not served by this worker/.test(l.msg) && JSON.stringify(l.keys) === '["ui","http"]'), w.stderr);
        const out = (await client.runs.wait(null, 'cfg_speak', { input: {} })).out;
        assert.deepEqual(out, { voice: 'calm', greeting: 'hello', env: 'from the env file' });
        const mine = (await client.runs.wait(null, 'cfg_speak', { input: {}, context: { voice: 'loud' } })).out;
        assert.equal(mine.voice, 'loud');
        const parts = [];
        for await (const p of client.runs.stream(null, 'cfg_factory', { input: {}, config: { configurable: { node: 'built' } }, streamMode: ['updates'] })) parts.push(p);
        assert.deepEqual(parts.filter((p) => p.event === 'updates').flatMap((p) => Object.keys(p.data)), ['built']);
        const listed = (await client.assistants.search({ limit: 100 })).map((a) => a.graph_id);
        assert.ok(listed.includes('cfg_speak') && listed.includes('cfg_factory'), listed.join());
        const system = (await client.assistants.search({ graphId: 'cfg_speak' }))[0];
        assert.deepEqual({ created_by: system.metadata.created_by, config: system.config, context: system.context },
          { created_by: 'system', config: { configurable: { greeting: 'hello' } }, context: { voice: 'calm' } },
          'the graph\'s system assistant has its LANGGRAPH_CONFIG defaults');
      } finally {
        await w.kill('SIGTERM');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
