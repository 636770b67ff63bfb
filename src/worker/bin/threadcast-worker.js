#!/usr/bin/env node
// threadcast-worker: serves LangGraph graphs to threadcast.
//
//   threadcast-worker [--redis-url URL] [--graphs MODULE] [--name NAME] [--ttl SECONDS]
//                     [--claim-idle-ms MS] [--lock-ms MS]
//
// MODULE (default: the example graph, graphs/agent.js) exports `graphs`,
// { <assistant id>: StateGraph or compiled graph }, or a `builder()` served
// as assistant "agent". SIGTERM/SIGINT: stop taking commands, let the runs in
// hand finish (up to 10 s; what is left is taken over by other workers).
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { serve } from '../worker.js';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
};
if (args.includes('--help')) {
  process.stdout.write('usage: threadcast-worker [--redis-url URL] [--graphs MODULE] [--name NAME] [--ttl SECONDS]\n' +
    '                         [--claim-idle-ms MS] [--lock-ms MS]\n');
  process.exit(0);
}
const modPath = opt('--graphs', null);
const mod = modPath ? await import(pathToFileURL(resolve(modPath)).href) : await import('../graphs/agent.js');
const graphs = mod.graphs ?? (typeof mod.builder === 'function' ? { agent: mod.builder() } : null);
if (!graphs) {
  process.stderr.write(`threadcast-worker: ${modPath} exports neither graphs nor builder()\n`);
  process.exit(2);
}
const worker = await serve({
  redis: opt('--redis-url', process.env.THREADCAST_REDIS_URL ?? 'redis://127.0.0.1:6379'),
  graphs,
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
