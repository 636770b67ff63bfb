// The Python worker (src/worker-python, issue 37) behind threadcast, end to end with real
// processes: redis-server, the gateway (the sanitizer build) and two Python workers
// (build-py/venv-dev/bin/threadcast-worker-python) serving the example graph
// (src/worker-python/example/agent.py) and the small graphs of tests/integration/python/.
// What langgraph.test.mjs, rest-worker.test.mjs and graph-large-events.test.mjs hold the
// JavaScript worker to, for the Python one: the protocol's runtime commands over WebSocket
// (run.start, interrupts answered, the HITL approval, input.inject, run.cancel, state.get,
// state.listCheckpoints, state.fork and their errors, a run adopted by the thread's REST record),
// the REST runs (cancel with interrupt and rollback, every multitask strategy, after_seconds,
// stateless runs, runs.wait, events of 16 MiB), and graphs that cannot run (a file that does not
// import, an attribute that is no graph, a factory that raises, a node that raises, a state that
// is not JSON). python-worker-faults.test.mjs has the faults (workers killed, stopped, closed;
// Redis restarted).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { stopAll, waitUntil, storedEvents, sleep, startPythonWorker, repoRoot } from './lib/harness.mjs';
import { openSse } from './lib/rest.mjs';
import { stack, lines, transcriptOf, question, unservable, command, ok, ALL, isRoot, rootEvents, ended, assemble,
  textOf } from './lib/python.mjs';

after(stopAll);

// One stack for the whole file: every test's thread is its own.
let s;
before(async () => { s = await stack(); });
after(async () => { await s?.done(); });

