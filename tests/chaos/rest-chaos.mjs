#!/usr/bin/env node
// The REST runs' chaos test (issues 27 and 37): SDK users stream runs of the example
// LangGraph graph through HAProxy in front of three gateways and two workers
// while gateways are SIGKILLed and SIGTERMed, workers SIGKILLed and Redis
// SIGSTOPped and restarted; then every stream is checked against the run's
// final state and against a full replay of the run, and the figures printed.
//
//   node tests/chaos/rest-chaos.mjs [--workers js|python|mixed] [--seconds 60] [--users 30]
//        [--runs 1] [--fault-every 5] [--token-ms 30] [--drain-grace 10000] [--bin PATH]
//        [--json FILE] [--logs DIR]
//
// Stack (loopback, everything started here and stopped by PID): redis-server
// (appendonly yes: a restart keeps the data) on a fixed port and dir, three
// gateways on fixed ports (a restarted one comes back on its port behind
// HAProxy), the workers (a restarted one gets a new name, as a new pod would),
// and HAProxy with deploy/haproxy.cfg given a third server and an X-Served-By
// header (which gateway a stream is on). The workers, by --workers:
// - js (the default): two JavaScript LangGraph workers (src/worker) serving
//   src/worker/graphs/agent.js as assistant "agent";
// - python: two Python workers (src/worker-python) serving its twin, the
//   example Python project (src/worker-python/example), as "agent";
// - mixed: one project holding both (tests/chaos/mixed/langgraph.json: the
//   JavaScript graph as "agent", the Python one as "agent_py"), served by two
//   JavaScript and two Python workers — two of each, so that a killed worker
//   of either language has a peer to take its runs over; users alternate
//   between the two assistants in fours (users 0–3 "agent", 4–7 "agent_py", …).
//
// Users: each a loop with its own @langchain/langgraph-sdk Client on HAProxy:
// a thread, one run (every third user two on the same thread), with
// runs.stream (every fourth user runs.create + runs.joinStream from the
// start), streamMode values, messages-tuple and updates; the SDK's own
// retries resume through faults. Every part is kept with its receive time,
// every stream response with its gateway and when it opened and ended.
//
// Faults every --fault-every seconds, in turn: SIGKILL a gateway (restarted
// a second later on its port), SIGTERM a gateway (it drains for
// --drain-grace; restarted once it has exited), SIGKILL a worker (restarted),
// SIGSTOP Redis for 2 s, restart Redis (SIGTERM, then again on its port and
// dir). Gateway faults leave at least one gateway up, worker faults one worker
// of the language they kill (a language with fewer than two up is not killed;
// mixed: the worker kills alternate between the languages).
//
// Checked, per run (a violation each, with details): the run ends terminal;
// event ids are integers, strictly increasing per stream; what the client
// got equals a full replay of the run (Last-Event-ID -1) at every id, with no
// hole between its first and last; and, when the client got no error: a
// successful run's stream reached the replay's last event (no silent
// truncation), its last values event is the thread's final state, every
// message the run added to the state is in its messages-tuple chunks with
// exactly the state's text (and a tool call's arguments), nothing else is —
// except, in a run a worker took over, what protocol/README.md ("When a
// worker dies") says the step that runs again leaves: the beginning of a
// message the dead worker was streaming (messages-tuple has nowhere to put
// its worker_lost mark), or a message it had finished, whole, under an id
// the final state does not have (counted) —, and a failed run shows its
// error event. Errors the client got are allowed and counted; a run that
// ended in error is not (run-failed: the example graph fails no run of its
// own, so a fault lost it). Sanitizer reports from the gateways are violations.
// The chunks are read as each graph's language renders them: a JavaScript
// graph's as @langchain/langgraph-api does (an AI chunk's `type` "ai"), a
// Python graph's as LangGraph's Python server does (protocol/README.md, "Run
// streams", rendered runs: a streamed chunk "AIMessageChunk" with its
// `tool_call_chunks` and `usage_metadata`, a whole message "ai", a tool's
// result "tool" with its `status`; the metadata the Python server's, with the
// run's `graph_id`); every `messages` event is `[chunk, metadata]` with the
// run's own `run_id` and `thread_id` (message-shape, a violation otherwise).
//
// Figures: runs, streams, runs by status, clients with errors (which), HTTP
// 5xx answers, violations, and per fault kind the time from the fault to the
// next event each affected client received (p50/p99/max) against the
// issue's targets: p99 ≤ 3 s for gateway faults, ≤ 5 s for a worker kill. A
// gateway SIGTERM's time counts from the moment the drain cut the stream.
// With --workers mixed the figures are also given per language (the graph the
// client ran), and a target is missed when either language's p99 misses it.
// Exits 1 on any violation or missed target, 2 on a broken stack.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs, isDeepStrictEqual } from 'node:util';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import {
  repoRoot, freePort, sleep, waitUntil, startRedis, startThreadcast, startWorker, startPythonWorker,
  pythonExampleConfig, redisClient, storedEvents, stopAll,
} from '../integration/lib/harness.mjs';
import { question, textOf } from '../integration/lib/rest.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
// The SDK the integration tests pin (tests/integration/package-lock.json).
const sdkPath = createRequire(path.join(here, '../integration/package.json')).resolve('@langchain/langgraph-sdk');
const { Client } = await import(pathToFileURL(sdkPath).href);

