// The demo page, served by threadcast (--static-dir protocol/js), driven in
// Debian's headless Chromium against the reference agent: a full run streams
// into the page, an interrupt is answered from it, and a gateway killed and
// restarted mid-run leaves the page with the complete, exact transcript.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { chromium } from 'playwright-core';
import {
  startRedis, startThreadcast, startAgent, stopAll, waitUntil, sleep, freePort, redisClient,
  storedEvents, repoRoot,
} from './lib/harness.mjs';
import { assemble } from '../../protocol/js/messages.js';
// The expected events come from the tests' own reading of the filter rules, not the client's.
import { matches } from './lib/events.mjs';

const CHANNELS = ['messages', 'tools', 'lifecycle', 'input', 'checkpoints', 'custom:progress'];
const artifacts = path.join(repoRoot, 'tests', 'artifacts');
const staticDir = path.join(repoRoot, 'protocol', 'js');

let redis, rc, tc, port, browser;
const gatewayArgs = () => ['--port', String(port), '--static-dir', staticDir];

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  redis = await startRedis();
  rc = redisClient(redis.port);
  port = await freePort();
  tc = await startThreadcast({ redisUrl: redis.url, args: gatewayArgs() });
  await startAgent(redis.url, { args: ['--token-delay-ms', '25'] });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready');
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
  const reports = tc.sanitizerReports();
  rc?.close();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, [], tc.stderr);
});

async function openDemo(thread) {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`http://127.0.0.1:${port}/#${thread}`);
  await page.waitForFunction(() => document.getElementById('conn').dataset.status === 'open');
  return { page, errors };
}

const pageState = (page) => page.evaluate(() => ({
  events: threadcastDemo.events,
  transcript: threadcastDemo.transcript(),
  statuses: threadcastDemo.statuses,
  reconnects: threadcastDemo.conn.reconnects,
  resyncs: threadcastDemo.resyncs,
}));

const rootDone = () => threadcastDemo.events.some((e) => e.method === 'lifecycle' &&
  e.params.namespace.length === 0 && e.params.data.event === 'completed');

/** The page holds exactly the stored events its filter matches, once each, in order. */
async function assertExact(page, thread) {
  const got = await pageState(page);
  const stored = await storedEvents(rc, thread);
  const want = stored.filter((e) => matches({ channels: CHANNELS }, e));
  assert.deepEqual(got.events.map((e) => e.seq), want.map((e) => e.seq), 'every event once, in order');
  assert.deepEqual(got.events.map((e) => ({ seq: e.seq, method: e.method, params: e.params })), want);
  assert.deepEqual(got.transcript, assemble(want), 'the page assembled what the producer wrote');
  return got;
}

test('the demo page streams a full run: message, tool call, subgraph, checkpoints', async () => {
  const { page, errors } = await openDemo('demo-run');
  assert.equal(await page.title(), 'threadcast demo');
  await page.fill('#message', 'tell me about otters');
  await page.click('#send');
  // The answer streams in token by token: a partial AI message shows up before the end.
  await page.waitForSelector('.msg.ai.streaming', { timeout: 15000 });
  await page.waitForFunction(rootDone, null, { timeout: 20000 });
  await page.waitForFunction(() => !document.querySelector('.msg.streaming'));
  const got = await assertExact(page, 'demo-run');

  const msgs = got.transcript;
  assert.deepEqual(msgs.map((m) => [m.role, m.namespace.join('/')]),
    [['human', ''], ['ai', ''], ['ai', 'researcher'], ['ai', '']]);
  assert.ok(msgs.every((m) => m.status === 'finished'));
  const texts = await page.$$eval('.msg .text', (ns) => ns.map((n) => n.textContent));
  assert.equal(texts[0], 'tell me about otters');
  assert.match(texts[1], /^Let me look into "tell me about otters" for you\.$/);
  assert.match(texts[3], /^Here is what I found about "tell me about otters"\.$/);
  assert.equal(await page.locator('.msg.sub').count(), 1, 'the researcher subgraph has its own message');
  const tool = await page.textContent('.tool');
  assert.match(tool, /search\(\{"query":"tell me about otters"\}\)/);
  assert.match(tool, /done/);
  assert.match(tool, /result one/);
  assert.equal(await page.locator('#checkpoints li').count(), 3);
  assert.equal(await page.isVisible('#interrupt'), false);
  const agents = await page.$$eval('#agents li', (ns) => ns.map((n) => n.textContent.trim()));
  assert.deepEqual(agents, ['rootcompleted', 'researchercompleted']);
  assert.equal(await page.$eval('#progress', (p) => p.value), 100);
  assert.equal(await page.getAttribute('#conn', 'data-status'), 'open');

  const shot = path.join(artifacts, 'demo-run.png');
  await page.screenshot({ path: shot, fullPage: true });
  const png = fs.readFileSync(shot);
  assert.equal(png.subarray(1, 4).toString(), 'PNG');
  assert.ok(png.length > 10000, 'a real screenshot');
  assert.deepEqual(errors, []);
  await page.close();
});

