// threadcast's LangGraph worker: runs @langchain/langgraph graphs for the
// runtime commands browsers send through threadcast, and appends what the
// graphs emit to the threads' event streams.
//
//   import { serve } from './worker.js';
//   const worker = await serve({ redis: 'redis://127.0.0.1:6379', graphs: { agent: builder() } });
//   …
//   await worker.close();
//
// The contract it implements is protocol/README.md's "Worker contract" and
// "The LangGraph worker": per-assistant command streams with a consumer
// group, a registry with heartbeats (so a gateway refuses at once a command
// no live worker can take), answers on the gateway's reply channel, events
// through FCALL threadcast_append_batch, and checkpoints on the same Redis
// (checkpoint.js). Runs of one thread never overlap, on any number of
// workers: a lock per thread, held by the worker running it.
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { Command, isUnknownInterruptError } from '@langchain/langgraph';
import { KEEP, ProtocolError, answer, success } from './answers.js';
import { WorkerSaver } from './checkpoint.js';
import { Relay, closeMessage, openMessages, plain } from './relay.js';
import { HISTORY_MAX, emptyState, graphJson, graphSchemas, threadState, truthy } from './rest.js';
import { startRestRun } from './rest-runs.js';
import { cancelRun, inject, pendingInterrupts, runGraph, startRun, withIds } from './runs.js';
import { GROUP, keys } from './keys.js';
import { acquire, claimThread, defineScripts, forward, headOf, loadInput, markCancel, release } from './lock.js';

export { keys };

/** Methods that start (or continue) a run: acknowledged when the run is over. */
const RUNS = new Set(['run.start', 'input.respond', 'state.fork', 'rest.run']);

function defaultLog(level, msg, fields = {}) {
  process.stderr.write(`${JSON.stringify({ ts: new Date().toISOString(), level, msg, ...fields })}\n`);
}

/** The function library, for a Redis that has not loaded it yet (no gateway started). */
function functionSource() {
  for (const p of [process.env.THREADCAST_FUNCTION, new URL('../../protocol/redis/threadcast.lua', import.meta.url).pathname,
    new URL('./threadcast.lua', import.meta.url).pathname]) {
    if (p && existsSync(p)) return readFileSync(p, 'utf8');
  }
  return null;
}

/**
 * Starts a worker. Options:
 *   redis      URL (default $THREADCAST_REDIS_URL or redis://127.0.0.1:6379)
 *   graphs     { <assistant id>: a StateGraph (compiled here) or a compiled graph }
 *   name       consumer name (default <host>-<pid>-<random>)
 *   log        (level, msg, fields) → void (default JSON lines on stderr)
 *   heartbeatMs, liveMs   registry heartbeat and how long one counts (3 s, 10 s)
 *   claimIdleMs           entries idle this long are claimed from dead workers (10 s)
 *   lockMs                the thread lock's lease (10 s, renewed while running)
 *   ttlSeconds            checkpoints expire this long after a thread's last write (none)
 * Resolves once it is registered and reading; close() stops it.
 */
