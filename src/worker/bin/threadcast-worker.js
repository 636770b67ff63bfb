#!/usr/bin/env node
// threadcast-worker: serves LangGraph graphs to threadcast.
//
//   threadcast-worker [--redis-url URL] [--redis-tls-ca FILE] [--redis-tls-cert FILE --redis-tls-key FILE]
//                     [--graphs MODULE | --config langgraph.json] [--name NAME]
//                     [--ttl SECONDS] [--heartbeat-ms MS] [--claim-idle-ms MS] [--lock-ms MS]
// (the takeover's timing: a heartbeat a second; a worker silent for three is dead, its runs
// claimed after --claim-idle-ms and taken over once its thread locks' --lock-ms lapsed)
//
// MODULE (default: the example graph, graphs/agent.js) exports `graphs`,
// { <assistant id>: a StateGraph, a compiled graph, a Promise of either, or a
// graph factory (config) => either }, or a `builder()` served as assistant
// "agent". --config reads a langgraph.json instead: its `graphs`
// ("./file:export", resolved from the file's directory) and its `env`
// (LANGGRAPH_CONFIG's per-graph defaults among them); keys the worker does not
// serve (ui, http, auth, …) are named in a warning. TypeScript graph files:
// run under a loader, e.g. `node --import tsx bin/threadcast-worker.js …`.
// SIGTERM/SIGINT: stop taking commands, let the runs in hand finish (up to
// 10 s; what is left is taken over by other workers).
import { loadConfig, loadModule } from '../graphs.js';
import { jsonLog, registerSdkLogger } from '../logger.js';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
};
if (args.includes('--help')) {
  process.stdout.write('usage: threadcast-worker [--redis-url URL] [--graphs MODULE | --config langgraph.json] [--name NAME]\n' +
    '                         [--ttl SECONDS] [--heartbeat-ms MS] [--claim-idle-ms MS] [--lock-ms MS]\n' +
    '  --redis-url URL         redis://[[user]:password@]host[:port][/db], or rediss://… over TLS\n' +
    '                          ($THREADCAST_REDIS_URL; redis://127.0.0.1:6379)\n' +
    '  --redis-tls-ca FILE     with rediss://: the CA certificates to trust, PEM ($THREADCAST_REDIS_TLS_CA;\n' +
    '                          default: the system\'s)\n' +
    '  --redis-tls-cert FILE   a client certificate, PEM ($THREADCAST_REDIS_TLS_CERT)\n' +
    '  --redis-tls-key FILE    its key, PEM ($THREADCAST_REDIS_TLS_KEY)\n' +
    '  --heartbeat-ms MS   how often the worker says it is alive (1000)\n' +
    '  --claim-idle-ms MS  a run whose worker said nothing this long is taken over (3000; > the heartbeat)\n' +
    '  --lock-ms MS        the lease of a running thread\'s lock (3000; renewed every quarter)\n');
  process.exit(0);
}
const modPath = opt('--graphs', null);
const configPath = opt('--config', null);
if (modPath && configPath) {
  process.stderr.write('threadcast-worker: --graphs and --config exclude each other\n');
  process.exit(2);
}
// Graphs may ask for the SDK's logger as they are imported.
registerSdkLogger(jsonLog);
let graphs;
let graphSpecs;
try {
  if (configPath) {
    const loaded = await loadConfig(configPath);
    graphs = loaded.graphs;
    graphSpecs = loaded.specs;
    if (loaded.ignored.length) jsonLog('warn', `${configPath}: not served by this worker, ignored`, { keys: loaded.ignored });
    if (loaded.python.length) jsonLog('info', `${configPath}: Python graphs are left to the Python worker (src/worker-python)`, { graphs: loaded.python });
    if (!Object.keys(graphs).length) {
      process.stderr.write(`threadcast-worker: ${configPath} has no JavaScript graph to serve\n`);
      process.exit(3);
    }
  } else {
    graphs = await loadModule(modPath ?? new URL('../graphs/agent.js', import.meta.url).pathname);
  }
} catch (e) {
  process.stderr.write(`threadcast-worker: ${e.stack ?? e}\n`);
  process.exit(2);
}
/** A duration option: a whole number of milliseconds from 100 to 600000, else exit 2; absent: undefined. */
function ms(name) {
  const v = opt(name, undefined);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 100 || n > 600000) {
    process.stderr.write(`threadcast-worker: ${name} must be a whole number of milliseconds from 100 to 600000, got "${v}"\n`);
    process.exit(2);
  }
  return n;
}
if ((ms('--claim-idle-ms') ?? 3000) <= (ms('--heartbeat-ms') ?? 1000)) {
  process.stderr.write('threadcast-worker: --claim-idle-ms must be longer than --heartbeat-ms (a live worker would look dead)\n');
  process.exit(2);
}
// After the graphs: their env (langgraph.json's) may name the Redis URL.
const { serve } = await import('../worker.js');
const worker = await serve({
  redis: opt('--redis-url', process.env.THREADCAST_REDIS_URL ?? 'redis://127.0.0.1:6379'),
  tls: {
    ca: opt('--redis-tls-ca', process.env.THREADCAST_REDIS_TLS_CA),
    cert: opt('--redis-tls-cert', process.env.THREADCAST_REDIS_TLS_CERT),
    key: opt('--redis-tls-key', process.env.THREADCAST_REDIS_TLS_KEY),
  },
  graphs,
  graphSpecs,
  name: opt('--name', undefined),
  ttlSeconds: opt('--ttl', undefined) ? Number(opt('--ttl')) : undefined,
  heartbeatMs: ms('--heartbeat-ms'),
  claimIdleMs: ms('--claim-idle-ms'),
  lockMs: ms('--lock-ms'),
});
let stopping = false;
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, async () => {
    if (stopping) return;
    stopping = true;
    await worker.close();
    process.exit(0);
  });
}
