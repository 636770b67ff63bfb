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
import { Command, RunControl, isGraphDrained, isUnknownInterruptError } from '@langchain/langgraph';
import { RedisSaver } from './checkpoint.js';
import { Relay, closeMessage, openMessages, plain } from './relay.js';

/* ---- the keys of the contract (protocol/README.md) ----------------------------------------- */

const GROUP = 'workers';
/** Registry and per-assistant streams share the slot of tc:commands (hash tag). */
export const keys = {
  commands: 'tc:commands',                          // wildcard workers (threadcast-agent)
  stream: (a) => `{tc:commands}:a:${a}`,            // commands for assistant a
  workers: (a) => `{tc:commands}:w:${a}`,           // its live workers: consumer → expiry (ms)
  assistants: '{tc:commands}:assistants',           // every assistant ever registered
  lock: (t) => `tc:{${t}}:lg:lock`,                 // the worker running the thread's run
  run: (t) => `tc:{${t}}:lg:run`,                   // that run: entry, id, status, input
  events: (t) => `tc:{${t}}:events`,
  meta: (t) => `tc:{${t}}:meta`,
  control: (consumer) => `tc:worker:${consumer}`,   // inject/cancel for runs this worker holds
};

/** handle()'s answer for an entry to leave pending (another worker, or a later try, takes it). */
const KEEP = Symbol('keep');

/** Methods that start (or continue) a run: acknowledged when the run is over. */
const RUNS = new Set(['run.start', 'input.respond', 'state.fork']);

class ProtocolError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

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

/** Interrupts waiting for an answer at the thread's head: [{ id, value }]. */
function pendingInterrupts(state) {
  const out = [];
  for (const t of state.tasks ?? []) {
    if (t.result !== undefined) continue;
    for (const i of t.interrupts ?? []) if (i.id && !out.some((o) => o.id === i.id)) out.push({ id: i.id, value: i.value });
  }
  return out;
}

/** Human messages of a run's input, each with an id (so the echo and the state agree). */
function withIds(input) {
  if (!input || typeof input !== 'object' || !Array.isArray(input.messages)) return { input, humans: [] };
  const messages = input.messages.map((m) => (m && typeof m === 'object' && !m.id && !m.lc ? { ...m, id: `msg-${randomUUID()}` } : m));
  const humans = messages.filter((m) => m && (m.role === 'user' || m.role === 'human' || m.type === 'human') && typeof m.content === 'string');
  return { input: { ...input, messages }, humans };
}

/** A whole message as `messages` events: how input and injected messages are shown. */
function wholeMessage(ns, node, role, id, text) {
  const ev = (data) => ({ method: 'messages', params: { namespace: ns, ...(node ? { node } : {}), data } });
  return [
    ev({ event: 'message-start', role, id }),
    ev({ event: 'content-block-start', index: 0, content: { type: 'text', text: '' } }),
    ev({ event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text } }),
    ev({ event: 'content-block-finish', index: 0, content: { type: 'text', text } }),
    ev({ event: 'message-finish', reason: 'stop' }),
  ];
}

/** How a run's input is kept in its record, to run it again after a crash. */
const saveInput = (input) => (input instanceof Command
  ? JSON.stringify({ command: { resume: input.resume, update: input.update, goto: input.goto } })
  : JSON.stringify({ input: input ?? null }));
