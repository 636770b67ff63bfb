// The official client, @langchain/langgraph-sdk (pinned in package-lock.json),
// used exactly as its README shows, with its default routes
// (/threads/:id/stream/events, /threads/:id/commands), over both of its
// transports, through HAProxy in front of two threadcast instances and the
// reference agent. Nothing here speaks the protocol by hand: whatever the SDK
// assembles is compared with what the agent stored in Redis.
import { test, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { Client } from '@langchain/langgraph-sdk';
import { startRedis, startThreadcast, startAgent, startHaproxy, stopAll, waitUntil, redisClient,
  storedEvents } from './lib/harness.mjs';
import { assemble, messageText } from '../../protocol/js/messages.js';

after(stopAll);


/** Redis, two gateways, reference agents and HAProxy; the SDK talks to HAProxy. */
async function stack({ tokenDelayMs = 1 } = {}) {
  const redis = await startRedis();
  const gws = await Promise.all([startThreadcast({ redisUrl: redis.url }), startThreadcast({ redisUrl: redis.url })]);
  await Promise.all(gws.map((g) => g.ready()));
  const agents = await Promise.all(['w1', 'w2'].map((name) =>
    startAgent(redis.url, { name, args: ['--token-delay-ms', String(tokenDelayMs)] })));
  const lb = await startHaproxy(gws.map((g) => g.port));
  const rc = redisClient(redis.port);
  return {
    redis, gws, agents, rc,
    apiUrl: `http://127.0.0.1:${lb}`,
    async done() {
      const reports = gws.flatMap((g) => g.sanitizerReports());
      rc.close();
      for (const a of agents) await a.kill('SIGTERM');
      for (const g of gws) if (g.exitCode === null && g.signal === null) await g.stop();
      await redis.cleanup();
      assert.deepEqual(reports, []);
    },
  };
}

/** A ThreadStream as the SDK's README makes one (ws from the `ws` package in Node). */
function open(apiUrl, threadId, transport, wsOptions = {}) {
  const client = new Client({ apiUrl, apiKey: null });
  return client.threads.stream(threadId, { assistantId: 'agent', transport,
    webSocketFactory: (url) => new WebSocket(url, wsOptions), maxReconnectAttempts: 10 });
}

/** id → text of every message the agent stored for the thread. */
async function storedMessages(rc, thread) {
  const events = await storedEvents(rc, thread);
  return new Map(assemble(events).map((m) => [m.id, messageText(m)]));
}

/** Collects thread.messages: id → text, and how many times each id came. */
function collectMessages(thread) {
  const got = { texts: new Map(), counts: new Map() };
  got.done = (async () => {
    for await (const m of thread.messages) {
      got.counts.set(m.id, (got.counts.get(m.id) ?? 0) + 1);
      got.texts.set(m.id, await m.text);
    }
  })();
  return got;
}

/** Waits until the SDK has assembled every message the agent stored, with its text. */
async function sameTranscript(s, threadId, msgs, ms, what) {
  let stored;
  try {
    await waitUntil(async () => {
      stored = await storedMessages(s.rc, threadId);
      return stored.size === msgs.texts.size && [...stored].every(([id, text]) => msgs.texts.get(id) === text);
    }, ms, what);
  } catch (e) {
    assert.deepEqual(Object.fromEntries(msgs.texts), Object.fromEntries(stored), e.message);
  }
}

const userInput = (content) => ({ input: { messages: [{ role: 'user', content }] } });

for (const transport of ['websocket', 'sse']) {
  describe(`@langchain/langgraph-sdk over ${transport}`, () => {
    test('a run: messages, tool calls, subgraphs, output, state, checkpoints and the agent tree', async () => {
      const s = await stack();
      try {
        const threadId = `sdk-run-${transport}`;
        const thread = open(s.apiUrl, threadId, transport);
        const run = await thread.run.start(userInput('tell me about otters'));
        assert.match(run.run_id, /^run-/);
        const msgs = collectMessages(thread);
        const calls = [];
        const callsDone = (async () => {
          for await (const tc of thread.toolCalls) calls.push({ name: tc.name, input: tc.input, output: await tc.output });
        })();
        const subgraphs = [];
        const subsDone = (async () => { for await (const sg of thread.subgraphs) subgraphs.push(sg.name); })();
        const output = await thread.output;
        await Promise.all([msgs.done, callsDone, subsDone].map((p) => Promise.race([p, new Promise((r) => setTimeout(r, 2000))])));

        const stored = await storedMessages(s.rc, threadId);
        assert.deepEqual(Object.fromEntries(msgs.texts), Object.fromEntries(stored), 'every message, with its text');
        assert.ok([...stored.values()].some((t) => t.includes('otters')));
        assert.ok(calls.length >= 1);
        assert.deepEqual({ name: calls[0].name, input: calls[0].input, output: calls[0].output },
          { name: 'search', input: { query: 'tell me about otters' }, output: { results: ['result one', 'result two'] } });
        assert.deepEqual(subgraphs, ['researcher']);
        assert.ok(Array.isArray(output.messages) && output.messages.length >= 2);

        const state = await thread.state.get({ namespace: [] });
        assert.deepEqual(state.values, output);
        const { checkpoints } = await thread.state.listCheckpoints({});
        assert.ok(checkpoints.length >= 2 && checkpoints.every((c) => typeof c.id === 'string' && typeof c.step === 'number'));
        assert.ok(checkpoints.some((c) => c.node_name === 'agent'), 'spelled as 0.0.21');
        const { tree } = await thread.agent.getTree({});
        assert.deepEqual({ ns: tree.namespace, status: tree.status, graph: tree.graph_name }, { ns: [], status: 'completed', graph: 'agent' });
        assert.deepEqual(tree.children.map((c) => c.graph_name), ['researcher']);
        await thread.close();
      } finally {
        await s.done();
      }
    });

    test('an interrupt answered with thread.input.respond; the run completes', async () => {
      const s = await stack();
      try {
        const threadId = `sdk-interrupt-${transport}`;
        const thread = open(s.apiUrl, threadId, transport);
        await thread.run.start(userInput('look it up, then interrupt me'));
        const msgs = collectMessages(thread);
        await waitUntil(() => thread.interrupted && thread.interrupts.length > 0, 20000, 'the interrupt');
        const it = thread.interrupts[0];
        assert.match(it.interruptId, /^int-/);
        assert.equal(it.payload.question, 'Shall I write the final answer?');
        // Up to the interrupt, the SDK has what the agent stored.
        await sameTranscript(s, threadId, msgs, 10000, 'the messages before the interrupt');
        await thread.input.respond({ namespace: [], interrupt_id: it.interruptId, response: 'yes' });
        assert.equal(thread.interrupts.length, 0);
        await waitUntil(async () => (await s.rc.cmd('HGET', `tc:{${threadId}}:meta`, 'run_status')) === 'completed',
          20000, 'the run to complete');
        // SDK 1.15 ends thread.messages at the interrupt; a new stream on the
        // thread (another tab, a reload) replays the whole run, answer included.
        // (It settles its messages at the root "interrupted" event of the
        // replay too, and still yields the message after it only when the
        // frames reach it in one task: `ws` hands over uncompressed frames so,
        // but inflates compressed ones one per task, as a browser delivers
        // every frame. So this stream is opened without permessage-deflate,
        // and the replay of a compressed one is checked frame by frame below.)
        const later = open(s.apiUrl, threadId, transport, { perMessageDeflate: false });
        const all = collectMessages(later);
        await sameTranscript(s, threadId, all, 10000, 'the whole run in a new stream');
        assert.ok([...all.texts.values()].some((t) => t.includes('You answered: yes')));
        if (transport === 'websocket') {
          const raw = new WebSocket(`${s.apiUrl.replace(/^http/, 'ws')}/threads/${threadId}/stream/events`);
          const frames = [];
          raw.on('message', (d) => frames.push(JSON.parse(String(d))));
          await new Promise((r) => raw.once('open', r));
          assert.match(raw.extensions, /permessage-deflate/);
          raw.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } }));
          const want = (await storedEvents(s.rc, threadId)).filter((e) => e.method === 'messages').map((e) => e.seq);
          await waitUntil(() => frames.filter((f) => f.type === 'event').length >= want.length, 10000, 'the compressed replay');
          assert.deepEqual(frames.filter((f) => f.type === 'event').map((f) => f.seq), want);
          assert.ok(frames.some((f) => f.params?.data?.delta?.text?.includes('yes')), 'the answer is in the compressed replay');
          raw.close();
        }
        await thread.close();
        await later.close();
      } finally {
        await s.done();
      }
    });

    test('the gateway the client is on is SIGKILLed mid-message: the SDK reconnects, the transcript is whole', async () => {
      const s = await stack({ tokenDelayMs: 40 });
      try {
        const threadId = `sdk-kill-${transport}`;
        const thread = open(s.apiUrl, threadId, transport);
        await thread.run.start(userInput('a question that takes a while to answer'));
        const msgs = collectMessages(thread);
        // Mid-message: some tokens of the first AI message are out.
        await waitUntil(async () => {
          const events = await storedEvents(s.rc, threadId);
          return events.filter((e) => e.method === 'messages' && e.params.data.event === 'content-block-delta').length >= 3;
        }, 20000, 'tokens');
        const counts = await Promise.all(s.gws.map(async (g) => (await (await g.http('/readyz')).json())));
        const key = transport === 'websocket' ? 'websockets' : 'sse';
        const victim = s.gws[counts.findIndex((c) => c[key] > 0)];
        assert.ok(victim, `the client holds a ${key} connection on one gateway: ${JSON.stringify(counts)}`);
        victim.proc.kill('SIGKILL');
        await waitUntil(async () => (await s.rc.cmd('HGET', `tc:{${threadId}}:meta`, 'run_status')) === 'completed',
          60000, 'the run to complete');
        await sameTranscript(s, threadId, msgs, 30000, 'the SDK to have every message after the reconnect');
        for (const [id, n] of msgs.counts) assert.equal(n, 1, `message ${id} once`);
        await thread.close();
      } finally {
        await s.done();
      }
    });
  });
}
