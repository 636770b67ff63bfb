// The Agent Protocol REST API (issue 17) as raw HTTP: the journeys of
// rest-sdk.test.mjs with fetch, asserting what a client in any language has
// to rely on — status codes, headers (Content-Type, Location,
// Content-Location), the SSE framing of run streams (event:, data:, id:
// lines), Last-Event-ID, bodies and the errors: their message as text, as the
// LangGraph reference server writes them.
// Two gateways behind HAProxy, two LangGraph workers (lib/rest-graphs.mjs).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stopAll } from './lib/harness.mjs';
import {
  restStack, question, transcript, expectedTranscript, randomUUID, UUID, ISO,
  errorResponse, jsonResponse, openSse, assertFraming, holder, sleep, waitUntil, systemAssistantId,
} from './lib/rest.mjs';

after(stopAll);

const LIVE = ['pending', 'running'];

/** The same event lists: ids, names and data. */
const sameEvents = (a, b, msg) => assert.deepEqual(a.map((e) => [e.id, e.event, e.data]), b.map((e) => [e.id, e.event, e.data]), msg);

function assertIncreasingIds(events, what) {
  for (const [i, e] of events.entries()) assert.match(e.id ?? '', /^\d+$/, `${what}: event ${i} (${e.event}) has an integer id`);
  for (let i = 1; i < events.length; i++) assert.ok(Number(events[i].id) > Number(events[i - 1].id), `${what}: ids increase at ${i}`);
}