test('an interrupt is asked in the page and answered from it', async () => {
  const { page, errors } = await openDemo('demo-ask');
  await page.fill('#message', 'please interrupt me');
  await page.press('#message', 'Enter');
  assert.equal(await page.isVisible('#interrupt'), false, 'no question before the agent asks');
  await page.waitForSelector('#interrupt', { state: 'visible', timeout: 15000 });
  assert.equal(await page.textContent('#interrupt-question'), 'Shall I write the final answer?');
  assert.match(await page.textContent('#agents'), /interrupted/);
  await page.fill('#interrupt-answer', 'yes please');
  await page.click('#interrupt button');
  await page.waitForFunction(rootDone, null, { timeout: 20000 });
  await page.waitForSelector('#interrupt', { state: 'hidden' });
  const got = await assertExact(page, 'demo-ask');
  assert.match(got.transcript.at(-1).blocks[0].text, /You answered: yes please\.$/);
  assert.deepEqual(errors, []);
  await page.close();
});

test('a second tab opened mid-run and a reload both show the same transcript', async () => {
  const { page } = await openDemo('demo-tabs');
  await page.fill('#message', 'two tabs');
  await page.click('#send');
  await page.waitForFunction(() => threadcastDemo.events.length >= 15, null, { timeout: 15000 });
  const second = await openDemo('demo-tabs');
  await page.waitForFunction(rootDone, null, { timeout: 20000 });
  await second.page.waitForFunction(rootDone, null, { timeout: 20000 });
  const a = await assertExact(page, 'demo-tabs');
  const b = await assertExact(second.page, 'demo-tabs');
  assert.deepEqual(a.transcript, b.transcript);
  await second.page.reload();
  await second.page.waitForFunction(rootDone, null, { timeout: 10000 });
  await assertExact(second.page, 'demo-tabs');
  await page.close();
  await second.page.close();
});

test('killing and restarting the gateway mid-run: the page ends with the complete transcript', async () => {
  const { page, errors } = await openDemo('demo-kill');
  await page.fill('#message', 'survive a crash of the gateway please');
  await page.click('#send');
  await page.waitForFunction(() => threadcastDemo.events.length >= 12, null, { timeout: 15000 });
  await tc.stop('SIGKILL');
  await page.waitForFunction(() => document.getElementById('conn').dataset.status === 'reconnecting');
  const during = (await pageState(page)).events.length;
  await sleep(700); // the agent goes on writing to Redis meanwhile
  tc = await startThreadcast({ redisUrl: redis.url, args: gatewayArgs() });
  await page.waitForFunction(rootDone, null, { timeout: 30000 });
  await page.waitForFunction(() => !document.querySelector('.msg.streaming'));
  const got = await assertExact(page, 'demo-kill');
  assert.ok(got.events.length > during, 'events written while the gateway was down arrived');
  assert.ok(got.reconnects >= 1);
  assert.ok(got.statuses.includes('reconnecting'));
  assert.equal(got.resyncs, 0, 'the history was there: restored, no resync');
  assert.match(await page.textContent('#conn-text'), /reconnected/);
  await page.screenshot({ path: path.join(artifacts, 'demo-after-restart.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

/** One raw HTTP/1.1 GET (fetch would normalize the path). */
function rawGet(p) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.end(`GET ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    let out = '';
    s.on('data', (d) => { out += d; });
    s.on('end', () => resolve({ status: Number(out.split(' ')[1]), text: out }));
    s.on('error', reject);
  });
}

test('--static-dir serves plain files only: no dot-files, no way out of the directory', async () => {
  const page = await tc.http('/');
  assert.equal(page.status, 200);
  assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.equal(page.headers.get('cache-control'), 'no-cache');
  assert.equal(await page.text(), fs.readFileSync(path.join(staticDir, 'index.html'), 'utf8'));
  const js = await tc.http('/threadcast.js');
  assert.equal(js.headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.equal(js.headers.get('x-content-type-options'), 'nosniff');
  for (const p of ['/../meson.build', '/%2e%2e/meson.build', '/.gitignore', '/node_modules/.package-lock.json',
    '/package.json/', '/nope.js', '/demo.js%00.html', '/a//b.js']) {
    const r = await rawGet(p);
    // Refused: an error status, or (lws, for a NUL) the connection closed unanswered.
    assert.ok([400, 403, 404].includes(r.status) || r.text === '', `${p}: ${r.status}`);
    assert.doesNotMatch(r.text, /project\(|node_modules|lockfileVersion/, p);
  }
  const post = await tc.http('/index.html', { method: 'POST', body: 'x' });
  assert.equal(post.status, 404);
  // The gateway's own routes still win.
  assert.equal((await tc.http('/healthz')).status, 200);
});
