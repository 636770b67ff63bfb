#!/usr/bin/env node
// threadcast-worker: serves LangGraph graphs to threadcast.
//
//   threadcast-worker [--redis-url URL] [--graphs MODULE | --config langgraph.json] [--name NAME]
//                     [--ttl SECONDS] [--claim-idle-ms MS] [--lock-ms MS]
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
    '                         [--ttl SECONDS] [--claim-idle-ms MS] [--lock-ms MS]\n');
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
  } else {
    graphs = await loadModule(modPath ?? new URL('../graphs/agent.js', import.meta.url).pathname);
  }
} catch (e) {
  process.stderr.write(`threadcast-worker: ${e.stack ?? e}\n`);
  process.exit(2);
}
// After the graphs: their env (langgraph.json's) may name the Redis URL.
const { serve } = await import('../worker.js');
const worker = await serve({
  redis: opt('--redis-url', process.env.THREADCAST_REDIS_URL ?? 'redis://127.0.0.1:6379'),
  graphs,
  graphSpecs,
  name: opt('--name', undefined),
  ttlSeconds: opt('--ttl', undefined) ? Number(opt('--ttl')) : undefined,
  claimIdleMs: opt('--claim-idle-ms', undefined) ? Number(opt('--claim-idle-ms')) : undefined,
  lockMs: opt('--lock-ms', undefined) ? Number(opt('--lock-ms')) : undefined,
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
