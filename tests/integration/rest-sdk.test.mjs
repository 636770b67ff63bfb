// The Agent Protocol REST API (issue 17) as @langchain/langgraph-sdk 1.15.0's
// Client calls it: client.threads.*, client.runs.*, client.store.*,
// client.assistants.*, against two gateways behind HAProxy and two LangGraph
// workers serving the example graph (assistant "agent") and a graph that
// writes custom stream events ("reporter"; lib/rest-graphs.mjs). What the API
// answers is compared with the graph's own state on the same checkpoints.
// The same journeys as raw HTTP: rest-http.test.mjs.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, stopAll } from './lib/harness.mjs';
import {
  restStack, question, transcript, expectedTranscript, lines, randomUUID, UUID, ISO,
  rejectsWith, runReaches, collect, assertIds, tuples, assembleTuples, holder, sleep, waitUntil, systemAssistantId,
} from './lib/rest.mjs';
import { reports } from './lib/rest-graphs.mjs';

after(stopAll);

const STATUSES_LIVE = ['pending', 'running'];

describe('the Agent Protocol REST API through @langchain/langgraph-sdk', () => {
  let s;
  let client;
  before(async () => {
    s = await restStack({ tokenMs: 15 });
    client = s.client();
  });
  after(async () => { await s?.done(); });
  /** Waits until the graph's state holds the question (the run has written its first checkpoint). */
  const inState = (threadId, q) => waitUntil(async () => transcript(await s.head(threadId)).includes(q), 10000, `"${q}" in the state`);

  test('seed journey 1: create a thread, get it, a background run, wait for its output', async () => {
    const threadId = randomUUID();
    const q = "Hi there, what's the weather?";
    const thread = await client.threads.create({ threadId, metadata: { purpose: 'support-chat' } });
    assert.equal(thread.thread_id, threadId);
    assert.equal(thread.status, 'idle');
    assert.deepEqual(thread.metadata, { purpose: 'support-chat' });
    assert.match(thread.created_at, ISO);
    assert.match(thread.updated_at, ISO);
    assert.equal((await client.threads.get(threadId)).status, 'idle');

    const run = await client.runs.create(threadId, 'agent', { input: question(q), metadata: { requestType: 'weatherQuery' } });
    assert.match(run.run_id, UUID);
    assert.equal(run.thread_id, threadId);
    assert.equal(run.assistant_id, systemAssistantId('agent'), 'a graph id names its system assistant');
    assert.ok(STATUSES_LIVE.includes(run.status), run.status);
    assert.equal(run.metadata.requestType, 'weatherQuery');
    assert.equal(run.multitask_strategy, 'reject', 'the default strategy');
    assert.match(run.created_at, ISO);

    const values = await client.runs.join(threadId, run.run_id);
    assert.deepEqual(transcript(values), expectedTranscript(q));
    assert.deepEqual(values, await s.head(threadId), 'the output is the graph\'s state');
    assert.equal((await client.runs.get(threadId, run.run_id)).status, 'success');
    const after = await client.threads.get(threadId);
    assert.equal(after.status, 'idle');
    assert.deepEqual(after.values, values, 'the thread keeps its last values');
  });

  test('a human message whose content is a list of text blocks (what the chat UI sends) is read as its text', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const q = 'tell me about seals';
    const values = await client.runs.wait(threadId, 'agent', { input: { messages: [{ type: 'human',
      content: [{ type: 'text', text: 'tell me' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } }, { type: 'text', text: 'about seals' }] }] } });
    const ai = transcript(values).slice(1);
    assert.deepEqual(ai, [lines.searching, lines.answer(q), lines.summary]);
  });

  test('a run started over the protocol\'s WebSocket on a thread of the REST API is a run of that thread: runs.join waits for it, runs.get and runs.list show it', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const assistant = await client.assistants.create({ graphId: 'agent', name: 'over the socket' });
    const ws = await connect(`ws://127.0.0.1:${s.lbPort}/threads/${threadId}/stream/events`);
    const q = 'a question sent over the socket';
    const ack = await ws.request({ id: 1, method: 'run.start', params: { assistant_id: assistant.assistant_id, input: question(q) } });
    assert.equal(ack.type, 'success', JSON.stringify(ack));
    const runId = ack.result.run_id;
    assert.match(runId, UUID, 'run ids are uuids, as the reference server\'s');
    await ws.close();
    const values = await client.runs.join(threadId, runId);
    assert.deepEqual(transcript(values), expectedTranscript(q));
    assert.deepEqual(values, await s.head(threadId));
    const run = await client.runs.get(threadId, runId);
    assert.equal(run.status, 'success');
    assert.equal(run.assistant_id, assistant.assistant_id, 'the assistant the command named');
    assert.deepEqual((await client.runs.list(threadId)).map((r) => r.run_id), [runId]);
    const thread = await client.threads.get(threadId);
    assert.equal(thread.status, 'idle');
    assert.deepEqual(thread.values, values);
    assert.equal(thread.metadata.graph_id, 'agent');

    // A thread the REST API does not know: the run runs, nothing is recorded.
    const bare = randomUUID();
    const other = await connect(`ws://127.0.0.1:${s.lbPort}/threads/${bare}/stream/events`);
    const started = await other.request({ id: 1, method: 'run.start', params: { assistant_id: 'agent', input: question(q) } });
    assert.equal(started.type, 'success', JSON.stringify(started));
    await waitUntil(async () => transcript(await s.head(bare)).length === expectedTranscript(q).length, 20000, 'the run over');
    await other.close();
    await rejectsWith(client.runs.get(bare, started.result.run_id), 404, /not found/i);
    await client.assistants.delete(assistant.assistant_id); // the assistants test lists the system ones only
  });

  test('seed journey 2: a stateless runs.wait; its thread is deleted after, unless onCompletion is "keep"', async () => {
    const q = "What's the fastest route to the airport?";
    let created;
    const values = await client.runs.wait(null, 'agent', {
      input: question(q), metadata: { useCase: 'travelPlan' }, config: { tags: ['ephemeral', 'demo'] },
      onRunCreated: (m) => { created = m; },
    });
    assert.deepEqual(transcript(values), expectedTranscript(q));
    assert.ok(created, 'Content-Location names the run');
    assert.match(created.run_id, UUID);
    assert.match(created.thread_id ?? '', UUID, 'Content-Location: /threads/<thread_id>/runs/<run_id>');
    await waitUntil(async () => {
      try {
        await client.threads.get(created.thread_id);
        return false;
      } catch (e) {
        return e.status === 404;
      }
    }, 10000, 'the ephemeral thread to be deleted');

    const kept = await client.runs.create(null, 'agent', { input: question('keep this one'), onCompletion: 'keep' });
    assert.match(kept.thread_id, UUID);
    const out = await client.runs.join(kept.thread_id, kept.run_id);
    assert.deepEqual(transcript(out), expectedTranscript('keep this one'));
    const thread = await client.threads.get(kept.thread_id);
    assert.deepEqual(thread.values, out);

    // Stateless and streamed.
    const parts = await collect(client.runs.stream(null, 'agent', { input: question('stream me'), streamMode: 'values' })).done;
    assert.equal(parts[0].event, 'metadata');
    assert.deepEqual(transcript(parts.filter((p) => p.event === 'values').at(-1).data), expectedTranscript('stream me'));
  });

  test('seed journey 3: store put, get, delete', async () => {
    const value = { displayName: 'Jane Doe', role: 'customer' };
    assert.equal(await client.store.putItem(['user_profiles'], 'profile_jane_doe', value), undefined, '204');
    const item = await client.store.getItem(['user_profiles'], 'profile_jane_doe');
    assert.deepEqual(item.value, value);
    assert.deepEqual(item.namespace, ['user_profiles']);
    assert.equal(item.key, 'profile_jane_doe');
    assert.match(item.created_at, ISO);
    assert.match(item.updated_at, ISO);
    assert.equal(await client.store.deleteItem(['user_profiles'], 'profile_jane_doe'), undefined, '204');
    assert.equal(await client.store.getItem(['user_profiles'], 'profile_jane_doe'), null, 'gone: null');
  });

  test('runs.stream: metadata first, values, messages-tuple, updates and custom, with subgraphs', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const q = 'tell me about otters';
    let created;
    const parts = await collect(client.runs.stream(threadId, 'agent', {
      input: question(q), streamMode: ['values', 'messages-tuple', 'updates', 'custom'], streamSubgraphs: true,
      onRunCreated: (m) => { created = m; },
    })).done;

    // metadata, with the run's id, first; Content-Location names the same run.
    assert.equal(parts[0].event, 'metadata');
    assert.match(parts[0].data.run_id, UUID);
    assert.deepEqual(created, { run_id: parts[0].data.run_id, thread_id: threadId });
    assert.equal(parts.filter((p) => p.event === 'metadata').length, 1);
    assertIds(parts);
    const names = new Set(parts.map((p) => p.event.split('|')[0]));
    // (with stream_subgraphs and values, LangGraph's checkpoint envelopes come too, as from the Agent Server)
    assert.deepEqual([...names].filter((n) => !['metadata', 'values', 'messages', 'updates', 'custom', 'checkpoints'].includes(n)), [],
      `only the modes asked for: ${[...names]}`);

    // values: whole states; the last is the graph's.
    const values = parts.filter((p) => p.event === 'values');
    assert.ok(values.length >= 4, `a values event per step: ${values.length}`);
    assert.deepEqual(values.at(-1).data, await s.head(threadId));
    assert.deepEqual(transcript(values.at(-1).data), expectedTranscript(q));

    // messages (tuples [chunk, metadata]) of the root: the model's two turns, token by token.
    const root = assembleTuples(tuples(parts, 'messages'));
    const byNode = (n) => root.filter((m) => m.nodes.has(n));
    assert.deepEqual(byNode('model').map((m) => m.text), [lines.searching, lines.answer(q)], 'metadata.langgraph_node and text');
    assert.match(byNode('tools').map((m) => m.text).join(''), /3 results for "tell me about otters"/, 'the tool\'s message');
    for (const m of root) assert.equal(m.nodes.size, 1, `one node per message: ${m.id}`);
    const stateIds = (await s.head(threadId)).messages.map((m) => m.id);
    assert.ok(byNode('model').every((m) => stateIds.includes(m.id)), 'tuple chunks carry the ids of the state\'s messages');
    assert.ok(tuples(parts, 'messages').length > 10, 'streamed, not whole');

    // updates of the root: {<node>: <its update>}, in the order the nodes ran.
    const updates = parts.filter((p) => p.event === 'updates').map((p) => {
      assert.equal(Object.keys(p.data).length, 1, JSON.stringify(p.data));
      return Object.keys(p.data)[0];
    });
    assert.deepEqual(updates.slice(0, 4), ['model', 'tools', 'model', 'researcher']);
    const firstModel = parts.find((p) => p.event === 'updates' && p.data.model).data.model;
    assert.equal(firstModel.messages.at(-1).tool_calls[0].name, 'search');

    // The subgraph's events, named mode|<namespace>.
    const sub = parts.filter((p) => p.event.includes('|'));
    assert.ok(sub.length > 0, 'subgraph events with streamSubgraphs');
    const nss = new Set(sub.map((p) => p.event.split('|').slice(1).join('|')));
    assert.equal(nss.size, 1, [...nss].join(', '));
    const [ns] = nss;
    assert.match(ns, /^researcher:[^|]+$/);
    const subUpdates = parts.filter((p) => p.event === `updates|${ns}`).map((p) => Object.keys(p.data)[0]);
    assert.deepEqual(subUpdates, ['summarize', 'review']);
    const subMessages = assembleTuples(tuples(parts, `messages|${ns}`));
    assert.deepEqual(subMessages.map((m) => m.text), [lines.summary]);
    assert.ok(parts.some((p) => p.event === `values|${ns}` && p.data.notes === 'reviewed'));
    assert.equal(parts.filter((p) => p.event.startsWith('custom')).length, 0, 'this graph writes nothing custom');

    assert.equal((await client.runs.get(threadId, created.run_id)).status, 'success');
  });

  test('runs.stream of a graph that writes custom events, at the root and in a subgraph', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const parts = await collect(client.runs.stream(threadId, 'reporter', {
      input: { topic: 'otters' }, streamMode: ['custom', 'values'], streamSubgraphs: true,
    })).done;
    assert.equal(parts[0].event, 'metadata');
    assertIds(parts);
    assert.deepEqual(parts.filter((p) => p.event === 'custom').map((p) => p.data), reports.root);
    const inner = parts.filter((p) => p.event.startsWith('custom|'));
    assert.equal(inner.length, reports.inner.length);
    assert.match(inner[0].event, /^custom\|inner:[^|]+$/);
    assert.deepEqual(inner.map((p) => p.data), reports.inner);
    assert.deepEqual(parts.filter((p) => p.event === 'values').at(-1).data, { topic: 'otters', steps: 5 });
    // Without "custom" in streamMode, none.
    const plainParts = await collect(client.runs.stream(threadId, 'reporter', { input: { topic: 'again' }, streamMode: ['values'] })).done;
    assert.deepEqual([...new Set(plainParts.map((p) => p.event))], ['metadata', 'values']);
  });

  test('runs.create in the background; runs.get, runs.list (limit, offset, status), runs.delete', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const a = await client.runs.create(threadId, 'agent', { input: question('first question') });
    assert.ok(STATUSES_LIVE.includes(a.status), a.status);
    await runReaches(client, threadId, a.run_id, 'success');
    const b = await client.runs.create(threadId, 'agent', { input: question('second question') });
    const bValues = await client.runs.join(threadId, b.run_id);
    assert.deepEqual(transcript(bValues), [...expectedTranscript('first question'), ...expectedTranscript('second question')]);

    const all = await client.runs.list(threadId);
    assert.deepEqual(all.map((r) => r.run_id).sort(), [a.run_id, b.run_id].sort());
    for (const r of all) {
      assert.equal(r.status, 'success');
      assert.equal(r.thread_id, threadId);
      assert.equal(r.assistant_id, systemAssistantId('agent'));
    }
    const page1 = await client.runs.list(threadId, { limit: 1 });
    const page2 = await client.runs.list(threadId, { limit: 1, offset: 1 });
    assert.equal(page1.length, 1);
    assert.equal(page2.length, 1);
    assert.deepEqual([page1[0].run_id, page2[0].run_id].sort(), [a.run_id, b.run_id].sort());
    assert.equal((await client.runs.list(threadId, { status: 'success' })).length, 2);
    assert.deepEqual(await client.runs.list(threadId, { status: 'pending' }), []);

    assert.equal(await client.runs.delete(threadId, a.run_id), undefined, '204');
    await rejectsWith(client.runs.get(threadId, a.run_id), 404);
    assert.deepEqual((await client.runs.list(threadId)).map((r) => r.run_id), [b.run_id]);
    await rejectsWith(client.runs.get(threadId, randomUUID()), 404);
  });

  test('runs.cancel: a running run ends interrupted (with and without wait); a queued one never runs; rollback deletes', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    // wait=true: returns once the run is over.
    const a = await client.runs.create(threadId, 'agent', { input: question('cancel me while I talk') });
    await runReaches(client, threadId, a.run_id, 'running');
    await client.runs.cancel(threadId, a.run_id, true);
    assert.equal((await client.runs.get(threadId, a.run_id)).status, 'interrupted');
    assert.notEqual((await client.threads.get(threadId)).status, 'busy');

    // wait=false: returns at once; the run ends interrupted.
    const b = await client.runs.create(threadId, 'agent', { input: question('and me too') });
    await runReaches(client, threadId, b.run_id, 'running');
    await client.runs.cancel(threadId, b.run_id, false);
    await runReaches(client, threadId, b.run_id, 'interrupted');

    // A queued run, cancelled before it ran; the one ahead of it goes on.
    const c = await client.runs.create(threadId, 'agent', { input: question('the one that runs') });
    const d = await client.runs.create(threadId, 'agent', { input: question('the one that never runs'), multitaskStrategy: 'enqueue' });
    assert.equal(d.status, 'pending');
    await client.runs.cancel(threadId, d.run_id);
    await runReaches(client, threadId, d.run_id, 'interrupted', 5000);
    const values = await client.runs.join(threadId, c.run_id);
    assert.equal(transcript(values).at(-1), lines.summary);
    assert.ok(!transcript(values).includes('the one that never runs'));
    assert.equal((await client.runs.get(threadId, c.run_id)).status, 'success');
    assert.equal((await client.runs.get(threadId, d.run_id)).status, 'interrupted');

    // action=rollback: the run is deleted.
    const e = await client.runs.create(threadId, 'agent', { input: question('roll me back') });
    await runReaches(client, threadId, e.run_id, 'running');
    await inState(threadId, 'roll me back');
    await client.runs.cancel(threadId, e.run_id, true, 'rollback');
    await rejectsWith(client.runs.get(threadId, e.run_id), 404);
    assert.ok(!transcript(await s.head(threadId)).includes('roll me back'), 'its checkpoints are gone');

    await rejectsWith(client.runs.cancel(threadId, randomUUID()), 404);
  });

  test('a run waiting for its after_seconds, cancelled: interrupted at once, its join and stream end, the thread takes updates again', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const run = await client.runs.create(threadId, 'agent', { input: question('not now'), afterSeconds: 60 });
    const stream = collect(s.client().runs.joinStream(threadId, run.run_id, { lastEventId: '-1' }));
    await sleep(300);
    await rejectsWith(client.threads.updateState(threadId, { values: { approved: 'early' }, asNode: 'approve' }), 409, /^Thread is busy$/);
    await client.runs.cancel(threadId, run.run_id);
    assert.deepEqual((await client.runs.list(threadId, { status: 'interrupted' })).map((r) => r.run_id), [run.run_id], 'at once, as the reference lists it');
    assert.equal((await client.threads.get(threadId)).status, 'idle');
    await client.runs.join(threadId, run.run_id);
    await Promise.race([stream.done, sleep(20000).then(() => { throw new Error('the run stream did not end'); })]);
    assert.deepEqual(stream.map((p) => p.event), ['metadata'], 'nothing of the graph ran');
    assert.equal((await client.runs.get(threadId, run.run_id)).status, 'interrupted');
    assert.deepEqual(await s.head(threadId), {}, 'no checkpoint');
    await client.threads.updateState(threadId, { values: { approved: 'later' }, asNode: 'approve' });
    assert.equal((await client.threads.getState(threadId)).values.approved, 'later');
  });

  test('multitask_strategy reject (the default): a second run on a busy thread is refused with 409', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const a = await client.runs.create(threadId, 'agent', { input: question('one at a time') });
    await rejectsWith(client.runs.create(threadId, 'agent', { input: question('me too') }), 409, /./);
    await rejectsWith(client.runs.create(threadId, 'agent', { input: question('me too'), multitaskStrategy: 'reject' }), 409);
    await rejectsWith(client.runs.wait(threadId, 'agent', { input: question('me too') }), 409);
    const values = await client.runs.join(threadId, a.run_id);
    assert.deepEqual(transcript(values), expectedTranscript('one at a time'));
    assert.deepEqual((await client.runs.list(threadId)).map((r) => r.run_id), [a.run_id]);
  });

  test('multitask_strategy enqueue: the second run waits, then runs after the first', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const a = await client.runs.create(threadId, 'agent', { input: question('first in line') });
    const b = await client.runs.create(threadId, 'agent', { input: question('second in line'), multitaskStrategy: 'enqueue' });
    assert.equal(b.status, 'pending');
    assert.equal(b.multitask_strategy, 'enqueue');
    await client.runs.join(threadId, a.run_id);
    assert.ok(STATUSES_LIVE.includes((await client.runs.get(threadId, b.run_id)).status), 'b had not run before a ended');
    const values = await client.runs.join(threadId, b.run_id);
    assert.deepEqual(transcript(values), [...expectedTranscript('first in line'), ...expectedTranscript('second in line')]);
    assert.equal((await client.runs.get(threadId, a.run_id)).status, 'success');
    assert.equal((await client.runs.get(threadId, b.run_id)).status, 'success');
  });

  test('multitask_strategy interrupt: the first run ends interrupted, the second runs', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const a = await client.runs.create(threadId, 'agent', { input: question('about to be interrupted') });
    await runReaches(client, threadId, a.run_id, 'running');
    await inState(threadId, 'about to be interrupted');
    const b = await client.runs.create(threadId, 'agent', { input: question('the newcomer'), multitaskStrategy: 'interrupt' });
    assert.ok(STATUSES_LIVE.includes(b.status));
    const values = await client.runs.join(threadId, b.run_id);
    assert.equal((await client.runs.get(threadId, a.run_id)).status, 'interrupted');
    assert.equal((await client.runs.get(threadId, b.run_id)).status, 'success');
    const t = transcript(values);
    assert.equal(t[0], 'about to be interrupted', 'the first run\'s input stays');
    assert.deepEqual(t.slice(-4), expectedTranscript('the newcomer'));
    assert.deepEqual(values, await s.head(threadId));
  });

  test('multitask_strategy rollback: the first run is deleted with its work, the second runs', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const a = await client.runs.create(threadId, 'agent', { input: question('about to be rolled back') });
    await runReaches(client, threadId, a.run_id, 'running');
    await inState(threadId, 'about to be rolled back');
    const b = await client.runs.create(threadId, 'agent', { input: question('the replacement'), multitaskStrategy: 'rollback' });
    const values = await client.runs.join(threadId, b.run_id);
    await rejectsWith(client.runs.get(threadId, a.run_id), 404);
    assert.equal((await client.runs.get(threadId, b.run_id)).status, 'success');
    assert.deepEqual(transcript(values), expectedTranscript('the replacement'), 'nothing of the first run is left');
    assert.deepEqual((await client.runs.list(threadId)).map((r) => r.run_id), [b.run_id]);
  });

  test('threads: create (if_exists), get, update (metadata merged), delete; unknown ids are 404', async () => {
    const threadId = randomUUID();
    const t = await client.threads.create({ threadId, metadata: { owner: 'ann', tier: 1 } });
    await rejectsWith(client.threads.create({ threadId, ifExists: 'raise' }), 409, /exist/i);
    const again = await client.threads.create({ threadId, ifExists: 'do_nothing', metadata: { owner: 'bob' } });
    assert.deepEqual({ id: again.thread_id, created: again.created_at, metadata: again.metadata },
      { id: threadId, created: t.created_at, metadata: { owner: 'ann', tier: 1 } });
    const fresh = await client.threads.create();
    assert.match(fresh.thread_id, UUID, 'a new thread gets a UUID');
    assert.notEqual(fresh.thread_id, threadId);

    await sleep(5);
    const updated = await client.threads.update(threadId, { metadata: { tier: 2, region: 'eu' } });
    assert.deepEqual(updated.metadata, { owner: 'ann', tier: 2, region: 'eu' });
    assert.ok(updated.updated_at > t.updated_at, `updated_at moves: ${t.updated_at} → ${updated.updated_at}`);
    assert.equal(updated.created_at, t.created_at);
    assert.deepEqual((await client.threads.get(threadId)).metadata, updated.metadata);

    assert.equal(await client.threads.delete(threadId), undefined, '204');
    await rejectsWith(client.threads.get(threadId), 404, new RegExp(threadId));
    await rejectsWith(client.threads.delete(threadId), 404);
    await rejectsWith(client.threads.update(randomUUID(), { metadata: { a: 1 } }), 404);
    await rejectsWith(client.runs.create(randomUUID(), 'agent', { input: question('nobody home') }), 404);
    await rejectsWith(client.runs.create(threadId, 'nobody', { input: question('hi') }), 404);
    const made = await client.runs.create(threadId, 'agent', { input: question('make it'), ifNotExists: 'create' });
    assert.equal(made.thread_id, threadId);
    await client.runs.join(threadId, made.run_id);
    assert.equal((await client.threads.get(threadId)).status, 'idle');
  });

  test('threads.search by status, metadata and ids; limit, offset, sort', async () => {
    const suite = randomUUID();
    const idle = await client.threads.create({ metadata: { suite, kind: 'a' } });
    await sleep(5);
    const interrupted = await client.threads.create({ metadata: { suite, kind: 'b' } });
    await sleep(5);
    const busy = await client.threads.create({ metadata: { suite, kind: 'c' } });
    const r1 = await client.runs.create(interrupted.thread_id, 'agent', { input: question('please interrupt me') });
    await client.runs.join(interrupted.thread_id, r1.run_id);
    const r2 = await client.runs.create(busy.thread_id, 'agent', { input: question('keep me busy') });
    await runReaches(client, busy.thread_id, r2.run_id, 'running');

    const ids = (ts) => ts.map((t) => t.thread_id);
    const asc = { metadata: { suite }, sortBy: 'created_at', sortOrder: 'asc' };
    assert.deepEqual(ids(await client.threads.search(asc)), ids([idle, interrupted, busy]));
    assert.deepEqual(ids(await client.threads.search({ ...asc, sortOrder: 'desc' })), ids([busy, interrupted, idle]));
    assert.deepEqual(ids(await client.threads.search({ ...asc, status: 'busy' })), [busy.thread_id]);
    assert.deepEqual(ids(await client.threads.search({ ...asc, status: 'interrupted' })), [interrupted.thread_id]);
    assert.deepEqual(ids(await client.threads.search({ ...asc, status: 'idle' })), [idle.thread_id]);
    assert.deepEqual(ids(await client.threads.search({ metadata: { suite, kind: 'b' } })), [interrupted.thread_id]);
    assert.deepEqual(ids(await client.threads.search({ metadata: { suite: randomUUID() } })), []);
    assert.deepEqual(ids(await client.threads.search({ ...asc, ids: [busy.thread_id, idle.thread_id] })), [idle.thread_id, busy.thread_id]);
    assert.deepEqual(ids(await client.threads.search({ ...asc, limit: 1, offset: 1 })), [interrupted.thread_id]);
    assert.deepEqual(ids(await client.threads.search({ ...asc, limit: 2 })), [idle.thread_id, interrupted.thread_id]);
    const found = (await client.threads.search({ ...asc, status: 'interrupted' }))[0];
    assert.match(JSON.stringify(found.interrupts), /Approve the answer\?/);
    await rejectsWith(client.threads.search({ status: 'sleeping' }), 422, /status/);
    await rejectsWith(client.threads.search({ sortBy: 'colour' }), 422, /sort_by/);
    await client.runs.join(busy.thread_id, r2.run_id);
    assert.deepEqual(ids(await client.threads.search({ ...asc, status: 'idle' })), [idle.thread_id, busy.thread_id]);
  });

  test('an interrupt(): the run succeeds, the thread is interrupted; getState shows it; a command resumes', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const run = await client.runs.create(threadId, 'agent', { input: question('look it up, then interrupt me') });
    await client.runs.join(threadId, run.run_id);
    assert.equal((await client.runs.get(threadId, run.run_id)).status, 'success');
    assert.equal((await client.threads.get(threadId)).status, 'interrupted');
    const state = await client.threads.getState(threadId);
    assert.deepEqual(state.next, ['approve']);
    const its = state.tasks.flatMap((t) => t.interrupts ?? []);
    assert.equal(its.length, 1);
    assert.deepEqual(its[0].value, { question: 'Approve the answer?', options: ['yes', 'no'] });
    const values = await client.runs.wait(threadId, 'agent', { command: { resume: 'yes' } });
    assert.equal(values.approved, 'yes');
    assert.equal((await client.threads.get(threadId)).status, 'idle');
    assert.deepEqual((await client.threads.getState(threadId)).next, []);
  });

  test('"approval": the example graph asks as LangChain\'s human-in-the-loop middleware does, and the chat UI\'s Approve resumes it', async () => {
    // agent-chat-ui shows Approve and Reject only for a request with
    // action_requests and review_configs; it resumes with input {} and
    // command {resume: {decisions}} on a streamed run.
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const q = 'answer after my approval';
    await client.runs.wait(threadId, 'agent', { input: question(q) });
    const thread = await client.threads.get(threadId);
    assert.equal(thread.status, 'interrupted');
    const [it] = Object.values(thread.interrupts).flat();
    assert.deepEqual(it.value, {
      action_requests: [{ name: 'send_answer', args: { question: q }, description: 'Send this answer?' }],
      review_configs: [{ action_name: 'send_answer', allowed_decisions: ['approve', 'reject'] }],
    });
    const decisions = [{ type: 'approve' }];
    const events = [];
    for await (const part of client.runs.stream(threadId, 'agent', {
      input: {}, command: { resume: { decisions } }, streamMode: ['values'], streamSubgraphs: true, streamResumable: true,
    })) events.push(part);
    assert.equal(events.filter((e) => e.event === 'error').length, 0);
    assert.deepEqual(events.at(-1).data.approved, { decisions });
    assert.equal((await client.threads.get(threadId)).status, 'idle');
    assert.deepEqual((await client.threads.getState(threadId)).next, []);
  });

  test('threads.getState, getHistory, updateState and copy agree with the graph\'s checkpoints', async () => {
    const threadId = randomUUID();
    await client.threads.create({ threadId });
    const q = 'what is in the state?';
    const values = await client.runs.wait(threadId, 'agent', { input: question(q) });
    const head = await s.head(threadId);
    assert.deepEqual(values, head);

    const state = await client.threads.getState(threadId);
    assert.deepEqual(state.values, head);
    assert.deepEqual(state.next, []);
    const cps = await s.checkpointIds(threadId);
    assert.equal(state.checkpoint.checkpoint_id, cps[0]);
    assert.equal(state.checkpoint.thread_id, threadId);
    assert.equal(state.parent_checkpoint.checkpoint_id, cps[1]);

    const history = await client.threads.getHistory(threadId);
    assert.deepEqual(history.map((h) => h.checkpoint.checkpoint_id), cps.slice(0, 10));
    assert.deepEqual(history[0].values, head);
    assert.deepEqual((await client.threads.getHistory(threadId, { limit: 2 })).map((h) => h.checkpoint.checkpoint_id), cps.slice(0, 2));
    const before = await client.threads.getHistory(threadId, { limit: 2, before: { configurable: { checkpoint_id: cps[1] } } });
    assert.deepEqual(before.map((h) => h.checkpoint.checkpoint_id), cps.slice(2, 4));
    const older = await client.threads.getState(threadId, cps[2]);
    assert.equal(older.checkpoint.checkpoint_id, cps[2]);
    assert.deepEqual(older.values, history[2].values);

    const upd = await client.threads.updateState(threadId, { values: { approved: 'by hand' }, asNode: 'approve' });
    assert.equal(typeof upd.checkpoint.checkpoint_id, 'string');
    const cps2 = await s.checkpointIds(threadId);
    assert.equal(upd.checkpoint.checkpoint_id, cps2[0]);
    assert.notEqual(cps2[0], cps[0]);
    assert.equal((await s.head(threadId)).approved, 'by hand');
    const now = await client.threads.getState(threadId);
    assert.equal(now.values.approved, 'by hand');
    assert.deepEqual(now.values.messages, head.messages);

    const copy = await client.threads.copy(threadId);
    assert.match(copy.thread_id, UUID);
    assert.notEqual(copy.thread_id, threadId);
    assert.deepEqual((await client.threads.getState(copy.thread_id)).values, now.values);
    assert.equal((await client.threads.getHistory(copy.thread_id, { limit: 100 })).length, cps2.length);
    assert.deepEqual((await s.head(copy.thread_id)), now.values, 'the copy has checkpoints of its own');
    // A run on the copy leaves the original alone.
    await client.runs.wait(copy.thread_id, 'agent', { input: question('only on the copy') });
    assert.ok(!transcript(await s.head(threadId)).includes('only on the copy'));
    assert.ok(transcript(await s.head(copy.thread_id)).includes('only on the copy'));

    await rejectsWith(client.threads.getState(randomUUID()), 404);
    await rejectsWith(client.threads.getHistory(randomUUID()), 404);
    await rejectsWith(client.threads.copy(randomUUID()), 404);
  });

  test('store: putItem, getItem, searchItems (prefix, filter, limit, offset), listNamespaces, deleteItem', async () => {
    const put = (ns, key, value, opts) => client.store.putItem(ns, key, value, opts);
    await put(['prefs', 'u1'], 'theme', { color: 'dark', size: 1 });
    await put(['prefs', 'u1'], 'lang', { code: 'en', size: 2 });
    await put(['prefs', 'u2'], 'theme', { color: 'light', size: 1 }, { ttl: 60 });
    await put(['other'], 'x', { y: 1 });

    const first = await client.store.getItem(['prefs', 'u1'], 'theme');
    await sleep(5);
    await put(['prefs', 'u1'], 'theme', { color: 'blue', size: 1 });
    const second = await client.store.getItem(['prefs', 'u1'], 'theme');
    assert.deepEqual(second.value, { color: 'blue', size: 1 }, 'put replaces the value');
    assert.equal(second.created_at, first.created_at);
    assert.ok(second.updated_at > first.updated_at);
    assert.deepEqual((await client.store.getItem(['prefs', 'u2'], 'theme')).value, { color: 'light', size: 1 });

    const keys = (r) => r.items.map((i) => `${i.namespace.join('/')}:${i.key}`).sort();
    assert.deepEqual(keys(await client.store.searchItems(['prefs'])), ['prefs/u1:lang', 'prefs/u1:theme', 'prefs/u2:theme']);
    assert.deepEqual(keys(await client.store.searchItems(['prefs', 'u1'])), ['prefs/u1:lang', 'prefs/u1:theme']);
    assert.deepEqual(keys(await client.store.searchItems(['prefs'], { filter: { size: 1 } })), ['prefs/u1:theme', 'prefs/u2:theme']);
    assert.deepEqual(keys(await client.store.searchItems(['prefs'], { filter: { color: 'light' } })), ['prefs/u2:theme']);
    assert.deepEqual(keys(await client.store.searchItems(['nothing'])), []);
    const p1 = await client.store.searchItems(['prefs'], { limit: 2 });
    const p2 = await client.store.searchItems(['prefs'], { limit: 2, offset: 2 });
    assert.equal(p1.items.length, 2);
    assert.equal(p2.items.length, 1);
    assert.deepEqual(keys({ items: [...p1.items, ...p2.items] }), ['prefs/u1:lang', 'prefs/u1:theme', 'prefs/u2:theme']);
    const item = (await client.store.searchItems(['prefs', 'u2'])).items[0];
    assert.deepEqual({ ns: item.namespace, key: item.key, value: item.value }, { ns: ['prefs', 'u2'], key: 'theme', value: { color: 'light', size: 1 } });
    assert.match(item.created_at, ISO);

    const nss = (r) => r.namespaces.map((n) => n.join('/')).sort();
    assert.deepEqual(nss(await client.store.listNamespaces()), ['other', 'prefs/u1', 'prefs/u2']);
    assert.deepEqual(nss(await client.store.listNamespaces({ prefix: ['prefs'] })), ['prefs/u1', 'prefs/u2']);
    assert.deepEqual(nss(await client.store.listNamespaces({ suffix: ['u2'] })), ['prefs/u2']);
    assert.deepEqual(nss(await client.store.listNamespaces({ maxDepth: 1 })), ['other', 'prefs']);
    assert.equal((await client.store.listNamespaces({ limit: 1 })).namespaces.length, 1);

    await client.store.deleteItem(['prefs', 'u1'], 'theme');
    assert.equal(await client.store.getItem(['prefs', 'u1'], 'theme'), null);
    assert.deepEqual(keys(await client.store.searchItems(['prefs'])), ['prefs/u1:lang', 'prefs/u2:theme']);
  });

  test('assistants.search and assistants.get: the system assistant of each graph the workers registered', async () => {
    const all = await client.assistants.search();
    assert.deepEqual(all.map((a) => a.graph_id).sort(), ['agent', 'reporter']);
    for (const a of all) {
      assert.equal(a.assistant_id, systemAssistantId(a.graph_id));
      assert.equal(a.name, a.graph_id);
      assert.deepEqual(a.metadata, { created_by: 'system' });
      assert.match(a.created_at, ISO);
      assert.deepEqual([a.config, a.context, a.version, a.description], [{}, {}, 1, null]);
    }
    assert.deepEqual((await client.assistants.search({ graphId: 'reporter' })).map((a) => a.assistant_id), [systemAssistantId('reporter')]);
    assert.equal((await client.assistants.search({ limit: 1 })).length, 1);
    const agent = await client.assistants.get('agent');
    assert.deepEqual(agent, all.find((a) => a.graph_id === 'agent'));
    assert.deepEqual(await client.assistants.get(agent.assistant_id), agent);
    await rejectsWith(client.assistants.get('nobody'), 404, /^Assistant not found$/);
  });
});

