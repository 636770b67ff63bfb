// Test harness: real redis-server and real threadcast processes on free
// loopback ports, and a small WebSocket client that pairs replies with
// commands by id. Every process started here is stopped by stopAll(), which
// the tests call from `after()`, so nothing outlives a failing test.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');
export const threadcastBin =
  process.env.THREADCAST_BIN || path.join(repoRoot, 'build', 'threadcast');

const running = new Set();

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
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

function track(proc) {
  running.add(proc);
  proc.on('exit', () => running.delete(proc));
  return proc;
}

function exited(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((r) => proc.once('exit', () => r()));
}

/** Starts redis-server on a free port in a fresh temp dir. */
export async function startRedis({ appendonly = false, port } = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'tc-redis-'));
  port = port || (await freePort());
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
    '--save', '', '--appendonly', appendonly ? 'yes' : 'no', '--daemonize', 'no'];
  const proc = track(spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  proc.stdout.on('data', (d) => { out += d; });
  await waitUntil(() => out.includes('Ready to accept connections'), 5000, 'redis-server');
  return {
    port,
    dir,
    url: `redis://127.0.0.1:${port}`,
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
 * Starts the threadcast binary with --port 0 and resolves once it logged
 * "listening" (with the port it bound). stderr is kept as parsed log lines.
 */
export async function startThreadcast({ redisUrl, args = [], env = {} } = {}) {
  const fullEnv = { ...process.env, ...env };
  if (redisUrl) fullEnv.THREADCAST_REDIS_URL = redisUrl;
  const proc = track(spawn(threadcastBin, ['--port', '0', '--host', '127.0.0.1', ...args],
    { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] }));
  const tc = { proc, stderr: '', logs: [], port: 0, exitCode: null, signal: null };
  let partial = '';
  proc.stderr.on('data', (d) => {
    tc.stderr += d;
    partial += d;
    let nl;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      try { tc.logs.push(JSON.parse(line)); } catch { /* sanitizer output etc. */ }
    }
  });
  proc.on('exit', (code, signal) => { tc.exitCode = code; tc.signal = signal; });
  const listening = await waitUntil(
    () => tc.logs.find((l) => l.msg === 'listening') || (tc.exitCode !== null && 'exited'),
    10000, 'threadcast to listen');
  if (listening === 'exited') throw new Error(`threadcast exited early: ${tc.stderr}`);
  tc.port = listening.port;
  tc.url = (thread) => `ws://127.0.0.1:${tc.port}/threads/${thread}/stream`;
  tc.http = (p, init) => fetch(`http://127.0.0.1:${tc.port}${p}`, init);
  tc.sanitizerReports = () => sanitizerPatterns.filter((re) => re.test(tc.stderr));
  tc.waitLog = (pred, ms = 5000) => waitUntil(() => tc.logs.find(pred), ms, 'log line');
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
