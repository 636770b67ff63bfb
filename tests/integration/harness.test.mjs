// The harness itself: a test file the runner stops (past its --test-timeout
// the runner sends SIGTERM, and the file's after() hooks never run) still
// stops the servers it started, by PID; and a Redis connection the server
// closes fails the command waiting on it instead of leaving it unsettled; and
// the Python worker starts (startPythonWorker) as the chaos test starts it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedis, startPythonWorker, redisClient, stopAll, waitUntil } from './lib/harness.mjs';

const harness = path.join(path.dirname(fileURLToPath(import.meta.url)), 'lib/harness.mjs');

/** Whether pid is gone or dead (a zombie waits for a parent that may never reap it). */
function dead(pid) {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0] === 'Z';
  } catch {
    return true;
  }
}

test('a file stopped by SIGTERM before its after() hooks stops the Redis it started', async () => {
  const script = `
    const { startRedis } = await import(${JSON.stringify(harness)});
    const r = await startRedis();
    console.log(JSON.stringify({ pid: r.proc.pid }));
    setInterval(() => {}, 1000); // a test that hangs
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  await waitUntil(() => out.includes('\n'), 20000, 'the child to start its Redis');
  const { pid } = JSON.parse(out);
  assert.equal(dead(pid), false);
  const exited = new Promise((r) => child.on('exit', (code, signal) => r({ code, signal })));
  child.kill('SIGTERM');
  assert.deepEqual(await exited, { code: 143, signal: null });
  await waitUntil(() => dead(pid), 5000, `the child's Redis (pid ${pid}) to be stopped`);
});

test('a command waiting on a connection the server closes fails instead of waiting forever', async () => {
  const r = await startRedis();
  try {
    const rc = redisClient(r.port);
    assert.equal(await rc.cmd('CLIENT', 'SETNAME', 'victim'), 'OK');
    const killer = redisClient(r.port);
    // BLPOP waits; the server then closes the connection under it. (Its failure is awaited
    // from the start: the close may come before CLIENT KILL's own answer is read.)
    const waiting = assert.rejects(rc.cmd('BLPOP', 'nothing', '0'), /closed|reset/);
    await waitUntil(async () => (await killer.cmd('CLIENT', 'LIST')).includes('cmd=blpop'), 5000, 'the BLPOP');
    assert.equal(await killer.cmd('CLIENT', 'KILL', 'SKIPME', 'yes', 'TYPE', 'normal'), 1);
    await waiting;
    await assert.rejects(rc.cmd('PING'), /closed|reset/);
    killer.close();
  } finally {
    await stopAll();
    await r.cleanup();
  }
});

test('startPythonWorker: the Python worker registered for the example project\'s graph, then killed; no venv is named', async () => {
  const r = await startRedis();
  try {
    const w = await startPythonWorker(r.url, { name: 'harness-py' });
    assert.equal(w.name, 'harness-py');
    assert.deepEqual(w.logs.find((l) => l.msg === 'worker ready').assistants, ['agent']);
    // Registered for its assistant: what the gateway routes by and peers check liveness with.
    const rc = redisClient(r.port);
    const until = Number(await rc.cmd('ZSCORE', '{tc:commands}:w:agent', 'harness-py'));
    assert.ok(until > Number((await rc.cmd('TIME'))[0]) * 1000, `live until ${until}`);
    rc.close();
    await w.kill('SIGKILL');
    assert.equal(w.proc.signalCode, 'SIGKILL');
    await assert.rejects(startPythonWorker(r.url, { bin: '/nonexistent/threadcast-worker-python' }), /tc_python_env dev/);
  } finally {
    await stopAll();
    await r.cleanup();
  }
});
