// scripts/run as a newcomer uses it: no Redis configured, so it starts one,
// the LangGraph worker with the example graph, and threadcast with the demo
// page. The page, in Debian's headless Chromium, drives a whole run of the
// real graph — an interrupt asked and answered in the page — and SIGTERM to
// scripts/run stops everything it started. With --config and the Python
// example project it makes the Python worker's venv (the first time) and
// serves the example with it; the page's approval finishes a run.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { chromium } from 'playwright-core';
import { freePort, waitUntil, repoRoot } from './lib/harness.mjs';
import { lines } from '../../src/worker/graphs/agent.js';

let run, browser;
const runs = [];
after(async () => {
  await browser?.close();
  for (const r of runs) {
    if (r.exitCode === null) {
      r.kill('SIGKILL');
      await new Promise((done) => r.once('exit', done));
    }
  }
});

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test('scripts/run: Redis, the LangGraph worker and threadcast; the demo page drives the example graph', { timeout: 600000 }, async () => {
  const port = await freePort();
  const env = { ...process.env, TC_AGENT_TOKEN_DELAY_MS: '10' };
  delete env.THREADCAST_REDIS_URL;
  run = spawn('scripts/run', ['--port', String(port)], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  runs.push(run);
  let out = '';
  run.stdout.on('data', (d) => { out += d; });
  run.stderr.on('data', (d) => { out += d; });
  // The first run builds the release binary.
  await waitUntil(() => /"msg":"worker ready"/.test(out) && /"msg":"listening"/.test(out) || run.exitCode !== null,
    480000, 'scripts/run to start everything');
  assert.equal(run.exitCode, null, out);
  const workerPid = Number(/LangGraph worker with the example graph \(assistant "agent", pid (\d+)\)/.exec(out)?.[1]);
  const redisPort = Number(/started a local redis-server at redis:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1]);
  assert.ok(workerPid && redisPort, out);
  assert.match(out, new RegExp(`demo page: http://127\\.0\\.0\\.1:${port}/`));
  await waitUntil(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => ({}))).status === 200, 20000, 'ready');

  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`http://127.0.0.1:${port}/#run-demo`);
  await page.waitForFunction(() => document.getElementById('conn').dataset.status === 'open');
  const q = 'look it up, then interrupt me';
  await page.fill('#message', q);
  await page.click('#send');
  await page.waitForSelector('#interrupt', { state: 'visible', timeout: 30000 });
  assert.equal(await page.textContent('#interrupt-question'), 'Approve the answer?');
  await page.fill('#interrupt-answer', 'yes');
  await page.click('#interrupt button');
  await page.waitForFunction(() => threadcastDemo.events.some((e) => e.method === 'lifecycle' &&
    e.params.namespace.length === 0 && e.params.data.event === 'completed'), null, { timeout: 30000 });
  await page.waitForFunction(() => !document.querySelector('.msg.streaming'));
  const texts = await page.$$eval('.msg .text', (ns) => ns.map((n) => n.textContent));
  assert.deepEqual(texts, [q, lines.searching, lines.answer(q), lines.summary]);
  assert.equal(await page.locator('.msg.sub').count(), 1, 'the researcher subgraph\'s message');
  const who = await page.$$eval('.msg .who', (ns) => ns.map((n) => n.textContent));
  assert.deepEqual(who.map((w) => w.replace(/ › .*/, '')), ['human', 'ai · model', 'ai · model', 'ai · researcher']);
  assert.match(await page.textContent('.tool'), /search\(\{"query":"look it up, then interrupt me"\}\)/);
  const agents = await page.$$eval('#agents li', (ns) => ns.map((n) => n.textContent.trim()));
  assert.deepEqual(agents, ['rootcompleted', 'researchercompleted']);
  assert.ok(await page.locator('#checkpoints li').count() >= 5);
  assert.deepEqual(errors, []);
  await page.close();

  // SIGTERM: scripts/run stops threadcast, the worker and Redis.
  run.kill('SIGTERM');
  const code = await new Promise((r) => run.once('exit', (c) => r(c)));
  assert.equal(code, 0, out.slice(-2000));
  await waitUntil(() => !alive(workerPid), 15000, 'the worker to stop');
  await assert.rejects(fetch(`http://127.0.0.1:${port}/readyz`), 'threadcast is gone');
  const redisGone = await new Promise((r) => {
    const s = net.createConnection({ port: redisPort, host: '127.0.0.1' });
    s.once('connect', () => { s.destroy(); r(false); });
    s.once('error', () => r(true));
  });
  assert.ok(redisGone, 'the private redis-server is gone');
});

test('scripts/run --config with the Python example: the Python worker serves it; the demo page asks for the approval and Approve finishes the run', { timeout: 600000 }, async () => {
  const port = await freePort();
  const env = { ...process.env, THREADCAST_FAKE_TOKEN_MS: '10' };
  delete env.THREADCAST_REDIS_URL;
  const py = spawn('scripts/run', ['--config', 'src/worker-python/example/langgraph.json', '--port', String(port)],
    { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  runs.push(py);
  let out = '';
  py.stdout.on('data', (d) => { out += d; });
  py.stderr.on('data', (d) => { out += d; });
  // The first run makes the Python worker's venv from its lock file.
  await waitUntil(() => /"msg":"worker ready"/.test(out) && /"msg":"listening"/.test(out) || py.exitCode !== null,
    480000, 'scripts/run --config to start everything');
  assert.equal(py.exitCode, null, out);
  const workerPid = Number(/its Python graphs by src\/worker-python \(pid (\d+)\)/.exec(out)?.[1]);
  assert.ok(workerPid, out);
  assert.match(out, /"msg":"worker ready","name":"langgraph-py-\d+","assistants":\["agent"\]/);
  await waitUntil(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => ({}))).status === 200, 20000, 'ready');

  browser ??= await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`http://127.0.0.1:${port}/#run-python-demo`);
  await page.waitForFunction(() => document.getElementById('conn').dataset.status === 'open');
  const q = 'answer after my approval';
  await page.fill('#message', q);
  await page.click('#send');
  await page.waitForSelector('#approval', { state: 'visible', timeout: 30000 });
  assert.equal(await page.textContent('#interrupt-question'), 'Send this answer?');
  await page.click('#approve');
  await page.waitForFunction(() => threadcastDemo.events.some((e) => e.method === 'lifecycle' &&
    e.params.namespace.length === 0 && e.params.data.event === 'completed'), null, { timeout: 30000 });
  await page.waitForFunction(() => !document.querySelector('.msg.streaming'));
  const texts = await page.$$eval('.msg .text', (ns) => ns.map((n) => n.textContent));
  assert.deepEqual(texts, [q, lines.searching, lines.answer(q), lines.summary]);
  const who = await page.$$eval('.msg .who', (ns) => ns.map((n) => n.textContent));
  assert.deepEqual(who, ['human', 'ai · model', 'ai · model', 'ai · researcher › summarize']);
  assert.match(await page.textContent('.tool'), /search\(\{"query":"answer after my approval"\}\)/);
  assert.deepEqual(errors, []);
  await page.close();

  py.kill('SIGTERM');
  const code = await new Promise((r) => py.once('exit', (c) => r(c)));
  assert.equal(code, 0, out.slice(-2000));
  await waitUntil(() => !alive(workerPid), 15000, 'the Python worker to stop');
});