const { values: opt } = parseArgs({
  options: {
    workers: { type: 'string', default: 'js' },
    seconds: { type: 'string', default: '60' },
    users: { type: 'string', default: '30' },
    runs: { type: 'string', default: '1' },
    'fault-every': { type: 'string', default: '5' },
    'token-ms': { type: 'string', default: '30' },
    'drain-grace': { type: 'string', default: '10000' },
    bin: { type: 'string', default: path.join(repoRoot, 'build-asan', 'threadcast') },
    json: { type: 'string' },
    logs: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) {
  console.log(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1, 10).map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
  process.exit(0);
}
const cfg = {
  seconds: Number(opt.seconds), users: Number(opt.users), runs: Number(opt.runs),
  faultEveryMs: Number(opt['fault-every']) * 1000, tokenMs: Number(opt['token-ms']),
  drainGraceMs: Number(opt['drain-grace']), bin: opt.bin, workers: opt.workers, logs: opt.logs ?? null,
};
/**
 * The workers of each --workers mode ([slot, language]), the project they serve (none: each
 * language's example), and the assistant each language's users run.
 */
const PLANS = {
  js: { workers: [['w1', 'js'], ['w2', 'js']], graphs: { js: 'agent' } },
  python: { workers: [['w1', 'python'], ['w2', 'python']], graphs: { python: 'agent' } },
  mixed: { workers: [['j1', 'js'], ['j2', 'js'], ['p1', 'python'], ['p2', 'python']],
    graphs: { js: 'agent', python: 'agent_py' }, config: path.join(here, 'mixed', 'langgraph.json') },
};
const plan = PLANS[cfg.workers];
if (!plan) {
  console.error(`rest-chaos: --workers must be js, python or mixed, not ${JSON.stringify(cfg.workers)}`);
  process.exit(2);
}
const LANGS = Object.keys(plan.graphs);
/** User i's language: in fours when there are two (each four holds a joining and a two-run user). */
const langOf = (i) => LANGS[Math.floor(i / 4) % LANGS.length];
for (const [k, v] of Object.entries(cfg)) {
  if (typeof v === 'number' && !(v > 0 || (k === 'drainGraceMs' && v === 0))) {
    console.error(`rest-chaos: --${k} must be a positive number`);
    process.exit(2);
  }
}

const CHECKS_MS = 120000;      // the checks after the chaos (runs terminal, replays), at most
const extraProcs = new Set();  // started here, not by the harness (HAProxy)
const TERMINAL = ['success', 'error', 'interrupted', 'timeout'];
const STREAM_MODE = ['values', 'messages-tuple', 'updates'];
const RUN_TIMEOUT_MS = 120000;   // one run's stream, at most (a stream that hangs longer is a violation)
const REDIS_STOP_MS = 2000;
const TARGETS = { 'gateway-sigkill': 3000, 'gateway-sigterm': 3000, 'worker-sigkill': 5000 };
/** Requests noted for the slowest clients' accounts (a run makes some tens of thousands). */
const REQUESTS_KEPT = 500000;
const FAULT_KINDS = ['gateway-sigkill', 'gateway-sigterm', 'worker-sigkill', 'redis-sigstop', 'redis-restart'];
const TOPICS = ['otters in rivers', 'the history of tea', 'redis streams and consumer groups', 'volcanoes of iceland',
  'how bees find flowers', 'the northern lights', 'sourdough bread at home', 'lighthouses of brittany'];

const log = (...a) => console.error(`[${new Date().toISOString().slice(11, 23)}]`, ...a);
const short = (s, n = 160) => (s.length > n ? `${s.slice(0, n)}…` : s);
const plain = (v) => JSON.parse(JSON.stringify(v ?? null));

function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/* ---- the stack ----------------------------------------------------------------------------- */

const readLines = (stream, fn) => createInterface({ input: stream, crlfDelay: Infinity }).on('line', fn);

/** HAProxy's request log line: the test's request number, then server, retries, Tw/Tc/Tr/Ta (ms), status. */
const HAPROXY_LOG_FORMAT = 'chaos-req %[capture.req.hdr(0)] %s %rc %Tw %Tc %Tr %Ta %ST';

/** deploy/haproxy.cfg with a third server and a header naming the server of each answer. */
function haproxyConfig(dir) {
  const base = readFileSync(path.join(repoRoot, 'deploy', 'haproxy.cfg'), 'utf8');
  const two = '    server tc2 ${TC_BACKEND_2} check\n';
  if (!base.includes(two)) throw new Error('deploy/haproxy.cfg changed: no "server tc2" line to add a third after');
  let cfgText = base.replace(two, `${two}    server tc3 \${TC_BACKEND_3} check\n    http-response set-header X-Served-By %[srv_name]\n`);
  // Every request logged with its timers (queue, connect, response headers) and the test's own
  // request number, so the slowest client's account says where its wait was.
  cfgText = cfgText.replace(/^(\s*log stderr format) short (local0) notice$/m, '$1 raw $2 info')
    .replace(/^defaults\n/m, `defaults\n    log global\n    log-format "${HAPROXY_LOG_FORMAT}"\n`)
    .replace(/^(frontend public\n)/m, '$1    http-request capture req.hdr(x-chaos-req) len 12\n');
  if (!cfgText.includes('x-chaos-req') || !cfgText.includes('raw local0 info')) throw new Error('deploy/haproxy.cfg changed: cannot add the request log');
  const file = path.join(dir, 'haproxy.cfg');
  writeFileSync(file, cfgText);
  return file;
}

async function startStack() {
  const dir = mkdtempSync(path.join(tmpdir(), 'tc-chaos-'));
  const redisDir = path.join(dir, 'redis');
  mkdirSync(redisDir);
  const st = { dir, gateways: [], workers: [], allGateways: [], allWorkers: [], procs: new Set() };
  st.redis = { r: await startRedis({ appendonly: true, dir: redisDir }), state: 'up' };
  st.redis.port = st.redis.r.port;
  st.redisUrl = st.redis.r.url;
  for (const name of ['tc1', 'tc2', 'tc3']) st.gateways.push({ name, port: await freePort(), state: 'down', tc: null });
  await Promise.all(st.gateways.map((g) => startGateway(st, g)));
  st.workerKills = 0;
  st.startFailures = [];
  for (const [name, lang] of plan.workers) st.workers.push({ name, lang, gen: 0, state: 'down', w: null });
  await Promise.all(st.workers.map((w) => startOneWorker(st, w)));

  const file = haproxyConfig(dir);
  st.lbPort = await freePort();
  const env = { ...process.env, TC_LB_BIND: `127.0.0.1:${st.lbPort}` };
  st.gateways.forEach((g, i) => { env[`TC_BACKEND_${i + 1}`] = `127.0.0.1:${g.port}`; });
  const check = spawnSync('haproxy', ['-c', '-f', file], { env, encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`haproxy -c: ${check.stdout}${check.stderr}`);
  st.haproxy = spawn('haproxy', ['-db', '-f', file], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  st.lbLog = new Map(); // request number → HAProxy's timers
  readLines(st.haproxy.stderr, (line) => {
    const m = /chaos-req (\d+) (\S+) (\d+) (-?\d+) (-?\d+) (-?\d+) (-?\d+) (-?\d+)/.exec(line);
    if (m && st.lbLog.size < REQUESTS_KEPT) st.lbLog.set(Number(m[1]), { server: m[2], retries: Number(m[3]), queueMs: Number(m[4]), connectMs: Number(m[5]), responseMs: Number(m[6]), totalMs: Number(m[7]), status: Number(m[8]) });
  });
  st.procs.add(st.haproxy);
  extraProcs.add(st.haproxy);
  st.apiUrl = `http://127.0.0.1:${st.lbPort}`;
  await waitUntil(async () => {
    try {
      const r = await Promise.all(st.gateways.map(() => fetch(`${st.apiUrl}/readyz`)));
      return r.every((x) => x.status === 200);
    } catch { return false; }
  }, 15000, 'haproxy');
  return st;
}

/** Starts gateway slot g on its port (tried again while the port is still held by its last process). */
async function startGateway(st, g) {
  for (let attempt = 1; ; attempt++) {
    try {
      g.tc = await startThreadcast({ redisUrl: st.redisUrl, bin: cfg.bin, args: ['--port', String(g.port)],
        env: { THREADCAST_DRAIN_GRACE: String(cfg.drainGraceMs) } });
      g.tc.slot = g.name;
      st.allGateways.push(g.tc);
      g.state = 'up';
      return g.tc;
    } catch (e) {
      if (attempt >= 5) throw e;
      await sleep(300);
    }
  }
}

/**
 * Starts worker slot w (a new name each time, as a new pod). One that exits while starting (Redis
 * stalled or restarted under its start-up) is started again, as its supervisor would, up to
 * four times; each such exit is kept in st.startFailures (a figure, not a violation).
 */
async function startOneWorker(st, w) {
  const env = { THREADCAST_FAKE_TOKEN_MS: String(cfg.tokenMs) };
  for (let attempt = 1; ; attempt++) {
    w.gen++;
    const name = `chaos-${w.name}-${w.gen}`;
    try {
      w.w = w.lang === 'python'
        ? await startPythonWorker(st.redisUrl, { name, config: plan.config ?? pythonExampleConfig, env, readyMs: 60000 })
        : await startWorker(st.redisUrl, { name, readyMs: 60000, env, args: plan.config ? ['--config', plan.config] : [] });
      break;
    } catch (e) {
      const lines = String(e.message).split('\n').filter((l) => l.trim());
      st.startFailures.push({ t: Date.now(), worker: name, lang: w.lang, error: short(lines.find((l) => /^[\w.]+(Error|Exception): /.test(l.trim())) ?? lines.at(-1) ?? '', 300) });
      log(`worker ${name} did not start (${short(lines.at(-1) ?? '', 120)})${attempt < 4 ? ': again' : ''}`);
      if (attempt >= 4) throw e;
      await sleep(500);
    }
  }
  w.w.lang = w.lang;
  st.allWorkers.push(w.w);
  w.state = 'up';
}

function exited(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((r) => proc.once('exit', () => r()));
}

async function stopStack(st) {
  if (st.redis?.r?.proc && st.redis.state === 'stopped') st.redis.r.proc.kill('SIGCONT');
  for (const w of st.workers) if (w.w && w.w.proc.exitCode === null && w.w.proc.signalCode === null) await w.w.kill('SIGTERM');
  // SIGINT: a gateway stops without the grace a balancer needs.
  for (const g of st.gateways) if (g.tc && g.tc.exitCode === null && g.tc.signal === null) await g.tc.stop('SIGINT');
  for (const p of st.procs) { p.kill('SIGKILL'); await exited(p); extraProcs.delete(p); }
  await stopAll();
  rmSync(st.dir, { recursive: true, force: true });
}

/* ---- faults -------------------------------------------------------------------------------- */

async function fault(st, kind, faults) {
  const f = { kind, t: Date.now(), target: null, tRecovered: null, notes: [] };
  const pick = (list) => list[Math.floor(Math.random() * list.length)];
  /** The fault is on target, which is now in state; its time starts. */
  const begin = (target, slot, state) => {
    f.target = target;
    faults.push(f);
    slot.state = state;
    f.t = Date.now();
  };
  try {
    if (kind === 'gateway-sigkill' || kind === 'gateway-sigterm') {
      const up = st.gateways.filter((g) => g.state === 'up');
      if (up.length < 2) return skipped(f, faults, 'fewer than two gateways up');
      const g = pick(up);
      const tc = g.tc;
      if (kind === 'gateway-sigkill') {
        begin(g.name, g, 'down');
        tc.proc.kill('SIGKILL');
        await exited(tc.proc);
        await sleep(1000);
      } else {
        begin(g.name, g, 'draining');
        tc.proc.kill('SIGTERM');
        const out = await Promise.race([exited(tc.proc).then(() => 'exited'), sleep(cfg.drainGraceMs + 30000).then(() => 'hung')]);
        if (out === 'hung') {
          f.notes.push('the drained gateway did not exit in grace + 30 s: SIGKILLed');
          f.drainHung = true;
          tc.proc.kill('SIGKILL');
          await exited(tc.proc);
        }
        f.exit = { code: tc.exitCode, signal: tc.signal };
        f.tExit = Date.now();
      }
      await startGateway(st, g);
      f.tRecovered = Date.now();
    } else if (kind === 'worker-sigkill') {
      // A killed worker's runs need a live peer serving the same graphs: the language killed
      // has two workers up. Mixed: the kills alternate between the languages.
      const up = (lang) => st.workers.filter((w) => w.state === 'up' && w.lang === lang);
      const lang = LANGS.map((_, j) => LANGS[(st.workerKills + j) % LANGS.length]).find((l) => up(l).length >= 2);
      if (!lang) return skipped(f, faults, LANGS.length > 1 ? 'fewer than two workers of either language up' : 'fewer than two workers up');
      st.workerKills++;
      const w = pick(up(lang));
      f.lang = lang;
      begin(w.w.name, w, 'down');
      await w.w.kill('SIGKILL');
      await sleep(1000);
      await startOneWorker(st, w);
      f.tRecovered = Date.now();
    } else if (kind === 'redis-sigstop') {
      if (st.redis.state !== 'up') return skipped(f, faults, 'redis is not up');
      begin('redis', st.redis, 'stopped');
      st.redis.r.proc.kill('SIGSTOP');
      try { await sleep(REDIS_STOP_MS); } finally { st.redis.r.proc.kill('SIGCONT'); }
      st.redis.state = 'up';
      f.tRecovered = Date.now();
    } else if (kind === 'redis-restart') {
      if (st.redis.state !== 'up') return skipped(f, faults, 'redis is not up');
      begin('redis', st.redis, 'restarting');
      await st.redis.r.stop('SIGTERM');
      st.redis.r = await startRedis({ appendonly: true, port: st.redis.port, dir: st.redis.r.dir });
      st.redis.state = 'up';
      f.tRecovered = Date.now();
    }
  } catch (e) {
    f.notes.push(`fault failed: ${e.message}`);
    f.failed = true;
  }
  log(`fault ${kind} ${f.target ?? ''} ${f.failed ? 'FAILED ' : ''}(${f.tRecovered ? f.tRecovered - f.t : '?'} ms)${f.notes.length ? ` ${f.notes.join('; ')}` : ''}`);
  return f;
}

function skipped(f, faults, why) {
  f.skipped = why;
  faults.push(f);
  log(`fault ${f.kind} skipped: ${why}`);
  return f;
}

/* ---- users --------------------------------------------------------------------------------- */

/**
 * fetch for a user's Client: notes every answer of 5xx (global list) and,
 * for a stream, which gateway served it (X-Served-By) and when its body
 * opened and ended, on the user's current run.
 */
function tracedFetch(u, world) {
  return async (url, init = {}) => {
    const t0 = Date.now();
    const p = new URL(url).pathname;
    const method = init.method ?? 'GET';
    // Every request, for the slowest client's account: when it was asked and when it was answered.
    const req = { n: ++world.requestNo, t: t0, tAnswer: null, status: null, served: null, method, path: p, user: u.i };
    if (world.requests.length < REQUESTS_KEPT) world.requests.push(req);
    const headers = new Headers(init.headers ?? {});
    headers.set('x-chaos-req', String(req.n)); // in HAProxy's log with its timers
    init = { ...init, headers };
    let res;
    try {
      res = await fetch(url, init);
    } catch (e) { // no answer at all (a connection refused or reset): counted with the 5xx, as status 0
      req.tAnswer = Date.now();
      req.status = 0;
      world.http5xx.push({ t: t0, status: 0, served: null, method, path: p, body: short(String(e.cause?.code ?? e.message), 120), user: u.i });
      throw e;
    }
    const served = res.headers.get('x-served-by');
    Object.assign(req, { tAnswer: Date.now(), status: res.status, served });
    if (res.status >= 500) {
      let body = '';
      try { body = await res.clone().text(); } catch { /* cut */ }
      world.http5xx.push({ t: t0, status: res.status, served, method, path: p, body: short(body, 120), user: u.i });
    }
    if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream') || !res.body || !u.cur) return res;
    const conn = { served, method, path: p, tAsked: t0, tOpen: Date.now(), tEnd: null, how: null,
      lastEventId: headers.get('last-event-id') };
    u.cur.conns.push(conn);
    const reader = res.body.getReader();
    const body = new ReadableStream({
      async pull(ctrl) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            conn.tEnd = Date.now();
            conn.how = 'end';
            ctrl.close();
          } else {
            ctrl.enqueue(value);
          }
        } catch (e) {
          conn.tEnd = Date.now();
          conn.how = `error: ${e.cause?.code ?? e.message}`;
          ctrl.error(e);
        }
      },
      cancel(reason) {
        conn.tEnd ??= Date.now();
        conn.how ??= 'cancelled';
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

const errorOf = (what, e) => ({ what, name: e?.name, message: short(String(e?.message ?? e), 300), t: Date.now() });

/** Retries op (a POST the SDK does not retry) up to three times; failures are counted. */
async function tries(world, u, what, op) {
  for (let i = 1; ; i++) {
    try {
      return await op();
    } catch (e) {
      world.requestErrors.push({ user: u.i, ...errorOf(what, e) });
      if (i >= 3) throw e;
      await sleep(500 * i);
    }
  }
}

async function oneRun(world, u, client, thread, k) {
  const q = `question ${u.i}.${k}: tell me about ${TOPICS[(u.i + k) % TOPICS.length]}`;
  const rec = { user: u.i, thread, k, mode: u.i % 4 === 3 ? 'join' : 'stream', lang: u.lang, assistant: u.assistant, q, runId: null, parts: [], conns: [],
    error: null, after: [], status: null, before: null, final: null, tStart: Date.now(), tEnd: null };
  world.recs.push(rec);
  u.cur = rec;
  try {
    if (k > 0) rec.before = plain((await client.threads.getState(thread)).values);
  } catch (e) {
    rec.error = errorOf('threads.getState before the run', e);
    u.cur = null;
    return rec;
  }
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), RUN_TIMEOUT_MS);
  try {
    let gen;
    if (rec.mode === 'stream') {
      gen = client.runs.stream(thread, u.assistant, { input: question(q), streamMode: STREAM_MODE, signal: ac.signal,
        onRunCreated: (m) => { rec.runId ??= m.run_id; } });
    } else {
      const run = await client.runs.create(thread, u.assistant, { input: question(q), streamMode: STREAM_MODE });
      rec.runId = run.run_id;
      gen = client.runs.joinStream(thread, rec.runId, { lastEventId: '-1', signal: ac.signal });
    }
    for await (const p of gen) {
      rec.parts.push({ id: p.id, event: p.event, data: p.data, t: Date.now() });
      if (p.event === 'metadata' && p.data?.run_id) rec.runId ??= p.data.run_id;
    }
    if (ac.signal.aborted) rec.hung = true;
  } catch (e) {
    rec.error = errorOf(rec.mode === 'stream' ? 'runs.stream' : rec.runId ? 'runs.joinStream' : 'runs.create', e);
    if (ac.signal.aborted) rec.hung = true;
  }
  clearTimeout(timer);
  rec.tEnd = Date.now();
  u.cur = null;
  if (!rec.runId) return rec;
  // The reads after the run are the check's, not the user's: one a fault cuts (a gateway
  // killed while it answers: the SDK does not retry "terminated") is made again, twice at
  // most, and counted among the other request errors only if every try failed.
  await readAfter(rec, 'runs.join', () => client.runs.join(thread, rec.runId, { signal: AbortSignal.timeout(60000) }));
  await readAfter(rec, 'runs.get / threads.getState', async () => {
    rec.status = (await client.runs.get(thread, rec.runId)).status;
    rec.final = plain((await client.threads.getState(thread)).values);
  });
  return rec;
}

async function readAfter(rec, what, read) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (e) {
      if (attempt === 3) return void rec.after.push(errorOf(what, e));
      await new Promise((r) => setTimeout(r, 500 * attempt));
    }
  }
}

async function user(world, i) {
  const u = { i, cur: null, lang: langOf(i) };
  u.assistant = plan.graphs[u.lang];
  const client = new Client({ apiUrl: world.apiUrl, apiKey: null, callerOptions: { fetch: tracedFetch(u, world) } });
  while (Date.now() < world.endAt) {
    const thread = randomUUID();
    try {
      await tries(world, u, 'threads.create', () => client.threads.create({ threadId: thread, ifExists: 'do_nothing' }));
    } catch {
      continue;
    }
    world.threads.push(thread);
    world.threadLang.set(thread, u.lang);
    for (let k = 0; k < (i % 3 === 0 ? 2 : 1) && Date.now() < world.endAt; k++) {
      const rec = await oneRun(world, u, client, thread, k);
      if (rec.error || !TERMINAL.includes(rec.status)) break;
    }
  }
}

/* ---- checks -------------------------------------------------------------------------------- */

/** The root messages-tuple chunks of a stream, assembled per message id. */
function assembled(parts) {
  const byId = new Map();
  for (const p of parts) {
    if (p.event !== 'messages' || !Array.isArray(p.data)) continue;
    const [chunk] = p.data;
    const id = chunk?.id ?? '(no id)';
    const m = byId.get(id) ?? { id, type: chunk?.type, text: '', chunks: 0, toolCallId: chunk?.tool_call_id, calls: new Map() };
    m.text += textOf(chunk ?? {});
    m.chunks++;
    for (const c of chunk?.tool_call_chunks ?? []) {
      const call = m.calls.get(c.index) ?? { id: null, name: null, args: '' };
      call.id ??= c.id ?? null;
      call.name ??= c.name ?? null;
      call.args += c.args ?? '';
      m.calls.set(c.index, call);
    }
    byId.set(id, m);
  }
  return [...byId.values()];
}

const isHuman = (m) => m.type === 'human' || m.role === 'user';

const isObj = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
const has = (o, ...keys) => keys.every((k) => Object.hasOwn(o, k));

/**
 * What is wrong with a `messages` event's data for a graph of lang, or null: [chunk, metadata]
 * as that language's server renders it (the JavaScript server: @langchain/core's chunk, type
 * "ai"; the Python server: langchain_core's model_dump, "AIMessageChunk" for a streamed chunk,
 * "ai" for a whole message), the metadata naming this run and thread (and, from the Python
 * server, this graph).
 */
function shapeProblem(data, rec) {
  if (!Array.isArray(data) || data.length !== 2 || !isObj(data[0]) || !isObj(data[1])) return 'not [chunk, metadata]';
  const [c, meta] = data;
  if (typeof c.id !== 'string' || !c.id) return `chunk id ${JSON.stringify(c.id)}`;
  if (typeof c.content !== 'string' && !Array.isArray(c.content)) return `chunk ${c.id}: content ${JSON.stringify(c.content)}`;
  if (typeof meta.langgraph_node !== 'string') return `chunk ${c.id}: metadata without langgraph_node`;
  if (meta.thread_id !== rec.thread) return `chunk ${c.id}: metadata thread_id ${meta.thread_id}`;
  if (rec.runId && meta.run_id !== rec.runId) return `chunk ${c.id}: metadata run_id ${meta.run_id}`;
  if (rec.lang === 'js') {
    if (c.type !== 'ai' && c.type !== 'tool') return `chunk ${c.id}: type ${c.type} (the JavaScript server's: ai, tool)`;
    if (c.type === 'ai' && !Array.isArray(c.tool_call_chunks) && !Array.isArray(c.tool_calls)) return `chunk ${c.id}: ai without tool_call_chunks or tool_calls`;
    return null;
  }
  if (c.type === 'AIMessageChunk') {
    if (!Array.isArray(c.tool_call_chunks) || !has(c, 'usage_metadata', 'tool_calls', 'invalid_tool_calls')) return `chunk ${c.id}: AIMessageChunk without the Python server's fields (${Object.keys(c).join(',')})`;
  } else if (c.type === 'ai') {
    if (has(c, 'tool_call_chunks') || !has(c, 'usage_metadata', 'tool_calls', 'invalid_tool_calls')) return `chunk ${c.id}: ai not as the Python server renders a whole message (${Object.keys(c).join(',')})`;
  } else if (c.type === 'tool') {
    if (!has(c, 'tool_call_id', 'status', 'artifact')) return `chunk ${c.id}: tool without the Python server's fields (${Object.keys(c).join(',')})`;
  } else {
    return `chunk ${c.id}: type ${c.type} (the Python server's: AIMessageChunk, ai, tool)`;
  }
  if (meta.graph_id !== rec.assistant) return `chunk ${c.id}: metadata graph_id ${meta.graph_id}, the run's graph ${rec.assistant}`;
  return null;
}

function checkRun(rec, takenOver, violate) {
  const where = { user: rec.user, thread: rec.thread, run: rec.runId, mode: rec.mode, lang: rec.lang };
  const v = (kind, detail) => violate({ kind, ...where, detail });
  if (rec.hung) v('stream-hung', `no end in ${RUN_TIMEOUT_MS} ms`);
  const shapes = rec.parts.filter((p) => p.event === 'messages').map((p) => [p, shapeProblem(p.data, rec)]).filter(([, x]) => x);
  if (shapes.length) v('message-shape', `${shapes.length} messages events, the first ${shapes[0][0].id}: ${shapes[0][1]}`);
  const ids = rec.parts.map((p) => p.id);
  for (let i = 0; i < ids.length; i++) {
    if (!/^\d+$/.test(String(ids[i]))) { v('id-not-integer', `part ${i} (${rec.parts[i].event}): ${ids[i]}`); break; }
    if (i > 0 && Number(ids[i]) <= Number(ids[i - 1])) { v('ids-not-increasing', `${ids[i - 1]} then ${ids[i]} at part ${i}`); break; }
  }
  if (rec.error || !rec.runId) return;
  if (!TERMINAL.includes(rec.status)) return; // reported by the terminal check
  const errors = rec.parts.filter((p) => p.event === 'error');
  if (rec.status === 'error' && !errors.length) v('silent-failure', 'the run failed; its stream showed no error event');
  if (rec.status === 'success' && errors.length) v('error-event-in-successful-run', short(JSON.stringify(errors[0].data)));
  if (rec.status !== 'success') return;
  if (rec.final === null) return; // its state could not be read (an other request error)
  const values = rec.parts.filter((p) => p.event === 'values');
  if (!values.length) v('no-values', 'a successful run\'s stream had no values event');
  else if (!isDeepStrictEqual(plain(values.at(-1).data), rec.final)) {
    v('last-values-not-final-state', `last values: ${(values.at(-1).data?.messages ?? []).length} messages, state: ${(rec.final?.messages ?? []).length}`);
  }
  const beforeIds = new Set((rec.before?.messages ?? []).map((m) => m.id));
  const added = (rec.final?.messages ?? []).filter((m) => !beforeIds.has(m.id));
  const streamed = assembled(rec.parts);
  const matched = new Set();
  for (const m of added) {
    if (isHuman(m)) continue; // the input: in values only (LangGraph's messages mode shows no input)
    const want = textOf(m);
    const got = m.type === 'tool' ? streamed.find((s) => s.type === 'tool' && s.toolCallId === m.tool_call_id)
      : streamed.find((s) => s.id === m.id);
    if (!got) { v('message-missing', `${m.type} ${m.id}: ${short(JSON.stringify(want), 80)} not in messages-tuple`); continue; }
    matched.add(got);
    if (got.text !== want) v('message-text-differs', `${m.type} ${m.id}: streamed ${JSON.stringify(short(got.text, 100))} (${got.text.length}), state ${JSON.stringify(short(want, 100))} (${want.length})`);
    for (const call of m.tool_calls ?? []) {
      const c = [...got.calls.values()].find((x) => x.id === call.id);
      let args;
      try { args = c && JSON.parse(c.args); } catch { args = undefined; }
      if (!c || !isDeepStrictEqual(args, call.args)) v('tool-call-args-differ', `${call.id}: streamed ${JSON.stringify(c?.args)}, state ${JSON.stringify(call.args)}`);
    }
  }
  const finalTexts = added.filter((m) => !isHuman(m)).map(textOf);
  for (const s of streamed) {
    if (matched.has(s)) continue;
    const whole = finalTexts.includes(s.text);
    const prefix = finalTexts.some((t) => t.startsWith(s.text));
    if (takenOver.has(rec.runId) && prefix && !whole) { rec.cut = (rec.cut ?? 0) + 1; continue; }
    if (takenOver.has(rec.runId) && whole) { rec.again = (rec.again ?? 0) + 1; continue; }
    v(whole ? 'message-repeated' : 'message-not-in-state',
      `${s.type} ${s.id} (${s.chunks} chunks): ${JSON.stringify(short(s.text, 100))}${takenOver.has(rec.runId) ? ' (a run taken over)' : ''}`);
  }
}

/** What the client got against a full replay of the run: same event at every id, no hole, the end reached. */
function checkReplay(rec, replay, violate) {
  const where = { user: rec.user, thread: rec.thread, run: rec.runId, mode: rec.mode, lang: rec.lang };
  const v = (kind, detail) => violate({ kind, ...where, detail });
  const byId = new Map(replay.map((p) => [String(p.id), p]));
  let differs = 0, first = null;
  for (const p of rec.parts) {
    const r = byId.get(String(p.id));
    if (!r || r.event !== p.event || !isDeepStrictEqual(plain(r.data), plain(p.data))) { differs++; first ??= `${p.id} ${p.event}`; }
  }
  if (differs) v('differs-from-replay', `${differs} events, the first ${first}`);
  if (!rec.parts.length) return;
  const lo = Number(rec.parts[0].id), hi = Number(rec.parts.at(-1).id);
  const got = new Set(rec.parts.map((p) => String(p.id)));
  const holes = replay.filter((p) => Number(p.id) > lo && Number(p.id) < hi && !got.has(String(p.id)));
  if (holes.length) v('events-lost', `${holes.length} events between ids ${lo} and ${hi} never received, the first ${holes[0].id} ${holes[0].event}`);
  if (Number(replay[0]?.id) < lo) v('start-missed', `the stream began at ${lo}, the run at ${replay[0].id}`);
  if (!rec.error && rec.status === 'success' && replay.length && Number(replay.at(-1).id) > hi) {
    v('silent-truncation', `the stream ended cleanly at ${hi}; the run's last event is ${replay.at(-1).id} ${replay.at(-1).event}`);
  }
}

async function pool(items, n, fn) {
  const queue = [...items];
  await Promise.all(Array.from({ length: n }, async () => { while (queue.length) await fn(queue.shift()); }));
}

/* ---- one chaos run ------------------------------------------------------------------------- */

async function chaosRun(no) {
  log(`run ${no}: starting the stack (${cfg.bin})`);
  const st = await startStack();
  const world = { apiUrl: st.apiUrl, endAt: 0, recs: [], threads: [], threadLang: new Map(), requestErrors: [], http5xx: [], requests: [], requestNo: 0, lbLog: st.lbLog,
    // What a gateway (every process that ran in its slot) logged between two times, at most 30 lines.
    gatewayLog: (slot, from, to) => st.allGateways.filter((tc) => tc.slot === slot).flatMap((tc) => tc.logs)
      .filter((l) => { const t = Date.parse(l.ts); return t >= from && t <= to; }).slice(0, 30) };
  const faults = [];
  const violations = [];
  const violate = (x) => violations.push(x);
  const tasks = [];
  const t0 = Date.now();
  world.endAt = t0 + cfg.seconds * 1000;
  log(`run ${no}: ${cfg.users} users for ${cfg.seconds} s, a fault every ${cfg.faultEveryMs / 1000} s, through ${st.apiUrl}`);
  const users = Promise.all(Array.from({ length: cfg.users }, (_, i) => user(world, i)));
  for (let n = 0; ; n++) {
    const wait = cfg.faultEveryMs * (0.8 + 0.4 * Math.random());
    if (Date.now() + wait >= world.endAt) break;
    await sleep(wait);
    tasks.push(fault(st, FAULT_KINDS[n % FAULT_KINDS.length], faults));
  }
  await Promise.race([Promise.all(tasks), sleep(cfg.drainGraceMs + 60000)]);
  log(`run ${no}: faults over; waiting for the users' last runs`);
  await users;
  const tUsers = Date.now();
  for (const g of st.gateways) if (g.state !== 'up') violate({ kind: 'stack', detail: `gateway ${g.name} is ${g.state} at the end` });

  // Every run terminal (bounded): every run of every thread.
  const client = new Client({ apiUrl: st.apiUrl, apiKey: null });
  const runStatus = new Map();
  const checksEnd = Date.now() + CHECKS_MS;
  await pool(world.threads, 8, async (thread) => {
    try {
      await waitUntil(async () => {
        const list = await client.runs.list(thread, { limit: 100 });
        for (const r of list) runStatus.set(r.run_id, { thread, status: r.status });
        return list.every((r) => TERMINAL.includes(r.status));
      }, Math.max(0, checksEnd - CHECKS_MS / 2 - Date.now()), 'the thread\'s runs to end');
    } catch (e) { /* reported below from runStatus */ }
  });
  for (const [run, { thread, status }] of runStatus) if (!TERMINAL.includes(status)) violate({ kind: 'run-not-terminal', thread, run, lang: world.threadLang.get(thread), detail: status });
  for (const rec of world.recs) if (rec.runId && runStatus.has(rec.runId)) rec.status = runStatus.get(rec.runId).status;
  // The example graph fails no run of its own: a run that ended in error was lost to a fault.
  for (const [run, { thread, status }] of runStatus) {
    if (status !== 'error') continue;
    const rec = world.recs.find((r) => r.runId === run);
    const shown = rec?.parts.findLast((p) => p.event === 'error')?.data;
    violate({ kind: 'run-failed', user: rec?.user, thread, run, mode: rec?.mode, lang: rec?.lang ?? world.threadLang.get(thread),
      detail: shown ? short(JSON.stringify(shown), 300) : 'status error (no error event seen)' });
  }

  // Runs a worker took over (the workers' own words).
  const takeovers = st.allWorkers.flatMap((w) => w.logs.filter((l) => l.msg === 'taking over a run').map((l) => ({ run: l.run_id, thread: l.thread, t: Date.parse(l.ts), from: l.from, lang: w.lang, worker: w.name })));
  const takenOver = new Set(takeovers.map((x) => x.run));
  for (const rec of world.recs) checkRun(rec, takenOver, violate);
  let replaysSkipped = 0;
  await pool(world.recs.filter((r) => r.runId && r.parts.length), 6, async (rec) => {
    if (Date.now() > checksEnd) { replaysSkipped++; return; }
    try {
      const replay = [];
      for await (const p of client.runs.joinStream(rec.thread, rec.runId, { lastEventId: '-1', signal: AbortSignal.timeout(30000) })) replay.push(p);
      checkReplay(rec, replay, violate);
    } catch (e) {
      violate({ kind: 'replay-failed', user: rec.user, thread: rec.thread, run: rec.runId, detail: e.message });
    }
  });

  // Fault → the next event of each client it affected.
  const perKind = {};
  for (const kind of FAULT_KINDS) {
    perKind[kind] = { faults: 0, skipped: 0, affected: 0, noNext: 0, ms: [], afterRecoveryMs: [], slowest: null,
      byLang: Object.fromEntries(LANGS.map((l) => [l, { affected: 0, noNext: 0, ms: [] }])) };
  }
  const nextAfter = (rec, t) => rec.parts.find((p) => p.t > t);
  for (const f of faults) {
    const k = perKind[f.kind];
    if (f.skipped) { k.skipped++; continue; }
    k.faults++;
    const samples = []; // [rec, from]
    if (f.kind === 'gateway-sigkill') {
      for (const rec of world.recs) if (rec.conns.some((c) => c.served === f.target && c.tOpen <= f.t && (c.tEnd === null || c.tEnd >= f.t))) samples.push([rec, f.t]);
    } else if (f.kind === 'gateway-sigterm') {
      for (const rec of world.recs) {
        rec.conns.forEach((c, i) => {
          if (c.served !== f.target || c.tEnd === null || c.tEnd < f.t || c.tEnd > (f.tExit ?? Infinity) + 1000) return;
          if (i < rec.conns.length - 1 || rec.error) samples.push([rec, c.tEnd]); // cut, not the run's end
        });
      }
    } else if (f.kind === 'worker-sigkill') {
      const nextKill = faults.find((g) => g.kind === 'worker-sigkill' && !g.skipped && g.t > f.t)?.t ?? Infinity;
      const runs = new Set(takeovers.filter((x) => x.t >= f.t && x.t < Math.min(nextKill, f.t + 20000)).map((x) => x.run));
      for (const rec of world.recs) if (runs.has(rec.runId) && rec.tStart <= f.t && (rec.tEnd ?? Infinity) >= f.t) samples.push([rec, f.t]);
    } else {
      for (const rec of world.recs) if (rec.tStart <= f.t && (rec.tEnd ?? Infinity) >= f.t && rec.conns.some((c) => c.tOpen <= f.t)) samples.push([rec, f.t]);
    }
    f.affected = samples.length;
    for (const [rec, from] of samples) {
      k.affected++;
      const kl = k.byLang[rec.lang];
      kl.affected++;
      const p = nextAfter(rec, from);
      if (!p) { k.noNext++; kl.noNext++; continue; }
      k.ms.push(p.t - from);
      kl.ms.push(p.t - from);
      if (f.tRecovered) k.afterRecoveryMs.push(Math.max(0, p.t - f.tRecovered));
      if (!k.slowest || p.t - from > k.slowest.ms) { // what the slowest client went through, to explain it
        k.slowest = { ms: p.t - from, user: rec.user, lang: rec.lang, run: rec.runId, fault: f.target, faultAt: f.t - t0, nextEventAt: p.t - t0,
          conns: rec.conns.filter((c) => c.tOpen >= from - 60000).map((c) => ({ served: c.served, asked: c.tAsked - t0, open: c.tOpen - t0, end: c.tEnd === null ? null : c.tEnd - t0, how: c.how })),
          // Every request of that user between the fault and the next event, answered or not (status 0: no answer).
          requests: world.requests.filter((q) => q.user === rec.user && (q.tAnswer ?? Infinity) >= from && q.t <= p.t)
            .map((q) => ({ method: q.method, path: q.path, asked: q.t - t0, answered: q.tAnswer === null ? null : q.tAnswer - t0, status: q.status, served: q.served, balancer: world.lbLog.get(q.n) ?? null })),
          // The log of the gateway that was killed, and of its successor, until the next event.
          gatewayLog: world.gatewayLog(f.target, f.t - 1000, p.t).map((l) => ({ ...l, at: Date.parse(l.ts) - t0 })) };
      }
    }
  }
  const latency = {};
  let missedTargets = 0;
  for (const [kind, k] of Object.entries(perKind)) {
    const s = [...k.ms].sort((a, b) => a - b);
    const r = [...k.afterRecoveryMs].sort((a, b) => a - b);
    latency[kind] = { faults: k.faults, skipped: k.skipped, affected: k.affected, noNextEvent: k.noNext,
      p50: percentile(s, 50), p99: percentile(s, 99), max: s.at(-1) ?? null,
      afterRecovery: { p50: percentile(r, 50), p99: percentile(r, 99), max: r.at(-1) ?? null }, slowest: k.slowest };
    if (LANGS.length > 1) {
      latency[kind].byLanguage = Object.fromEntries(Object.entries(k.byLang).map(([lang, x]) => {
        const ls = [...x.ms].sort((a, b) => a - b);
        return [lang, { affected: x.affected, noNextEvent: x.noNext, p50: percentile(ls, 50), p99: percentile(ls, 99), max: ls.at(-1) ?? null }];
      }));
    }
    if (TARGETS[kind] !== undefined) {
      latency[kind].targetP99 = TARGETS[kind];
      // Mixed: each language's clients meet it (a few slow ones of one language would hide in the other's many).
      const p99s = [s, ...(LANGS.length > 1 ? Object.values(k.byLang).map((x) => [...x.ms].sort((a, b) => a - b)) : [])]
        .filter((x) => x.length).map((x) => percentile(x, 99));
      latency[kind].meetsTarget = p99s.length ? p99s.every((x) => x <= TARGETS[kind]) : null;
      if (latency[kind].meetsTarget === false) missedTargets++;
    }
  }

  // Drains: exit 0, no request refused because of one.
  for (const f of faults) {
    if (f.kind === 'gateway-sigterm' && f.exit && !(f.exit.code === 0 && f.exit.signal === null)) violate({ kind: 'drain-exit', detail: `${f.target}: ${JSON.stringify(f.exit)}${f.drainHung ? ' (hung)' : ''}` });
  }
  const draining503 = world.http5xx.filter((x) => x.status === 503 && /draining/.test(x.body));
  for (const x of draining503) violate({ kind: 'request-refused-by-drain', user: x.user, detail: `${x.method} ${x.path} on ${x.served}` });

  const sanitizer = st.allGateways.flatMap((tc) => tc.sanitizerReports().length
    ? [{ gateway: tc.slot, report: tc.stderr.split('\n').filter((l) => /ERROR: AddressSanitizer|runtime error|SUMMARY|^\s+#\d/.test(l)).slice(0, 30).join('\n') }] : []);
  for (const s of sanitizer) violate({ kind: 'sanitizer', detail: `${s.gateway}: ${short(s.report, 2000)}` });
  const workerErrors = st.allWorkers.flatMap((w) => w.logs.filter((l) => l.level === 'error').map((l) => ({ worker: w.name, lang: w.lang, msg: l.msg, error: short(String(l.error ?? ''), 300) })));

  const byStatus = {};
  for (const { status } of runStatus.values()) byStatus[status] = (byStatus[status] ?? 0) + 1;
  const clientErrors = world.recs.filter((r) => r.error).map((r) => ({ user: r.user, thread: r.thread, run: r.runId, ...r.error, t: r.error.t - t0 }));
  const byKind = {};
  for (const v of violations) byKind[v.kind] = (byKind[v.kind] ?? 0) + 1;
  // Per language (the graph the client ran): what each served, and what went wrong with it.
  const recsOf = (lang) => world.recs.filter((r) => r.lang === lang);
  const byLanguage = Object.fromEntries(LANGS.map((lang) => [lang, {
    assistant: plan.graphs[lang], workers: plan.workers.filter(([, l]) => l === lang).length,
    runs: [...runStatus.values()].filter((x) => world.threadLang.get(x.thread) === lang).length,
    streams: recsOf(lang).filter((r) => r.parts.length || r.conns.length || r.error).length,
    runsTakenOver: new Set(takeovers.filter((x) => x.lang === lang).map((x) => x.run)).size,
    workerKills: faults.filter((f) => f.kind === 'worker-sigkill' && !f.skipped && f.lang === lang).length,
    cutMessages: recsOf(lang).reduce((n, r) => n + (r.cut ?? 0), 0),
    finishedStreamedAgain: recsOf(lang).reduce((n, r) => n + (r.again ?? 0), 0),
    clientsWithErrors: recsOf(lang).filter((r) => r.error).length,
    violations: violations.filter((v) => v.lang === lang).length,
  }]));
  const figures = {
    run: no, workers: cfg.workers, startedAt: new Date(t0).toISOString(), seconds: cfg.seconds, users: cfg.users, faultEverySeconds: cfg.faultEveryMs / 1000, tokenMs: cfg.tokenMs,
    drainGraceMs: cfg.drainGraceMs, bin: cfg.bin, wallSeconds: Math.round((Date.now() - t0) / 1000),
    drainedSeconds: Math.round((tUsers - world.endAt) / 1000),
    runs: runStatus.size, streams: world.recs.filter((r) => r.parts.length || r.conns.length || r.error).length,
    streamConnections: world.recs.reduce((n, r) => n + r.conns.length, 0),
    reconnects: world.recs.reduce((n, r) => n + Math.max(0, r.conns.length - 1), 0),
    runsTerminal: [...runStatus.values()].filter((x) => TERMINAL.includes(x.status)).length, runsByStatus: byStatus,
    runsTakenOver: takenOver.size, byLanguage, replaysSkipped, cutMessages: world.recs.reduce((n, r) => n + (r.cut ?? 0), 0),
    finishedStreamedAgain: world.recs.reduce((n, r) => n + (r.again ?? 0), 0),
    clientsWithErrors: clientErrors.length, clientErrors,
    otherRequestErrors: world.requestErrors.length + world.recs.reduce((n, r) => n + r.after.length, 0),
    requestErrors: [...world.requestErrors, ...world.recs.flatMap((r) => r.after.map((a) => ({ user: r.user, ...a })))].map((e) => ({ ...e, t: e.t - t0 })),
    http5xx: { count: world.http5xx.length, byStatus: countBy(world.http5xx, (x) => x.status), draining503: draining503.length,
      sample: world.http5xx.slice(0, 10).map((x) => ({ ...x, t: x.t - t0 })) },
    faults: faults.map((f) => ({ kind: f.kind, target: f.target, ...(f.lang ? { lang: f.lang } : {}), at: f.t - t0, recoveredMs: f.tRecovered ? f.tRecovered - f.t : null,
      affected: f.affected ?? 0, ...(f.skipped ? { skipped: f.skipped } : {}), ...(f.exit ? { exit: f.exit } : {}), ...(f.notes.length ? { notes: f.notes } : {}) })),
    latency, missedTargets,
    violations: violations.length, violationsByKind: byKind, violationList: violations.slice(0, 200),
    evidence: [...new Set(violations.map((v) => v.run).filter(Boolean))].slice(0, 25)
      .map((run) => world.recs.find((r) => r.runId === run)).filter(Boolean).map((r) => evidence(r, t0, takeovers)),
    workerErrors,
    workerStartFailures: st.startFailures.map((x) => ({ ...x, t: x.t - t0 })),
  };
  if (cfg.logs) await keepLogs(no, st, world, violations);
  await stopStack(st);
  if (cfg.logs) writeLogs(no, st);
  return figures;
}

/**
 * --logs DIR: the stored events of the threads of runs with violations (up to 25), read before
 * the stack stops, as DIR/run<no>/thread-<id>.jsonl (one event a line, with its seq).
 */
async function keepLogs(no, st, world, violations) {
  const dir = path.join(cfg.logs, `run${no}`);
  mkdirSync(dir, { recursive: true });
  const threads = [...new Set(violations.map((v) => v.thread).filter(Boolean))].slice(0, 25);
  const rc = redisClient(st.redis.port);
  try {
    for (const t of threads) {
      const evs = await storedEvents(rc, t);
      writeFileSync(path.join(dir, `thread-${t}.jsonl`), evs.map((e) => JSON.stringify(e)).join('\n') + '\n');
    }
  } catch (e) {
    log(`--logs: the threads' events could not be read: ${e.message}`);
  } finally {
    rc.close();
  }
}

/** --logs DIR: every worker's and gateway's stderr (their JSON log lines), as DIR/run<no>/<name>.log. */
function writeLogs(no, st) {
  const dir = path.join(cfg.logs, `run${no}`);
  mkdirSync(dir, { recursive: true });
  for (const w of st.allWorkers) writeFileSync(path.join(dir, `worker-${w.lang}-${w.name}.log`), w.stderr);
  const seen = {};
  for (const tc of st.allGateways) {
    seen[tc.slot] = (seen[tc.slot] ?? 0) + 1;
    writeFileSync(path.join(dir, `gateway-${tc.slot}-${seen[tc.slot]}.log`), tc.stderr);
  }
  log(`run ${no}: logs in ${dir}`);
}

/** A run's story, for a violation's diagnosis: its streams, its parts in short, its takeovers. */
function evidence(rec, t0, takeovers) {
  const brief = (p) => {
    if (p.event !== 'messages' || !Array.isArray(p.data)) return p.event === 'values' ? `${(p.data?.messages ?? []).length} messages` : '';
    const [c, meta] = p.data;
    const calls = (c.tool_call_chunks ?? []).map((x) => `call ${x.id ?? ''}#${x.index} ${JSON.stringify(x.args)}`).join(' ');
    return `${c.type} …${String(c.id).slice(-6)} ${meta?.langgraph_node} ${JSON.stringify(textOf(c))}${calls ? ` ${calls}` : ''}`;
  };
  return {
    user: rec.user, thread: rec.thread, run: rec.runId, mode: rec.mode, status: rec.status, error: rec.error,
    start: rec.tStart - t0, end: rec.tEnd - t0,
    conns: rec.conns.map((c) => ({ served: c.served, open: c.tOpen - t0, end: c.tEnd === null ? null : c.tEnd - t0, how: c.how, lastEventId: c.lastEventId })),
    takeovers: takeovers.filter((x) => x.run === rec.runId).map((x) => ({ at: x.t - t0, from: x.from })),
    parts: rec.parts.map((p) => `${p.t - t0} ${p.id} ${p.event} ${brief(p)}`),
  };
}

function countBy(list, key) {
  const o = {};
  for (const x of list) o[key(x)] = (o[key(x)] ?? 0) + 1;
  return o;
}

function summary(f) {
  const ms = (x) => (x === null || x === undefined ? '—' : `${(x / 1000).toFixed(2)} s`);
  const lines = [
    `chaos run ${f.run} (${f.workers} workers): ${f.seconds} s, ${f.users} users, a fault every ~${f.faultEverySeconds} s (${f.wallSeconds} s in all)`,
    `  runs ${f.runs}, terminal ${f.runsTerminal} ${JSON.stringify(f.runsByStatus)}; streams ${f.streams}, stream connections ${f.streamConnections} (${f.reconnects} reconnects); runs taken over ${f.runsTakenOver}, cut messages ${f.cutMessages}, finished ones streamed again ${f.finishedStreamedAgain}`,
    `  clients with errors ${f.clientsWithErrors}${f.clientErrors.length ? `: ${Object.entries(countBy(f.clientErrors, (e) => `${e.what}: ${short(e.message, 90)}`)).map(([k, n]) => `${n}× ${k}`).join('; ')}` : ''}`,
    `  other request errors ${f.otherRequestErrors}; HTTP 5xx answers (0: none, the connection failed) ${f.http5xx.count} ${JSON.stringify(f.http5xx.byStatus)} (503 draining: ${f.http5xx.draining503})`,
    '  fault kind          faults affected  p50     p99     max     (after recovery p99)  target',
  ];
  for (const [kind, l] of Object.entries(f.latency)) {
    lines.push(`  ${kind.padEnd(19)} ${String(l.faults).padStart(6)} ${String(l.affected).padStart(8)}  ${ms(l.p50).padEnd(7)} ${ms(l.p99).padEnd(7)} ${ms(l.max).padEnd(7)} (${ms(l.afterRecovery.p99)})${' '.repeat(12)}${l.targetP99 ? `${l.meetsTarget === false ? 'MISSED' : l.meetsTarget ? 'met' : 'no sample'} (≤ ${l.targetP99 / 1000} s)` : ''}`);
  }
  if (Object.keys(f.byLanguage).length > 1) {
    for (const [lang, x] of Object.entries(f.byLanguage)) {
      const lat = Object.entries(f.latency).filter(([, l]) => l.byLanguage?.[lang]?.affected)
        .map(([kind, l]) => `${kind} ${ms(l.byLanguage[lang].p50)}/${ms(l.byLanguage[lang].p99)}`).join(', ');
      lines.push(`  ${lang} ("${x.assistant}", ${x.workers} workers): runs ${x.runs}, streams ${x.streams}, worker kills ${x.workerKills}, runs taken over ${x.runsTakenOver}, cut ${x.cutMessages}, again ${x.finishedStreamedAgain}, clients with errors ${x.clientsWithErrors}, violations ${x.violations}`);
      if (lat) lines.push(`    p50/p99: ${lat}`);
    }
  }
  lines.push(`  violations ${f.violations}${f.violations ? ` ${JSON.stringify(f.violationsByKind)}` : ''}`);
  for (const v of f.violationList.slice(0, 15)) lines.push(`    ${v.kind}${v.lang ? ` (${v.lang})` : ''} user ${v.user ?? '-'} thread ${v.thread ?? '-'} run ${v.run ?? '-'}: ${v.detail}`);
  if (f.workerStartFailures.length) lines.push(`  workers that exited while starting (started again) ${f.workerStartFailures.length}: ${short(JSON.stringify(f.workerStartFailures[0]), 200)}`);
  if (f.workerErrors.length) lines.push(`  worker error lines ${f.workerErrors.length}: ${short(JSON.stringify(f.workerErrors[0]), 200)}`);
  return lines.join('\n');
}

/* ---- main ---------------------------------------------------------------------------------- */

let stopping = false;
async function giveUp(why, code) {
  if (stopping) return;
  stopping = true;
  log(`${why}: stopping everything`);
  for (const p of extraProcs) p.kill('SIGKILL');
  await stopAll();
  // A fault's restart may have been under way (a gateway is started a second after its kill).
  await sleep(1500);
  for (const p of extraProcs) p.kill('SIGKILL');
  await stopAll();
  process.exit(code);
}
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => giveUp(sig, 130));
// However a run goes, it ends: its seconds, the users' last runs, the checks, and a margin.
setTimeout(() => giveUp('the watchdog (a run took far longer than it can)', 2),
  cfg.runs * (cfg.seconds * 1000 + RUN_TIMEOUT_MS + 60000 + CHECKS_MS + cfg.drainGraceMs + 180000)).unref();

const all = [];
let broken = false;
for (let no = 1; no <= cfg.runs; no++) {
  try {
    const f = await chaosRun(no);
    all.push(f);
    console.log(summary(f));
  } catch (e) {
    broken = true;
    log(`run ${no}: the stack broke: ${e.stack ?? e}`);
    for (const p of extraProcs) p.kill('SIGKILL');
    await stopAll();
    break;
  }
}
const out = { config: cfg, runs: all };
const json = JSON.stringify(out, null, 2);
if (opt.json) writeFileSync(opt.json, json);
else console.log(json);
if (all.length > 1) {
  console.log(`\n${all.length} chaos runs: ${all.reduce((n, f) => n + f.runs, 0)} runs, violations ${all.map((f) => f.violations).join(', ')}, missed targets ${all.map((f) => f.missedTargets).join(', ')}`);
}
process.exit(broken ? 2 : all.some((f) => f.violations || f.missedTargets) ? 1 : 0);