describe('the Agent Protocol REST API as raw HTTP', () => {
  let s;
  before(async () => { s = await restStack({ tokenMs: 15 }); });
  after(async () => { await s?.done(); });

  const post = (p, json) => s.http(p, { method: 'POST', json });
  const get = (p, headers = {}) => s.http(p, { headers });
  const newThread = async (body = {}) => jsonResponse(await post('/threads', body));
  const runStatus = async (tid, rid) => (await jsonResponse(await get(`/threads/${tid}/runs/${rid}`))).status;
  const reaches = (tid, rid, statuses, ms = 30000) => waitUntil(async () => [].concat(statuses).includes(await runStatus(tid, rid)), ms, `run ${rid} to be ${statuses}`);

  test('seed journey 1: POST /threads, GET it, POST a background run, GET …/wait and …/join', async () => {
    const tid = randomUUID();
    const thread = await jsonResponse(await post('/threads', { thread_id: tid, metadata: { purpose: 'support-chat' } }));
    assert.equal(thread.thread_id, tid);
    assert.deepEqual(thread.metadata, { purpose: 'support-chat' });
    assert.match(thread.created_at, ISO);
    assert.equal((await jsonResponse(await get(`/threads/${tid}`))).status, 'idle');

    const q = "Hi there, what's the weather?";
    const res = await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question(q), metadata: { requestType: 'weatherQuery' } });
    const run = await jsonResponse(res);
    assert.match(run.run_id, UUID);
    assert.equal(res.headers.get('content-location'), `/threads/${tid}/runs/${run.run_id}`);
    assert.ok(LIVE.includes(run.status), run.status);
    assert.deepEqual(Object.keys(run).sort(), ['assistant_id', 'created_at', 'kwargs', 'metadata', 'multitask_strategy', 'run_id', 'status', 'thread_id', 'updated_at']);

    const waited = await jsonResponse(await get(`/threads/${tid}/runs/${run.run_id}/wait`));
    assert.deepEqual(transcript(waited), expectedTranscript(q));
    assert.deepEqual(waited, await s.head(tid));
    assert.deepEqual(await jsonResponse(await get(`/threads/${tid}/runs/${run.run_id}/join?cancel_on_disconnect=0`)), waited, 'the SDK\'s runs.join');
    assert.equal(await runStatus(tid, run.run_id), 'success');

    await errorResponse(await post(`/threads/${tid}/runs`, { input: question(q) }), 422, /assistant_id/);
    await errorResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'nobody', input: null }), 404, /nobody/);
    await errorResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', multitask_strategy: 'shove' }), 422, /multitask_strategy/);
    await errorResponse(await get(`/threads/${tid}/runs/${randomUUID()}`), 404);
    await errorResponse(await get(`/threads/${tid}/runs/${randomUUID()}/wait`), 404);
  });

  test('seed journey 2: POST /runs/wait, an ephemeral thread, deleted after the run', async () => {
    const res = await post('/runs/wait', {
      assistant_id: 'agent', input: question("What's the fastest route to the airport?"),
      metadata: { useCase: 'travelPlan' }, config: { tags: ['ephemeral', 'demo'] },
    });
    const values = await jsonResponse(res);
    assert.deepEqual(transcript(values), expectedTranscript("What's the fastest route to the airport?"));
    const loc = res.headers.get('content-location') ?? '';
    const m = /^\/threads\/([0-9a-f-]{36})\/runs\/([0-9a-f-]{36})$/.exec(loc);
    assert.ok(m, `Content-Location: /threads/<thread_id>/runs/<run_id>, got "${loc}"`);
    await waitUntil(async () => (await get(`/threads/${m[1]}`)).status === 404, 10000, 'the thread to be deleted');
    await errorResponse(await get(`/threads/${m[1]}`), 404);

    // POST /runs (background), on_completion keep: the thread stays.
    const run = await jsonResponse(await post('/runs', { assistant_id: 'agent', input: question('keep me'), on_completion: 'keep' }));
    assert.match(run.thread_id, UUID);
    await jsonResponse(await get(`/threads/${run.thread_id}/runs/${run.run_id}/join`));
    assert.equal((await jsonResponse(await get(`/threads/${run.thread_id}`))).status, 'idle');
  });

  test('seed journey 3: PUT, GET, DELETE /store/items; namespaces joined by "."; bad items are 422', async () => {
    const put = await s.http('/store/items', { method: 'PUT', json: { namespace: ['user_profiles'], key: 'profile_jane_doe', value: { displayName: 'Jane Doe', role: 'customer' } } });
    assert.equal(put.status, 204);
    assert.equal(await put.text(), '');
    const item = await jsonResponse(await get('/store/items?key=profile_jane_doe&namespace=user_profiles'));
    assert.deepEqual({ ns: item.namespace, key: item.key, value: item.value },
      { ns: ['user_profiles'], key: 'profile_jane_doe', value: { displayName: 'Jane Doe', role: 'customer' } });
    assert.match(item.created_at, ISO);
    const del = await s.http('/store/items', { method: 'DELETE', json: { namespace: ['user_profiles'], key: 'profile_jane_doe' } });
    assert.equal(del.status, 204);
    assert.equal(await jsonResponse(await get('/store/items?key=profile_jane_doe&namespace=user_profiles')), null,
      'a missing item is 200 null (as the reference server; issue 26)');

    assert.equal((await s.http('/store/items', { method: 'PUT', json: { namespace: ['team', 'alpha'], key: 'k 1', value: { n: 1 } } })).status, 204);
    assert.deepEqual((await jsonResponse(await get('/store/items?namespace=team.alpha&key=k%201'))).namespace, ['team', 'alpha']);
    assert.equal(await jsonResponse(await get('/store/items?namespace=team&key=k%201')), null);
    await errorResponse(await get('/store/items?namespace=team.alpha'), 422, /key/);
    await errorResponse(await s.http('/store/items', { method: 'PUT', json: { namespace: ['a.b'], key: 'k', value: {} } }), 422, /namespace/);
    await errorResponse(await s.http('/store/items', { method: 'PUT', json: { namespace: ['a'], value: {} } }), 422, /key/);
    await errorResponse(await s.http('/store/items', { method: 'PUT', json: { namespace: ['a'], key: 'k', value: 'not an object' } }), 422, /value/);
    const bad = await s.http('/store/items', { method: 'PUT', body: '{"namespace":', headers: { 'content-type': 'application/json' } });
    assert.ok([400, 422].includes(bad.status), `malformed JSON: ${bad.status}`);
    await errorResponse(bad, bad.status, /JSON/i);
  });

  test('POST /threads/:id/runs/stream: headers, SSE framing, metadata first, modes and subgraphs', async () => {
    const tid = (await newThread()).thread_id;
    const q = 'stream it raw';
    const { res, sse, body } = await openSse(`${s.apiUrl}/threads/${tid}/runs/stream`, { method: 'POST',
      json: { assistant_id: 'agent', input: question(q), stream_mode: ['values', 'messages-tuple', 'updates'], stream_subgraphs: true } });
    assert.equal(res.status, 200, body);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    const loc = res.headers.get('content-location') ?? '';
    const m = new RegExp(`^/threads/${tid}/runs/([0-9a-f-]{36})$`).exec(loc);
    assert.ok(m, `Content-Location: /threads/<thread_id>/runs/<run_id> (the SDK reads the run id from it), got "${loc}"`);
    const rid = m[1];
    assert.equal(res.headers.get('location'), `/threads/${tid}/runs/${rid}/stream`, 'Location: the join stream (the SDK reconnects to it)');
    await sse.done;
    assert.equal(sse.error, null);
    assertFraming(sse.events);
    assertIncreasingIds(sse.events, 'the stream');
    const [first] = sse.events;
    assert.equal(first.event, 'metadata');
    assert.deepEqual(first.data, { run_id: rid, attempt: 1 }, 'the Agent Server\'s metadata');
    assert.equal(first.id, '0');
    const names = new Set(sse.events.map((e) => e.event.split('|')[0]));
    // (with stream_subgraphs and values, LangGraph's checkpoint envelopes come too, as from the Agent Server)
    assert.deepEqual([...names].sort(), ['checkpoints', 'messages', 'metadata', 'updates', 'values']);
    assert.ok(sse.events.some((e) => /^updates\|researcher:[^|]+$/.test(e.event)));
    assert.ok(sse.events.filter((e) => e.event === 'messages').every((e) => Array.isArray(e.data) && e.data.length === 2));
    assert.deepEqual(transcript(sse.events.filter((e) => e.event === 'values').at(-1).data), expectedTranscript(q));
    // The stream ends with the run: its record says so (else the SDK reconnects).
    await waitUntil(async () => (await runStatus(tid, rid)) === 'success', 1000, 'the run to be success when its stream ended');

    // GET …/stream: Last-Event-ID -1 replays it all; an id, what follows it.
    const all = await openSse(`${s.apiUrl}/threads/${tid}/runs/${rid}/stream`, { headers: { 'Last-Event-ID': '-1' } });
    assert.equal(all.res.status, 200);
    assert.match(all.res.headers.get('content-type'), /^text\/event-stream/);
    assert.equal(all.res.headers.get('location'), `/threads/${tid}/runs/${rid}/stream`);
    await all.sse.done;
    sameEvents(all.sse.events, sse.events, 'the replay is the stream');
    const mid = sse.events[Math.floor(sse.events.length / 2)].id;
    const rest = await openSse(`${s.apiUrl}/threads/${tid}/runs/${rid}/stream?cancel_on_disconnect=0`, { headers: { 'Last-Event-ID': mid } });
    await rest.sse.done;
    sameEvents(rest.sse.events, sse.events.filter((e) => Number(e.id) > Number(mid)));

    // Errors are JSON, not streams.
    await errorResponse(await post(`/threads/${randomUUID()}/runs/stream`, { assistant_id: 'agent', input: null }), 404);
    await errorResponse(await get(`/threads/${tid}/runs/${randomUUID()}/stream`), 404);
    await errorResponse(await post(`/threads/${tid}/runs/stream`, { assistant_id: 'agent', stream_mode: ['values', 'telepathy'] }), 422, /stream_mode/);
  });

  test('GET …/runs/:id/stream joined mid-run: every event from there on, none missing', async () => {
    const tid = (await newThread()).thread_id;
    const run = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question('join me midway'), stream_mode: ['values', 'messages-tuple'] }));
    await reaches(tid, run.run_id, 'running');
    await sleep(300);
    const live = await openSse(`${s.apiUrl}/threads/${tid}/runs/${run.run_id}/stream`);
    assert.equal(live.res.status, 200);
    await live.sse.done;
    const full = await openSse(`${s.apiUrl}/threads/${tid}/runs/${run.run_id}/stream`, { headers: { 'Last-Event-ID': '-1' } });
    await full.sse.done;
    const events = live.sse.events.filter((e) => e.event !== 'metadata');
    assert.ok(events.length > 0);
    const at = full.sse.events.findIndex((e) => e.id === events[0].id);
    assert.ok(at > 1, 'joined after the start');
    sameEvents(events, full.sse.events.slice(at), 'from the join on, the whole rest');
  });

  test('POST /runs/stream (stateless): the same headers and framing', async () => {
    const { res, sse } = await openSse(`${s.apiUrl}/runs/stream`, { method: 'POST', json: { assistant_id: 'reporter', input: { topic: 'raw' }, stream_mode: ['custom', 'values'] } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    const m = /^\/threads\/([0-9a-f-]{36})\/runs\/([0-9a-f-]{36})$/.exec(res.headers.get('content-location') ?? '');
    assert.ok(m, res.headers.get('content-location'));
    assert.equal(res.headers.get('location'), `/threads/${m[1]}/runs/${m[2]}/stream`);
    await sse.done;
    assertFraming(sse.events);
    assert.deepEqual(sse.events.map((e) => e.event), ['metadata', 'values', 'custom', 'custom', 'values', 'values']);
    assert.deepEqual(sse.events.filter((e) => e.event === 'custom').map((e) => e.data), [{ step: 1, note: 'starting' }, { step: 2, note: 'halfway' }]);
  });

  test('POST …/cancel: 202, or with wait=1 once the run is over; action=rollback deletes; bad action 422', async () => {
    const tid = (await newThread()).thread_id;
    const a = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question('cancel me raw') }));
    await reaches(tid, a.run_id, 'running');
    const c1 = await post(`/threads/${tid}/runs/${a.run_id}/cancel?wait=0&action=interrupt`);
    assert.equal(c1.status, 202, await c1.text());
    await reaches(tid, a.run_id, 'interrupted');

    const b = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question('cancel me and wait') }));
    await reaches(tid, b.run_id, 'running');
    const c2 = await post(`/threads/${tid}/runs/${b.run_id}/cancel?wait=1&action=interrupt`);
    assert.ok([200, 204].includes(c2.status), `wait=1: ${c2.status}`);
    if (c2.status === 200) assert.equal((await c2.json()).status, 'interrupted');
    assert.equal(await runStatus(tid, b.run_id), 'interrupted', 'over when the answer comes');

    const c = await jsonResponse(await post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question('roll back raw') }));
    await reaches(tid, c.run_id, 'running');
    await waitUntil(async () => transcript(await s.head(tid)).includes('roll back raw'), 10000, 'its input in the state');
    await errorResponse(await post(`/threads/${tid}/runs/${c.run_id}/cancel?action=explode`), 422, /action/);
    const c3 = await post(`/threads/${tid}/runs/${c.run_id}/cancel?wait=1&action=rollback`);
    assert.ok([200, 204].includes(c3.status), `rollback: ${c3.status}`);
    await errorResponse(await get(`/threads/${tid}/runs/${c.run_id}`), 404);
    assert.ok(!transcript(await s.head(tid)).includes('roll back raw'), 'its checkpoints are gone');
    await errorResponse(await post(`/threads/${tid}/runs/${randomUUID()}/cancel`), 404);
    assert.notEqual((await jsonResponse(await get(`/threads/${tid}`))).status, 'busy');
  });

  test('multitask_strategy: reject 409, enqueue, interrupt, rollback', async () => {
    const start = async (tid, q, extra = {}) => post(`/threads/${tid}/runs`, { assistant_id: 'agent', input: question(q), ...extra });
    const two = async (strategy) => {
      const tid = (await newThread()).thread_id;
      const a = await jsonResponse(await start(tid, `first (${strategy})`));
      await reaches(tid, a.run_id, 'running');
      await waitUntil(async () => transcript(await s.head(tid)).includes(`first (${strategy})`), 10000, 'the first run\'s input in the state');
      return { tid, a, res: await start(tid, `second (${strategy})`, { multitask_strategy: strategy }) };
    };
    const [rej, enq, int, rb] = await Promise.all(['reject', 'enqueue', 'interrupt', 'rollback'].map(two));

    await errorResponse(rej.res, 409, /./);
    const join = async (tid, rid) => jsonResponse(await get(`/threads/${tid}/runs/${rid}/join`));
    assert.deepEqual(transcript(await join(rej.tid, rej.a.run_id)), expectedTranscript('first (reject)'));

    const eb = await jsonResponse(enq.res);
    assert.equal(eb.status, 'pending');
    await join(enq.tid, enq.a.run_id);
    assert.ok(LIVE.includes(await runStatus(enq.tid, eb.run_id)));
    assert.deepEqual(transcript(await join(enq.tid, eb.run_id)), [...expectedTranscript('first (enqueue)'), ...expectedTranscript('second (enqueue)')]);

    const ib = await jsonResponse(int.res);
    const iv = await join(int.tid, ib.run_id);
    assert.equal(await runStatus(int.tid, int.a.run_id), 'interrupted');
    assert.equal(await runStatus(int.tid, ib.run_id), 'success');
    // ("second (interrupt)" stops at the graph's interrupt(): a join answers the run's last values
    // event, LangGraph's {"__interrupt__": […]}, as the Agent Server does)
    assert.deepEqual(Object.keys(iv), ['__interrupt__']);
    assert.deepEqual(transcript(await s.head(int.tid)).slice(-4), expectedTranscript('second (interrupt)'));

    const rbb = await jsonResponse(rb.res);
    const rv = await join(rb.tid, rbb.run_id);
    await errorResponse(await get(`/threads/${rb.tid}/runs/${rb.a.run_id}`), 404);
    assert.deepEqual(transcript(rv), expectedTranscript('second (rollback)'));
    const listed = await jsonResponse(await get(`/threads/${rb.tid}/runs?limit=10&offset=0`));
    assert.deepEqual(listed.map((r) => r.run_id), [rbb.run_id]);
  });

  test('threads: POST, GET, PATCH, DELETE, search, state, history, state update, copy', async () => {
    const tid = randomUUID();
    const suite = randomUUID();
    const t = await newThread({ thread_id: tid, metadata: { suite, n: 1 } });
    await errorResponse(await post('/threads', { thread_id: tid, if_exists: 'raise' }), 409, /exist/i);
    await errorResponse(await post('/threads', { thread_id: 42 }), 422, /thread_id/);
    await errorResponse(await post('/threads', { metadata: 'not an object' }), 422, /metadata/);
    const patched = await jsonResponse(await s.http(`/threads/${tid}`, { method: 'PATCH', json: { metadata: { m: 2 } } }));
    assert.deepEqual(patched.metadata, { suite, n: 1, m: 2 });
    assert.equal(patched.created_at, t.created_at);

    const values = await jsonResponse(await post(`/threads/${tid}/runs/wait`, { assistant_id: 'agent', input: question('state of things') }));
    const other = await newThread({ metadata: { suite } });

    const found = await jsonResponse(await post('/threads/search', { metadata: { suite }, limit: 10, offset: 0, sort_by: 'created_at', sort_order: 'asc' }));
    assert.deepEqual(found.map((x) => x.thread_id), [tid, other.thread_id]);
    assert.deepEqual(found[0].values, values);
    assert.deepEqual((await jsonResponse(await post('/threads/search', { metadata: { suite, m: 2 } }))).map((x) => x.thread_id), [tid]);
    assert.deepEqual((await jsonResponse(await post('/threads/search', { metadata: { suite }, status: 'busy' }))), []);
    await errorResponse(await post('/threads/search', { limit: 100000 }), 422, /limit/);
    await errorResponse(await post('/threads/search', { sort_order: 'sideways' }), 422, /sort_order/);

    const state = await jsonResponse(await get(`/threads/${tid}/state`));
    assert.deepEqual(state.values, values);
    assert.deepEqual(state.next, []);
    const cps = await s.checkpointIds(tid);
    assert.equal(state.checkpoint.checkpoint_id, cps[0]);
    const hist = await jsonResponse(await post(`/threads/${tid}/history`, { limit: 3 }));
    assert.deepEqual(hist.map((h) => h.checkpoint.checkpoint_id), cps.slice(0, 3));
    const at = await jsonResponse(await get(`/threads/${tid}/state/${cps[1]}`));
    assert.equal(at.checkpoint.checkpoint_id, cps[1]);
    await errorResponse(await get(`/threads/${tid}/state/${randomUUID()}`), 404);
    await errorResponse(await post(`/threads/${tid}/history`, { limit: 'ten' }), 422, /limit/);

    const upd = await jsonResponse(await post(`/threads/${tid}/state`, { values: { approved: 'raw' }, as_node: 'approve' }));
    assert.equal(upd.checkpoint.checkpoint_id, (await s.checkpointIds(tid))[0]);
    assert.equal((await s.head(tid)).approved, 'raw');

    const copy = await jsonResponse(await post(`/threads/${tid}/copy`));
    assert.match(copy.thread_id, UUID);
    assert.notEqual(copy.thread_id, tid);
    assert.deepEqual((await jsonResponse(await get(`/threads/${copy.thread_id}/state`))).values, await s.head(tid));

    const del = await s.http(`/threads/${tid}`, { method: 'DELETE' });
    assert.equal(del.status, 204);
    assert.equal(await del.text(), '');
    await errorResponse(await get(`/threads/${tid}`), 404, new RegExp(tid));
    await errorResponse(await get(`/threads/${tid}/runs?limit=10&offset=0`), 404);
    assert.equal((await jsonResponse(await get(`/threads/${copy.thread_id}`))).thread_id, copy.thread_id, 'the copy outlives it');
  });

  test('store: POST /store/items/search and /store/namespaces', async () => {
    const put = (namespace, key, value) => s.http('/store/items', { method: 'PUT', json: { namespace, key, value } });
    for (const [ns, k, v] of [[['raw', 'a'], 'x', { c: 1 }], [['raw', 'a'], 'y', { c: 2 }], [['raw', 'b'], 'x', { c: 1 }]]) assert.equal((await put(ns, k, v)).status, 204);
    const res = await jsonResponse(await post('/store/items/search', { namespace_prefix: ['raw'], filter: { c: 1 }, limit: 10, offset: 0 }));
    assert.deepEqual(Object.keys(res), ['items']);
    assert.deepEqual(res.items.map((i) => `${i.namespace.join('.')}/${i.key}`).sort(), ['raw.a/x', 'raw.b/x']);
    assert.equal((await jsonResponse(await post('/store/items/search', { namespace_prefix: ['raw'], limit: 1 }))).items.length, 1);
    await errorResponse(await post('/store/items/search', { namespace_prefix: ['raw'], limit: 5000 }), 422, /limit/);
    const ns = await jsonResponse(await post('/store/namespaces', { prefix: ['raw'], limit: 100, offset: 0 }));
    assert.deepEqual(ns.namespaces.map((n) => n.join('.')).sort(), ['raw.a', 'raw.b']);
    assert.deepEqual((await jsonResponse(await post('/store/namespaces', { prefix: ['raw'], max_depth: 1 }))).namespaces, [['raw']]);
  });

  test('assistants: POST /assistants/search, GET /assistants/:id', async () => {
    const all = await jsonResponse(await post('/assistants/search', { limit: 10, offset: 0 }));
    assert.deepEqual(all.map((a) => a.assistant_id).sort(), [systemAssistantId('agent'), systemAssistantId('reporter')].sort());
    const agent = await jsonResponse(await get('/assistants/agent'));
    assert.equal(agent.graph_id, 'agent');
    assert.equal(agent.assistant_id, systemAssistantId('agent'));
    assert.match(agent.created_at, ISO);
    assert.deepEqual((await jsonResponse(await post('/assistants/search', { graph_id: 'agent' }))).map((a) => a.assistant_id), [systemAssistantId('agent')]);
    await errorResponse(await get('/assistants/nobody'), 404, /^Assistant not found$/);
  });

  test('bodies are bounded; non-JSON bodies get precise errors', async () => {
    const big = JSON.stringify({ metadata: { pad: 'x'.repeat(1024 * 1024) } });
    const res = await s.http('/threads', { method: 'POST', body: big, headers: { 'content-type': 'application/json' } });
    await errorResponse(res, 413, /1 MiB|too large/i);
    const notJson = await s.http('/threads', { method: 'POST', body: 'hello', headers: { 'content-type': 'application/json' } });
    assert.ok([400, 422].includes(notJson.status), `not JSON: ${notJson.status}`);
    await errorResponse(notJson, notJson.status, /JSON/i);
  });

  test('threads/search pages: limit 10 by default, limit and offset', async () => {
    const suite = randomUUID();
    for (let i = 0; i < 12; i++) await newThread({ metadata: { suite } });
    assert.equal((await jsonResponse(await post('/threads/search', { metadata: { suite } }))).length, 10, 'default limit 10');
    assert.equal((await jsonResponse(await post('/threads/search', { metadata: { suite }, limit: 20 }))).length, 12);
    assert.equal((await jsonResponse(await post('/threads/search', { metadata: { suite }, limit: 5, offset: 10 }))).length, 2);
  });
});