describe('runs.joinStream through a gateway SIGKILL', () => {
  test('the SDK reconnects with Last-Event-ID: every event once, as a full replay has them', async () => {
    const s = await restStack({ tokenMs: 40 });
    try {
      const client = s.client();
      const threadId = randomUUID();
      await client.threads.create({ threadId });
      const q = 'a question that takes a while to answer';
      const run = await client.runs.create(threadId, 'agent', {
        input: question(q), streamMode: ['values', 'messages-tuple', 'updates'], streamSubgraphs: true,
      });
      const watcher = s.client();
      const parts = collect(watcher.runs.joinStream(threadId, run.run_id, { lastEventId: '-1' }));
      await waitUntil(() => parts.filter((p) => p.event === 'messages').length >= 5, 30000, 'tokens on the stream');
      const victim = await holder(s.gws);
      const atKill = parts.length;
      victim.proc.kill('SIGKILL');
      await Promise.race([parts.done, sleep(60000).then(() => { throw new Error('the stream did not end'); })]);
      assert.ok(parts.length > atKill, `events after the kill: ${atKill} → ${parts.length}`);
      assert.equal((await client.runs.get(threadId, run.run_id)).status, 'success');

      const full = await collect(client.runs.joinStream(threadId, run.run_id, { lastEventId: '-1' })).done;
      assert.equal(full[0].event, 'metadata');
      assert.equal(full[0].data.run_id, run.run_id);
      assertIds(full, 'the replay');
      assertIds(parts, 'the resumed stream');
      assert.deepEqual(parts.map((p) => `${p.id} ${p.event}`), full.map((p) => `${p.id} ${p.event}`), 'no event lost, none repeated');
      assert.deepEqual(parts.map((p) => p.data), full.map((p) => p.data));
      assert.deepEqual(transcript(full.filter((p) => p.event === 'values').at(-1).data), expectedTranscript(q));
      // Joined from the middle (a Last-Event-ID of the run): exactly what follows it.
      const mid = full[Math.floor(full.length / 2)].id;
      const rest = await collect(client.runs.joinStream(threadId, run.run_id, { lastEventId: mid })).done;
      assert.deepEqual(rest.map((p) => p.id), full.filter((p) => Number(p.id) > Number(mid)).map((p) => p.id));
    } finally {
      await s.done();
    }
  });
});
