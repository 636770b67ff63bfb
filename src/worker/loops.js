// The worker's connections and loops (protocol/README.md, "Worker contract
// (the command bridge)"):
// - three connections to Redis: `cmd` for every command, `block` for the
//   blocking XREADGROUP, `sub` for the control channel;
// - start-up (prepare): the function library, loaded when no gateway has
//   loaded it yet; the consumer group on each assistant's stream; what the
//   REST API shows of each assistant (and its graph's defaults); the
//   registry;
// - the read loop: XREADGROUP on the assistants' streams, each entry handed
//   to commands.js' handle() and acknowledged once handled (unless it
//   answered KEEP), never twice at once (w.inflight);
// - the control channel tc:worker:<name>: inject and cancel for runs this
//   worker holds, sent by workers that got those commands (lock.js' forward);
// - the heartbeat: stay registered, keep the entries in hand from looking
//   idle and take over what dead workers left (takeover.js' claim);
// - close: stop reading, leave the registry, let the runs in hand finish.
//
// Every function here takes the worker's shared state `w` (worker.js) first.
import { existsSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { KEEP } from './answers.js';
import { handle } from './commands.js';
import { GROUP, keys } from './keys.js';
import { graphJson } from './rest.js';
import { describe, fromSources } from './schemas.js';
import { cancelRun, inject } from './runs.js';
import { claim } from './takeover.js';

/**
 * ioredis options for a Redis URL read as the gateway reads it (deploy/configuration.md):
 * - rediss:// is TLS, the server's certificate checked against the URL's host, signed by
 *   tls.ca (a PEM file; the system's CAs when absent); tls.cert and tls.key (PEM files) are
 *   a client certificate to present. tls options with a redis:// URL are a mistake: refused.
 * - redis://secret@host is a password alone (ioredis would read a user name "secret").
 * Given to ioredis before the URL, so they win over what it reads from the URL.
 */
export function redisOptions(url, tls = {}) {
  const o = {};
  const rest = url.slice(url.indexOf('://') + 3);
  const hostPart = rest.split('/')[0];
  const at = hostPart.lastIndexOf('@');
  if (at >= 0 && !hostPart.slice(0, at).includes(':')) {
    o.username = '';
    o.password = decodeURIComponent(hostPart.slice(0, at));
  }
  const files = Object.entries({ ca: tls.ca, cert: tls.cert, key: tls.key }).filter(([, f]) => f);
  if (/^rediss:\/\//i.test(url)) {
    if (!tls.cert !== !tls.key) throw new Error('a client certificate needs its key, and a key its certificate');
    o.tls = Object.fromEntries(files.map(([k, f]) => [k, readFileSync(f)]));
  } else if (files.length) {
    throw new Error(`--redis-tls-${files[0][0]} is set but the Redis URL is not rediss:// (TLS)`);
  }
  return o;
}

/**
 * Connects the worker's three clients: { cmd, block, sub }. tls: { ca, cert, key }, PEM
 * files for a rediss:// URL (redisOptions).
 */
export async function connect(url, log, tls) {
  const redisOpts = { maxRetriesPerRequest: null, enableAutoPipelining: false, lazyConnect: true,
    ...redisOptions(url, tls) };
  const cmd = new Redis(redisOpts, url);
  const block = new Redis(redisOpts, url);     // XREADGROUP … BLOCK
  const sub = new Redis(redisOpts, url);       // the control channel
  for (const c of [cmd, block, sub]) c.on('error', (e) => log('warn', 'redis', { error: e.message }));
  await Promise.all([cmd.connect(), block.connect(), sub.connect()]);
  return { cmd, block, sub };
}

/* ---- start-up ---------------------------------------------------------------------------------- */

/** The function library, for a Redis that has not loaded it yet (no gateway started). */
function functionSource() {
  for (const p of [process.env.THREADCAST_FUNCTION, new URL('../../protocol/redis/threadcast.lua', import.meta.url).pathname,
    new URL('./threadcast.lua', import.meta.url).pathname]) {
    if (p && existsSync(p)) return readFileSync(p, 'utf8');
  }
  return null;
}

/** Registers (and so keeps registering, as the heartbeat) every assistant this worker serves. */
const register = (w) => Promise.all(w.assistants.map((a) =>
  w.cmd.call('FCALL', 'threadcast_register', 2, keys.workers(a), keys.assistants, a, w.name, w.liveMs)));

/**
 * Makes Redis ready for the worker — the function library, the groups,
 * the assistants' descriptions — and registers it.
 */
export async function prepare(w) {
  // The function library: a worker may start before any gateway loaded it.
  const libs = await w.cmd.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'threadcast');
  if (!libs.length) {
    const src = functionSource();
    if (!src) throw new Error('threadcast\'s Redis functions are not loaded and protocol/redis/threadcast.lua was not found');
    await w.cmd.call('FUNCTION', 'LOAD', 'REPLACE', src);
  }
  for (const s of w.streams) {
    try {
      await w.cmd.xgroup('CREATE', s, GROUP, '0', 'MKSTREAM');
    } catch (e) {
      if (!/BUSYGROUP/.test(e.message)) throw e;
    }
  }

  // What the REST API shows of each assistant (assistants.get, /graph, /schemas, /subgraphs), and its
  // system assistant's config and context (the graph's defaults).
  const described = {}; // graphs whose sources may tell their schemas better (schemas.js)
  for (const [assistant, served] of w.graphs) {
    const { context, ...config } = served.defaults;
    const info = { name: assistant, graph: '{}', schemas: JSON.stringify({ graph_id: assistant, input_schema: null, output_schema: null,
      state_schema: null, config_schema: null, context_schema: null }) };
    if (Object.keys(served.defaults).length) Object.assign(info, { config: JSON.stringify(config), context: JSON.stringify(context ?? {}) });
    try {
      const graph = await served.build({ ...config, configurable: { ...(config.configurable ?? {}) } });
      info.graph = JSON.stringify(await graphJson(graph));
      info.graph_xray = JSON.stringify(await graphJson(graph, true));
      // Its schemas, and every subgraph's, parents before their children: {"<node>": …, "<node>|<node>": …}.
      const d = await describe(assistant, graph, w.graphSpecs?.[assistant]?.sourceFile);
      info.schemas = JSON.stringify(d.schemas);
      info.subgraphs = JSON.stringify(d.subgraphs);
      if (d.pending && w.graphSpecs?.[assistant]) described[assistant] = d;
    } catch (e) {
      w.log('warn', 'cannot describe the graph for the REST API', { assistant, error: String(e.message ?? e) });
    }
    const tx = w.cmd.multi();
    if (!info.config) tx.hdel(keys.ainfo(assistant), 'config', 'context'); // none now: none left from an earlier start
    await tx.hset(keys.ainfo(assistant), info).hsetnx(keys.ainfo(assistant), 'created_at', new Date().toISOString()).exec();
  }

  // Before registering, as the reference server has them before it answers: a few seconds, bounded.
  if (Object.keys(described).length) await readSchemasFromSources(w, described);
  await register(w);
}