describe('GET …/runs/:id/stream through a gateway SIGKILL, by hand', () => {
  test('reconnecting with the last id received gives exactly the rest of the run', async () => {
    const s = await restStack({ tokenMs: 40 });
    try {
      const tid = (await jsonResponse(await s.http('/threads', { method: 'POST', json: {} }))).thread_id;
      const q = 'a raw question that takes a while';
      const run = await jsonResponse(await s.http(`/threads/${tid}/runs`, { method: 'POST',
        json: { assistant_id: 'agent', input: question(q), stream_mode: ['values', 'messages-tuple', 'updates'], stream_subgraphs: true } }));
      const url = `${s.apiUrl}/threads/${tid}/runs/${run.run_id}/stream`;
      const first = await openSse(url, { headers: { 'Last-Event-ID': '-1' } });
      assert.equal(first.res.status, 200);
      await waitUntil(() => first.sse.events.filter((e) => e.event === 'messages').length >= 5, 30000, 'tokens');
      const victim = await holder(s.gws);
      victim.proc.kill('SIGKILL');
      await first.sse.done;
      const got = [...first.sse.events];
      const lastId = got.at(-1).id;
      // Through HAProxy again (the survivor), from the last id received.
      const second = await waitUntil(async () => {
        try {
          const r = await openSse(url, { headers: { 'Last-Event-ID': lastId } });
          return r.res.status === 200 ? r : null;
        } catch {
          return null;
        }
      }, 15000, 'the other gateway to answer');
      await second.sse.done;
      assert.equal(second.sse.error, null);
      got.push(...second.sse.events);
      const full = await openSse(url, { headers: { 'Last-Event-ID': '-1' } });
      await full.sse.done;
      assertIncreasingIds(full.sse.events, 'the replay');
      sameEvents(got, full.sse.events, 'no event lost, none repeated');
      assert.deepEqual(transcript(full.sse.events.filter((e) => e.event === 'values').at(-1).data), expectedTranscript(q));
    } finally {
      await s.done();
    }
  });
});

