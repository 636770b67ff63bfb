#!/usr/bin/env node
// One Redis restart under runs in flight, the chaos test's redis-restart fault alone: a gateway,
// two workers of one language serving the example graph, --runs REST runs started, Redis
// restarted (SIGTERM, then again on its port and dir, append-only: it keeps its data) while
// they stream. Every run must still end as it would have ("success", its stream ended by the
// run's end) within --within seconds of the restart; each run's end, its stream and its root
// lifecycle events in Redis are printed. Exits 1 when one does not, 2 on a broken set-up.
//
//   node tests/chaos/redis-restart.mjs [--workers js|python] [--runs 6] [--within 30]
//        [--bin build-asan/threadcast] [--logs DIR]
//
// The Python worker comes from THREADCAST_WORKER_PYTHON or build-py/venv-dev (scripts/lib.sh's
// `tc_python_env dev`).
import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import {
  repoRoot, sleep, startRedis, startThreadcast, startWorker, startPythonWorker, redisClient, storedEvents, stopAll,
} from '../integration/lib/harness.mjs';
import { question } from '../integration/lib/rest.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const sdkPath = createRequire(path.join(here, '../integration/package.json')).resolve('@langchain/langgraph-sdk');
const { Client } = await import(pathToFileURL(sdkPath).href);

const { values: opt } = parseArgs({ options: {
  workers: { type: 'string', default: 'python' },
  runs: { type: 'string', default: '6' },
  within: { type: 'string', default: '30' },
  bin: { type: 'string', default: path.join(repoRoot, 'build-asan', 'threadcast') },
  logs: { type: 'string' },
} });
if (!['js', 'python'].includes(opt.workers)) {
  console.error('redis-restart: --workers must be js or python');
  process.exit(2);
}
const TERMINAL = ['success', 'error', 'interrupted', 'timeout'];
const at = (t0) => `${String(Date.now() - t0).padStart(6)} ms`;

let redis;
const workers = [];
let failed = 0;
try {
  redis = await startRedis({ appendonly: true });
  const tc = await startThreadcast({ redisUrl: redis.url, bin: opt.bin });
  await tc.ready();
  const env = { THREADCAST_FAKE_TOKEN_MS: '30' };
  for (const n of ['a', 'b']) {
    workers.push(opt.workers === 'python'
      ? await startPythonWorker(redis.url, { name: `restart-py-${n}`, env })
      : await startWorker(redis.url, { name: `restart-js-${n}`, env, readyMs: 60000 }));
  }
  const client = new Client({ apiUrl: `http://127.0.0.1:${tc.port}`, apiKey: null });
  const t0 = Date.now();
  const runs = [];
  for (let i = 0; i < Number(opt.runs); i++) {
    const thread = (await client.threads.create()).thread_id;
    const run = await client.runs.create(thread, 'agent', { input: question(`question ${i}: tell me about otters`), streamMode: ['values', 'messages-tuple'] });
    runs.push({ thread, run: run.run_id, parts: [], end: null });
  }
  // Each run's stream from its start, as a client's (the SDK resumes it through the restart).
  const streams = runs.map(async (r) => {
    try {
      for await (const p of client.runs.joinStream(r.thread, r.run, { lastEventId: '-1', signal: AbortSignal.timeout(Number(opt.within) * 1000 + 20000) })) r.parts.push(p);
      r.end = 'ended';
    } catch (e) { r.end = `cut: ${e.name}: ${e.message}`; }
  });
  await sleep(1500); // the runs are streaming their first model turn
  console.log(`${at(t0)} restarting Redis (${opt.runs} runs in flight, ${opt.workers} workers)`);
  await redis.stop('SIGTERM');
  redis = await startRedis({ appendonly: true, port: redis.port, dir: redis.dir });
  const tBack = Date.now();
  console.log(`${at(t0)} Redis is back`);
  const ended = new Map();
  while (Date.now() < tBack + Number(opt.within) * 1000 && ended.size < runs.length) {
    for (const r of runs) {
      if (ended.has(r.run)) continue;
      try {
        const { status } = await client.runs.get(r.thread, r.run);
        if (TERMINAL.includes(status)) { ended.set(r.run, status); console.log(`${at(t0)} run ${r.run} ${status}`); }
      } catch { /* Redis is loading: asked again */ }
    }
    await sleep(250);
  }
  await Promise.race([Promise.all(streams), sleep(25000)]);
  const rc = redisClient(redis.port);
  for (const r of runs) {
    const evs = await storedEvents(rc, r.thread);
    const root = evs.filter((e) => e.method === 'lifecycle' && !(e.params.namespace ?? []).length).map((e) => `${e.seq}:${e.params.data?.event}`);
    const status = ended.get(r.run) ?? 'not ended';
    const ok = status === 'success' && r.end === 'ended';
    if (!ok) failed++;
    const shown = r.parts.findLast((p) => p.event === 'error')?.data;
    console.log(`${ok ? 'ok  ' : 'FAIL'} run ${r.run}: ${status}; its stream ${r.end ?? 'still open'} after ${r.parts.length} events, the last ${r.parts.at(-1)?.event}` +
      `${shown ? ` ${JSON.stringify(shown)}` : ''}; root lifecycle in Redis ${root.join(' ')}`);
  }
  rc.close();
  console.log(failed ? `${failed} of ${runs.length} runs did not ride through the restart` : `all ${runs.length} runs rode through the restart`);
} catch (e) {
  console.error(`redis-restart: the set-up broke: ${e.stack ?? e}`);
  failed = -1;
}
if (opt.logs) {
  mkdirSync(opt.logs, { recursive: true });
  for (const w of workers) writeFileSync(path.join(opt.logs, `worker-${w.name}.log`), w.stderr);
}
await stopAll();
if (redis) await redis.cleanup();
process.exit(failed < 0 ? 2 : failed ? 1 : 0);