export async function serve(opts = {}) {
  const url = opts.redis ?? process.env.THREADCAST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const log = opts.log ?? defaultLog;
  const name = opts.name ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const heartbeatMs = opts.heartbeatMs ?? 3000;
  const liveMs = opts.liveMs ?? 10000;
  const claimIdleMs = opts.claimIdleMs ?? 10000;
  const lockMs = opts.lockMs ?? 10000;
  const redisOpts = { maxRetriesPerRequest: null, enableAutoPipelining: false, lazyConnect: true };
  const cmd = new Redis(url, redisOpts);
  const block = new Redis(url, redisOpts);     // XREADGROUP … BLOCK
  const sub = new Redis(url, redisOpts);       // the control channel
  for (const c of [cmd, block, sub]) c.on('error', (e) => log('warn', 'redis', { error: e.message }));
  await Promise.all([cmd.connect(), block.connect(), sub.connect()]);

  defineScripts(cmd);

  const running = new Map();   // thread → the run this worker is running on it
  const restRunOf = (thread) => {
    const ctl = running.get(thread);
    return ctl?.rest ? ctl : null;
  };
  const saver = new WorkerSaver({ client: cmd, ttlSeconds: opts.ttlSeconds }, restRunOf);
  /** The worker's shared state, which the other modules' functions take first. */
  const w = { log, name, lockMs, cmd, running, saver, waiting: new Map(), closing: false };
  const graphs = new Map();
  for (const [assistant, g] of Object.entries(opts.graphs ?? {})) {
    if (!/^[\x21-\x7e]{1,128}$/.test(assistant) || assistant === '*') throw new Error(`bad assistant id "${assistant}"`);
    let compiled = g;
    if (typeof g.compile === 'function' && typeof g.streamEvents !== 'function') compiled = g.compile({ checkpointer: saver, name: assistant });
    else compiled.checkpointer = saver;
    compiled.subgraphPaths = new Set();
    for await (const [path] of compiled.getSubgraphsAsync(undefined, true)) compiled.subgraphPaths.add(path);
    graphs.set(assistant, compiled);
  }
  if (!graphs.size) throw new Error('serve() needs at least one graph');
  w.graphs = graphs;
  const assistants = [...graphs.keys()];
  const streams = assistants.map(keys.stream);
  const assistantOf = new Map(assistants.map((a) => [keys.stream(a), a]));

  // The function library: a worker may start before any gateway loaded it.
  const libs = await cmd.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'threadcast');
  if (!libs.length) {
    const src = functionSource();
    if (!src) throw new Error('threadcast\'s Redis functions are not loaded and protocol/redis/threadcast.lua was not found');
    await cmd.call('FUNCTION', 'LOAD', 'REPLACE', src);
  }
  for (const s of streams) {
    try {
      await cmd.xgroup('CREATE', s, GROUP, '0', 'MKSTREAM');
    } catch (e) {
      if (!/BUSYGROUP/.test(e.message)) throw e;
    }
  }

  const { waiting } = w;       // REST run id → a run waiting for its thread here
  const inflight = new Map();  // `${stream} ${id}` → { stream, id } while handled

  // What the REST API shows of each assistant (assistants.get, /graph, /schemas).
  for (const [assistant, graph] of graphs) {
    const info = { name: assistant, graph: '{}', schemas: JSON.stringify({ graph_id: assistant, input_schema: null, output_schema: null,
      state_schema: null, config_schema: null, context_schema: null }) };
    try {
      info.graph = JSON.stringify(await graphJson(graph));
      info.schemas = JSON.stringify(await graphSchemas(assistant, graph));
    } catch (e) {
      log('warn', 'cannot describe the graph for the REST API', { assistant, error: String(e.message ?? e) });
    }
    await cmd.multi().hset(keys.ainfo(assistant), info).hsetnx(keys.ainfo(assistant), 'created_at', new Date().toISOString()).exec();
  }

  const register = () => Promise.all(assistants.map((a) =>
    cmd.call('FCALL', 'threadcast_register', 2, keys.workers(a), keys.assistants, a, name, liveMs)));
  await register();

  /* ---- commands ------------------------------------------------------------------------------ */

  /** The checkpoint a REST state command names ({checkpoint_id}, {checkpoint: {…}}), as configurable. */
  function checkpointParams(thread, p) {
    const c = { thread_id: thread, checkpoint_ns: '' };
    if (p.checkpoint != null) {
      if (typeof p.checkpoint !== 'object' || Array.isArray(p.checkpoint)) throw new ProtocolError('invalid_argument', 'checkpoint must be an object');
      for (const k of ['checkpoint_id', 'checkpoint_ns']) {
        const v = p.checkpoint[k];
        if (v == null) continue;
        if (typeof v !== 'string') throw new ProtocolError('invalid_argument', `checkpoint.${k} must be a string`);
        c[k] = v;
      }
      if (p.checkpoint.checkpoint_map != null) c.checkpoint_map = p.checkpoint.checkpoint_map;
    }
    if (p.checkpoint_id != null) {
      if (typeof p.checkpoint_id !== 'string') throw new ProtocolError('invalid_argument', 'checkpoint_id must be a string');
      c.checkpoint_id = p.checkpoint_id;
    }
    if (c.checkpoint_id === '') delete c.checkpoint_id;
    return c;
  }

  const noCheckpoint = (c) => new ProtocolError('no_such_checkpoint',
    `thread "${c.thread_id}" has no checkpoint "${c.checkpoint_id}"${c.checkpoint_ns ? ` at namespace "${c.checkpoint_ns}"` : ''}`);

  const handlers = {
    async 'rest.run'(entry, p) {
      const ctl = await startRestRun(w, entry, p);
      if (ctl === KEEP || !ctl) return ctl;
      await runGraph(w, ctl);
      return undefined;
    },

    async 'rest.cancel'(entry, p) {
      const thread = entry.thread;
      const action = p.action ?? 'interrupt';
      if (typeof p.run_id !== 'string' || (action !== 'interrupt' && action !== 'rollback')) {
        log('warn', 'rest.cancel needs a run_id and an action interrupt or rollback', { thread, params: JSON.stringify(p).slice(0, 200) });
        return;
      }
      const wait = waiting.get(p.run_id);
      if (wait) {
        wait.cancelAction = action;
        return;
      }
      const local = running.get(thread);
      if (local?.runId === p.run_id) {
        cancelRun(local, action);
        return;
      }
      // Kept in the run's record, for a worker that takes the run over; then told to the lock's owner.
      const marked = await markCancel(w, thread, p.run_id, action);
      if (await forward(w, thread, { op: 'cancel', run_id: p.run_id, action })) return;
      if (marked < 0) log('info', 'rest.cancel for a run that is not running', { thread, run_id: p.run_id });
    },

    async 'rest.state.get'(entry, p) {
      const graph = graphs.get(entry.assistant);
      const configurable = checkpointParams(entry.thread, p);
      if (!(await saver.getTuple({ configurable }))) {
        if (configurable.checkpoint_id) throw noCheckpoint(configurable);
        return success(w, entry, emptyState());
      }
      const snap = await graph.getState({ configurable }, { subgraphs: truthy(p.subgraphs) });
      return success(w, entry, threadState(snap));
    },

    async 'rest.state.update'(entry, p) {
      const thread = entry.thread;
      const graph = graphs.get(entry.assistant);
      if (p.values != null && typeof p.values !== 'object') throw new ProtocolError('invalid_argument', 'values must be an object, a list of objects or null');
      if (p.as_node != null && typeof p.as_node !== 'string') throw new ProtocolError('invalid_argument', 'as_node must be a string');
      const configurable = checkpointParams(thread, p);
      await claimThread(w, thread);
      try {
        if (configurable.checkpoint_id && !(await saver.getTuple({ configurable }))) throw noCheckpoint(configurable);
        let next;
        try {
          next = await graph.updateState({ configurable }, p.values ?? null, p.as_node ?? undefined);
        } catch (e) {
          if (/InvalidUpdate|Value|Empty/.test(e.name ?? '')) throw new ProtocolError('invalid_argument', `cannot update the state: ${e.message}`);
          throw e;
        }
        const c = next.configurable ?? {};
        return success(w, entry, { checkpoint: { thread_id: thread, checkpoint_ns: c.checkpoint_ns ?? '', checkpoint_id: c.checkpoint_id,
          ...(c.checkpoint_map ? { checkpoint_map: plain(c.checkpoint_map) } : {}) } });
      } finally {
        await release(w, thread);
      }
    },

    async 'rest.history'(entry, p) {
      const graph = graphs.get(entry.assistant);
      const limit = p.limit == null ? 10 : Number(p.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > HISTORY_MAX) {
        throw new ProtocolError('invalid_argument', `limit must be an integer from 1 to ${HISTORY_MAX} (got ${JSON.stringify(p.limit)})`);
      }
      let before;
      if (typeof p.before === 'string' && p.before) before = { configurable: { checkpoint_id: p.before } };
      else if (p.before != null && typeof p.before === 'object') {
        const id = p.before.configurable?.checkpoint_id ?? p.before.checkpoint_id;
        if (typeof id !== 'string') throw new ProtocolError('invalid_argument', 'before must be a checkpoint id or a config naming configurable.checkpoint_id');
        before = { configurable: { checkpoint_id: id } };
      } else if (p.before != null) throw new ProtocolError('invalid_argument', 'before must be a checkpoint id or a config');
      if (p.metadata != null && (typeof p.metadata !== 'object' || Array.isArray(p.metadata))) throw new ProtocolError('invalid_argument', 'metadata must be an object');
      const configurable = checkpointParams(entry.thread, p);
      const states = [];
      for await (const s of graph.getStateHistory({ configurable }, { limit, ...(before ? { before } : {}), ...(p.metadata ? { filter: p.metadata } : {}) })) {
        states.push(threadState(s));
      }
      return success(w, entry, states);
    },

    async 'rest.copy'(entry, p) {
      const to = p.new_thread_id;
      if (typeof to !== 'string' || !/^[A-Za-z0-9._:-]{1,128}$/.test(to)) {
        throw new ProtocolError('invalid_argument', 'new_thread_id must be a thread id ([A-Za-z0-9._:-]{1,128})');
      }
      if (to === entry.thread) throw new ProtocolError('invalid_argument', 'new_thread_id is the thread itself');
      const from = saver.threadKeys(entry.thread);
      const into = saver.threadKeys(to);
      const names = Object.keys(from);
      // One consistent read of the five keys (one slot), one write of the copies (the other's).
      const read = cmd.multi();
      for (const k of names) read.dumpBuffer(from[k]).pttl(from[k]);
      const got = (await read.exec()).map(([err, v]) => {
        if (err) throw err;
        return v;
      });
      const write = cmd.multi();
      names.forEach((k, i) => {
        const [dump, ttl] = [got[2 * i], got[2 * i + 1]];
        if (dump === null) write.del(into[k]);
        else write.restore(into[k], ttl > 0 ? ttl : 0, dump, 'REPLACE');
      });
      for (const [err] of await write.exec()) if (err) throw err;
      return success(w, entry, {});
    },

    async 'run.start'(entry, p) {
      const thread = entry.thread;
      const message = typeof p.input === 'string' ? { role: 'user', content: p.input } : p.input?.messages?.at?.(-1) ?? p.input;
      let local = running.get(thread);
      if (local?.over) { // its end is out: a new run, once this one is gone
        await local.settled;
        local = running.get(thread);
      }
      if (local) { // CDDL 4a: input for an active run is injected into it
        inject(local, message ?? {});
        return success(w, entry, { run_id: local.runId });
      }
      if (await forward(w, thread, { op: 'inject', message })) {
        return success(w, entry, { run_id: await cmd.hget(keys.run(thread), 'run_id') });
      }
      await claimThread(w, thread);
      try {
        const graph = graphs.get(entry.assistant);
        const configurable = { ...(p.config?.configurable ?? {}) };
        delete configurable.thread_id;
        const cfg = { configurable: { thread_id: thread } };
        if (configurable.checkpoint_id) {
          const found = await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '', checkpoint_id: configurable.checkpoint_id } });
          if (!found) throw new ProtocolError('no_such_checkpoint', `thread "${thread}" has no checkpoint "${configurable.checkpoint_id}"`);
          const { input, humans } = withIds(p.input ?? null);
          return await startRun(w, entry, { thread, assistant: entry.assistant, input, configurable, metadata: p.metadata, humans });
        }
        const pending = pendingInterrupts(await graph.getState(cfg));
        if (pending.length) { // an interrupted run: the input answers it
          const resume = Object.fromEntries(pending.map((i) => [i.id, p.input]));
          return await startRun(w, entry, { thread, assistant: entry.assistant, input: new Command({ resume }), configurable, metadata: p.metadata, answered: pending.map((i) => i.id) });
        }
        const { input, humans } = withIds(p.input);
        return await startRun(w, entry, { thread, assistant: entry.assistant, input, configurable, metadata: p.metadata, humans });
      } catch (e) {
        if (!running.has(thread)) await release(w, thread);
        throw e;
      }
    },

    async 'input.respond'(entry, p) {
      const thread = entry.thread;
      const responses = p.responses ?? [{ namespace: p.namespace, interrupt_id: p.interrupt_id, response: p.response }];
      await claimThread(w, thread);
      try {
        const assistant = entry.assistant;
        const graph = graphs.get(assistant);
        const pending = pendingInterrupts(await graph.getState({ configurable: { thread_id: thread } }));
        for (const r of responses) {
          if (!pending.some((i) => i.id === r.interrupt_id)) {
            throw new ProtocolError('no_such_interrupt', `no interrupt "${r.interrupt_id}" is waiting for an answer on thread "${thread}"`);
          }
        }
        const resume = Object.fromEntries(responses.map((r) => [r.interrupt_id, r.response]));
        const input = new Command({ resume, ...(p.update ? { update: p.update } : {}), ...(p.goto ? { goto: p.goto } : {}) });
        return await startRun(w, entry, { thread, assistant, input, configurable: { ...(p.config?.configurable ?? {}) }, metadata: p.metadata,
          answered: responses.map((r) => r.interrupt_id), result: () => ({}) });
      } catch (e) {
        if (!running.has(thread)) await release(w, thread);
        if (isUnknownInterruptError(e)) throw new ProtocolError('no_such_interrupt', e.message);
        throw e;
      }
    },

    async 'input.inject'(entry, p) {
      const local = running.get(entry.thread);
      if (local && !local.over) inject(local, p.message ?? {});
      else if (!(await forward(w, entry.thread, { op: 'inject', message: p.message }))) {
        throw new ProtocolError('no_such_run', `no run is active on thread "${entry.thread}" to inject into`);
      }
      return success(w, entry, {});
    },

    async 'run.cancel'(entry) {
      const local = running.get(entry.thread);
      if (local && !local.over) {
        cancelRun(local);
      } else if (!(await forward(w, entry.thread, { op: 'cancel' }))) {
        throw new ProtocolError('no_such_run', `no run is active on thread "${entry.thread}"`);
      }
      return success(w, entry, {});
    },

    async 'state.get'(entry, p) {
      const ns = (p.namespace ?? []).join('|');
      const graph = graphs.get(entry.assistant);
      const cfg = { configurable: { thread_id: entry.thread, checkpoint_ns: ns } };
      if (!(await saver.getTuple(cfg))) {
        if (ns) throw new ProtocolError('no_such_namespace', `thread "${entry.thread}" has no state at namespace ${JSON.stringify(p.namespace)}`);
        return success(w, entry, { values: {} });
      }
      const st = await graph.getState(cfg);
      let values = plain(st.values) ?? {};
      if (Array.isArray(p.keys)) values = Object.fromEntries(p.keys.filter((k) => k in values).map((k) => [k, values[k]]));
      return success(w, entry, { values, checkpoint: { id: st.config.configurable.checkpoint_id, ns } });
    },

    async 'state.listCheckpoints'(entry, p) {
      const graph = graphs.get(entry.assistant);
      const limit = Math.min(Math.max(Number.isInteger(p.limit) ? p.limit : 20, 1), 200);
      const cfg = { configurable: { thread_id: entry.thread, checkpoint_ns: (p.namespace ?? []).join('|') } };
      const page = [];
      // One more than asked: a checkpoint's node is what its parent had next.
      for await (const s of graph.getStateHistory(cfg, { limit: limit + 1, ...(p.before ? { before: { configurable: { checkpoint_id: p.before } } } : {}) })) page.push(s);
      const checkpoints = page.slice(0, limit).map((s, i) => {
        const c = { id: s.config.configurable.checkpoint_id, timestamp: s.createdAt, step: Math.max(0, s.metadata?.step ?? 0), metadata: plain(s.metadata) };
        const parent = page[i + 1];
        if (parent?.next?.length) c.node_name = parent.next.join(',');
        else if (s.metadata?.source === 'input') c.node_name = '__input__';
        return c;
      });
      return success(w, entry, { checkpoints });
    },

    async 'state.fork'(entry, p) {
      const thread = entry.thread;
      await claimThread(w, thread);
      try {
        const found = await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '', checkpoint_id: p.checkpoint_id } });
        if (!found) throw new ProtocolError('no_such_checkpoint', `thread "${thread}" has no checkpoint "${p.checkpoint_id}"`);
        const configurable = { ...(p.config?.configurable ?? {}), checkpoint_id: p.checkpoint_id };
        delete configurable.thread_id;
        const { input, humans } = withIds(p.input ?? null);
        // LangGraph forks on the same thread: the fork becomes the thread's head.
        return await startRun(w, entry, { thread, assistant: entry.assistant, input, configurable, humans, result: (r) => ({ ...r, thread_id: thread }) });
      } catch (e) {
        if (!running.has(thread)) await release(w, thread);
        throw e;
      }
    },
  };

  /**
   * A run-starting command claimed from a worker that died: its run goes on
   * from the last checkpoint (or from the start, when none was written).
   * What the client sees is in protocol/README.md ("When a worker dies").
   */
  async function takeOver(entry, record) {
    const thread = entry.thread;
    if (!(await acquire(w, thread, lockMs + 5000))) {
      log('warn', 'cannot take over a run yet: the thread stays locked', { thread, run_id: record.run_id });
      return KEEP;
    }
    const assistant = record.assistant;
    const graph = graphs.get(assistant);
    const relay = new Relay({ redis: cmd, thread, assistant, runId: record.run_id, log, appendOpts: ['ASSISTANT', assistant], subgraphs: graph.subgraphPaths });
    // Messages the dead worker left open are closed: their step runs again, under new ids.
    const runSeq = Number(await cmd.hget(keys.meta(thread), 'run_seq')) || 1;
    const rows = await cmd.xrange(keys.events(thread), `${runSeq}-0`, '+');
    const events = rows.map(([, f]) => JSON.parse(f[f.indexOf('e') + 1]));
    for (const m of openMessages(events)) relay.raw(closeMessage(m, 'the worker running this step stopped; the step runs again', 'worker_lost'));
    const head = await headOf(w, thread);
    const input = head === record.base ? loadInput(record.input) : null;
    const configurable = head === record.base ? JSON.parse(record.configurable || '{}') : {};
    log('info', 'taking over a run', { thread, run_id: record.run_id, from: head === record.base ? 'the start' : 'the last checkpoint' });
    const ctl = { thread, graph, assistant, runId: record.run_id, relay, input, configurable, injects: [], abort: new AbortController() };
    if (record.rest) { // a REST run: its id and options go on; a cancel that came while nobody ran it applies now
      const { options, metadata, dispose } = JSON.parse(record.rest);
      Object.assign(ctl, { rest: true, options, metadata, dispose, configurable: { ...configurable, run_id: record.run_id, assistant_id: assistant, graph_id: assistant } });
      if (record.cancel) cancelRun(ctl, record.cancel);
    }
    running.set(thread, ctl);
    await runGraph(w, ctl);
  }

  async function handle(stream, id, fields, claimed) {
    const f = {};
    for (let i = 0; i + 1 < (fields?.length ?? 0); i += 2) f[fields[i]] = fields[i + 1];
    const entry = { key: `${stream} ${id}`, thread: f.thread, method: f.method, corr: f.corr, reply: f.reply,
      assistant: assistantOf.get(stream) ?? null };
    if (!entry.thread || !entry.method) return; // deleted or malformed: acknowledged below
    if (claimed && RUNS.has(entry.method)) {
      const record = await cmd.hgetall(keys.run(entry.thread));
      if (record.entry === entry.key) {
        if (record.status === 'running' && graphs.has(record.assistant)) return takeOver(entry, record);
        return;
      }
    }
    if (Number(f.deadline) && Date.now() > Number(f.deadline)) return; // the gateway gave up
    let params;
    try {
      params = JSON.parse(f.params || '{}');
    } catch {
      return answer(w, entry, { type: 'error', error: 'invalid_argument', message: 'params is not JSON' });
    }
    if (!entry.assistant) { // a wildcard stream: serve it only with the graph the command names
      entry.assistant = params.assistant_id ?? await cmd.hget(keys.meta(entry.thread), 'assistant_id');
    }
    const h = handlers[entry.method];
    if (!h) return answer(w, entry, { type: 'error', error: 'unknown_command', message: `this worker does not handle ${entry.method}` });
    if (!graphs.has(entry.assistant)) {
      return answer(w, entry, { type: 'error', error: 'invalid_argument', message: `this worker does not serve assistant "${entry.assistant}"` });
    }
    try {
      return await h(entry, params);
    } catch (e) {
      if (e instanceof ProtocolError) return answer(w, entry, { type: 'error', error: e.code, message: e.message });
      log('error', 'command failed', { thread: entry.thread, method: entry.method, error: String(e.stack ?? e) });
      return answer(w, entry, { type: 'error', error: 'unknown_error', message: String(e.message ?? e) });
    }
  }

  function dispatch(stream, id, fields, claimed) {
    const k = `${stream} ${id}`;
    if (inflight.has(k)) return;
    inflight.set(k, { stream, id });
    handle(stream, id, fields, claimed)
      .catch((e) => log('error', 'command handling failed', { error: String(e.stack ?? e) }))
      .then(async (keep) => {
        inflight.delete(k);
        if (keep !== KEEP && !w.closing) await cmd.xack(stream, GROUP, id).catch(() => {});
      });
  }

  /* ---- loops ---------------------------------------------------------------------------------- */

  sub.on('message', (_ch, msg) => {
    let m;
    try {
      m = JSON.parse(msg);
    } catch {
      return;
    }
    const ctl = running.get(m.thread);
    if (!ctl || ctl.over) return;
    if (m.run_id && m.run_id !== ctl.runId) return; // a REST cancel for a run that is over
    if (m.op === 'inject') inject(ctl, m.message ?? {});
    if (m.op === 'cancel') cancelRun(ctl, m.action);
  });
  await sub.subscribe(keys.control(name));

  const reading = (async () => {
    while (!w.closing) {
      try {
        const res = await block.xreadgroup('GROUP', GROUP, name, 'COUNT', 16, 'BLOCK', 1000, 'STREAMS', ...streams, ...streams.map(() => '>'));
        for (const [stream, entries] of res ?? []) for (const [id, fields] of entries) dispatch(stream, id, fields, false);
      } catch (e) {
        if (w.closing) break;
        log('warn', 'reading commands', { error: e.message });
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  })();

  // Heartbeat: stay registered; keep the entries in hand from looking idle
  // (a long run is not a dead worker); take over what dead workers left.
  let beating = false;
  const beat = async () => {
    if (beating || w.closing) return;
    beating = true;
    try {
      await register();
      const mine = new Map();
      for (const { stream, id } of inflight.values()) mine.set(stream, [...(mine.get(stream) ?? []), id]);
      for (const [stream, ids] of mine) await cmd.xclaim(stream, GROUP, name, 0, ...ids, 'JUSTID');
      for (const stream of streams) {
        const [, entries] = await cmd.xautoclaim(stream, GROUP, name, claimIdleMs, '0-0', 'COUNT', 16);
        for (const [id, fields] of entries ?? []) {
          if (!fields) await cmd.xack(stream, GROUP, id);
          else dispatch(stream, id, fields, true);
        }
      }
    } catch (e) {
      log('warn', 'heartbeat', { error: e.message });
    } finally {
      beating = false;
    }
  };
  const timer = setInterval(beat, heartbeatMs);
  beat();
  log('info', 'worker ready', { name, assistants });

  return {
    name,
    assistants,
    running,
    graphs,
    saver,
    /**
     * Stops reading, leaves the registry, and waits up to graceMs for the
     * runs in hand; what is still running then is left to other workers.
     */
    async close({ graceMs = 10000 } = {}) {
      w.closing = true;
      clearInterval(timer);
      await Promise.all(assistants.map((a) => cmd.zrem(keys.workers(a), name).catch(() => {})));
      block.disconnect();
      await reading;
      const until = Date.now() + graceMs;
      while (inflight.size && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
      sub.disconnect();
      cmd.disconnect();
    },
  };
}
