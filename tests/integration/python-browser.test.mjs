// The browser front ends against the Python example (src/worker-python/example, the twin of
// src/worker/graphs/agent.js) served by the Python worker, in Debian's headless Chromium:
//
// - the demo page (protocol/js, served by the gateway's --static-dir) over the protocol's
//   WebSocket: the answer streams token by token, the tool call shows with its arguments
//   forming, the researcher subgraph has its own message, "interrupt" is asked and answered in
//   the page, "approval" shows LangChain's human-in-the-loop request with Approve, and a gateway
//   SIGKILLed and restarted mid-run leaves the page with the whole transcript;
// - LangChain's React hook useStream (browser/usestream-app.jsx, the page
//   browser-usestream.test.mjs drives) over the REST API: the messages, the tool call, an
//   interrupt resumed with submit({command: {resume}}), and the approval in the shape
//   agent-chat-ui reads (stream.interrupt.value.action_requests / review_configs);
// - and the demo page's approval against the JavaScript example too (the twins ask the same).
//
// The Python worker's events differ from the JavaScript worker's (protocol/README.md, "The
// Python worker"): a root model's messages are at [] on node "model", tools at [], no run_id.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { Client } from '@langchain/langgraph-sdk';
import { normalizeHitlInterruptPayload } from '@langchain/langgraph-sdk/ui';
import {
  startRedis, startThreadcast, startPythonWorker, startWorker, stopAll, sleep, freePort, redisClient,
  storedEvents, repoRoot,
} from './lib/harness.mjs';
import { assemble } from '../../protocol/js/messages.js';
import { matches } from './lib/events.mjs';
import { buildPage, servePage } from './lib/usestream-page.mjs';
// The Python example says what its JavaScript twin says, word for word.
import { lines, approvalRequest } from '../../src/worker/graphs/agent.js';

const artifacts = path.join(repoRoot, 'tests', 'artifacts');
const staticDir = path.join(repoRoot, 'protocol', 'js');
const CHANNELS = ['messages', 'tools', 'lifecycle', 'input', 'checkpoints', 'custom:progress'];
const WAIT = 60000;

after(stopAll);

function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