/**
 * The schemas of the graphs loaded from files, read from their TypeScript
 * sources (schemas.js), written over what prepare() wrote. Never fails the
 * worker: a source it cannot read in time keeps what it had. (LANGGRAPH_SCHEMA_RESOLVE_TIMEOUT_MS, as the reference: how
 * long the reading may take, 30 s by default.)
 */
async function readSchemasFromSources(w, described) {
  const specs = Object.fromEntries(Object.keys(described).map((g) => [g, w.graphSpecs[g]]));
  const timeoutMs = Number(process.env.LANGGRAPH_SCHEMA_RESOLVE_TIMEOUT_MS) > 0 ? Number(process.env.LANGGRAPH_SCHEMA_RESOLVE_TIMEOUT_MS) : 30000;
  const t0 = Date.now();
  try {
    const read = await fromSources(specs, described, { timeoutMs });
    for (const [graph, { schemas, subgraphs }] of Object.entries(read)) {
      await w.cmd.hset(keys.ainfo(graph), { schemas: JSON.stringify(schemas), subgraphs: JSON.stringify(subgraphs) });
    }
    w.log('info', 'graph schemas read from their sources', { graphs: Object.keys(read), ms: Date.now() - t0 });
  } catch (e) {
    w.log('warn', 'cannot read the graphs\' schemas from their sources', { graphs: Object.keys(specs), error: String(e.message ?? e) });
  }
}

/* ---- the loops --------------------------------------------------------------------------------- */

/** Handles an entry unless it is in hand already; acknowledges it once handled (unless KEEP or closing). */
function dispatch(w, stream, id, fields, claimed) {
  const k = `${stream} ${id}`;
  if (w.inflight.has(k)) return;
  w.inflight.set(k, { stream, id });
  handle(w, stream, id, fields, claimed)
    .catch((e) => w.log('error', 'command handling failed', { error: String(e.stack ?? e) }))
    .then(async (keep) => {
      w.inflight.delete(k);
      if (keep !== KEEP && !w.closing) await w.cmd.xack(stream, GROUP, id).catch(() => {});
    });
}

/** Starts the control channel, the read loop and the heartbeat (w.reading, w.timer; close() stops them). */
export async function start(w) {
  w.sub.on('message', (_ch, msg) => {
    let m;
    try {
      m = JSON.parse(msg);
    } catch {
      return;
    }
    const ctl = w.running.get(m.thread);
    if (!ctl || ctl.over) return;
    if (m.run_id && m.run_id !== ctl.runId) return; // a REST cancel for a run that is over
    if (m.op === 'inject') inject(ctl, m.message ?? {});
    if (m.op === 'cancel') cancelRun(ctl, m.action);
  });
  await w.sub.subscribe(keys.control(w.name));

  w.reading = (async () => {
    while (!w.closing) {
      try {
        const res = await w.block.xreadgroup('GROUP', GROUP, w.name, 'COUNT', 16, 'BLOCK', 1000, 'STREAMS', ...w.streams, ...w.streams.map(() => '>'));
        for (const [stream, entries] of res ?? []) for (const [id, fields] of entries) dispatch(w, stream, id, fields, false);
      } catch (e) {
        if (w.closing) break;
        w.log('warn', 'reading commands', { error: e.message });
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
      await register(w);
      await claim(w, (stream, id, fields, claimed) => dispatch(w, stream, id, fields, claimed));
    } catch (e) {
      w.log('warn', 'heartbeat', { error: e.message });
    } finally {
      beating = false;
    }
  };
  w.timer = setInterval(beat, w.heartbeatMs);
  beat();
}

/**
 * Stops reading, leaves the registry, and waits up to graceMs for the
 * runs in hand; what is still running then is left to other workers.
 */
export async function close(w, { graceMs = 10000 } = {}) {
  w.closing = true;
  clearInterval(w.timer);
  await Promise.all(w.assistants.map((a) => w.cmd.zrem(keys.workers(a), w.name).catch(() => {})));
  w.block.disconnect();
  await w.reading;
  const until = Date.now() + graceMs;
  while (w.inflight.size && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  w.sub.disconnect();
  w.cmd.disconnect();
}
