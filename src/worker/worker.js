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
//
// This file owns serve(): the options, the graphs, and the worker's shared
// state `w`, which every other module's functions take first. The parts:
// loops.js (connections, start-up, read loop, heartbeat, close),
// commands.js (one handler per method), runs.js (graph runs),
// rest-runs.js (REST runs), lock.js (the thread lock and run record),
// takeover.js (what dead workers left), answers.js (replies), keys.js
// (every Redis name), checkpoint.js (the savers), relay.js (events to
// threadcast), rest.js (the REST API's shapes), graphs.js (the graphs'
// forms and sources), config.js (what a run is run with), store.js (the
// graphs' store), logger.js (log lines, the SDK logger). README.md has the
// map.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { WorkerSaver } from './checkpoint.js';
import { graphDefaults, serveGraphs } from './graphs.js';
import { keys } from './keys.js';
import { defineScripts } from './lock.js';
import { jsonLog, registerSdkLogger } from './logger.js';
import { close, connect, prepare, start } from './loops.js';
import { ThreadcastStore } from './store.js';

export { keys };

/**
 * Starts a worker. Options:
 *   redis      URL (default $THREADCAST_REDIS_URL or redis://127.0.0.1:6379): redis:// or
 *              rediss:// (TLS), [[user]:password@]host[:port][/db], as the gateway takes it
 *   tls        { ca, cert, key }: PEM files for rediss:// (default $THREADCAST_REDIS_TLS_CA,
 *              _CERT, _KEY; no ca: the system's CAs) (loops.js' redisOptions)
 *   graphs     { <assistant id>: a StateGraph (compiled here), a compiled graph, a Promise
 *              of either, or a factory (config) => either (graphs.js) }
 *   graphDefaults  { <assistant id>: {configurable, context, …} }, the graphs' system
 *              assistants' config (default: $LANGGRAPH_CONFIG)
 *   graphSpecs { <assistant id>: {sourceFile, exportSymbol} }: where a graph's TypeScript
 *              types are read for its schemas (langgraph.json's; schemas.js)
 *   name       consumer name (default <host>-<pid>-<random>)
 *   log        (level, msg, fields) → void (default JSON lines on stderr)
 *   heartbeatMs, liveMs   registry heartbeat and how long one counts (1 s, three heartbeats)
 *   claimIdleMs           entries idle this long are claimed from dead workers (3 s: three
 *                         heartbeats missed; a live worker re-claims its own every heartbeat)
 *   lockMs                the thread lock's lease (3 s, renewed every quarter of it while running)
 * A dead worker's run is taken over within claimIdleMs (+ a heartbeat), once its lock lapsed.
 *   ttlSeconds            checkpoints expire this long after a thread's last write (none)
 * Resolves once it is registered and reading; close() stops it.
 */
export async function serve(opts = {}) {
  const url = opts.redis ?? process.env.THREADCAST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const log = opts.log ?? jsonLog;
  registerSdkLogger(log); // for graphs imported from here on (bin/ registers it before importing any)
  /** The worker's shared state: settings, connections, graphs, and what it has in hand. */
  const heartbeatMs = opts.heartbeatMs ?? 1000;
  const w = {
    log,
    name: opts.name ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`,
    heartbeatMs,
    liveMs: opts.liveMs ?? 3 * heartbeatMs, // three heartbeats missed: dead
    claimIdleMs: opts.claimIdleMs ?? 3000,
    lockMs: opts.lockMs ?? 3000,
    ...(await connect(url, log, opts.tls ?? { ca: process.env.THREADCAST_REDIS_TLS_CA,
      cert: process.env.THREADCAST_REDIS_TLS_CERT, key: process.env.THREADCAST_REDIS_TLS_KEY })), // cmd, block, sub
    running: new Map(),   // thread → the run this worker is running on it (runs.js' ctl)
    waiting: new Map(),   // REST run id → a run waiting for its thread here
    inflight: new Map(),  // `${stream} ${id}` → { stream, id } while handled
    closing: false,
  };
  defineScripts(w.cmd);
  const restRunOf = (thread) => {
    const ctl = w.running.get(thread);
    return ctl?.rest ? ctl : null;
  };
  w.saver = new WorkerSaver({ client: w.cmd, ttlSeconds: opts.ttlSeconds }, restRunOf, w.name);
  w.store = new ThreadcastStore({ client: w.cmd });
  w.graphs = await serveGraphs(opts.graphs, { saver: w.saver, store: w.store }, opts.graphDefaults ?? graphDefaults());
  w.graphSpecs = opts.graphSpecs ?? {}; // graph id → {sourceFile, exportSymbol}: where its schemas are read from
  w.assistants = [...w.graphs.keys()];
  w.streams = w.assistants.map(keys.stream);
  w.assistantOf = new Map(w.assistants.map((a) => [keys.stream(a), a]));
  await prepare(w);
  await start(w);
  log('info', 'worker ready', { name: w.name, assistants: w.assistants });

  return {
    name: w.name,
    assistants: w.assistants,
    running: w.running,
    graphs: w.graphs,
    saver: w.saver,
    store: w.store,
    /**
     * Stops reading, leaves the registry, and waits up to graceMs for the
     * runs in hand; what is still running then is left to other workers.
     */
    close: (o) => close(w, o),
  };
}