describe('the demo page against the Python example', () => {
  let redis, rc, tc, port, browser, worker;
  const gatewayArgs = () => ['--port', String(port), '--static-dir', staticDir];

  before(async () => {
    fs.mkdirSync(artifacts, { recursive: true });
    redis = await startRedis();
    rc = redisClient(redis.port);
    port = await freePort();
    tc = await startThreadcast({ redisUrl: redis.url, args: gatewayArgs() });
    await tc.ready();
    // 50 ms a token (and a tool call's argument chunk): long enough for the page to show each,
    // even on a busy machine, and for a run to outlive a gateway.
    worker = await startPythonWorker(redis.url, { env: { THREADCAST_FAKE_TOKEN_MS: '50' } });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    const reports = tc?.sanitizerReports() ?? [];
    rc?.close();
    await stopAll();
    await redis?.cleanup();
    assert.deepEqual(reports, [], tc?.stderr);
    assert.doesNotMatch(worker?.stderr ?? '', /"level":"error"/, worker?.stderr);
  });

  /**
   * Opens the demo page on thread. Every distinct text the page showed for each message
   * (by message id) and each tool call (by tool call id) is kept in window.__shown, from the
   * DOM, so a test can tell what streamed in from what only showed up whole.
   */
  async function openDemo(thread) {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.addInitScript(() => {
      const shown = { messages: {}, tools: {} };
      window.__shown = shown;
      const note = (into, id, text) => {
        const seen = (into[id] ??= []);
        if (seen.at(-1) !== text) seen.push(text);
      };
      new MutationObserver(() => {
        for (const m of document.querySelectorAll('.msg')) note(shown.messages, m.dataset.messageId, m.querySelector('.text')?.textContent ?? '');
        for (const t of document.querySelectorAll('.tool')) note(shown.tools, t.dataset.toolCallId, t.querySelector('.call')?.textContent ?? '');
      }).observe(document, { subtree: true, childList: true, characterData: true });
    });
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
    shown: window.__shown,
  }));

  const rootDone = () => threadcastDemo.events.some((e) => e.method === 'lifecycle'
    && e.params.namespace.length === 0 && e.params.data.event === 'completed');
  /** Waits until the run of the page's thread completed and nothing shows as streaming. */
  async function completes(page, ms = WAIT) {
    await page.waitForFunction(rootDone, null, { timeout: ms });
    await page.waitForFunction(() => !document.querySelector('.msg.streaming'), null, { timeout: ms });
  }

  /** The page holds exactly the stored events its filter matches, once each, in order. */
  async function assertExact(page, thread) {
    const got = await pageState(page);
    const stored = await storedEvents(rc, thread);
    const want = stored.filter((e) => matches({ channels: CHANNELS }, e));
    assert.deepEqual(got.events.map((e) => e.seq), want.map((e) => e.seq), 'every event once, in order');
    assert.deepEqual(got.events.map((e) => ({ seq: e.seq, method: e.method, params: e.params })), want);
    assert.deepEqual(got.transcript, assemble(want), 'the page assembled what the worker wrote');
    return got;
  }

  /** The graph's state of thread, read over the protocol (state.get) from the page. */
  const stateOf = (page) => page.evaluate(() => threadcastDemo.conn.command('state.get', { namespace: [] }));

  const texts = (page) => page.$$eval('.msg .text', (ns) => ns.map((n) => n.textContent));
  const whos = (page) => page.$$eval('.msg .who', (ns) => ns.map((n) => n.textContent));

  test('a message: the answer streams token by token, the tool call with its arguments forming, the researcher subgraph', async () => {
    const { page, errors } = await openDemo('py-demo-run');
    const q = 'tell me about otters';
    await page.fill('#message', q);
    await page.click('#send');
    await page.waitForSelector('.msg.ai.streaming', { timeout: WAIT });
    await completes(page);
    const got = await assertExact(page, 'py-demo-run');

    assert.deepEqual(await texts(page), [q, lines.searching, lines.answer(q), lines.summary]);
    // A root model's messages are at [] on node "model"; the subgraph's at ["researcher:<task>"].
    assert.deepEqual(got.transcript.map((m) => [m.role, m.namespace.map((s) => s.split(':')[0]).join('/'), m.node ?? null]),
      [['human', '', null], ['ai', '', 'model'], ['ai', '', 'model'], ['ai', 'researcher', 'summarize']]);
    assert.ok(got.transcript.every((m) => m.status === 'finished'));
    assert.deepEqual(await whos(page), ['human', 'ai · model', 'ai · model', 'ai · researcher › summarize']);
    assert.deepEqual(await page.$$eval('.msg', (ns) => ns.map((n) => n.classList.contains('sub'))), [false, false, false, true],
      'the researcher subgraph\'s message is shown as a subgraph\'s');

    // Token by token: the answer and the summary showed partly, each partial text a prefix of the final one.
    for (const [m, final] of [[got.transcript[2], lines.answer(q)], [got.transcript[3], lines.summary]]) {
      const seen = got.shown.messages[m.id] ?? [];
      for (const t of seen) assert.ok(final.startsWith(t), `${m.id} showed ${JSON.stringify(t)}, not a prefix of ${JSON.stringify(final)}`);
      const partial = seen.filter((t) => t.length > 0 && t.length < final.length);
      assert.ok(partial.length >= 5, `${final}: shown partly as it streamed: ${JSON.stringify(seen)}`);
    }

    // The tool call: its arguments formed on the page (a call shown with part of them), then
    // the finished call with its result.
    const call = got.transcript[1].blocks.find((b) => b?.type === 'tool_call');
    assert.deepEqual(call, { type: 'tool_call', id: 'call_1', name: 'search', args: { query: q } });
    const full = `search(${JSON.stringify({ query: q })})`;
    const calls = got.shown.tools[call.id] ?? [];
    assert.equal(calls.at(-1), full);
    for (const t of calls) assert.ok(t.startsWith('search(') && full.startsWith(t.slice(0, -1)), `a call's text as its arguments formed: ${t}`);
    const forming = calls.filter((t) => t.length > 'search()'.length && t !== full);
    assert.ok(forming.length >= 1, `the call was shown with part of its arguments: ${JSON.stringify(calls)}`);
    const tool = await page.textContent('.tool');
    assert.match(tool, /done/);
    assert.equal(await page.textContent('.tool .output'), '3 results for "tell me about otters": threadcast, redis streams, langgraph',
      'the tool message\'s content');

    const agents = await page.$$eval('#agents li', (ns) => ns.map((n) => n.textContent.trim()));
    assert.deepEqual(agents, ['rootcompleted', 'researchercompleted']);
    assert.ok(await page.locator('#checkpoints li').count() >= 6, 'the checkpoints listed');
    assert.equal(await page.isVisible('#interrupt'), false);
    // What the page shows is the graph's state: its messages but the tool's, in order.
    const { values } = await stateOf(page);
    assert.deepEqual(values.messages.filter((m) => m.type !== 'tool').map((m) => [m.id, m.content]),
      got.transcript.map((m) => [m.id, m.blocks.filter((b) => b?.type === 'text').map((b) => b.text).join('')]));
    await page.screenshot({ path: path.join(artifacts, 'python-demo-run.png'), fullPage: true });
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('"interrupt": the page asks the graph\'s question, the answer typed in it resumes the run', async () => {
    const { page, errors } = await openDemo('py-demo-ask');
    const q = 'look it up, then interrupt me';
    await page.fill('#message', q);
    await page.press('#message', 'Enter');
    await page.waitForSelector('#interrupt', { state: 'visible', timeout: WAIT });
    assert.equal(await page.textContent('#interrupt-question'), 'Approve the answer?');
    assert.equal(await page.isVisible('#approval'), false, 'a question, not an approval');
    assert.match(await page.textContent('#agents'), /interrupted/);
    assert.equal((await stateOf(page)).values.approved ?? null, null);
    await page.fill('#interrupt-answer', 'yes');
    await page.click('#interrupt-send');
    await completes(page);
    await page.waitForSelector('#interrupt', { state: 'hidden' });
    const got = await assertExact(page, 'py-demo-ask');
    const answered = got.events.filter((e) => e.method === 'input.answered');
    const asked = got.events.find((e) => e.method === 'input.requested');
    assert.deepEqual(answered.map((e) => e.params.data.interrupt_ids), [[asked.params.data.interrupt_id]]);
    assert.deepEqual(await texts(page), [q, lines.searching, lines.answer(q), lines.summary]);
    assert.equal((await stateOf(page)).values.approved, 'yes', 'the answer resumed the interrupt()');
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('"approval": the page shows LangChain\'s human-in-the-loop request, and Approve resumes the run', async () => {
    const { page, errors } = await openDemo('py-demo-approval');
    const q = 'answer after my approval';
    await page.fill('#message', q);
    await page.click('#send');
    await page.waitForSelector('#approval', { state: 'visible', timeout: WAIT });
    const asked = (await pageState(page)).events.find((e) => e.method === 'input.requested');
    // The request is the middleware's, exactly the JavaScript example's.
    assert.deepEqual(asked.params.data.payload, approvalRequest(q));
    assert.equal(await page.textContent('#interrupt-question'), 'Send this answer?');
    assert.deepEqual(await page.$$eval('#approval-actions li', (ns) => ns.map((n) => n.textContent)),
      [`send_answer(${JSON.stringify({ question: q })})`]);
    assert.equal(await page.isVisible('#approve'), true);
    assert.equal(await page.isVisible('#reject'), true, 'the request allows reject too');
    assert.equal(await page.isVisible('#interrupt-answer'), false, 'answered with the buttons, not in words');
    await page.screenshot({ path: path.join(artifacts, 'python-demo-approval.png'), fullPage: true });
    await page.click('#approve');
    await completes(page);
    await page.waitForSelector('#interrupt', { state: 'hidden' });
    await assertExact(page, 'py-demo-approval');
    assert.deepEqual((await stateOf(page)).values.approved, { decisions: [{ type: 'approve' }] },
      'the middleware\'s answer: one decision per action');
    assert.deepEqual(await texts(page), [q, lines.searching, lines.answer(q), lines.summary]);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('a gateway SIGKILLed and restarted mid-run: the page ends with the whole transcript', async () => {
    const { page, errors } = await openDemo('py-demo-kill');
    const q = 'survive a crash of the gateway please';
    await page.fill('#message', q);
    await page.click('#send');
    // Mid-answer: the model's second message is on the page, partly.
    await page.waitForFunction((answer) => [...document.querySelectorAll('.msg.ai.streaming .text')]
      .some((n) => n.textContent.length > 5 && answer.startsWith(n.textContent)), lines.answer(q), { timeout: WAIT, polling: 10 });
    await tc.stop('SIGKILL');
    await page.waitForFunction(() => document.getElementById('conn').dataset.status === 'reconnecting');
    const during = (await pageState(page)).events.length;
    await sleep(700); // the worker goes on writing to Redis meanwhile
    tc = await startThreadcast({ redisUrl: redis.url, args: gatewayArgs() });
    await completes(page);
    const got = await assertExact(page, 'py-demo-kill');
    assert.ok(got.events.length > during, 'events written while the gateway was down arrived');
    assert.ok(got.reconnects >= 1);
    assert.ok(got.statuses.includes('reconnecting'));
    assert.equal(got.resyncs, 0, 'the history was there: restored, no resync');
    assert.deepEqual(await texts(page), [q, lines.searching, lines.answer(q), lines.summary]);
    // Every text the page showed for the answer was a prefix of it: nothing shown twice or lost.
    const answer = got.transcript[2];
    for (const t of got.shown.messages[answer.id]) assert.ok(lines.answer(q).startsWith(t), JSON.stringify(t));
    assert.match(await page.textContent('#conn-text'), /reconnected/);
    await page.screenshot({ path: path.join(artifacts, 'python-demo-after-restart.png'), fullPage: true });
    assert.deepEqual(errors, []);
    await page.close();
  });
});

// The page's approval is the example graphs' shared shape: the JavaScript example asks the same.
describe('the demo page\'s approval against the JavaScript example', () => {
  let redis, tc, browser;
  before(async () => {
    redis = await startRedis();
    tc = await startThreadcast({ redisUrl: redis.url, args: ['--static-dir', staticDir] });
    await tc.ready();
    await startWorker(redis.url, { env: { THREADCAST_FAKE_TOKEN_MS: '5' } });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    const reports = tc?.sanitizerReports() ?? [];
    await stopAll();
    await redis?.cleanup();
    assert.deepEqual(reports, [], tc?.stderr);
  });

  test('"approval": Approve and Reject shown, Approve resumes the run with the middleware\'s decisions', async () => {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`http://127.0.0.1:${tc.port}/#js-demo-approval`);
    await page.waitForFunction(() => document.getElementById('conn').dataset.status === 'open');
    const q = 'answer after my approval';
    await page.fill('#message', q);
    await page.click('#send');
    await page.waitForSelector('#approval', { state: 'visible', timeout: WAIT });
    assert.equal(await page.textContent('#interrupt-question'), 'Send this answer?');
    assert.deepEqual(await page.$$eval('#approval-actions li', (ns) => ns.map((n) => n.textContent)),
      [`send_answer(${JSON.stringify({ question: q })})`]);
    assert.deepEqual(await page.$$eval('.msg .who', (ns) => ns.map((n) => n.textContent)),
      ['human', 'ai · model', 'ai · model', 'ai · researcher › summarize'], 'the labels the Python example\'s get');
    await page.click('#approve');
    await page.waitForFunction(() => threadcastDemo.events.some((e) => e.method === 'lifecycle'
      && e.params.namespace.length === 0 && e.params.data.event === 'completed'), null, { timeout: WAIT });
    await page.waitForSelector('#interrupt', { state: 'hidden' });
    const state = await page.evaluate(() => threadcastDemo.conn.command('state.get', { namespace: [] }));
    assert.deepEqual(state.values.approved, { decisions: [{ type: 'approve' }] });
    assert.deepEqual(errors, []);
    await page.close();
  });
});

describe('useStream (@langchain/langgraph-sdk/react) against the Python example', () => {
  let redis, tc, worker, dir, server, browser, page, apiUrl, client;
  const problems = []; // errors the page threw

  before(async () => {
    dir = await buildPage();
    server = await servePage(dir);
    const origin = `http://127.0.0.1:${server.address().port}`;
    redis = await startRedis();
    tc = await startThreadcast({ redisUrl: redis.url, args: ['--cors-origins', origin] });
    await tc.ready();
    worker = await startPythonWorker(redis.url, { env: { THREADCAST_FAKE_TOKEN_MS: '25' } });
    apiUrl = `http://127.0.0.1:${tc.port}`;
    client = new Client({ apiUrl, apiKey: null });
    browser = await launch();
    page = await browser.newPage();
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.stack ?? e}`));
    await page.goto(`${origin}/?api=${encodeURIComponent(apiUrl)}`);
    await page.waitForSelector('[data-testid="threads"][data-listed="1"]', { state: 'attached', timeout: WAIT });
  });
  after(async () => {
    await browser?.close();
    await new Promise((r) => (server ? server.close(r) : r()));
    if (dir) await fsp.rm(dir, { recursive: true, force: true });
    const reports = tc?.sanitizerReports() ?? [];
    await stopAll();
    await redis?.cleanup();
    assert.deepEqual(reports, [], tc?.stderr);
    assert.doesNotMatch(worker?.stderr ?? '', /"level":"error"/, worker?.stderr);
  });

  const tcState = () => page.evaluate(() => window.__tc);
  const hook = () => page.evaluate(() => window.__tc.state);
  /** The rendered messages: [{type, id, text, calls: [{id, name, text}], result: <tool_call_id>}]. */
  const rendered = () => page.$$eval('[data-testid="message"]', (els) => els.map((el) => ({
    type: el.dataset.type, id: el.dataset.id,
    text: el.querySelector('[data-testid="text"]').textContent,
    calls: [...el.querySelectorAll('[data-testid="tool-call"]')].map((c) => ({ id: c.dataset.callId, name: c.dataset.name, text: c.textContent })),
    result: el.querySelector('[data-testid="tool-result"]')?.dataset.callId ?? null,
  })));
  const textOf = (m) => (typeof m.content === 'string' ? m.content
    : (m.content ?? []).filter((b) => b?.type === 'text').map((b) => b.text).join(''));

  async function noErrors(what) {
    const t = await tcState();
    assert.deepEqual([...problems, ...t.errors], [], `${what}: the page reports no error`);
    assert.equal(t.state?.error ?? null, null, `${what}: useStream's error`);
  }

  /** Waits until the hook has finished n runs (onFinish) and shows it. */
  async function finished(n, what) {
    await page.waitForFunction((k) => window.__tc.finished >= k || window.__tc.errors.length > 0, n, { timeout: WAIT });
    await noErrors(what);
    await page.waitForSelector('[data-testid="status"][data-loading="false"]', { timeout: WAIT });
  }

  /** Types q into the page on a new thread and sends it; resolves when the hook has finished that run. */
  async function ask(q) {
    await page.click('[data-testid="new-thread"]');
    await page.waitForSelector('[data-testid="status"][data-thread-id=""]', { timeout: WAIT });
    const before = (await tcState()).finished;
    await page.fill('[data-testid="question"]', q);
    await page.click('[data-testid="send"]');
    await finished(before + 1, `the answer to "${q}"`);
    return (await hook()).threadId;
  }

  /**
   * The page agrees with the thread's state as the API answers it: the hook's values and
   * messages are the state's, and the page shows each message once, in order.
   */
  async function showsState(threadId) {
    const state = await client.threads.getState(threadId);
    const st = await hook();
    assert.equal(st.threadId, threadId);
    assert.deepEqual(st.values, state.values, 'useStream\'s values are the thread\'s state');
    assert.deepEqual(st.messages, state.values.messages, 'useStream\'s messages are the state\'s');
    const shown = await rendered();
    assert.deepEqual(shown.map((m) => [m.id, m.type, m.text]), state.values.messages.map((m) => [m.id, m.type, textOf(m)]),
      'each message rendered once, in order');
    return state;
  }

  test('a streamed answer with a tool call: the text grows token by token, the tool call and its result shown, the messages the state\'s', async () => {
    const q = 'what do otters eat';
    const threadId = await ask(q);
    assert.match(threadId ?? '', /^[0-9a-f-]{36}$/, 'the hook made a thread');
    const state = await showsState(threadId);
    const shown = await rendered();
    assert.deepEqual(shown.map((m) => m.type), ['human', 'ai', 'tool', 'ai', 'ai']);
    assert.deepEqual(shown.map((m) => m.text).filter((_t, i) => i !== 2), [q, lines.searching, lines.answer(q), lines.summary]);
    // The tool call from the AI message's tool_calls, the tool's result tied to it.
    assert.deepEqual(shown[1].calls, [{ id: 'call_1', name: 'search', text: `search(${JSON.stringify({ query: q })})` }]);
    assert.deepEqual(state.values.messages[1].tool_calls, [{ name: 'search', args: { query: q }, id: 'call_1', type: 'tool_call' }]);
    assert.equal(shown[2].result, 'call_1');
    assert.equal(shown[2].text, `3 results for "${q}": threadcast, redis streams, langgraph`);
    // Streamed: partial renders of the answer and the summary, each a prefix of the final text.
    const { seen } = await tcState();
    for (const m of state.values.messages.filter((x) => x.type === 'ai')) {
      for (const t of seen[m.id] ?? []) assert.ok(textOf(m).startsWith(t), `${m.id} showed ${JSON.stringify(t)}, not a prefix of ${JSON.stringify(textOf(m))}`);
    }
    for (const i of [3, 4]) {
      const m = state.values.messages[i];
      const partial = (seen[m.id] ?? []).filter((t) => t.length > 0 && t.length < textOf(m).length);
      assert.ok(partial.length >= 3, `${textOf(m)}: rendered partly as it streamed: ${JSON.stringify(seen[m.id])}`);
    }
    assert.equal((await hook()).interrupt, null, 'no interrupt');
    assert.deepEqual(await page.$$('[data-testid="interrupt"]'), []);
  });

  test('"interrupt": stream.interrupt holds the question, Approve resumes with submit({command: {resume}})', async () => {
    const q = 'look it up, then interrupt me';
    const threadId = await ask(q);
    const want = { question: 'Approve the answer?', options: ['yes', 'no'] };
    assert.deepEqual((await hook()).interrupt?.value, want, 'useStream\'s interrupt');
    assert.deepEqual(JSON.parse(await page.textContent('[data-testid="interrupt-value"]')), want);
    assert.deepEqual(await page.$$('[data-testid="action-request"]'), [], 'a question, not an approval');
    const before = await showsState(threadId);
    assert.equal((await client.threads.get(threadId)).status, 'interrupted');

    const n = (await tcState()).finished;
    await page.click('[data-testid="approve"]');
    await finished(n + 1, 'the resumed run');
    await page.waitForSelector('[data-testid="interrupt"]', { state: 'detached', timeout: WAIT });
    const after = await showsState(threadId);
    assert.equal(after.values.approved, 'yes', 'the resume value reached the interrupt()');
    assert.deepEqual(after.values.messages, before.values.messages, 'resuming adds no message');
    assert.equal((await client.threads.get(threadId)).status, 'idle');
    assert.deepEqual((await client.runs.list(threadId)).map((r) => r.status), ['success', 'success']);
  });

  test('"approval": stream.interrupt is the human-in-the-loop request agent-chat-ui reads, its Approve resumes with {decisions}', async () => {
    const q = 'answer after my approval';
    const threadId = await ask(q);
    // The request is the middleware's shape, exactly the JavaScript example's, as the API has it.
    const thread = await client.threads.get(threadId);
    assert.equal(thread.status, 'interrupted');
    const request = {
      action_requests: [{ name: 'send_answer', args: { question: q }, description: 'Send this answer?' }],
      review_configs: [{ action_name: 'send_answer', allowed_decisions: ['approve', 'reject'] }],
    };
    assert.deepEqual(approvalRequest(q), request);
    assert.deepEqual(Object.values(thread.interrupts).flat().map((i) => i.value), [request]);
    // useStream gives it with the SDK's camelCase aliases added (normalizeHitlInterruptPayload);
    // agent-chat-ui reads the snake_case fields.
    const { interrupt } = await hook();
    assert.deepEqual(interrupt?.value, normalizeHitlInterruptPayload(request));
    assert.deepEqual(interrupt.value.action_requests.map(({ name, args, description }) => ({ name, args, description })), request.action_requests);
    assert.deepEqual(interrupt.value.review_configs.map(({ action_name, allowed_decisions }) => ({ action_name, allowed_decisions })), request.review_configs);
    assert.deepEqual(await page.$$eval('[data-testid="action-request"]', (els) => els.map((e) => e.textContent)),
      [`Send this answer?: send_answer(${JSON.stringify({ question: q })})`]);
    const state = await client.threads.getState(threadId);
    assert.deepEqual(state.next, ['approve']);
    assert.deepEqual(state.tasks.flatMap((t) => t.interrupts.map((i) => i.value)), [approvalRequest(q)]);

    const n = (await tcState()).finished;
    await page.click('[data-testid="approve"]');
    await finished(n + 1, 'the approved run');
    await page.waitForSelector('[data-testid="interrupt"]', { state: 'detached', timeout: WAIT });
    const after = await showsState(threadId);
    assert.deepEqual(after.values.approved, { decisions: [{ type: 'approve' }] }, 'the middleware\'s answer reached the interrupt()');
    assert.deepEqual(after.next, []);
    assert.equal((await hook()).interrupt, null);
    assert.equal((await client.threads.get(threadId)).status, 'idle');
    await noErrors('the approval');
  });
});
