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
import { KEEP } from './answers.js';
import { WorkerSaver } from './checkpoint.js';
import { handle } from './commands.js';
import { GROUP, keys } from './keys.js';
import { defineScripts } from './lock.js';
import { graphJson, graphSchemas } from './rest.js';
import { cancelRun, inject } from './runs.js';
import { claim } from './takeover.js';

export { keys };

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
  const w = { log, name, lockMs, claimIdleMs, cmd, running, saver,
    waiting: new Map(),   // REST run id → a run waiting for its thread here
    inflight: new Map(),  // `${stream} ${id}` → { stream, id } while handled
    closing: false };
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
  Object.assign(w, { streams, assistantOf });

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

  const { inflight } = w;

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

  function dispatch(stream, id, fields, claimed) {
    const k = `${stream} ${id}`;
    if (inflight.has(k)) return;
    inflight.set(k, { stream, id });
    handle(w, stream, id, fields, claimed)
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
      await claim(w, dispatch);
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
