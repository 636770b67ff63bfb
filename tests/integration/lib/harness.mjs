// Test harness: real redis-server and real threadcast processes on free
// loopback ports, and a small WebSocket client that pairs replies with
// commands by id. Every process started here is stopped by stopAll(), which
// the tests call from `after()`, so nothing outlives a failing test.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');
export const threadcastBin =
  process.env.THREADCAST_BIN || path.join(repoRoot, 'build', 'threadcast');

const running = new Set();

// Ports are picked outside the kernel's ephemeral range: a port from inside it
// (what listen(0) hands out) can become the local port of some outgoing
// connection between being picked and being bound — the storm tests running
// beside make thousands — and the server then fails to bind it.
const portRange = (() => {
  let lo = 32768, hi = 60999;
  try {
    [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  } catch { /* the default range */ }
  return lo > 11024 ? [10000, lo - 10000] : [hi + 1, 65535 - hi];
})();

function tryListen(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A TCP port on 127.0.0.1 that nothing is bound to, outside the ephemeral range. */
export async function freePort() {
  const [base, span] = portRange;
  for (let i = 0; i < 200; i++) {
    const port = base + Math.floor(Math.random() * span);
    if (await tryListen(port)) return port;
  }
  throw new Error('no free port found');
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls fn until it returns a truthy value or timeoutMs passes. */
export async function waitUntil(fn, timeoutMs = 5000, what = 'condition') {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Counts proc among what this file started: stopAll() stops it, and so does the file's end. */
export function track(proc) {
  running.add(proc);
  proc.on('exit', () => running.delete(proc));
  return proc;
}

// A file that ends without its after() hooks — the runner stops one that
// passes its --test-timeout with SIGTERM — still stops, by PID, every process
// it started, instead of leaving servers behind.
function killRunning() {
  for (const p of running) {
    try { p.kill('SIGKILL'); } catch { /* gone already */ }
  }
}
process.on('exit', killRunning);
for (const [sig, n] of [['SIGTERM', 15], ['SIGINT', 2]]) {
  process.once(sig, () => {
    killRunning();
    process.exit(128 + n);
  });
}

function exited(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((r) => proc.once('exit', () => r()));
}

/**
 * The store's server: redis-server, or the binary TC_REDIS_SERVER names
 * (scripts/test runs the store's suites against a valkey-server 8 this way).
 * Its command line, log lines and Sentinel mode are redis-server's.
 */
export const redisServerBin = process.env.TC_REDIS_SERVER || 'redis-server';

/**
 * Starts the store's server (redisServerBin) on a free port in a fresh temp dir. With tls
 * ({ cert, key, ca, authClients }, PEM files; lib/tls.mjs makes them) the port is a TLS port and
 * there is no plain one; url is then rediss://127.0.0.1:<port>.
 */
export async function startRedis({ appendonly = false, port, dir, extra = [], tls } = {}) {
  dir = dir || mkdtempSync(path.join(tmpdir(), 'tc-redis-'));
  const fixedPort = port;
  let proc, out;
  // Another port is tried when the chosen one was taken meanwhile (unless the
  // caller chose it).
  for (let attempt = 1; ; attempt++) {
    port = fixedPort || (await freePort());
    const listen = tls
      ? ['--port', '0', '--tls-port', String(port), '--tls-cert-file', tls.cert, '--tls-key-file', tls.key,
        '--tls-ca-cert-file', tls.ca, '--tls-auth-clients', tls.authClients ?? 'no']
      : ['--port', String(port)];
    const args = [...listen, '--bind', '127.0.0.1', '--dir', dir,
      '--save', '', '--appendonly', appendonly ? 'yes' : 'no', '--daemonize', 'no', ...extra];
    proc = track(spawn(redisServerBin, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    out = '';
    proc.stdout.on('data', (d) => { out += d; });
    proc.stderr.on('data', (d) => { out += d; });
    let closed = false;
    const streamsClosed = new Promise((r) => proc.once('close', () => { closed = true; r(); }));
    await waitUntil(() => out.includes('Ready to accept connections') || closed, 30000, redisServerBin);
    if (out.includes('Ready to accept connections')) break;
    await streamsClosed; // its last words read
    if (fixedPort || attempt === 5 || !/Address already in use/.test(out)) {
      throw new Error(`${redisServerBin} on port ${port} exited: ${out.slice(-2000)}`);
    }
  }
  return {
    port,
    dir,
    url: `${tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`,
    proc,
    async stop(signal = 'SIGTERM') {
      proc.kill(signal);
      await exited(proc);
    },
    async cleanup() {
      proc.kill('SIGKILL');
      await exited(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const sanitizerPatterns = [/ERROR: AddressSanitizer/, /ERROR: LeakSanitizer/, /runtime error:/,
  /SUMMARY: UndefinedBehaviorSanitizer/];

/**
 * Keeps a process' stderr in into.stderr and its JSON log lines, parsed, in
 * into.logs (other lines, such as sanitizer reports, only in stderr).
 */
export function collectLogs(stream, into) {
  let partial = '';
  stream.on('data', (d) => {
    into.stderr += d;
    partial += d;
    let nl;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      try { into.logs.push(JSON.parse(line)); } catch { /* not JSON */ }
    }
  });
}

/**
 * Starts the threadcast binary with --port 0 and resolves once it logged
 * "listening" (with the port it bound). stderr is kept as parsed log lines.
 */
export async function startThreadcast({ redisUrl, args = [], env = {}, bin = threadcastBin } = {}) {
  // Authentication is on by default; tests that do not test it turn it off explicitly.
  // Stopped by SIGTERM, a test's gateway drains without the grace a balancer needs (tests of it ask for one).
  const fullEnv = { THREADCAST_AUTH: 'off', THREADCAST_DRAIN_GRACE: '0', ...process.env, ...env };
  if (redisUrl) fullEnv.THREADCAST_REDIS_URL = redisUrl;
  const proc = track(spawn(bin, ['--port', '0', '--host', '127.0.0.1', ...args],
    { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] }));
  const tc = { proc, stderr: '', logs: [], port: 0, exitCode: null, signal: null };
  collectLogs(proc.stderr, tc);
  proc.on('exit', (code, signal) => { tc.exitCode = code; tc.signal = signal; });
  const listening = await waitUntil(
    () => tc.logs.find((l) => l.msg === 'listening') || (tc.exitCode !== null && 'exited'),
    30000, 'threadcast to listen');
  if (listening === 'exited') throw new Error(`threadcast exited early: ${tc.stderr}`);
  tc.port = listening.port;
  tc.url = (thread) => `ws://127.0.0.1:${tc.port}/threads/${thread}/stream`;
  tc.http = (p, init) => fetch(`http://127.0.0.1:${tc.port}${p}`, init);
  tc.sanitizerReports = () => sanitizerPatterns.filter((re) => re.test(tc.stderr));
  tc.waitLog = (pred, ms = 5000) => waitUntil(() => tc.logs.find(pred), ms, 'log line');
  /** Resolves once /readyz answers 200: Redis reached, the function loaded, not draining. */
  tc.ready = (ms = 15000) => waitUntil(async () => (await tc.http('/readyz')).status === 200, ms, 'threadcast to be ready');
  /** Sends signal and waits for exit; resolves {code, signal}. */
  tc.stop = async (signal = 'SIGTERM') => {
    if (tc.exitCode === null && tc.signal === null) proc.kill(signal);
    await exited(proc);
    return { code: tc.exitCode, signal: tc.signal };
  };
  return tc;
}

/** Kills every process the harness started. */
export async function stopAll() {
  const procs = [...running];
  for (const p of procs) p.kill('SIGKILL');
  await Promise.all(procs.map(exited));
}

/**
 * A WebSocket client: `request(cmd)` resolves with the reply whose id is
 * cmd.id; every frame received is kept in `frames` (parsed) and events in
 * `events`. `closed` resolves with {code, reason}.
 */
export function connect(url, opts = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, opts);
    const client = {
      ws,
      frames: [],
      events: [],
      raw: [],
      pending: new Map(),
      nullIdErrors: [],
    };
    client.closed = new Promise((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    ws.on('message', (data, isBinary) => {
      const text = data.toString();
      client.raw.push(text);
      const msg = JSON.parse(text);
      client.frames.push(msg);
      if (msg.type === 'event') client.events.push(msg);
      else if (msg.id === null) client.nullIdErrors.push(msg);
      else {
        const p = client.pending.get(msg.id);
        if (p) { client.pending.delete(msg.id); p(msg); }
      }
    });
    client.sendRaw = (data, o) => ws.send(data, o);
    client.request = (cmd) => new Promise((res) => {
      client.pending.set(cmd.id, res);
      ws.send(JSON.stringify(cmd));
    });
    client.close = () => { ws.close(); return client.closed; };
    ws.once('open', () => resolve(client));
    ws.once('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode, body })));
    });
    ws.once('error', reject);
  });
}

/* ---- a load balancer ------------------------------------------------------------------ */

/**
 * HAProxy with deploy/haproxy.cfg in front of two threadcast ports; resolves
 * with its port once it answers /readyz. Stopped by stopAll().
 */
export async function startHaproxy(backends) {
  const cfg = path.join(repoRoot, 'deploy', 'haproxy.cfg');
  const port = await freePort();
  const env = { ...process.env, TC_LB_BIND: `127.0.0.1:${port}`,
    TC_BACKEND_1: `127.0.0.1:${backends[0]}`, TC_BACKEND_2: `127.0.0.1:${backends[1]}` };
  const check = spawnSync('haproxy', ['-c', '-f', cfg], { env, encoding: 'utf8' });
  assert.equal(check.status, 0, check.stdout + check.stderr);
  track(spawn('haproxy', ['-db', '-f', cfg], { env, stdio: ['ignore', 'ignore', 'pipe'] }));
  await waitUntil(async () => { try { return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200; } catch { return false; } }, 10000, 'haproxy');
  return port;
}

/* ---- producers, agents, SSE --------------------------------------------------------- */

export const produceBin = path.join(path.dirname(threadcastBin), 'threadcast-produce');
export const agentBin = path.join(path.dirname(threadcastBin), 'threadcast-agent');

/**
 * Appends events (objects) to thread with threadcast-produce; resolves with
 * the seqs it printed. Rejects when it exits non-zero (unless allowFail).
 */
export function produce(redisUrl, thread, events, { args = [], allowFail = false } = {}) {
  return new Promise((resolve, reject) => {
    const p = track(spawn(produceBin, ['--redis-url', redisUrl, ...args, thread],
      { stdio: ['pipe', 'pipe', 'pipe'] }));
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.on('exit', (code) => {
      const seqs = out.split('\n').filter(Boolean).map(Number);
      if (code !== 0 && !allowFail) reject(new Error(`threadcast-produce exited ${code}: ${err}`));
      else resolve({ seqs, code, stderr: err });
    });
    p.stdin.end(events.map((e) => (typeof e === 'string' ? e : JSON.stringify(e))).join('\n') + '\n');
  });
}

export const workerBin = path.join(repoRoot, 'src/worker/bin/threadcast-worker.js');

/**
 * Starts the LangGraph worker (src/worker) serving the example graph;
 * resolves once it is registered and reading. env THREADCAST_FAKE_TOKEN_MS
 * paces the fake model's tokens.
 */
export async function startWorker(redisUrl, { name, args = [], env = {}, readyMs = 30000 } = {}) {
  const p = track(spawn(process.execPath, [workerBin, '--redis-url', redisUrl, ...(name ? ['--name', name] : []), ...args],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, THREADCAST_FAKE_TOKEN_MS: '5', ...env } }));
  const worker = { proc: p, stderr: '', logs: [], name };
  collectLogs(p.stderr, worker);
  const ready = await waitUntil(() => worker.logs.find((l) => l.msg === 'worker ready') || (p.exitCode !== null && 'exited'),
    readyMs, 'the LangGraph worker to start');
  if (ready === 'exited') throw new Error(`the worker exited: ${worker.stderr}`);
  worker.name = ready.name;
  worker.kill = async (signal = 'SIGKILL') => { p.kill(signal); await exited(p); };
  return worker;
}

/**
/**
 * The Python worker's command (src/worker-python), from the venv scripts/lib.sh's
 * `tc_python_env dev` makes; THREADCAST_WORKER_PYTHON (or TC_PY_WORKER, TC_PYTHON_WORKER)
 * names another.
 */
export const pythonWorkerBin = process.env.THREADCAST_WORKER_PYTHON || process.env.TC_PY_WORKER
  || process.env.TC_PYTHON_WORKER || path.join(repoRoot, 'build-py/venv-dev/bin/threadcast-worker-python');

/** The example Python project (src/worker-python/example): src/worker/graphs/agent.js's twin. */
export const pythonExampleConfig = path.join(repoRoot, 'src/worker-python/example/langgraph.json');
export const pythonExample = pythonExampleConfig;

/**
 * Starts the Python worker serving the Python graphs of the project config (a langgraph.json;
 * default the example Python project); resolves, as startWorker does, once it is registered and
 * reading ("worker ready"). env THREADCAST_FAKE_TOKEN_MS paces the example's fake model (5 ms
 * here). worker.kill(signal) signals it by PID and waits for its exit; worker.exit resolves
 * {code, signal} when it exits; worker.alive() says whether it has not; worker.waitLog(pred)
 * waits for a log line.
 */
export async function startPythonWorker(redisUrl, { name, config = pythonExampleConfig, args = [], env = {}, readyMs = 60000, bin = pythonWorkerBin } = {}) {
  if (!existsSync(bin)) throw new Error(`no ${bin}: make the venv first (source scripts/lib.sh; tc_python_env dev)`);
  const p = track(spawn(bin, ['--config', config, '--redis-url', redisUrl, ...(name ? ['--name', name] : []), ...args],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, THREADCAST_FAKE_TOKEN_MS: '5', PYTHONUNBUFFERED: '1', ...env } }));
  const worker = { proc: p, stderr: '', logs: [], name, exitCode: null, signal: null };
  collectLogs(p.stderr, worker);
  worker.exit = new Promise((r) => p.once('exit', (code, signal) => {
    worker.exitCode = code;
    worker.signal = signal;
    r({ code, signal });
  }));
  // Its imports (langgraph, langchain_core) take seconds on a busy machine.
  const ready = await waitUntil(() => worker.logs.find((l) => l.msg === 'worker ready') || (worker.exitCode !== null && 'exited'),
    readyMs, 'the Python worker to start');
  if (ready === 'exited') throw new Error(`the Python worker exited (${worker.exitCode}): ${worker.stderr}`);
  worker.name = ready.name;
  worker.waitLog = (pred, ms = 5000) => waitUntil(() => worker.logs.find(pred), ms, 'a log line of the Python worker');
  worker.alive = () => p.exitCode === null && p.signalCode === null;
  worker.kill = async (signal = 'SIGKILL') => {
    if (p.exitCode === null && p.signalCode === null) p.kill(signal);
    return worker.exit;
  };
  return worker;
}

/** Starts a reference agent; resolves once it is connected. */
export async function startAgent(redisUrl, { name, args = [] } = {}) {
  const p = track(spawn(agentBin, ['--redis-url', redisUrl, '--token-delay-ms', '1',
    ...(name ? ['--name', name] : []), ...args], { stdio: ['ignore', 'ignore', 'pipe'] }));
  const agent = { proc: p, stderr: '', logs: [] };
  collectLogs(p.stderr, agent);
  // Connected, and in the registry: gateways route commands to it from now on.
  await waitUntil(() => agent.logs.filter((l) => l.msg === 'redis connected').length >= 2 &&
    agent.logs.some((l) => l.msg === 'registered'), 5000, 'agent to connect and register');
  agent.waitLog = (pred, ms = 5000) => waitUntil(() => agent.logs.find(pred), ms, 'agent log');
  agent.kill = async (signal = 'SIGKILL') => { p.kill(signal); await exited(p); };
  return agent;
}

/**
 * Opens an SSE stream with fetch and parses it. events: [{id, event, data}]
 * (data parsed as JSON when it is), comments: count of comment lines.
 */
export async function sse(url, init = {}) {
  const controller = new AbortController();
  const res = await fetch(url, { ...init, signal: controller.signal });
  const stream = { status: res.status, headers: res.headers, events: [], comments: 0, body: '' };
  if (!res.headers.get('content-type')?.startsWith('text/event-stream')) {
    stream.body = await res.text();
    stream.close = () => {};
    return stream;
  }
  const decoder = new TextDecoder();
  let buf = '';
  stream.done = (async () => {
    try {
      for await (const chunk of res.body) {
        buf += decoder.decode(chunk, { stream: true });
        let end;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const ev = { data: [] };
          let comment = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comment = true;
            else if (line.startsWith('id: ')) ev.id = line.slice(4);
            else if (line.startsWith('event: ')) ev.event = line.slice(7);
            else if (line.startsWith('data: ')) ev.data.push(line.slice(6));
          }
          if (comment && !ev.data.length) { stream.comments++; continue; }
          const text = ev.data.join('\n');
          try { ev.data = JSON.parse(text); } catch { ev.data = text; }
          stream.events.push(ev);
        }
      }
    } catch { /* aborted */ }
  })();
  stream.close = () => controller.abort();
  return stream;
}

