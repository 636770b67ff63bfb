// A real @langchain/langgraph graph behind threadcast (issue 16): the example
// graph (src/worker/graphs/agent.js: a fake streaming chat model, a tool node,
// a subgraph, interrupts), served by two LangGraph workers (src/worker)
// behind two gateways and HAProxy, driven by the official client,
// @langchain/langgraph-sdk, over both of its transports. What the client
// assembles is compared with what the model says and with the graph's own
// state (graph.getState on the same checkpointer).
import { test, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { Client } from '@langchain/langgraph-sdk';
import { startRedis, startThreadcast, startWorker, startHaproxy, stopAll, waitUntil, redisClient,
  storedEvents, connect } from './lib/harness.mjs';
import { builder, lines } from '../../src/worker/graphs/agent.js';
import { plain } from '../../src/worker/relay.js';
import { Redis, RedisSaver } from '../../src/worker/test/fixtures.js';

after(stopAll);

/** Redis, two gateways, two workers, HAProxy; the SDK talks to HAProxy. */
async function stack({ tokenMs = 5, workerArgs = [] } = {}) {
  const redis = await startRedis();
  const gws = await Promise.all([startThreadcast({ redisUrl: redis.url }), startThreadcast({ redisUrl: redis.url })]);
  await Promise.all(gws.map((g) => g.ready()));
  const workers = await Promise.all(['lg1', 'lg2'].map((name) =>
    startWorker(redis.url, { name, args: workerArgs, env: { THREADCAST_FAKE_TOKEN_MS: String(tokenMs) } })));
  const lb = await startHaproxy(gws.map((g) => g.port));
  const rc = redisClient(redis.port);
  // The graph itself, on the same checkpoints: what the client must agree with.
  const ioredis = new Redis(redis.url);
  const graph = builder().compile({ checkpointer: new RedisSaver({ client: ioredis }), name: 'agent' });
  return {
    redis, gws, workers, rc, graph,
    apiUrl: `http://127.0.0.1:${lb}`,
    async done() {
      const reports = gws.flatMap((g) => g.sanitizerReports());
      rc.close();
      ioredis.disconnect();
      for (const w of workers) await w.kill('SIGTERM');
      for (const g of gws) if (g.exitCode === null && g.signal === null) await g.stop();
      await redis.cleanup();
      assert.deepEqual(reports, []);
      for (const w of workers) assert.doesNotMatch(w.stderr, /"level":"error"/, w.stderr);
    },
  };
}

function open(apiUrl, threadId, transport) {
  const client = new Client({ apiUrl, apiKey: null });
  return client.threads.stream(threadId, { assistantId: 'agent', transport,
    webSocketFactory: (url) => new WebSocket(url), maxReconnectAttempts: 10 });
}

/** thread.messages as id → { text, error } (error: the code a cut message was closed with). */
function collectMessages(thread) {
  const got = new Map();
  got.done = (async () => {
    for await (const m of thread.messages) {
      let text;
      try {
        text = await m.text;
      } catch (e) {
        text = `(${e.message})`;
      }
      got.set(m.id, { text, error: m.assembled?.error?.code ?? null });
    }
  })();
  return got;
}

/** The text of a plain AI message of the state (content: a string or blocks). */
const textOf = (m) => (typeof m.content === 'string' ? m.content
  : m.content.filter((b) => b.type === 'text').map((b) => b.text).join(''));

const question = (q) => ({ input: { messages: [{ role: 'user', content: q }] } });
const head = async (s, thread) => plain((await s.graph.getState({ configurable: { thread_id: thread } })).values);
const status = (s, thread) => s.rc.cmd('HGET', `tc:{${thread}}:meta`, 'run_status');

for (const transport of ['websocket', 'sse']) {
  describe(`a LangGraph graph through @langchain/langgraph-sdk over ${transport}`, () => {
    test('a run: the model\'s text, the tool call, the subgraph, state and checkpoints as the graph has them', async () => {
      const s = await stack();
      try {
        const threadId = `lg-run-${transport}`;
        const q = 'tell me about otters';
        const thread = open(s.apiUrl, threadId, transport);
        const run = await thread.run.start(question(q));
        assert.match(run.run_id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a uuid, as the reference server\'s run ids');
        const msgs = collectMessages(thread);
        const calls = [];
        const callsDone = (async () => {
          for await (const tc of thread.toolCalls) calls.push({ name: tc.name, input: tc.input, output: await tc.output });
        })();
        const subgraphs = [];
        const subsDone = (async () => { for await (const sg of thread.subgraphs) subgraphs.push(sg.name); })();
        await thread.output;
        await Promise.all([msgs.done, callsDone, subsDone].map((p) => Promise.race([p, new Promise((r) => setTimeout(r, 2000))])));

        // The assembled messages: the question, then what the fake model streamed.
        const texts = [...msgs.values()].map((m) => m.text);
        assert.deepEqual(texts, [q, lines.searching, lines.answer(q), lines.summary]);
        assert.ok(calls.length >= 1);
        assert.equal(calls[0].name, 'search');
        assert.deepEqual(calls[0].input, { query: q });
        assert.match(JSON.stringify(calls.at(-1).output), /3 results for \\"tell me about otters\\"/);
        assert.deepEqual(subgraphs, ['researcher']);

        // thread.state.get is the graph's own state; the messages the SDK
        // assembled are the state's, ids and texts.
        const state = await thread.state.get({ namespace: [] });
        const expected = await head(s, threadId);
        assert.deepEqual(state.values, expected);
        assert.deepEqual([...msgs.keys()], expected.messages.filter((m) => m.type !== 'tool').map((m) => m.id));
        assert.deepEqual(expected.messages.filter((m) => m.type === 'ai').map(textOf), [lines.searching, lines.answer(q), lines.summary]);
        // A subgraph's own state, by its namespace; a namespace the graph lacks.
        const ns = (await storedEvents(s.rc, threadId)).find((e) => e.method === 'lifecycle' && e.params.namespace.length === 1).params.namespace;
        assert.match(ns[0], /^researcher:/);
        const sub = await thread.state.get({ namespace: ns });
        assert.equal(sub.values.notes, 'reviewed');
        await assert.rejects(thread.state.get({ namespace: ['nowhere:1'] }), /no state at namespace/);

        const { checkpoints } = await thread.state.listCheckpoints({});
        const history = [];
        for await (const h of s.graph.getStateHistory({ configurable: { thread_id: threadId } })) history.push(h.config.configurable.checkpoint_id);
        assert.deepEqual(checkpoints.map((c) => c.id), history.slice(0, checkpoints.length));
        assert.deepEqual(checkpoints.slice(0, 5).map((c) => c.node_name), ['approve', 'researcher', 'model', 'tools', 'model']);
        const { tree } = await thread.agent.getTree({});
        assert.deepEqual({ status: tree.status, graph: tree.graph_name }, { status: 'completed', graph: 'agent' });
        assert.deepEqual(tree.children.map((c) => c.graph_name), ['researcher']);
        await thread.close();
      } finally {
        await s.done();
      }
    });

    test('interrupt() surfaces as input.requested; thread.input.respond resumes; the run completes', async () => {
      const s = await stack();
      try {
        const threadId = `lg-interrupt-${transport}`;
        const thread = open(s.apiUrl, threadId, transport);
        await thread.run.start(question('look it up, then interrupt me'));
        await waitUntil(() => thread.interrupted && thread.interrupts.length > 0, 20000, 'the interrupt');
        const it = thread.interrupts[0];
        assert.deepEqual(it.payload, { question: 'Approve the answer?', options: ['yes', 'no'] });
        const pending = (await s.graph.getState({ configurable: { thread_id: threadId } })).tasks.flatMap((t) => t.interrupts);
        assert.deepEqual(pending.map((i) => i.id), [it.interruptId], 'the id is LangGraph\'s');
        assert.equal(await status(s, threadId), 'interrupted');
        await assert.rejects(thread.input.respond({ namespace: [], interrupt_id: 'nope', response: 1 }), /no interrupt "nope"/);
        await thread.input.respond({ namespace: [], interrupt_id: it.interruptId, response: 'yes' });
        await waitUntil(async () => (await status(s, threadId)) === 'completed', 20000, 'the run to complete');
        assert.equal((await head(s, threadId)).approved, 'yes');
        const events = await storedEvents(s.rc, threadId);
        const answered = events.find((e) => e.method === 'input.answered');
        assert.deepEqual(answered.params.data.interrupt_ids, [it.interruptId]);
        await thread.close();
      } finally {
        await s.done();
      }
    });
  });
}

describe('the LangGraph worker, beyond what the SDK drives', () => {
  test('an interrupt inside the subgraph; a fork from a listed checkpoint; a run from a checkpoint', async () => {
    const s = await stack();
    try {
      const threadId = 'lg-fork';
      const thread = open(s.apiUrl, threadId, 'websocket');
      await thread.run.start(question('a deep interrupt please'));
      await waitUntil(() => thread.interrupted && thread.interrupts.length > 0, 20000, 'the interrupt');
      const it = thread.interrupts[0];
      assert.match(it.namespace[0], /^researcher:/);
      assert.deepEqual(it.payload, { question: 'Keep the summary?', from: 'researcher' });
      await thread.input.respond({ namespace: it.namespace, interrupt_id: it.interruptId, response: 'keep' });
      await waitUntil(async () => (await status(s, threadId)) === 'completed', 20000, 'the run to complete');

      const { checkpoints } = await thread.state.listCheckpoints({});
      const afterTools = checkpoints.find((c) => c.node_name === 'tools');
      const fork = await thread.state.fork({ checkpoint_id: afterTools.id });
      assert.deepEqual(Object.keys(fork).sort(), ['run_id', 'thread_id']);
      assert.equal(fork.thread_id, threadId);
      // From there the model runs again, and the subgraph asks again.
      await waitUntil(async () => (await status(s, threadId)) === 'interrupted', 20000, 'the fork to stop at the interrupt');
      // The fork's branch is the thread's head now.
      const history = [];
      for await (const h of s.graph.getStateHistory({ configurable: { thread_id: threadId } })) history.push(h);
      const path = [];
      for (let h = history[0]; h; h = history.find((x) => x.config.configurable.checkpoint_id === h.parentConfig?.configurable.checkpoint_id)) {
        path.push(h.config.configurable.checkpoint_id);
      }
      assert.ok(path.includes(afterTools.id), 'the head descends from the forked checkpoint');
      const state = await thread.state.get({ namespace: [] });
      assert.deepEqual(state.values, await head(s, threadId));
      assert.equal(state.values.messages.length, 4, 'the subgraph has not returned: its summary is in its own state');
      await assert.rejects(thread.state.fork({ checkpoint_id: 'nope' }), /no checkpoint "nope"/);
      // run.start with config.configurable.checkpoint_id starts from there too.
      const runSeq = await s.rc.cmd('HGET', `tc:{${threadId}}:meta`, 'run_seq');
      await thread.run.start({ input: null, config: { configurable: { checkpoint_id: afterTools.id } } });
      await waitUntil(async () => (await s.rc.cmd('HGET', `tc:{${threadId}}:meta`, 'run_seq')) !== runSeq &&
        (await status(s, threadId)) === 'interrupted', 20000, 'the run to stop at the interrupt');
      assert.equal((await head(s, threadId)).messages.length, 4);
      await thread.close();
    } finally {
      await s.done();
    }
  });

  /** A run of question q on threadId, mid-message in the model's second turn: {thread, msgs, holder}. */
  async function midAnswer(s, threadId, q) {
    const thread = open(s.apiUrl, threadId, 'websocket');
    await thread.run.start(question(q));
    const msgs = collectMessages(thread);
    // Mid-message, in the model's second turn (after the tools step's checkpoint).
    await waitUntil(async () => (await storedEvents(s.rc, threadId)).filter((e) => e.method === 'messages' &&
      e.params.data.event === 'content-block-delta').length >= 11, 30000, 'tokens of the answer');
    const owner = await s.rc.cmd('GET', `tc:{${threadId}}:lg:lock`);
    const holder = s.workers.find((w) => w.name === owner);
    assert.ok(holder, `the run is held by one of the workers: ${owner}`);
    return { thread, msgs, holder };
  }

  /**
   * Once the run is over: every message of the state once, whole; the one
   * the fault cut is closed with worker_lost, its text a beginning of its
   * rerun's (none when nothing was cut); one run, one start, one end (no
   * failure reported).
   */
  async function takenOverWhole(s, threadId, q, msgs, { cut: cuts = 1 } = {}) {
    await waitUntil(async () => (await status(s, threadId)) === 'completed', 60000, 'the run to complete');
    await msgs.done;
    const state = await head(s, threadId);
    const finished = [...msgs].filter(([, m]) => !m.error);
    assert.deepEqual(finished.map(([id]) => id), state.messages.filter((m) => m.type !== 'tool').map((m) => m.id));
    assert.deepEqual(finished.map(([, m]) => m.text), [q, lines.searching, lines.answer(q), lines.summary]);
    const cut = [...msgs].filter(([, m]) => m.error);
    assert.deepEqual(cut.map(([, m]) => m.error), Array(cuts).fill('worker_lost'));
    for (const [, m] of cut) assert.ok(lines.answer(q).startsWith(m.text), m.text);
    const events = await storedEvents(s.rc, threadId);
    const root = events.filter((e) => e.method === 'lifecycle' && e.params.namespace.length === 0).map((e) => e.params.data.event);
    assert.deepEqual([root.filter((e) => e === 'started').length, root.filter((e) => e === 'failed').length, root.at(-1)], [1, 0, 'completed']);
    return events;
  }

  test('a worker SIGKILLed mid-run: another takes the run over from the last checkpoint', async () => {
    const s = await stack({ tokenMs: 120, workerArgs: ['--claim-idle-ms', '2000', '--lock-ms', '2000'] });
    try {
      const q = 'a question that takes a while';
      const { thread, msgs, holder: victim } = await midAnswer(s, 'lg-kill', q);
      await victim.kill('SIGKILL');
      await takenOverWhole(s, 'lg-kill', q, msgs);
      const survivor = s.workers.find((w) => w !== victim);
      assert.ok(survivor.logs.some((l) => l.msg === 'taking over a run' && l.from === 'the last checkpoint'));
      await thread.close();
    } finally {
      await s.done();
    }
  });

  test('a worker that lost its thread\'s lock (stalled past its lease) stops without appending; the run is taken over whole', async () => {
    const s = await stack({ tokenMs: 120 }); // the default takeover timing: heartbeat 1 s, claim and lease 3 s
    try {
      const q = 'a question for a worker that stalls';
      const { thread, msgs, holder: stalled } = await midAnswer(s, 'lg-lost-lock', q);
      // What a stall past the lease looks like from Redis: the lock is not its any more.
      await s.rc.cmd('SET', 'tc:{lg-lost-lock}:lg:lock', 'lapsed', 'PX', '1500');
      await waitUntil(() => stalled.logs.some((l) => /lost the thread's lock/.test(l.msg)), 5000, 'the worker to find out');
      await takenOverWhole(s, 'lg-lost-lock', q, msgs);
      assert.ok(s.workers.some((w) => w.logs.some((l) => l.msg === 'taking over a run')), 'taken over');
      await thread.close();
    } finally {
      await s.done();
    }
  });

  test('Redis stalled past the lease and the claim delay: the worker running the run keeps it; nothing lost, repeated or taken over', async () => {
    const s = await stack({ tokenMs: 120 }); // the default takeover timing: heartbeat 1 s, claim and lease 3 s
    try {
      const q = 'a question asked while Redis stalls';
      const { thread, msgs, holder } = await midAnswer(s, 'lg-redis-stall', q);
      // Every lease lapses and every entry looks idle on Redis' clock when it wakes up.
      s.redis.proc.kill('SIGSTOP');
      await new Promise((r) => setTimeout(r, 4500));
      s.redis.proc.kill('SIGCONT');
      await takenOverWhole(s, 'lg-redis-stall', q, msgs, { cut: 0 });
      for (const w of s.workers) assert.ok(!w.logs.some((l) => l.msg === 'taking over a run'), `${w.name} took nothing over`);
      assert.ok(!holder.logs.some((l) => /lost the thread's lock/.test(l.msg)), 'the worker kept the thread');
      await thread.close();
    } finally {
      await s.done();
    }
  });

  test('routing: an assistant no worker serves is refused at once; run.cancel; input for an active run is injected', async () => {
    const s = await stack({ tokenMs: 60 });
    try {
      const c = await connect(`ws://127.0.0.1:${s.gws[0].port}/threads/lg-misc/stream/events`);
      const t0 = Date.now();
      const r = await c.request({ id: 1, method: 'run.start', params: { assistant_id: 'nobody', input: null } });
      assert.deepEqual([r.error, r.message], ['invalid_argument', 'no worker serves assistant "nobody" (live: agent)']);
      assert.ok(Date.now() - t0 < 1000);
      await c.request({ id: 2, method: 'subscription.subscribe', params: { channels: ['lifecycle', 'messages'] } });
      const started = await c.request({ id: 3, method: 'run.start', params: { assistant_id: 'agent', input: { messages: [{ role: 'user', content: 'hi' }] } } });
      assert.equal(started.type, 'success');
      // Input while the run is active: injected (CDDL 4a), shown whole at once, in the state at the next step.
      await waitUntil(() => c.events.some((e) => e.params.data.event === 'content-block-delta' && e.params.namespace.length), 10000, 'tokens');
      const inj = await c.request({ id: 4, method: 'run.start', params: { assistant_id: 'agent', input: { messages: [{ role: 'user', content: 'also: be brief' }] } } });
      assert.deepEqual(inj.result, { run_id: started.result.run_id });
      await waitUntil(async () => (await head(s, 'lg-misc')).messages.some((m) => m.content === 'also: be brief'), 20000, 'the injected message in the state');
      const shown = c.events.filter((e) => e.params.node === 'input' && e.params.data.event === 'content-block-delta');
      assert.deepEqual(shown.map((e) => e.params.data.delta.text), ['also: be brief']);
      // Cancel: the run ends failed, saying so; its open message is closed.
      const cancel = await c.request({ id: 5, method: 'run.cancel', params: {} });
      assert.equal(cancel.type, 'success');
      await waitUntil(() => c.events.some((e) => e.method === 'lifecycle' && !e.params.namespace.length && e.params.data.event === 'failed'), 10000, 'the run to end');
      const end = c.events.findLast((e) => e.method === 'lifecycle' && !e.params.namespace.length);
      assert.deepEqual(end.params.data, { event: 'failed', graph_name: 'agent', error: 'cancelled', cancelled: true });
      const again = await c.request({ id: 6, method: 'run.cancel', params: {} });
      assert.equal(again.error, 'no_such_run');
      await c.close();
    } finally {
      await s.done();
    }
  });
});
