// A Python graph's REST routes answered as LangGraph's Python server answers them (issue 37;
// protocol/README.md, "Two servers"), a JavaScript graph's as before, on gateways set to
// --rest-flavor python. Graph "agent" is marked Python the way the Python worker marks its
// graphs (language and run_metadata in its ainfo hash) though a LangGraph worker runs it:
// what is tested is what the gateway and threadcast_rest answer, not the graph's run.
// "reporter" stays a JavaScript graph. What the Python server answers is checked side by side
// against it in tests/side-by-side; here each answer is stated exactly.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stopAll } from './lib/harness.mjs';
import {
  restStack, question, randomUUID, UUID, errorResponse, jsonResponse, waitUntil, systemAssistantId,
} from './lib/rest.mjs';

after(stopAll);

const K = '{tc:commands}';
const RUN_METADATA = { run_attempt: 1, langgraph_version: '1.2.24', langgraph_plan: 'developer', langgraph_host: 'self-hosted' };
const PY_AGENT = systemAssistantId('agent');

/** A JSON error of the Python server: {"detail": detail}. */
async function detailResponse(res, status, detail) {
  const body = await jsonResponse(res, status);
  assert.deepEqual(body, { detail });
}

describe('a Python graph on gateways set to --rest-flavor python', () => {
  let s;
  before(async () => {
    s = await restStack({ tokenMs: 20, gatewayArgs: ['--rest-flavor', 'python'] });
    await s.rc.cmd('HSET', `${K}:ainfo:agent`, 'language', 'python', 'run_metadata', JSON.stringify(RUN_METADATA));
  });
  after(async () => { await s?.done(); });

  const post = (p, json) => s.http(p, { method: 'POST', json });
  const get = (p) => s.http(p);
  const newThread = async () => jsonResponse(await post('/threads', {}));
  const runOf = async (tid, rid) => jsonResponse(await get(`/threads/${tid}/runs/${rid}`));
  const reaches = (tid, rid, status) => waitUntil(async () => (await runOf(tid, rid)).status === status, 30000, `run ${rid} to be ${status}`);

  test('a new thread, and the errors of routes of no graph, are the Python server\'s', async () => {
    const t = await newThread();
    assert.deepEqual(Object.keys(t), ['thread_id', 'created_at', 'updated_at', 'state_updated_at', 'metadata', 'status', 'config', 'values']);
    assert.equal(t.values, null);
    assert.deepEqual(t.config, {});
    await detailResponse(await post('/threads', { thread_id: t.thread_id }), 409, `Thread with ID ${t.thread_id} already exists`);
    const missing = randomUUID();
    await detailResponse(await get(`/threads/${missing}`), 404, `Thread with ID ${missing} not found`);
    await detailResponse(await s.http('/threads', { method: 'POST', body: '{nope', headers: { 'content-type': 'application/json' } }), 422,
      'Invalid JSON in request body');
    // The store's search items carry the Python server's score.
    assert.equal((await s.http('/store/items', { method: 'PUT', json: { namespace: ['py', 'notes'], key: 'k', value: { a: 1 } } })).status, 204);
    const found = await jsonResponse(await post('/store/items/search', { namespace_prefix: ['py'] }));
    assert.deepEqual(found.items.map((i) => [i.key, i.value, i.score]), [['k', { a: 1 }, null]]);
  });

  test('its run: the Python server\'s record, default strategy enqueue, thread config and error', async () => {
    const t = await newThread();
    const run = await jsonResponse(await post(`/threads/${t.thread_id}/runs`, { assistant_id: 'agent', input: question('hi'), metadata: { n: 1 } }));
    assert.deepEqual(Object.keys(run), ['run_id', 'thread_id', 'assistant_id', 'created_at', 'updated_at', 'status', 'metadata', 'kwargs',
      'multitask_strategy', 'langsmith_session_name']);
    assert.equal(run.multitask_strategy, 'enqueue');
    assert.equal(run.langsmith_session_name, null);
    assert.deepEqual(run.metadata, { created_by: 'system', graph_id: 'agent', assistant_id: PY_AGENT, n: 1 });
    const { config, ...rest } = run.kwargs;
    assert.deepEqual(rest, {
      input: question('hi'), command: null, context: {}, stream_mode: ['values'], interrupt_before: null, interrupt_after: null,
      webhook: null, feedback_keys: null, temporary: false, subgraphs: false, resumable: false, checkpoint_during: true, durability: 'async',
    });
    const { langgraph_request_id: requestId, __request_start_time_ms__: started, ...configurable } = config.configurable;
    assert.match(requestId, UUID);
    assert.ok(Math.abs(started - Date.now()) < 60000, `__request_start_time_ms__ ${started}`);
    assert.deepEqual(configurable, {
      langgraph_auth_user: null, langgraph_auth_user_id: '', langgraph_auth_permissions: [], __after_seconds__: 0,
      run_id: run.run_id, thread_id: t.thread_id, graph_id: 'agent', assistant_id: PY_AGENT, user_id: '',
    });
    assert.deepEqual(config.metadata, run.metadata);

    const waited = await jsonResponse(await get(`/threads/${t.thread_id}/runs/${run.run_id}/join`));
    const done = await runOf(t.thread_id, run.run_id);
    assert.equal(done.status, 'success');
    // Once it ran, the record shows what the run streamed with, as langgraph dev's in-memory records do.
    assert.deepEqual(done.kwargs.config.metadata, { ...run.metadata, ...RUN_METADATA });
    assert.equal(done.kwargs.config.configurable.__pregel_node_finished, null);
    assert.ok('__pregel_node_finished' in done.kwargs.config.configurable);
    const thread = await jsonResponse(await get(`/threads/${t.thread_id}`));
    assert.deepEqual(Object.keys(thread), ['thread_id', 'created_at', 'updated_at', 'state_updated_at', 'metadata', 'status', 'config',
      'values', 'error', 'interrupts']);
    assert.deepEqual([thread.status, thread.config, thread.error, thread.interrupts], ['idle', { configurable: {} }, null, {}]);
    assert.deepEqual(thread.values, waited);
    assert.deepEqual(thread.metadata, { graph_id: 'agent', assistant_id: PY_AGENT });
  });

  test('reject, a cancel with wait, a cancel of a run that is over, a join of a run that is over', async () => {
    const t = await newThread();
    const tid = t.thread_id;
    const first = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question('the first') }));
    await reaches(tid, first.run_id, 'running');
    await detailResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: null, multitask_strategy: 'reject' }), 409,
      'Thread is already running a task. Wait for it to finish or choose a different multitask strategy.');
    const cancelled = await s.http(`/threads/${tid}/runs/${first.run_id}/cancel?wait=1&action=interrupt`, { method: 'POST' });
    assert.deepEqual(await jsonResponse(cancelled), {});
    assert.equal((await runOf(tid, first.run_id)).status, 'interrupted');
    const thread = await jsonResponse(await get(`/threads/${tid}`));
    assert.deepEqual(thread.error, { error: 'UserInterrupt', message: 'interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel' });
    await detailResponse(await s.http(`/threads/${tid}/runs/${first.run_id}/cancel`, { method: 'POST' }), 404,
      "No matching runs to cancel. Please verify the thread ID and run IDs are correct, and the runs haven't been deleted or completed.");
    await detailResponse(await get(`/threads/${tid}/runs/${randomUUID()}`), 404, 'Not Found');

    // A later run; joined now, the interrupted first answers what the thread holds: the later run's values.
    const second = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question('the second') }));
    const secondValues = await jsonResponse(await get(`/threads/${tid}/runs/${second.run_id}/join`));
    assert.deepEqual(await jsonResponse(await get(`/threads/${tid}/runs/${first.run_id}/join`)), secondValues);
    const nowThread = await jsonResponse(await get(`/threads/${tid}`));
    assert.equal(nowThread.error, null);

    // A cancel without wait: 202 and no body.
    const third = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question('the third') }));
    await reaches(tid, third.run_id, 'running');
    const res = await s.http(`/threads/${tid}/runs/${third.run_id}/cancel`, { method: 'POST' });
    assert.equal(res.status, 202);
    assert.equal(await res.text(), '');
    await reaches(tid, third.run_id, 'interrupted');
  });

  test('rollback: a rolled-back run joined answers the Python server\'s 404 as its result', async () => {
    const tid = (await newThread()).thread_id;
    const first = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question('to be undone') }));
    await reaches(tid, first.run_id, 'running');
    const second = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question('instead'), multitask_strategy: 'rollback' }));
    assert.equal(second.multitask_strategy, 'rollback');
    await jsonResponse(await get(`/threads/${tid}/runs/${second.run_id}/join`));
    assert.deepEqual(await jsonResponse(await get(`/threads/${tid}/runs/${first.run_id}/join`)),
      { __error__: { error: 'HTTPException', message: '404: Run not found' } });
    await detailResponse(await get(`/threads/${tid}/runs/${first.run_id}`), 404, 'Not Found');
    const runs = await jsonResponse(await get(`/threads/${tid}/runs`));
    assert.deepEqual(runs.map((r) => r.run_id), [second.run_id]);
  });

  test('an assistant of the Python graph keeps configurable and context copies of one another', async () => {
    const byConfig = await jsonResponse(await post('/assistants', { graph_id: 'agent', config: { configurable: { persona: 'pirate' } } }));
    assert.deepEqual([byConfig.config, byConfig.context], [{ configurable: { persona: 'pirate' } }, { persona: 'pirate' }]);
    const byContext = await jsonResponse(await post('/assistants', { graph_id: 'agent', context: { persona: 'poet' } }));
    assert.deepEqual([byContext.config, byContext.context], [{ configurable: { persona: 'poet' } }, { persona: 'poet' }]);
    await detailResponse(await post('/assistants', { graph_id: 'agent', config: { configurable: { a: 1 } }, context: { b: 2 } }), 400,
      'Cannot specify both configurable and context. Prefer setting context alone. Context was introduced in LangGraph 0.6.0 and is the long term planned replacement for configurable.');
    const patched = await jsonResponse(await s.http(`/assistants/${byConfig.assistant_id}`, { method: 'PATCH', json: { context: { persona: 'parrot' } } }));
    assert.deepEqual([patched.config, patched.context], [{ configurable: { persona: 'parrot' } }, { persona: 'parrot' }]);
    // A JavaScript graph's assistant: as before.
    const js = await jsonResponse(await post('/assistants', { graph_id: 'reporter', config: { configurable: { persona: 'pirate' } } }));
    assert.deepEqual([js.config, js.context], [{ configurable: { persona: 'pirate' } }, {}]);
  });

  test('a JavaScript graph on the same gateways: the JavaScript server\'s answers', async () => {
    const tid = (await newThread()).thread_id;
    const run = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'reporter', input: { topic: 'otters' } }));
    assert.equal(run.multitask_strategy, 'reject');
    assert.ok(!('langsmith_session_name' in run));
    await jsonResponse(await get(`/threads/${tid}/runs/${run.run_id}/join`));
    // (after_seconds: it stays the thread's run, pending, while the next is refused)
    const again = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'reporter', input: { topic: 'seals' }, after_seconds: 1 }));
    await errorResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'reporter', input: null }), 409, /multitask_strategy "reject"/);
    await jsonResponse(await get(`/threads/${tid}/runs/${again.run_id}/join`));
    await errorResponse(await get(`/threads/${tid}/runs/${randomUUID()}`), 404, /not found on thread/);
    const thread = await jsonResponse(await get(`/threads/${tid}`));
    assert.deepEqual(Object.keys(thread), ['thread_id', 'created_at', 'updated_at', 'state_updated_at', 'metadata', 'status', 'values',
      'interrupts', 'config']);
  });
});