const loadInput = (s) => {
  const o = JSON.parse(s);
  return o.command ? new Command(o.command) : o.input;
};

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

  cmd.defineCommand('lockRenew', { numberOfKeys: 1, lua: "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0" });
  cmd.defineCommand('lockRelease', { numberOfKeys: 1, lua: "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0" });

  const saver = new RedisSaver({ client: cmd, ttlSeconds: opts.ttlSeconds });
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

  const running = new Map();   // thread → the run this worker is running on it
  const inflight = new Map();  // `${stream} ${id}` → true while handled
  let closing = false;

  const register = () => Promise.all(assistants.map((a) =>
    cmd.call('FCALL', 'threadcast_register', 2, keys.workers(a), keys.assistants, a, name, liveMs)));
  await register();

  /* ---- answers --------------------------------------------------------------------------- */

  async function answer(entry, msg) {
    if (!entry.reply) return;
    try {
      await cmd.call('SPUBLISH', entry.reply, JSON.stringify({ corr: entry.corr, ...msg }));
    } catch (e) {
      log('warn', 'answer not sent', { corr: entry.corr, error: e.message });
    }
  }
  const success = (entry, result) => answer(entry, { type: 'success', result });

  /* ---- the thread lock --------------------------------------------------------------------- */

  async function lock(thread, waitMs = 0) {
    const until = Date.now() + waitMs;
    for (;;) {
      if (await cmd.set(keys.lock(thread), name, 'PX', lockMs, 'NX')) return true;
      if (Date.now() >= until) return false;
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** Sends inject/cancel to the worker running the thread; false when none is. */
  async function forward(thread, op) {
    const owner = await cmd.get(keys.lock(thread));
    if (!owner || owner === name) return false;
    return (await cmd.publish(keys.control(owner), JSON.stringify({ thread, ...op }))) > 0;
  }

  /* ---- runs --------------------------------------------------------------------------------- */

  /**
   * Runs the graph on the thread until the run is over: appends its events,
   * then its last root lifecycle event, then releases the thread. `input` may
   * be new input, a Command (resume) or null (continue from the checkpoint).
   */
  async function runGraph(ctl) {
    const { thread, graph, relay } = ctl;
    const renew = setInterval(() => cmd.lockRenew(keys.lock(thread), name, lockMs).catch(() => {}), lockMs / 4);
    let status = 'completed';
    let extra = {};
    try {
      for (let input = ctl.input; ;) {
        ctl.control = new RunControl();
        try {
          const run = await graph.streamEvents(input, {
            version: 'v3',
            configurable: { ...ctl.configurable, thread_id: thread },
            signal: ctl.abort.signal,
            control: ctl.control,
            durability: 'sync',
            ...(ctl.metadata ? { metadata: ctl.metadata } : {}),
          });
          for await (const ev of run) await relay.push(ev);
        } catch (e) {
          if (!isGraphDrained(e) || !ctl.injects.length) throw e;
        }
        delete ctl.configurable.checkpoint_id; // a fork starts there once; it continues from its own head
        if (!ctl.injects.length) break;
        input = await applyInjects(ctl);
      }
      status = pendingInterrupts(await graph.getState({ configurable: { thread_id: thread } })).length ? 'interrupted' : 'completed';
    } catch (e) {
      status = 'failed';
      if (ctl.cancelled) {
        relay.closeOpen('the run was cancelled', 'cancelled');
        extra = { error: 'cancelled', cancelled: true };
      } else {
        relay.closeOpen(e.message, 'run_failed');
        extra = { error: String(e.message ?? e) };
        log('warn', 'run failed', { thread, run_id: ctl.runId, error: String(e.message ?? e) });
      }
    } finally {
      clearInterval(renew);
    }
    try {
      await relay.end(status, extra);
      await cmd.hset(keys.run(thread), 'status', 'done');
    } finally {
      running.delete(thread);
      await cmd.lockRelease(keys.lock(thread), name).catch(() => {});
    }
    log('info', 'run over', { thread, run_id: ctl.runId, status });
  }

  /**
   * Messages injected into a running run, applied at a step boundary: the
   * run was drained; they join the state as if written by the node that
   * wrote the head, so what comes next is unchanged. Returns the input to
   * go on with.
   */
  async function applyInjects(ctl) {
    const cfg = { configurable: { thread_id: ctl.thread } };
    const messages = ctl.injects.splice(0);
    const head = await ctl.graph.getState(cfg);
    if (!head.next?.length) return { messages }; // the run had finished: the messages start the next turn
    let asNode;
    for await (const s of ctl.graph.getStateHistory(cfg, { limit: 2 })) if (s !== undefined && s.config.configurable.checkpoint_id !== head.config.configurable.checkpoint_id) asNode = s.next?.[0];
    const next = await ctl.graph.updateState(head.config, { messages }, asNode);
    ctl.configurable = { ...ctl.configurable, ...next.configurable };
    delete ctl.configurable.thread_id;
    return null;
  }

  /**
   * The common start of every run: claims the thread, records the run (so a
   * worker that takes over after a crash can go on with it), appends its
   * first events, answers, then runs it.
   */
  async function startRun(entry, { thread, assistant, input, configurable = {}, metadata, answered = [], humans = [], result = (r) => r }) {
    const graph = graphs.get(assistant);
    const runId = `run-${randomUUID()}`;
    const base = (await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '' } }))?.config.configurable.checkpoint_id ?? '';
    await cmd.hset(keys.run(thread), { entry: entry.key, run_id: runId, status: 'running', assistant, base, input: saveInput(input), configurable: JSON.stringify(configurable) });
    const relay = new Relay({ redis: cmd, thread, assistant, runId, log, appendOpts: ['ASSISTANT', assistant], subgraphs: graph.subgraphPaths });
    relay.started();
    if (answered.length) relay.raw({ method: 'input.answered', params: { namespace: [], data: { interrupt_ids: answered } } });
    for (const h of humans) for (const ev of wholeMessage([], undefined, 'human', h.id, h.content)) relay.raw(ev);
    const ctl = { thread, graph, assistant, runId, relay, input, configurable: { ...configurable }, metadata, injects: [], abort: new AbortController() };
    running.set(thread, ctl);
    try {
      await relay.drain();
    } catch (e) {
      running.delete(thread);
      await cmd.lockRelease(keys.lock(thread), name).catch(() => {});
      throw e;
    }
    await success(entry, result({ run_id: runId }));
    await runGraph(ctl);
  }

  /** Takes the thread for a new run, or explains why it cannot. */
  async function claimThread(thread) {
    if (running.has(thread) || !(await lock(thread))) {
      throw new ProtocolError('invalid_argument', `a run is active on thread "${thread}"; wait for it to end`);
    }
  }

  /** An injected message: shown whole at once, applied at the next step boundary. */
  function inject(ctl, message) {
    const m = { role: message.role === 'system' ? 'system' : 'user', content: String(message.content ?? ''), id: `msg-${randomUUID()}` };
    if (message.name) m.name = message.name;
    for (const ev of wholeMessage([], 'input', m.role === 'user' ? 'human' : 'system', m.id, m.content)) ctl.relay.raw(ev);
    ctl.injects.push(m);
    ctl.control?.requestDrain('inject');
  }

  /* ---- commands ------------------------------------------------------------------------------ */

  const handlers = {
    async 'run.start'(entry, p) {
      const thread = entry.thread;
      const message = typeof p.input === 'string' ? { role: 'user', content: p.input } : p.input?.messages?.at?.(-1) ?? p.input;
      const local = running.get(thread);
      if (local) { // CDDL 4a: input for an active run is injected into it
        inject(local, message ?? {});
        return success(entry, { run_id: local.runId });
      }
      if (await forward(thread, { op: 'inject', message })) {
        return success(entry, { run_id: await cmd.hget(keys.run(thread), 'run_id') });
      }
      await claimThread(thread);
      try {
        const graph = graphs.get(entry.assistant);
        const configurable = { ...(p.config?.configurable ?? {}) };
        delete configurable.thread_id;
        const cfg = { configurable: { thread_id: thread } };
        if (configurable.checkpoint_id) {
          const found = await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '', checkpoint_id: configurable.checkpoint_id } });
          if (!found) throw new ProtocolError('no_such_checkpoint', `thread "${thread}" has no checkpoint "${configurable.checkpoint_id}"`);
          const { input, humans } = withIds(p.input ?? null);
          return await startRun(entry, { thread, assistant: entry.assistant, input, configurable, metadata: p.metadata, humans });
        }
        const pending = pendingInterrupts(await graph.getState(cfg));
        if (pending.length) { // an interrupted run: the input answers it
          const resume = Object.fromEntries(pending.map((i) => [i.id, p.input]));
          return await startRun(entry, { thread, assistant: entry.assistant, input: new Command({ resume }), configurable, metadata: p.metadata, answered: pending.map((i) => i.id) });
        }
        const { input, humans } = withIds(p.input);
        return await startRun(entry, { thread, assistant: entry.assistant, input, configurable, metadata: p.metadata, humans });
      } catch (e) {
        if (!running.has(thread)) await cmd.lockRelease(keys.lock(thread), name).catch(() => {});
        throw e;
      }
    },

    async 'input.respond'(entry, p) {
      const thread = entry.thread;
      const responses = p.responses ?? [{ namespace: p.namespace, interrupt_id: p.interrupt_id, response: p.response }];
      await claimThread(thread);
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
        return await startRun(entry, { thread, assistant, input, configurable: { ...(p.config?.configurable ?? {}) }, metadata: p.metadata,
          answered: responses.map((r) => r.interrupt_id), result: () => ({}) });
      } catch (e) {
        if (!running.has(thread)) await cmd.lockRelease(keys.lock(thread), name).catch(() => {});
        if (isUnknownInterruptError(e)) throw new ProtocolError('no_such_interrupt', e.message);
        throw e;
      }
    },

    async 'input.inject'(entry, p) {
      const local = running.get(entry.thread);
      if (local) inject(local, p.message ?? {});
      else if (!(await forward(entry.thread, { op: 'inject', message: p.message }))) {
        throw new ProtocolError('no_such_run', `no run is active on thread "${entry.thread}" to inject into`);
      }
      return success(entry, {});
    },

    async 'run.cancel'(entry) {
      const local = running.get(entry.thread);
      if (local) {
        local.cancelled = true;
        local.abort.abort(new Error('cancelled'));
      } else if (!(await forward(entry.thread, { op: 'cancel' }))) {
        throw new ProtocolError('no_such_run', `no run is active on thread "${entry.thread}"`);
      }
      return success(entry, {});
    },

    async 'state.get'(entry, p) {
      const ns = (p.namespace ?? []).join('|');
      const graph = graphs.get(entry.assistant);
      const cfg = { configurable: { thread_id: entry.thread, checkpoint_ns: ns } };
      if (!(await saver.getTuple(cfg))) {
        if (ns) throw new ProtocolError('no_such_namespace', `thread "${entry.thread}" has no state at namespace ${JSON.stringify(p.namespace)}`);
        return success(entry, { values: {} });
      }
      const st = await graph.getState(cfg);
      let values = plain(st.values) ?? {};
      if (Array.isArray(p.keys)) values = Object.fromEntries(p.keys.filter((k) => k in values).map((k) => [k, values[k]]));
      return success(entry, { values, checkpoint: { id: st.config.configurable.checkpoint_id, ns } });
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
      return success(entry, { checkpoints });
    },

    async 'state.fork'(entry, p) {
      const thread = entry.thread;
      await claimThread(thread);
      try {
        const found = await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '', checkpoint_id: p.checkpoint_id } });
        if (!found) throw new ProtocolError('no_such_checkpoint', `thread "${thread}" has no checkpoint "${p.checkpoint_id}"`);
        const configurable = { ...(p.config?.configurable ?? {}), checkpoint_id: p.checkpoint_id };
        delete configurable.thread_id;
        const { input, humans } = withIds(p.input ?? null);
        // LangGraph forks on the same thread: the fork becomes the thread's head.
        return await startRun(entry, { thread, assistant: entry.assistant, input, configurable, humans, result: (r) => ({ ...r, thread_id: thread }) });
      } catch (e) {
        if (!running.has(thread)) await cmd.lockRelease(keys.lock(thread), name).catch(() => {});
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
    if (!(await lock(thread, lockMs + 5000))) {
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
    const head = (await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '' } }))?.config.configurable.checkpoint_id ?? '';
    const input = head === record.base ? loadInput(record.input) : null;
    const configurable = head === record.base ? JSON.parse(record.configurable || '{}') : {};
    log('info', 'taking over a run', { thread, run_id: record.run_id, from: head === record.base ? 'the start' : 'the last checkpoint' });
    const ctl = { thread, graph, assistant, runId: record.run_id, relay, input, configurable, injects: [], abort: new AbortController() };
    running.set(thread, ctl);
    await runGraph(ctl);
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
      return answer(entry, { type: 'error', error: 'invalid_argument', message: 'params is not JSON' });
    }
    if (!entry.assistant) { // a wildcard stream: serve it only with the graph the command names
      entry.assistant = params.assistant_id ?? await cmd.hget(keys.meta(entry.thread), 'assistant_id');
    }
    const h = handlers[entry.method];
    if (!h) return answer(entry, { type: 'error', error: 'unknown_command', message: `this worker does not handle ${entry.method}` });
    if (!graphs.has(entry.assistant)) {
      return answer(entry, { type: 'error', error: 'invalid_argument', message: `this worker does not serve assistant "${entry.assistant}"` });
    }
    try {
      await h(entry, params);
    } catch (e) {
      if (e instanceof ProtocolError) return answer(entry, { type: 'error', error: e.code, message: e.message });
      log('error', 'command failed', { thread: entry.thread, method: entry.method, error: String(e.stack ?? e) });
      return answer(entry, { type: 'error', error: 'unknown_error', message: String(e.message ?? e) });
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
        if (keep !== KEEP && !closing) await cmd.xack(stream, GROUP, id).catch(() => {});
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
    if (!ctl) return;
    if (m.op === 'inject') inject(ctl, m.message ?? {});
    if (m.op === 'cancel') {
      ctl.cancelled = true;
      ctl.abort.abort(new Error('cancelled'));
    }
  });
  await sub.subscribe(keys.control(name));

  const reading = (async () => {
    while (!closing) {
      try {
        const res = await block.xreadgroup('GROUP', GROUP, name, 'COUNT', 16, 'BLOCK', 1000, 'STREAMS', ...streams, ...streams.map(() => '>'));
        for (const [stream, entries] of res ?? []) for (const [id, fields] of entries) dispatch(stream, id, fields, false);
      } catch (e) {
        if (closing) break;
        log('warn', 'reading commands', { error: e.message });
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  })();

  // Heartbeat: stay registered; keep the entries in hand from looking idle
  // (a long run is not a dead worker); take over what dead workers left.
  let beating = false;
  const beat = async () => {
    if (beating || closing) return;
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
      closing = true;
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