describe('the Python worker over the protocol (WebSocket /threads/:id/stream/events)', () => {
  test('run.start streams the run: its lifecycle, the messages with their deltas, the tool, the subgraph, values; state as the graph has it', { timeout: 60000 }, async () => {
    const thread = 'py-run';
    const q = 'tell me about otters';
    const c = await s.ws(thread);
    await ok(c, 'subscription.subscribe', { channels: ALL });
    const run = await ok(c, 'run.start', { assistant_id: 'agent', input: question(q) });
    assert.match(run.run_id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const end = await ended(c);
    assert.deepEqual(end.params.data, { event: 'completed', graph_name: 'agent' });
    const events = c.events;
    // Every event of the thread, in order, once.
    assert.deepEqual(events.map((e) => e.seq), Array.from({ length: events.length }, (_, i) => i + 1));
    assert.deepEqual(events.map((e) => e.seq), (await storedEvents(s.rc, thread)).map((e) => e.seq));
    assert.deepEqual(rootEvents(events), ['started', 'completed']);
    assert.deepEqual(events[0].params.data, { event: 'started', graph_name: 'agent' });

    // The messages: the question shown whole, then what the model streamed, token by token.
    const msgs = assemble(events);
    assert.deepEqual(msgs.map((m) => [m.role, m.text, m.done]),
      [['human', q, true], ['ai', lines.searching, true], ['ai', lines.answer(q), true], ['ai', lines.summary, true]]);
    const deltas = (m) => events.filter((e) => e.method === 'messages' && e.params.data.event === 'content-block-delta' &&
      e.params.node === m.node && e.params.namespace.join() === m.ns.join());
    assert.ok(deltas(msgs[2]).length >= lines.answer(q).length, 'the answer streams one character a delta');
    assert.deepEqual(msgs.slice(1).map((m) => m.node), ['model', 'model', 'summarize']);
    // The tool call, in the model's message and on the tools channel.
    const finish = events.find((e) => e.method === 'messages' && e.params.data.content?.type === 'tool_call');
    assert.deepEqual(finish.params.data.content, { type: 'tool_call', id: 'call_1', name: 'search', args: { query: q } });
    const tools = events.filter((e) => e.method === 'tools').map((e) => e.params.data);
    assert.deepEqual(tools.map((t) => t.event), ['tool-started', 'tool-finished']);
    assert.deepEqual([tools[0].tool_call_id, tools[0].tool_name, tools[0].input], ['call_1', 'search', { query: q }]);
    assert.match(JSON.stringify(tools[1].output), /3 results for \\"tell me about otters\\"/);
    // The subgraph: its lifecycle at its namespace, its message there.
    const sub = events.filter((e) => e.method === 'lifecycle' && e.params.namespace.length === 1);
    assert.deepEqual(sub.map((e) => e.params.data), [{ event: 'started', graph_name: 'researcher' }, { event: 'completed', graph_name: 'researcher' }]);
    assert.match(sub[0].params.namespace[0], /^researcher:[0-9a-f-]{36}$/);
    assert.deepEqual(msgs[3].ns, sub[0].params.namespace);

    // state.get is the last root values event, and holds the messages streamed, ids and texts.
    const state = await ok(c, 'state.get', { namespace: [] });
    const lastValues = events.filter((e) => e.method === 'values' && e.params.namespace.length === 0).at(-1);
    assert.deepEqual(state.values, lastValues.params.data);
    const kept = state.values.messages.filter((m) => m.type !== 'tool');
    assert.deepEqual(kept.map((m) => m.id), msgs.map((m) => m.id));
    assert.deepEqual(kept.map(textOf), transcriptOf(q));
    // The subgraph's own state; a namespace the thread lacks.
    assert.equal((await ok(c, 'state.get', { namespace: sub[0].params.namespace })).values.notes, 'reviewed');
    const nowhere = await command(c, 'state.get', { namespace: ['nowhere:1'] });
    assert.deepEqual([nowhere.error, nowhere.message], ['no_such_namespace', 'thread "py-run" has no state at namespace ["nowhere:1"]']);
    // The checkpoints, newest first, each with the node that made it.
    const { checkpoints } = await ok(c, 'state.listCheckpoints', {});
    assert.equal(checkpoints[0].id, state.checkpoint.id);
    assert.deepEqual(checkpoints.map((cp) => cp.node_name), ['approve', 'researcher', 'model', 'tools', 'model', '__start__', '__input__']);
    assert.deepEqual(checkpoints.map((cp) => cp.id), events.filter((e) => e.method === 'checkpoints' && !e.params.namespace.length)
      .map((e) => e.params.data.id).reverse());
    assert.deepEqual((await ok(c, 'state.listCheckpoints', { limit: 2 })).checkpoints, checkpoints.slice(0, 2));
    const { tree } = await ok(c, 'agent.getTree', {});
    assert.deepEqual([tree.status, tree.graph_name, tree.children.map((k) => k.graph_name)], ['completed', 'agent', ['researcher']]);
    await c.close();
  });

  test('interrupt() is input.requested; input.respond answers it (input.answered), the run goes on; an unknown interrupt id is no_such_interrupt', { timeout: 60000 }, async () => {
    const thread = 'py-interrupt';
    const c = await s.ws(thread);
    await ok(c, 'subscription.subscribe', { channels: ALL });
    await ok(c, 'run.start', { assistant_id: 'agent', input: question('look it up, then interrupt me') });
    const stop = await ended(c);
    assert.deepEqual(stop.params.data, { event: 'interrupted', graph_name: 'agent' });
    const asked = c.events.filter((e) => e.method === 'input.requested');
    assert.equal(asked.length, 1);
    assert.deepEqual(asked[0].params.namespace, []);
    assert.deepEqual(asked[0].params.data.payload, { question: 'Approve the answer?', options: ['yes', 'no'] });
    const id = asked[0].params.data.interrupt_id;
    assert.match(id, /^[0-9a-f]{32}$/, 'LangGraph\'s interrupt id');
    assert.equal(await s.rc.cmd('HGET', `tc:{${thread}}:meta`, 'run_status'), 'interrupted');
    const state = await ok(c, 'state.get', { namespace: [] });
    assert.equal(state.values.approved, undefined);

    const wrong = await command(c, 'input.respond', { namespace: [], interrupt_id: 'nope', response: 'yes' });
    assert.deepEqual([wrong.error, wrong.message], ['no_such_interrupt', 'no interrupt "nope" is waiting for an answer on thread "py-interrupt"']);
    const seen = c.events.length;
    assert.deepEqual(await ok(c, 'input.respond', { namespace: [], interrupt_id: id, response: 'yes' }), {});
    const end = await ended(c, 2);
    assert.deepEqual(end.params.data, { event: 'completed', graph_name: 'agent' });
    const resumed = c.events.slice(seen);
    assert.deepEqual(resumed.slice(0, 2).map((e) => [e.method, e.params.data]), [
      ['lifecycle', { event: 'started', graph_name: 'agent' }],
      ['input.answered', { interrupt_ids: [id] }],
    ]);
    assert.ok(!resumed.some((e) => e.method === 'messages'), 'nothing runs again but approve');
    assert.equal((await ok(c, 'state.get', { namespace: [] })).values.approved, 'yes');
    // Answered: it waits no more.
    const again = await command(c, 'input.respond', { namespace: [], interrupt_id: id, response: 'no' });
    assert.equal(again.error, 'no_such_interrupt');
    await c.close();
  });

  test('the HITL approval: the request LangChain\'s chat UI answers with Approve; the decision resumes the run', { timeout: 60000 }, async () => {
    const thread = 'py-approval';
    const q = 'send it after my approval';
    const c = await s.ws(thread);
    await ok(c, 'subscription.subscribe', { channels: ['lifecycle', 'input'] });
    await ok(c, 'run.start', { assistant_id: 'agent', input: question(q) });
    await ended(c);
    const [asked] = c.events.filter((e) => e.method === 'input.requested');
    assert.deepEqual(asked.params.data.payload, {
      action_requests: [{ name: 'send_answer', args: { question: q }, description: 'Send this answer?' }],
      review_configs: [{ action_name: 'send_answer', allowed_decisions: ['approve', 'reject'] }],
    });
    const decision = { decisions: [{ type: 'approve' }] };
    await ok(c, 'input.respond', { namespace: [], interrupt_id: asked.params.data.interrupt_id, response: decision });
    assert.equal((await ended(c, 2)).params.data.event, 'completed');
    const state = await ok(c, 'state.get', { namespace: [] });
    assert.deepEqual(state.values.approved, decision);
    assert.deepEqual(state.values.messages.filter((m) => m.type !== 'tool').map(textOf), transcriptOf(q));
    await c.close();
  });

  test('input.inject into a running run: shown whole at once, in the state from the next step on; run.start on a running thread injects too', { timeout: 60000 }, async () => {
    const thread = 'py-inject';
    const c = await s.ws(thread);
    await ok(c, 'subscription.subscribe', { channels: ['lifecycle', 'messages', 'tools'] });
    const run = await ok(c, 'run.start', { assistant_id: 'agent', input: question('a question to add to') });
    // In the model's second turn (after the tool), with steps left to run.
    await waitUntil(() => c.events.some((e) => e.method === 'tools' && e.params.data.event === 'tool-finished') &&
      c.events.filter((e) => e.method === 'messages' && e.params.data.event === 'content-block-delta').length > 10, 20000, 'the answer streaming');
    assert.deepEqual(await ok(c, 'input.inject', { namespace: [], message: { role: 'user', content: 'also: be brief' } }), {});
    assert.deepEqual(await ok(c, 'run.start', { assistant_id: 'agent', input: question('and cite sources') }), { run_id: run.run_id });
    const end = await ended(c);
    assert.deepEqual(end.params.data, { event: 'completed', graph_name: 'agent' });
    assert.deepEqual(rootEvents(c.events), ['started', 'completed'], 'one run');
    const shown = assemble(c.events).filter((m) => m.node === 'input');
    assert.deepEqual(shown.map((m) => [m.role, m.text, m.done]), [['human', 'also: be brief', true], ['human', 'and cite sources', true]]);
    const state = await ok(c, 'state.get', { namespace: [] });
    const texts = state.values.messages.map(textOf);
    for (const m of shown) {
      const at = state.values.messages.findIndex((x) => x.id === m.id);
      assert.ok(at > 0, `${m.text} is in the state under the id it was shown with`);
      assert.equal(state.values.messages[at].type, 'human');
    }
    // Applied at a step boundary: after the answer that was streaming, before the summary.
    const answerAt = texts.indexOf(lines.answer('a question to add to'));
    assert.ok(answerAt > 0 && texts.indexOf('also: be brief') > answerAt, texts.join(' | '));
    await c.close();
  });

  test('run.cancel ends the running run failed (cancelled), its open message closed; run.cancel and input.inject with no run are no_such_run', { timeout: 60000 }, async () => {
    const thread = 'py-cancel';
    const c = await s.ws(thread);
    await ok(c, 'subscription.subscribe', { channels: ['lifecycle', 'messages'] });
    await ok(c, 'run.start', { assistant_id: 'agent', input: question('cancel me mid-sentence') });
    // Mid-answer: text deltas of the model's second message.
    await waitUntil(() => assemble(c.events)[2]?.text.length > 3, 20000, 'the answer streaming');
    assert.deepEqual(await ok(c, 'run.cancel', {}), {});
    const end = await ended(c);
    assert.deepEqual(end.params.data, { event: 'failed', graph_name: 'agent', error: 'cancelled', cancelled: true });
    const cut = assemble(c.events).filter((m) => !m.done);
    assert.deepEqual(cut.map((m) => m.error), ['cancelled']);
    assert.equal(await s.rc.cmd('GET', `tc:{${thread}}:lg:lock`), null, 'the thread is free');
    const again = await command(c, 'run.cancel', {});
    assert.deepEqual([again.error, again.message], ['no_such_run', 'no run is active on thread "py-cancel"']);
    const inject = await command(c, 'input.inject', { namespace: [], message: { role: 'user', content: 'anyone?' } });
    assert.equal(inject.error, 'no_such_run');
    // The thread goes on: a new run from where the cancelled one stopped.
    await ok(c, 'run.start', { assistant_id: 'agent', input: question('no tools, just answer') });
    assert.equal((await ended(c, 2)).params.data.event, 'completed');
    await c.close();
  });

  test('state.fork from a listed checkpoint; run.start from a checkpoint; unknown checkpoints are no_such_checkpoint', { timeout: 60000 }, async () => {
    const thread = 'py-fork';
    const c = await s.ws(thread);
    await ok(c, 'subscription.subscribe', { channels: ['lifecycle', 'input', 'checkpoints'] });
    await ok(c, 'run.start', { assistant_id: 'agent', input: question('a deep interrupt please') });
    await ended(c);
    const [asked] = c.events.filter((e) => e.method === 'input.requested');
    assert.match(asked.params.namespace[0], /^researcher:/, 'asked inside the subgraph');
    assert.deepEqual(asked.params.data.payload, { question: 'Keep the summary?', from: 'researcher' });
    await ok(c, 'input.respond', { namespace: asked.params.namespace, interrupt_id: asked.params.data.interrupt_id, response: 'keep' });
    assert.equal((await ended(c, 2)).params.data.event, 'completed');
    const done = await ok(c, 'state.get', { namespace: [] });
    assert.equal(done.values.messages.length, 5);

    const { checkpoints } = await ok(c, 'state.listCheckpoints', { limit: 50 });
    const afterTools = checkpoints.find((cp) => cp.node_name === 'tools');
    const seen = c.events.length;
    const fork = await ok(c, 'state.fork', { checkpoint_id: afterTools.id });
    assert.deepEqual(Object.keys(fork).sort(), ['run_id', 'thread_id']);
    assert.equal(fork.thread_id, thread);
    // From there the model answers again, and the subgraph asks again.
    assert.equal((await ended(c, 3)).params.data.event, 'interrupted');
    const forked = await ok(c, 'state.get', { namespace: [] });
    assert.equal(forked.values.messages.length, 4, 'the subgraph has not returned: its summary is in its own state');
    // The fork's branch is the thread's head: its first checkpoint's parent is the one forked.
    const branch = c.events.slice(seen).filter((e) => e.method === 'checkpoints' && !e.params.namespace.length).map((e) => e.params.data);
    assert.deepEqual([branch[0].parent_id, branch[0].source], [afterTools.id, 'fork']);
    for (let i = 1; i < branch.length; i++) assert.equal(branch[i].parent_id, branch[i - 1].id);
    const head = (await ok(c, 'state.listCheckpoints', { limit: 1 })).checkpoints[0];
    assert.equal(head.id, branch.at(-1).id);

    const missing = await command(c, 'state.fork', { checkpoint_id: 'nope' });
    assert.deepEqual([missing.error, missing.message], ['no_such_checkpoint', 'thread "py-fork" has no checkpoint "nope"']);
    const missingStart = await command(c, 'run.start', { assistant_id: 'agent', input: null, config: { configurable: { checkpoint_id: 'nope' } } });
    assert.equal(missingStart.error, 'no_such_checkpoint');
    // run.start with config.configurable.checkpoint_id starts there too.
    await ok(c, 'run.start', { assistant_id: 'agent', input: null, config: { configurable: { checkpoint_id: afterTools.id } } });
    assert.equal((await ended(c, 4)).params.data.event, 'interrupted');
    assert.equal((await ok(c, 'state.get', { namespace: [] })).values.messages.length, 4);
    assert.equal(await s.rc.cmd('GET', `tc:{${thread}}:lg:lock`), null);
    await c.close();
  });

  test('a run started over the protocol on a thread the REST API knows is one of its runs: runs.get, runs.list, runs.join see it', { timeout: 60000 }, async () => {
    const client = s.client();
    const { thread_id: thread } = await client.threads.create();
    const q = 'adopt me';
    const c = await s.ws(thread);
    await ok(c, 'subscription.subscribe', { channels: ['lifecycle'] });
    const { run_id: runId } = await ok(c, 'run.start', { assistant_id: 'agent', input: question(q) });
    const started = await waitUntil(() => c.events[0], 5000, 'the run\'s start');
    assert.deepEqual(started.params.data, { event: 'started', graph_name: 'agent', run_id: runId }, 'the root started names the run');
    const run = await client.runs.get(thread, runId);
    assert.ok(['pending', 'running', 'success'].includes(run.status), run.status);
    assert.deepEqual((await client.runs.list(thread)).map((r) => r.run_id), [runId]);
    const values = await client.runs.join(thread, runId);
    assert.deepEqual(values.messages.filter((m) => m.type !== 'tool').map(textOf), transcriptOf(q));
    assert.equal((await client.runs.get(thread, runId)).status, 'success');
    const t = await client.threads.get(thread);
    assert.equal(t.status, 'idle');
    assert.deepEqual(t.values, values);
    await ended(c);
    await c.close();
  });
});

/** A REST run's status once it is one of statuses. */
function runReaches(client, thread, runId, statuses, ms = 20000) {
  const want = [].concat(statuses);
  return waitUntil(async () => {
    const run = await client.runs.get(thread, runId);
    return want.includes(run.status) && run;
  }, ms, `run ${runId} to be ${want.join('|')}`);
}

/** Resolves once the thread's state has a log line matching re (the run has got that far). */
const logged = (client, thread, re, ms = 20000) => waitUntil(async () =>
  ((await client.threads.getState(thread)).values.log ?? []).some((l) => re.test(l)), ms, `${re} in the state`);

/** Asserts an SDK call fails with HTTP status. */
async function rejects(promise, status) {
  const err = await promise.then(() => null, (e) => e);
  assert.ok(err, `expected HTTP ${status}, the call succeeded`);
  assert.equal(err.status, status, err.message);
  return err;
}

const checkpointKeys = (thread) => Promise.all(['idx', 'cp', 'blobs', 'widx', 'w'].map((k) =>
  s.rc.cmd(k.endsWith('idx') ? 'ZCARD' : 'HLEN', `tc:{${thread}}:lg:${k}`)));

describe('REST runs of Python graphs', () => {
  test('cancel with interrupt keeps what the run did; with rollback the state and history are exactly as before the run', { timeout: 60000 }, async () => {
    const client = s.client();
    const { thread_id: t1 } = await client.threads.create();
    const a = await client.runs.create(t1, 'steps', { input: { text: 'slow please', pause: 1.5 } });
    await logged(client, t1, /^first saw slow please$/);
    await client.runs.cancel(t1, a.run_id, true, 'interrupt');
    assert.equal((await client.runs.get(t1, a.run_id)).status, 'interrupted');
    assert.deepEqual((await client.threads.getState(t1)).values.log, ['first saw slow please']);
    // Stopped before `second`: the thread has a node to run, so it is "interrupted", as the
    // Python server sets it (the checkpoint a cancelled run leaves has `next`).
    assert.equal((await client.threads.get(t1)).status, 'interrupted');
    await waitUntil(async () => (await s.rc.cmd('GET', `tc:{${t1}}:lg:lock`)) === null, 5000, 'the thread released');
    const end = (await storedEvents(s.rc, t1)).filter(isRoot).at(-1);
    assert.deepEqual(end.params.data, { event: 'interrupted', graph_name: 'steps', cancelled: true, action: 'interrupt' });

    const { thread_id: t2 } = await client.threads.create();
    await client.runs.wait(t2, 'steps', { input: { text: 'before' } });
    const stateBefore = await client.threads.getState(t2);
    const historyBefore = await client.threads.getHistory(t2, { limit: 100 });
    const keysBefore = await checkpointKeys(t2);
    const b = await client.runs.create(t2, 'steps', { input: { text: 'slow and doomed', pause: 1.5 } });
    await logged(client, t2, /^first saw slow and doomed$/);
    await client.runs.cancel(t2, b.run_id, true, 'rollback');
    await rejects(client.runs.get(t2, b.run_id), 404);
    assert.deepEqual(await client.threads.getState(t2), stateBefore);
    assert.deepEqual(await client.threads.getHistory(t2, { limit: 100 }), historyBefore);
    assert.deepEqual(await checkpointKeys(t2), keysBefore, 'nothing the run wrote is left');
    assert.equal(await s.rc.cmd('EXISTS', `tc:{${t2}}:lg:undo`), 0, 'its undo journal is gone');
    assert.deepEqual((await client.threads.get(t2)).values, stateBefore.values);
    // The thread goes on from there.
    const after = await client.runs.wait(t2, 'steps', { input: { text: 'after' } });
    assert.deepEqual(after.log, ['first saw before', 'second done', 'first saw after', 'second done']);
  });

  test('multitask_strategy: reject is 409, enqueue runs after, interrupt stops the first, rollback takes it back', { timeout: 60000 }, async () => {
    const client = s.client();
    const two = async (strategy) => {
      const { thread_id: thread } = await client.threads.create();
      const a = await client.runs.create(thread, 'steps', { input: { text: `slow first (${strategy})`, pause: 1.5 } });
      await logged(client, thread, /^first saw slow first/);
      const b = client.runs.create(thread, 'steps', { input: { text: `second (${strategy})` }, multitaskStrategy: strategy });
      return { thread, a, b: await b.then((r) => r, (e) => e) };
    };
    const [rej, enq, int, rb] = await Promise.all(['reject', 'enqueue', 'interrupt', 'rollback'].map(two));

    assert.equal(rej.b.status, 409, rej.b.message);
    assert.deepEqual((await client.runs.join(rej.thread, rej.a.run_id)).log, ['first saw slow first (reject)', 'second done']);
    assert.deepEqual((await client.runs.list(rej.thread)).map((r) => r.run_id), [rej.a.run_id]);

    assert.equal(enq.b.status, 'pending');
    await client.runs.join(enq.thread, enq.a.run_id);
    assert.deepEqual((await client.runs.join(enq.thread, enq.b.run_id)).log,
      ['first saw slow first (enqueue)', 'second done', 'first saw second (enqueue)', 'second done']);
    assert.equal((await client.runs.get(enq.thread, enq.a.run_id)).status, 'success');

    assert.deepEqual((await client.runs.join(int.thread, int.b.run_id)).log,
      ['first saw slow first (interrupt)', 'first saw second (interrupt)', 'second done']);
    assert.equal((await client.runs.get(int.thread, int.a.run_id)).status, 'interrupted');
    assert.equal((await client.runs.get(int.thread, int.b.run_id)).status, 'success');

    assert.deepEqual((await client.runs.join(rb.thread, rb.b.run_id)).log, ['first saw second (rollback)', 'second done']);
    await rejects(client.runs.get(rb.thread, rb.a.run_id), 404);
    assert.deepEqual((await client.runs.list(rb.thread)).map((r) => r.run_id), [rb.b.run_id]);
  });

  test('after_seconds: the run waits that long after it was created, then runs', { timeout: 60000 }, async () => {
    const client = s.client();
    const { thread_id: thread } = await client.threads.create();
    const t0 = Date.now();
    const run = await client.runs.create(thread, 'steps', { input: { text: 'later' }, afterSeconds: 1.5 });
    assert.equal(run.status, 'pending');
    await sleep(800);
    assert.equal((await client.runs.get(thread, run.run_id)).status, 'pending');
    assert.deepEqual((await client.threads.getState(thread)).values, {}, 'nothing ran yet');
    assert.deepEqual((await client.runs.join(thread, run.run_id)).log, ['first saw later', 'second done']);
    assert.ok(Date.now() - t0 >= 1400, `ran after ${Date.now() - t0} ms`);
    const started = (await storedEvents(s.rc, thread)).find(isRoot);
    assert.ok(started.params.timestamp - t0 >= 1400, `started ${started.params.timestamp - t0} ms after it was created`);
  });

  test('a stateless run (POST /runs/stream) streams, and its thread is gone after; runs.wait answers the state', { timeout: 60000 }, async () => {
    const { res, sse } = await openSse(`${s.apiUrl}/runs/stream`, { method: 'POST',
      json: { assistant_id: 'steps', input: { text: 'no thread' }, stream_mode: ['values', 'updates'] } });
    assert.equal(res.status, 200);
    const m = /^\/threads\/([0-9a-f-]{36})\/runs\/([0-9a-f-]{36})$/.exec(res.headers.get('content-location') ?? '');
    assert.ok(m, res.headers.get('content-location'));
    await sse.done;
    assert.deepEqual(sse.events.map((e) => e.event), ['metadata', 'values', 'updates', 'values', 'updates', 'values']);
    assert.equal(sse.events[0].data.run_id, m[2]);
    assert.deepEqual(sse.events.at(-1).data, { text: 'no thread', log: ['first saw no thread', 'second done'] });
    const client = s.client();
    await waitUntil(async () => (await client.threads.get(m[1]).then(() => 200, (e) => e.status)) === 404, 10000, 'the thread deleted');
    assert.equal(await s.rc.cmd('EXISTS', `tc:{${m[1]}}:lg:idx`, `tc:{${m[1]}}:lg:cp`, `tc:{${m[1]}}:lg:run`), 0, 'its checkpoints deleted');

    const values = await client.runs.wait(null, 'steps', { input: { text: 'waited' } });
    assert.deepEqual(values, { text: 'waited', log: ['first saw waited', 'second done'] });
    const { thread_id: thread } = await client.threads.create();
    assert.deepEqual(await client.runs.wait(thread, 'steps', { input: { text: 'one' } }), { text: 'one', log: ['first saw one', 'second done'] });
    assert.deepEqual((await client.runs.wait(thread, 'steps', { input: { text: 'two' } })).log,
      ['first saw one', 'second done', 'first saw two', 'second done']);
    assert.equal((await client.threads.get(thread)).status, 'idle');
  });

  const MiB = 1024 * 1024;
  test('an event of 16 MiB - 4 KiB is carried whole to REST and WebSocket clients; one over 16 MiB fails its run with EventTooLargeError', { timeout: 90000 }, async () => {
    const client = s.client();
    const { thread_id: thread } = await client.threads.create();
    const ws = await s.ws(thread);
    await ok(ws, 'subscription.subscribe', { channels: ['values'] });
    const bytes = 16 * MiB - 4096;
    const parts = [];
    for await (const p of client.runs.stream(thread, 'big', { input: { bytes }, streamMode: ['values'] })) parts.push(p);
    const blobOf = (v) => (typeof v?.doc?.blob === 'string' ? v.doc.blob : null);
    const blobs = parts.filter((p) => p.event === 'values' && blobOf(p.data)).map((p) => blobOf(p.data));
    assert.equal(blobs.length, 1);
    assert.ok(blobs[0] === 'x'.repeat(bytes), `REST: ${blobs[0].length} bytes`);
    const live = await waitUntil(() => ws.events.find((e) => blobOf(e.params.data)), 20000, 'the WebSocket to get it');
    assert.ok(blobOf(live.params.data) === blobs[0], 'whole over WebSocket');
    assert.equal((await client.runs.list(thread))[0].status, 'success');
    await ws.close();
    const again = await s.ws(thread);
    await ok(again, 'subscription.subscribe', { channels: ['values'] });
    const replayed = await waitUntil(() => again.events.find((e) => blobOf(e.params.data)), 20000, 'the replay');
    assert.ok(blobOf(replayed.params.data) === blobs[0], 'whole in a replay');
    await again.close();

    const { thread_id: other } = await client.threads.create();
    const failed = [];
    for await (const p of client.runs.stream(other, 'big', { input: { bytes: 16 * MiB + 1 }, streamMode: ['values'] })) failed.push(p);
    const err = failed.find((p) => p.event === 'error');
    assert.ok(err, `an error event: ${failed.map((p) => p.event).join()}`);
    assert.match(err.data.message, /^the run's (updates|values) event is \d+ bytes, over threadcast's limit of 16777216 bytes per event; the run cannot be streamed$/);
    assert.equal((await client.runs.list(other))[0].status, 'error');
    const t = await client.threads.get(other);
    assert.equal(t.status, 'error');
    assert.equal(t.error?.error, 'EventTooLargeError');
    assert.ok(s.workers.some((w) => w.logs.some((l) => l.msg === 'run failed' && l.thread === other && /EventTooLargeError: .*over threadcast's limit/.test(l.error))));
  });
});

describe('commands for a run another worker holds reach it on its control channel (tc:worker:<name>)', () => {
  // A worker serving the same graphs under other ids (agent_b, steps_b): an entry on their
  // streams is read by it alone, so it never runs the thread the entry names — as a command read
  // by any worker but the one running the thread.
  let other;
  before(async () => {
    other = await startPythonWorker(s.redis.url, { config: path.join(repoRoot, 'tests/integration/python/langgraph-b.json'), name: 'py-b' });
  });
  after(async () => {
    await other?.kill('SIGTERM');
    assert.deepEqual(other?.logs.filter((l) => l.level === 'error'), [], 'py-b\'s error lines');
  });
  /** The entry the gateway would XADD for the thread, on assistant's stream (no reply wanted). */
  const xadd = (assistant, thread, method, params) => s.rc.cmd('XADD', `{tc:commands}:a:${assistant}`, '*', 'thread', thread,
    'method', method, 'params', JSON.stringify(params), 'corr', `test:${thread}:${method}`, 'reply', '', 'deadline', '0');

  test('input.inject and run.cancel read by another worker reach the run', { timeout: 60000 }, async () => {
    const thread = 'py-forward';
    const c = await s.ws(thread);
    await ok(c, 'subscription.subscribe', { channels: ['lifecycle', 'messages'] });
    await ok(c, 'run.start', { assistant_id: 'agent', input: question('a question to reach from afar') });
    await waitUntil(() => assemble(c.events)[2]?.text.length > 3, 20000, 'the answer streaming');
    const owner = await s.rc.cmd('GET', `tc:{${thread}}:lg:lock`);
    assert.ok(s.workers.some((w) => w.name === owner), owner);
    await xadd('agent_b', thread, 'input.inject', { namespace: [], message: { role: 'user', content: 'from afar' } });
    await waitUntil(() => assemble(c.events).some((m) => m.node === 'input' && m.text === 'from afar' && m.done), 10000, 'the injected message shown');
    await waitUntil(async () => (await ok(c, 'state.get', { namespace: [] })).values.messages.some((m) => m.content === 'from afar'),
      10000, 'the injected message in the state');
    await xadd('agent_b', thread, 'run.cancel', {});
    const end = await ended(c);
    assert.deepEqual(end.params.data, { event: 'failed', graph_name: 'agent', error: 'cancelled', cancelled: true });
    assert.ok(!other.logs.some((l) => l.thread === thread && l.msg === 'run over'), 'py-b ran nothing');
    assert.ok(s.workers.find((w) => w.name === owner).logs.some((l) => l.thread === thread && l.msg === 'run over' && l.status === 'failed'));
    await c.close();
  });

  test('rest.cancel read by another worker reaches the run: rolled back', { timeout: 60000 }, async () => {
    const client = s.client();
    const { thread_id: thread } = await client.threads.create();
    const run = await client.runs.create(thread, 'steps', { input: { text: 'slow, cancelled from afar', pause: 1.5 } });
    await logged(client, thread, /^first saw slow, cancelled from afar$/);
    // As threadcast_rest hands a cancel over: the run's record marked, the entry on the stream.
    await s.rc.cmd('HSET', `{tc:commands}:r:${run.run_id}`, 'cancel', 'rollback');
    await xadd('steps_b', thread, 'rest.cancel', { run_id: run.run_id, thread_id: thread, action: 'rollback' });
    await waitUntil(async () => (await client.runs.get(thread, run.run_id).then(() => 200, (e) => e.status)) === 404, 10000, 'the run rolled back');
    assert.deepEqual((await client.threads.getState(thread)).values, {}, 'its checkpoints are gone');
    assert.deepEqual(await checkpointKeys(thread), [0, 0, 0, 0, 0]);
  });
});

describe('graphs that cannot run: a clear error at start or on the run, and the other graphs served on', () => {
  test('a graph file that does not import and an attribute that is no graph: named at start, and refused', { timeout: 60000 }, async () => {
    for (const w of s.workers) {
      for (const [graph, re] of Object.entries(unservable)) {
        const line = w.logs.find((l) => l.msg === 'graph not served' && l.graph === graph);
        assert.ok(line, `${w.name} says ${graph} is not served`);
        assert.match(line.error, re);
      }
      const ready = w.logs.find((l) => l.msg === 'worker ready');
      assert.deepEqual(ready.assistants.sort(), ['agent', 'big', 'broken_build', 'steps', 'unserializable']);
    }
    const c = await s.ws('py-unservable');
    for (const graph of Object.keys(unservable)) {
      const r = await command(c, 'run.start', { assistant_id: graph, input: null });
      assert.equal(r.error, 'invalid_argument');
      assert.match(r.message, new RegExp(`^no worker serves assistant "${graph}" \\(live: `));
    }
    await rejects(s.client().assistants.get(Object.keys(unservable)[0]), 404);
    await c.close();
  });

  test('a factory that raises, a node that raises, a state that is not JSON: each run fails with its exception, over the protocol and REST', { timeout: 60000 }, async () => {
    const c = await s.ws('py-bad-build');
    await ok(c, 'subscription.subscribe', { channels: ['lifecycle', 'custom:threadcast.modes'] });
    await ok(c, 'run.start', { assistant_id: 'broken_build', input: {} });
    const end = await ended(c);
    assert.deepEqual(end.params.data, { event: 'failed', graph_name: 'broken_build', error: 'this graph cannot be built: its model is not configured' });
    const side = c.events.filter((e) => e.method === 'custom:threadcast.modes' && e.params.data.mode === 'error');
    assert.deepEqual(side.map((e) => e.params.data.data), [{ error: 'GraphBuildError', message: 'this graph cannot be built: its model is not configured' }]);
    await c.close();

    // Over REST, the error event and the thread's error are the Python server's: the class,
    // and the message unless the class is one that server shows (TypeError, …); the protocol's
    // root `failed` and the worker's log keep the message.
    const client = s.client();
    const hidden = 'An internal error occurred';
    const cases = [
      ['broken_build', {}, 'GraphBuildError', hidden, 'this graph cannot be built: its model is not configured'],
      ['steps', { text: 'fail now' }, 'StepFailed', hidden, 'the second step failed on purpose'],
      ['unserializable', { label: 'x' }, 'TypeError', /^Type is not JSON serializable: .*Opaque/, /Opaque/],
    ];
    for (const [graph, input, cls, message, said] of cases) {
      const { thread_id: thread } = await client.threads.create();
      const parts = [];
      for await (const p of client.runs.stream(thread, graph, { input, streamMode: ['values'] })) parts.push(p);
      const err = parts.find((p) => p.event === 'error');
      assert.ok(err, `${graph}: an error event in ${parts.map((p) => p.event).join()}`);
      const t = await client.threads.get(thread);
      assert.equal(t.status, 'error', graph);
      assert.equal(t.error?.error, cls, `${graph}: ${JSON.stringify(t.error)}`);
      if (message instanceof RegExp) assert.match(t.error.message, message);
      else assert.equal(t.error.message, message);
      assert.deepEqual(err.data, t.error, 'the stream\'s error event is the thread\'s error');
      assert.equal((await client.runs.list(thread))[0].status, 'error');
      const last = (await storedEvents(s.rc, thread)).filter(isRoot).at(-1);
      assert.equal(last.params.data.event, 'failed', graph);
      assert.match(last.params.data.error, said instanceof RegExp ? said : new RegExp(`^${said}$`));
      assert.ok(s.workers.some((w) => w.logs.some((l) => l.msg === 'run failed' && l.thread === thread &&
        l.error.startsWith(`${cls}: `))), `${graph}: the worker's log names ${cls}`);
    }
    // Served on: the same workers run the other graphs.
    assert.deepEqual(await client.runs.wait(null, 'steps', { input: { text: 'still here' } }), { text: 'still here', log: ['first saw still here', 'second done'] });
  });
});
