// LangChain's React hook useStream (@langchain/langgraph-sdk/react, the
// pinned SDK) in real Chromium against threadcast: two gateways behind
// HAProxy, two LangGraph workers serving the example graph (lib/rest.mjs).
// The page (browser/usestream-app.jsx, bundled by lib/usestream-page.mjs) is served
// from an origin of its own and calls threadcast cross-origin
// (--cors-origins). The journeys are the ones LangChain's agent-chat-ui is
// checked with: a streamed answer with a tool call, an interrupt answered
// with Approve, the thread list, regenerate from a checkpoint, and a gateway
// SIGKILLed mid-answer. What the page renders is compared with the graph's
// own checkpointed state.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import { chromium } from 'playwright-core';
import { stopAll } from './lib/harness.mjs';
import { restStack, lines, holder } from './lib/rest.mjs';
import { buildPage, servePage } from './lib/usestream-page.mjs';

after(stopAll);

const WAIT = 60000;

describe('useStream (@langchain/langgraph-sdk/react) in Chromium against threadcast', () => {
  let s, dir, server, browser, page, origin;
  const problems = []; // errors the page threw
  const requests = []; // the page's requests to the API: {method, url, lastEventId, status}

  before(async () => {
    dir = await buildPage();
    server = await servePage(dir);
    origin = `http://127.0.0.1:${server.address().port}`;
    s = await restStack({ tokenMs: 50, gatewayArgs: ['--cors-origins', origin] });
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage();
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.stack ?? e}`));
    page.on('request', (r) => {
      if (!r.url().startsWith(s.apiUrl)) return;
      const seen = { method: r.method(), url: r.url().slice(s.apiUrl.length), lastEventId: r.headers()['last-event-id'], status: null };
      requests.push(seen);
      r.response().then((res) => { seen.status = res?.status() ?? 'failed'; }, () => { seen.status = 'failed'; });
    });
    await page.goto(`${origin}/?api=${encodeURIComponent(s.apiUrl)}`);
    await page.waitForSelector('[data-testid="threads"][data-listed="1"]', { state: 'attached', timeout: WAIT });
  });
  after(async () => {
    await browser?.close();
    await new Promise((r) => (server ? server.close(r) : r()));
    if (dir) await fs.rm(dir, { recursive: true, force: true });
    await s?.done();
  });

  /* ---- what the page shows ------------------------------------------------------------ */

  const tc = () => page.evaluate(() => window.__tc);
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

  /** Fails with what the page said when it reported an error. */
  async function noErrors(what) {
    const t = await tc();
    assert.deepEqual([...problems, ...t.errors], [], `${what}: the page reports no error`);
    assert.equal(t.state?.error ?? null, null, `${what}: useStream's error`);
  }

  /** Types q into the page and sends it; resolves when the hook has finished that run. */
  async function ask(q, { wait = true } = {}) {
    const before = (await tc()).finished;
    await page.fill('[data-testid="question"]', q);
    await page.click('[data-testid="send"]');
    if (wait) await finished(before + 1, `the answer to "${q}"`);
    return before;
  }

  /** Waits until the hook has finished n runs (onFinish) and shows it. */
  async function finished(n, what) {
    await page.waitForFunction((n) => window.__tc.finished >= n || window.__tc.errors.length > 0, n, { timeout: WAIT });
    await noErrors(what);
    await page.waitForSelector('[data-testid="status"][data-loading="false"]', { timeout: WAIT });
  }

  async function newThread() {
    await page.click('[data-testid="new-thread"]');
    await page.waitForSelector('[data-testid="status"][data-thread-id=""]', { timeout: WAIT });
  }

  /**
   * The rendered page agrees with the graph's own state of threadId: the
   * hook's messages are the state's, and the page shows each once, in order.
   */
  async function showsState(threadId) {
    const head = await s.head(threadId);
    const st = await hook();
    assert.equal(st.threadId, threadId);
    assert.deepEqual(st.messages, head.messages, 'useStream\'s messages are the graph\'s state');
    const shown = await rendered();
    assert.deepEqual(shown.map((m) => m.id), head.messages.map((m) => m.id), 'each message rendered once, in order');
    assert.deepEqual(shown.map((m) => m.text), head.messages.map(textOf));
    assert.deepEqual(shown.map((m) => m.type), head.messages.map((m) => m.type));
    return head;
  }

  /**
   * Every text the page showed for a message (seen by a MutationObserver)
   * was a prefix of its final text: it grew token by token, never showed a
   * token run twice. Returns the partial renders of the message id.
   */
  async function grewByPrefixes(head, id) {
    const { seen } = await tc();
    for (const m of head.messages.filter((x) => x.type === 'ai')) {
      const final = textOf(m);
      for (const t of seen[m.id] ?? []) assert.ok(final.startsWith(t), `message ${m.id} showed ${JSON.stringify(t)}, not a prefix of ${JSON.stringify(final)}`);
    }
    const final = textOf(head.messages.find((m) => m.id === id));
    return (seen[id] ?? []).filter((t) => t.length > 0 && t.length < final.length);
  }

  /* ---- the journeys ----------------------------------------------------------------------- */

  test('a streamed answer with a tool call: the text grows token by token, the tool call and its result shown, the final messages the graph\'s', async () => {
    const q = 'what do otters eat';
    await ask(q);
    const st = await hook();
    assert.match(st.threadId ?? '', /^[0-9a-f-]{36}$/, 'the hook made a thread');
    const head = await showsState(st.threadId);
    const shown = await rendered();
    assert.deepEqual(shown.map((m) => m.type), ['human', 'ai', 'tool', 'ai', 'ai']);
    assert.deepEqual(shown.map((m) => m.text).filter((_t, i) => i !== 2), [q, lines.searching, lines.answer(q), lines.summary]);
    // The tool call, its arguments, and the tool's result tied to it.
    const [call] = shown[1].calls;
    assert.equal(shown[1].calls.length, 1);
    assert.equal(call.name, 'search');
    assert.equal(call.id, head.messages[1].tool_calls[0].id);
    assert.equal(call.text, `search(${JSON.stringify({ query: q })})`);
    assert.equal(shown[2].result, call.id);
    assert.match(shown[2].text, new RegExp(`3 results for "${q}"`));
    // Streamed: partial renders of the answer and the summary, each a prefix of the final text.
    const partialAnswer = await grewByPrefixes(head, head.messages[3].id);
    assert.ok(partialAnswer.length >= 3, `the answer rendered partially as it streamed: ${JSON.stringify(partialAnswer)}`);
    assert.ok((await grewByPrefixes(head, head.messages[4].id)).length >= 3, 'the summary too');
    assert.deepEqual(await page.$$('[data-testid="interrupt"]'), [], 'no interrupt shown');
  });

  test('an interrupt answered with Approve: the value shown, the resume command finishes the run, the state holds approved', async () => {
    await newThread();
    const q = 'look it up, then interrupt me';
    await ask(q);
    const st = await hook();
    const want = { question: 'Approve the answer?', options: ['yes', 'no'] };
    assert.deepEqual(st.interrupt?.value, want, 'useStream\'s interrupt');
    const shownValue = await page.textContent('[data-testid="interrupt-value"]', { timeout: WAIT });
    assert.deepEqual(JSON.parse(shownValue), want, 'the page shows the interrupt value');
    const head = await showsState(st.threadId);
    assert.equal(head.approved, null);
    const thread = await s.client().threads.get(st.threadId);
    assert.equal(thread.status, 'interrupted');

    const before = (await tc()).finished;
    await page.click('[data-testid="approve"]');
    await finished(before + 1, 'the resumed run');
    const after = await showsState(st.threadId);
    assert.equal(after.approved, 'yes', 'the state holds the resume value');
    assert.equal((await hook()).values.approved, 'yes');
    assert.deepEqual(after.messages, head.messages, 'resuming adds no message');
    await page.waitForSelector('[data-testid="interrupt"]', { state: 'detached', timeout: WAIT });
    assert.equal((await s.client().threads.get(st.threadId)).status, 'idle');
    const runs = await s.client().runs.list(st.threadId);
    assert.deepEqual(runs.map((r) => r.status), ['success', 'success']);
  });

  test('the thread list: threads.search lists the page\'s threads newest first; picking an older one loads its messages', async () => {
    if ((await tc()).made.length < 2) {
      await newThread();
      await ask('one more thread for the list');
    }
    const { made } = await tc();
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid="thread"]').length === n, made.length, { timeout: WAIT });
    const listed = await page.$$eval('[data-testid="thread"]', (els) => els.map((el) => el.dataset.threadId));
    assert.deepEqual(listed, made.slice().reverse(), 'the threads the page made, newest first');
    const found = await s.client().threads.search({ metadata: { graph_id: 'agent' }, limit: 100 });
    assert.deepEqual(found.map((t) => t.thread_id), listed);

    // Older threads, one after another: the hook fetches each one's history and shows its messages.
    for (const id of made.slice(0, 2)) {
      await page.click(`[data-testid="thread"][data-thread-id="${id}"]`);
      await page.waitForSelector(`[data-testid="status"][data-thread-id="${id}"]`, { timeout: WAIT });
      const head = await s.head(id);
      await page.waitForFunction((n) => document.querySelectorAll('[data-testid="message"]').length === n
        && window.__tc.state?.isThreadLoading === false, head.messages.length, { timeout: WAIT });
      await showsState(id);
      assert.ok(requests.some((r) => r.url.startsWith(`/threads/${id}/history`)), 'the history was fetched');
      assert.equal((await hook()).interrupt, null, 'nothing pending on a finished thread');
    }
    await noErrors('switching threads');
  });

  test('regenerate from a checkpoint: the answer is made again on a new branch, nothing duplicated', async () => {
    await newThread();
    const q = 'regenerate this answer';
    await ask(q);
    const st = await hook();
    const tid = st.threadId;
    const first = await showsState(tid);
    const oldAnswer = first.messages[3];
    assert.equal(textOf(oldAnswer), lines.answer(q));
    const oldMeta = st.meta.find((m) => m.id === oldAnswer.id);
    assert.ok(oldMeta.checkpoint && oldMeta.parent, `the hook knows where the answer was first seen: ${JSON.stringify(oldMeta)}`);
    const before = (await tc()).finished;
    const runsBefore = (await tc()).runs.length;
    await page.click(`[data-testid="message"][data-id="${oldAnswer.id}"] [data-testid="regenerate"]`);
    await finished(before + 1, 'the regenerated answer');

    const { regenerated, runs } = await tc();
    assert.equal(regenerated.id, oldAnswer.id);
    assert.equal(regenerated.parent?.checkpoint_id, oldMeta.parent, 'the parent of the checkpoint the answer was first seen in');
    const cps = await s.checkpointIds(tid);
    assert.ok(regenerated.parent?.checkpoint_id, 'getMessagesMetadata(answer).firstSeenState.parent_checkpoint');
    assert.ok(cps.includes(regenerated.parent.checkpoint_id), 'a checkpoint of the thread');
    assert.equal(runs.length, runsBefore + 1, 'one more run');

    const head = await showsState(tid);
    assert.equal(head.messages.length, 5, 'the branch replaces the answer and what followed, nothing added twice');
    assert.deepEqual(head.messages.slice(0, 3).map((m) => m.id), first.messages.slice(0, 3).map((m) => m.id), 'the messages before the answer kept');
    assert.notEqual(head.messages[3].id, oldAnswer.id, 'the answer was made again');
    assert.equal(textOf(head.messages[3]), lines.answer(q));
    assert.equal(textOf(head.messages[4]), lines.summary);
    assert.notEqual(head.messages[4].id, first.messages[4].id);
    assert.equal(new Set((await rendered()).map((m) => m.id)).size, 5, 'no message shown twice');
    // The regenerated checkpoint now has two children: the old branch and the new one
    // (LangGraph starts a run from an older checkpoint with a "fork" checkpoint).
    const history = await s.client().threads.getHistory(tid, { limit: 100 });
    const born = history.filter((h) => h.parent_checkpoint?.checkpoint_id === regenerated.parent.checkpoint_id);
    assert.equal(born.length, 2, 'two children of the regenerated checkpoint: the old answer\'s and the new branch');
    // The new answer's first checkpoint descends from the regenerated one, not from the old answer.
    const meta = (await hook()).meta.find((m) => m.id === head.messages[3].id);
    const parentOf = new Map(history.map((h) => [h.checkpoint.checkpoint_id, h.parent_checkpoint?.checkpoint_id]));
    const line = [meta.checkpoint];
    while (line.length < 10 && line.at(-1) && line.at(-1) !== regenerated.parent.checkpoint_id) line.push(parentOf.get(line.at(-1)));
    assert.equal(line.at(-1), regenerated.parent.checkpoint_id, `the new answer's checkpoints lead back to the regenerated one: ${line.join(' < ')}`);
    assert.ok(!line.includes(oldMeta.checkpoint), 'not through the old answer\'s checkpoint');
    assert.ok(born.some((h) => h.checkpoint.checkpoint_id === line.at(-2)), 'through one of its two children');
    assert.equal(meta.branchOptions?.length, 2, `the hook shows the branch among two: ${JSON.stringify(meta)}`);
    assert.ok(meta.branchOptions.includes(meta.branch), 'the branch shown is one of them');
  });

  test('a gateway SIGKILLed mid-answer: the page resumes the stream (Last-Event-ID), every token once, none missing', async (t) => {
    await newThread();
    const q = 'an answer that outlives its gateway';
    const before = await ask(q, { wait: false });
    // Mid-answer: the model's second turn is on the page, partly.
    const answer = lines.answer(q);
    const partial = await page.waitForFunction((answer) => {
      const ai = [...document.querySelectorAll('[data-testid="message"][data-type="ai"] [data-testid="text"]')].map((e) => e.textContent);
      const t = ai.find((x) => answer.startsWith(x) && x.length >= 'Here is'.length);
      return t && t.length < answer.length - 10 ? t : null;
    }, answer, { timeout: WAIT, polling: 10 });
    assert.ok(await partial.jsonValue());
    const victim = await holder(s.gws);
    await page.evaluate(() => { window.__tc.marker = 'the same page'; });
    const shownAtKill = (await rendered()).find((m) => m.type === 'ai' && m.text.startsWith('Here is') && answer.startsWith(m.text));
    assert.ok(shownAtKill && shownAtKill.text.length < answer.length, `the answer is on the page, partly, when its gateway dies: ${JSON.stringify(shownAtKill)}`);
    victim.proc.kill('SIGKILL');
    await finished(before + 1, 'the answer after the kill');
    assert.ok(victim.proc.signalCode === 'SIGKILL' || victim.signal === 'SIGKILL', 'the gateway died');

    const { runs } = await tc();
    const run = runs.at(-1);
    const tid = (await hook()).threadId;
    assert.equal(run.thread_id, tid);
    // The SDK reconnected to the run's stream (Location) with the last event id it had, no reload.
    const rejoins = requests.filter((r) => r.method === 'GET' && r.url.startsWith(`/threads/${tid}/runs/${run.run_id}/stream`));
    assert.ok(rejoins.length >= 1, `the stream was rejoined: ${JSON.stringify(requests.filter((r) => r.url.includes(run.run_id)))}`);
    for (const r of rejoins) assert.match(r.lastEventId ?? '', /^\d+$/, 'with Last-Event-ID');
    assert.ok(rejoins.some((r) => r.status === 200), `a rejoin answered: ${JSON.stringify(rejoins)}`);
    assert.equal((await tc()).marker, 'the same page', 'no reload');
    const head = await showsState(tid);
    assert.deepEqual(head.messages.map(textOf).filter((_t, i) => i !== 2), [q, lines.searching, answer, lines.summary]);
    // Every token once: each text the page showed was a prefix of the final text, and the answer kept growing after the kill.
    const partials = await grewByPrefixes(head, head.messages[3].id);
    assert.ok(partials.some((t) => t.length > shownAtKill.text.length), `the answer grew on the page after the kill: ${JSON.stringify(partials)}`);
    t.diagnostic(`killed gateway :${victim.port} with ${JSON.stringify(shownAtKill.text)} on the page; rejoined with Last-Event-ID ${rejoins.map((r) => `${r.lastEventId} (${r.status})`).join(', ')}; ${partials.length} partial renders of the answer`);
    const all = await s.client().runs.list(tid);
    assert.deepEqual(all.map((r) => [r.run_id, r.status]), [[run.run_id, 'success']], 'one run, not restarted');
  });
});