describe('on_disconnect', () => {
  test('"cancel": a run whose stream client goes away is cancelled; "continue" (the default) runs on', async () => {
    const s = await restStack({ tokenMs: 40 });
    try {
      const post = (p, json) => s.http(p, { method: 'POST', json });
      const status = async (tid, rid) => (await jsonResponse(await s.http(`/threads/${tid}/runs/${rid}`))).status;
      const leave = async (onDisconnect) => {
        const tid = (await jsonResponse(await post('/threads', {}))).thread_id;
        const { res, sse } = await openSse(`${s.apiUrl}/threads/${tid}/runs/stream`, { method: 'POST',
          json: { assistant_id: 'agent', input: question(`leaving (${onDisconnect})`), stream_mode: ['messages-tuple'], ...(onDisconnect ? { on_disconnect: onDisconnect } : {}) } });
        assert.equal(res.status, 200);
        await waitUntil(() => sse.events.filter((e) => e.event === 'messages').length >= 3, 30000, 'tokens');
        sse.close();
        await sse.done;
        return { tid, rid: /\/runs\/([^/]+)$/.exec(res.headers.get('content-location'))[1] };
      };
      const [cancelled, kept] = await Promise.all([leave('cancel'), leave(undefined)]);
      await waitUntil(async () => (await status(cancelled.tid, cancelled.rid)) === 'interrupted', 15000, 'the run cancelled');
      await waitUntil(async () => (await status(kept.tid, kept.rid)) === 'success', 30000, 'the other run to finish');
    } finally {
      await s.done();
    }
  });
});
