// Configuration: bad settings exit 2 with a message naming the setting; --help exits 0.
import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, spawn } from 'node:child_process';
import { stopAll, threadcastBin } from './lib/harness.mjs';

// Bad settings exit 2 naming the setting (from the start-up and stop tests).
describe('configuration errors', () => {
  after(async () => { await stopAll(); });

  function run(args, env = {}) {
    return spawnSync(threadcastBin, args, { env: { THREADCAST_AUTH: 'off', ...process.env, ...env }, encoding: 'utf8', timeout: 10000 });
  }

  test('bad configuration exits 2 with a message naming the setting', () => {
    let r = run(['--port', 'abc']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--port/);
    r = run([], { THREADCAST_PORT: '99999' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /THREADCAST_PORT/);
    r = run(['--log-level', 'loud']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--log-level/);
    r = run(['--redis-url', 'http://x']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /redis/);
    r = run(['--nope']);
    assert.equal(r.status, 2);
    r = run(['--commands', 'maybe']);
    assert.equal(r.status, 2);
    r = run(['--help']);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /THREADCAST_REDIS_URL/);
  });
});

// Spec §8: configuration errors exit 2 naming the setting; --help exits 0.
describe('spec §8: configuration errors exit 2 naming the setting', () => {
  after(async () => { await stopAll(); });

  const sanitizer = /AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer/;

  /**
   * Runs the binary to completion (killed after 15 s) with only the given
   * THREADCAST_* variables set, and authentication off so that only the
   * setting under test can be wrong.
   */
  function run(args, env = {}) {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('THREADCAST_')));
    return new Promise((resolve, reject) => {
      const p = spawn(threadcastBin, args, { env: { ...base, THREADCAST_AUTH: 'off', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => { stdout += d; });
      p.stderr.on('data', (d) => { stderr += d; });
      const timer = setTimeout(() => p.kill('SIGKILL'), 15000);
      p.on('error', reject);
      p.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr }); });
    });
  }

  async function rejected(args, env, names) {
    const r = await run(args, env);
    const what = `${args.join(' ')} ${JSON.stringify(env)}`;
    assert.equal(r.signal, null, `${what} was killed: still running after 15 s?`);
    assert.equal(r.code, 2, `${what}: exit ${r.code}\n${r.stderr}`);
    for (const n of names) assert.ok(r.stderr.includes(n), `${what}: stderr should name ${n}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, sanitizer);
    assert.doesNotMatch(r.stderr, /"msg":"listening"/);
    return r;
  }

  test('--port abc exits 2 naming --port', async () => {
    await rejected(['--port', 'abc'], {}, ['--port']);
  });

  test('THREADCAST_PORT=99999 exits 2 naming THREADCAST_PORT', async () => {
    await rejected([], { THREADCAST_PORT: '99999' }, ['THREADCAST_PORT']);
  });

  test('--log-level loud exits 2 naming --log-level', async () => {
    await rejected(['--log-level', 'loud'], {}, ['--log-level']);
  });

  test('--redis-url http://x exits 2 naming --redis-url', async () => {
    await rejected(['--redis-url', 'http://x'], {}, ['--redis-url']);
  });

  test('an unknown flag --nope exits 2 naming it', async () => {
    await rejected(['--nope'], {}, ['--nope']);
  });

  test('--help exits 0 and lists THREADCAST_REDIS_URL', async () => {
    const r = await run(['--help']);
    assert.equal(r.signal, null);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /THREADCAST_REDIS_URL/);
    assert.match(r.stdout, /--port/);
    assert.doesNotMatch(r.stderr, sanitizer);
  });
});