/** A raw RESP client for assertions on Redis state: redis.cmd('XLEN', key). */
/** threadcast's Redis function libraries, in the order the gateway loads them. */
export const functionLibraries = ['threadcast', 'threadcast_store', 'threadcast_rest'];

/**
 * The text of one of them (protocol/redis/<name>.lua) as the gateway loads it: assembled by
 * scripts/embed.py, which puts threadcast.lua's shared prelude into the others.
 */
export function functionLibrary(name) {
  const dir = path.join(repoRoot, 'protocol/redis');
  const r = spawnSync('python3', [path.join(repoRoot, 'scripts/embed.py'), '--library', path.join(dir, 'threadcast.lua'),
    path.join(dir, `${name}.lua`)], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

/** Loads threadcast's function libraries into the Redis rc talks to (tests that call its functions without a gateway). */
export async function loadLibrary(rc) {
  for (const name of functionLibraries) assert.equal(await rc.cmd('FUNCTION', 'LOAD', 'REPLACE', functionLibrary(name)), name);
}

export function redisClient(port) {
  const sock = net.createConnection({ port, host: '127.0.0.1' });
  let buf = Buffer.alloc(0);
  const waiters = [];
  function parse(b, i) {
    const type = String.fromCharCode(b[i]);
    const nl = b.indexOf('\r\n', i);
    if (nl < 0) return null;
    const line = b.toString('utf8', i + 1, nl);
    if (type === '+' ) return [line, nl + 2];
    if (type === '-') return [new Error(line), nl + 2];
    if (type === ':') return [Number(line), nl + 2];
    if (type === '$') {
      const n = Number(line);
      if (n < 0) return [null, nl + 2];
      if (b.length < nl + 2 + n + 2) return null;
      return [b.toString('utf8', nl + 2, nl + 2 + n), nl + 2 + n + 2];
    }
    if (type === '*') {
      const n = Number(line);
      if (n < 0) return [null, nl + 2];
      const arr = [];
      let j = nl + 2;
      for (let k = 0; k < n; k++) {
        const r = parse(b, j);
        if (!r) return null;
        arr.push(r[0]);
        j = r[1];
      }
      return [arr, j];
    }
    throw new Error(`bad RESP type ${type}`);
  }
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      if (!buf.length || !waiters.length) break;
      const r = parse(buf, 0);
      if (!r) break;
      buf = buf.subarray(r[1]);
      waiters.shift()(r[0]);
    }
  });
  // A connection that fails (refused, reset by a Sentinel's failover) fails
  // the commands waiting on it and those sent after, instead of throwing an
  // 'error' event nobody listens to; so does one the server closes (a
  // Sentinel promoting a replica kills its clients, often with no error on
  // this side): a command waiting on it would otherwise never settle.
  let failure = null;
  const failed = [];
  const fail = (e) => {
    failure = failure || e;
    for (const w of waiters.splice(0)) w(Promise.reject(failure));
    for (const f of failed.splice(0)) f(failure);
  };
  sock.on('error', fail);
  sock.on('close', () => fail(new Error('the connection to Redis closed')));
  const ready = new Promise((r, reject) => { sock.once('connect', r); failed.push(reject); });
  ready.catch(() => {});
  return {
    async cmd(...args) {
      await ready;
      if (failure) throw failure;
      const parts = [`*${args.length}\r\n`];
      for (const a of args) {
        const s = String(a);
        parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`);
      }
      return new Promise((resolve) => { waiters.push(resolve); sock.write(parts.join('')); });
    },
    close() { sock.destroy(); },
  };
}

/** Asserts every seq is greater than the one before: returns the first violation or null. */
export function firstDisorder(seqs) {
  for (let i = 1; i < seqs.length; i++) if (seqs[i] <= seqs[i - 1]) return { at: i, prev: seqs[i - 1], seq: seqs[i] };
  return null;
}

/**
 * The usual test file: one redis-server and one threadcast, started before
 * the tests (ready) and stopped after them, failing the file on any
 * sanitizer report. set(redis, tc) receives them.
 */
export function gateway({ args = [], env = {} } = {}, set) {
  let redis;
  let tc;
  before(async () => {
    redis = await startRedis();
    tc = await startThreadcast({ redisUrl: redis.url, args, env });
    await tc.ready();
    set(redis, tc);
  });
  after(async () => {
    const reports = tc.sanitizerReports();
    await stopAll();
    await redis.cleanup();
    assert.deepEqual(reports, [], tc.stderr);
  });
}

let sentinelId = 4000000000;

/**
 * Sends each text as one frame, then a sentinel command, and resolves with
 * the non-event frames that arrived before the sentinel's reply. Replies come
 * in order, so this is exactly what the texts were answered with: one entry
 * per text when each got exactly one reply.
 */
export async function exchange(client, texts, ms = 5000) {
  const start = client.frames.length;
  const id = ++sentinelId;
  for (const t of texts) client.sendRaw(t);
  client.sendRaw(JSON.stringify({ id, method: 'tc.sentinel', params: {} }));
  await waitUntil(() => client.frames.slice(start).some((f) => f.id === id), ms, `sentinel ${id}`);
  const got = client.frames.slice(start).filter((f) => f.type !== 'event');
  const last = got.pop();
  assert.equal(last.id, id, 'the sentinel is answered last');
  assert.equal(last.error, 'unknown_command');
  return got;
}

/** A thread's stored history, oldest first: [{seq, method, params}] (what clients are sent). */
export async function storedEvents(rc, thread) {
  const rows = await rc.cmd('XRANGE', `tc:{${thread}}:events`, '-', '+');
  return rows.map(([id, fields]) => {
    const f = {};
    for (let i = 0; i < fields.length; i += 2) f[fields[i]] = fields[i + 1];
    return { seq: Number(id.split('-')[0]), ...JSON.parse(f.e) };
  });
}
