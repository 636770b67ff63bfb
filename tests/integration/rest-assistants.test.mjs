// Assistants (issue 26) as the LangGraph reference server keeps them, through
// @langchain/langgraph-sdk's Client and raw HTTP: each graph's system
// assistant, assistants made with POST /assistants, their versions, search
// and count, the graph, schemas and subgraphs their workers registered, and
// runs that take an assistant's config and context. With them the thread
// records' rules of the reference server: POST /threads/count, a failed run
// leaves its thread "error", a state update while a run is in flight is 409;
// a thread made with supersteps; and the test-only wipe, POST
// /internal/truncate, there only with --test-truncate. Two gateways behind
// HAProxy, two LangGraph workers (lib/rest-graphs.mjs: "agent", with its
// "researcher" subgraph, and "reporter").
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, stopAll, waitUntil, redisClient } from './lib/harness.mjs';
import {
  restStack, question, randomUUID, ISO, UUID, rejectsWith, errorResponse, jsonResponse, runReaches, systemAssistantId,
} from './lib/rest.mjs';

after(stopAll);

describe('assistants through the SDK and raw HTTP', () => {
  let s;
  let client;
  before(async () => {
    s = await restStack({ tokenMs: 15 });
    client = s.client();
  });
  after(async () => { await s?.done(); });
  const post = (p, json) => s.http(p, { method: 'POST', json });

  test('each graph has a system assistant: the reference server\'s id, created_by "system", found by its graph id too', async () => {
    const agent = await client.assistants.get('agent');
    assert.equal(agent.assistant_id, systemAssistantId('agent'));
    assert.equal(agent.assistant_id, 'fe096781-5601-53d2-b2f6-0d3403f7e9ca', 'what the reference server calls it');
    assert.deepEqual({ ...agent, created_at: 0, updated_at: 0 }, {
      assistant_id: agent.assistant_id, graph_id: 'agent', name: 'agent', config: {}, context: {},
      metadata: { created_by: 'system' }, version: 1, created_at: 0, updated_at: 0, description: null,
    });
    assert.match(agent.created_at, ISO);
    assert.deepEqual(await client.assistants.get(agent.assistant_id), agent);
    const system = await client.assistants.search({ metadata: { created_by: 'system' } });
    assert.deepEqual(system.map((a) => a.graph_id).sort(), ['agent', 'reporter']);
    await rejectsWith(client.assistants.get('nobody'), 404, /^Assistant not found$/);
  });

  test('create, get, update (a version each), versions, set latest, delete', async () => {
    const config = { configurable: { model_name: 'gpt' }, tags: ['t'] };
    const made = await client.assistants.create({ graphId: 'agent', config, context: { tone: 'dry' }, metadata: { team: 'blue' }, description: 'foo' });
    assert.match(made.assistant_id, UUID);
    assert.deepEqual({ ...made, assistant_id: 0, created_at: 0, updated_at: 0 }, {
      assistant_id: 0, graph_id: 'agent', name: 'Untitled', config, context: { tone: 'dry' }, metadata: { team: 'blue' },
      version: 1, created_at: 0, updated_at: 0, description: 'foo',
    });
    assert.deepEqual(await client.assistants.get(made.assistant_id), made);

    const id = made.assistant_id;
    await rejectsWith(client.assistants.create({ graphId: 'agent', assistantId: id }), 409, /^Assistant already exists$/);
    assert.deepEqual(await client.assistants.create({ graphId: 'agent', assistantId: id, ifExists: 'do_nothing', name: 'x' }), made);
    await rejectsWith(client.assistants.create({ graphId: 'no-such-graph' }), 404, /^Graph "no-such-graph" not found$/);
    const named = await client.assistants.create({ graphId: 'reporter', assistantId: randomUUID(), name: 'woof' });
    assert.equal(named.name, 'woof');

    const updated = await client.assistants.update(id, { metadata: { name: 'woof' }, description: 'bar' });
    assert.deepEqual([updated.version, updated.metadata, updated.description, updated.config], [2, { team: 'blue', name: 'woof' }, 'bar', config]);
    assert.ok(updated.updated_at >= made.updated_at);
    await client.assistants.update(id, { config: { configurable: { foo: 'bar' } } });
    assert.equal((await client.assistants.update(id, {})).version, 4, 'an empty update is a version too');
    await rejectsWith(client.assistants.update(randomUUID(), {}), 404, /^Assistant not found$/);

    const versions = await client.assistants.getVersions(id);
    assert.deepEqual(versions.map((v) => v.version), [4, 3, 2, 1]);
    assert.deepEqual(versions[1].config, { configurable: { foo: 'bar' } });
    assert.deepEqual(versions[3], { assistant_id: id, version: 1, graph_id: 'agent', config, context: { tone: 'dry' }, metadata: { team: 'blue' },
      created_at: made.created_at, name: 'Untitled', description: 'foo' });
    assert.deepEqual((await client.assistants.getVersions(id, { limit: 1 })).map((v) => v.version), [4]);
    assert.deepEqual((await client.assistants.getVersions(id, { offset: 3 })).map((v) => v.version), [1]);
    assert.deepEqual((await client.assistants.getVersions(id, { metadata: { name: 'woof' } })).map((v) => v.version), [4, 3, 2]);

    const back = await client.assistants.setLatest(id, 1);
    assert.deepEqual([back.version, back.config, back.metadata, back.description], [1, config, { team: 'blue' }, 'foo']);
    assert.equal((await client.assistants.update(id, {})).version, 5, 'versions go on after the newest');
    await rejectsWith(client.assistants.setLatest(id, 9), 404, /^Assistant version not found$/);

    assert.deepEqual(await client.assistants.delete(id), [id]);
    await rejectsWith(client.assistants.get(id), 404, /^Assistant not found$/);
    await rejectsWith(client.assistants.getVersions(id), 404, new RegExp(`^Assistant "${id}" not found\\.$`));
    await rejectsWith(client.assistants.delete(id), 404, /^Assistant not found$/);
  });

  test('delete with deleteThreads takes the threads whose metadata names the assistant', async () => {
    const a = await client.assistants.create({ graphId: 'agent' });
    const mine = await client.threads.create({ metadata: { assistant_id: a.assistant_id } });
    const other = await client.threads.create({ metadata: { assistant_id: 'someone' } });
    await client.assistants.delete(a.assistant_id, { deleteThreads: true });
    await rejectsWith(client.threads.get(mine.thread_id), 404, new RegExp(`^Thread with ID ${mine.thread_id} not found$`));
    assert.equal((await client.threads.get(other.thread_id)).thread_id, other.thread_id);
  });

  test('search: graph, name, metadata, limit and offset, sort, select; count', async () => {
    const tag = randomUUID();
    const made = [];
    for (const [i, name] of ['Alpha helper', 'beta HELPER', 'gamma'].entries()) {
      made.push(await client.assistants.create({ graphId: i === 2 ? 'reporter' : 'agent', name, metadata: { tag, i } }));
    }
    const ids = (list) => list.map((a) => a.assistant_id);
    assert.deepEqual(ids(await client.assistants.search({ metadata: { tag } })), ids(made).reverse(), 'newest first');
    assert.deepEqual(ids(await client.assistants.search({ metadata: { tag }, graphId: 'agent' })), ids(made.slice(0, 2)).reverse());
    assert.deepEqual(ids(await client.assistants.search({ metadata: { tag }, name: 'HELPER' })), ids(made.slice(0, 2)).reverse());
    assert.deepEqual(ids(await client.assistants.search({ metadata: { tag }, limit: 1, offset: 1 })), [made[1].assistant_id]);
    assert.deepEqual(ids(await client.assistants.search({ metadata: { tag }, sortBy: 'name', sortOrder: 'asc' })), ids(made));
    assert.deepEqual(await client.assistants.search({ metadata: { tag }, select: ['assistant_id', 'name'], limit: 1 }),
      [{ assistant_id: made[2].assistant_id, name: 'gamma' }]);
    const page = await client.assistants.search({ metadata: { tag }, limit: 3, includePagination: true });
    assert.deepEqual([page.assistants.length, page.next], [3, '3'], 'a full page: the reference server\'s X-Pagination-Next');
    assert.equal(await client.assistants.count({ metadata: { tag } }), 3);
    assert.equal(await client.assistants.count({ metadata: { tag }, graphId: 'reporter' }), 1);
    assert.ok(await client.assistants.count() >= 5, 'with the two system assistants');
    await rejectsWith(client.assistants.search({ sortBy: 'colour' }), 422, /sort_by/);
  });

  test('graph (xray), schemas and subgraphs: what the graph\'s workers registered', async () => {
    const a = await client.assistants.create({ graphId: 'agent' });
    const graph = await client.assistants.getGraph(a.assistant_id);
    assert.deepEqual(graph, await client.assistants.getGraph('agent'));
    const ids = graph.nodes.map((n) => n.id);
    for (const n of ['__start__', 'researcher', '__end__']) assert.ok(ids.includes(n), `${n} in ${ids}`);
    const xray = await client.assistants.getGraph(a.assistant_id, { xray: true });
    assert.ok(xray.nodes.some((n) => n.id.startsWith('researcher:')), 'xray draws the subgraph\'s own nodes');
    const schemas = await client.assistants.getSchemas(a.assistant_id);
    assert.equal(schemas.graph_id, 'agent');
    assert.ok(schemas.state_schema.properties.messages, JSON.stringify(schemas.state_schema));

    const subgraphs = await client.assistants.getSubgraphs(a.assistant_id);
    assert.deepEqual(Object.keys(subgraphs), ['researcher']);
    assert.equal(subgraphs.researcher.state.type, 'object');
    assert.deepEqual(Object.keys(await client.assistants.getSubgraphs(a.assistant_id, { recurse: true })), ['researcher']);
    assert.deepEqual(await client.assistants.getSubgraphs(a.assistant_id, { namespace: 'researcher' }), subgraphs);
    assert.deepEqual(await client.assistants.getSubgraphs(a.assistant_id, { namespace: 'researcher|deeper', recurse: true }), {});
    assert.deepEqual(Object.keys(await client.assistants.getSubgraphs('reporter')), ['inner']);
    await rejectsWith(client.assistants.getGraph(randomUUID()), 404, /^Assistant not found$/);
  });

  test('a run of an assistant goes to its graph\'s workers with its config and context under the run\'s', async () => {
    const a = await client.assistants.create({ graphId: 'agent', config: { configurable: { model_name: 'gpt', keep: 1 }, tags: ['mine'] },
      context: { tone: 'dry', locale: 'fr' } });
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, a.assistant_id, {
      input: question('assistant run'), config: { configurable: { model_name: 'claude' } }, context: { locale: 'en' } });
    assert.equal(run.assistant_id, a.assistant_id);
    assert.deepEqual(run.kwargs.config, { configurable: { model_name: 'claude', keep: 1 }, tags: ['mine'] });
    assert.deepEqual(run.kwargs.context, { tone: 'dry', locale: 'en' });
    const done = await runReaches(client, thread.thread_id, run.run_id, ['success', 'error']);
    assert.equal(done.status, 'success', 'its graph\'s workers ran it');
    const t = await client.threads.get(thread.thread_id);
    assert.deepEqual(t.metadata, { graph_id: 'agent', assistant_id: a.assistant_id });
    assert.deepEqual(t.config, run.kwargs.config, 'the thread keeps the config, as the reference server');
    assert.equal((await client.threads.search({ metadata: { assistant_id: a.assistant_id } }))[0].thread_id, thread.thread_id);

    // A run of the graph id is its system assistant's.
    const values = await client.runs.wait(thread.thread_id, 'agent', { input: question('by graph id') });
    assert.ok(values.messages.length > 0);
    assert.equal((await client.runs.list(thread.thread_id, { limit: 1 }))[0].assistant_id, systemAssistantId('agent'));
    // Unknown: the reference server's words, which its clients match.
    await rejectsWith(client.runs.wait(thread.thread_id, 'non-existent', { input: question('x') }), 404,
      /^No assistant found for "non-existent"\. Make sure the assistant ID is for a valid assistant or a valid graph ID\.$/);
  });

  test('a run.start over the protocol names an assistant by its id: its graph\'s workers take it', async () => {
    const a = await client.assistants.create({ graphId: 'reporter' });
    const threadId = randomUUID();
    const res = await jsonResponse(await post(`/threads/${threadId}/commands`,
      { id: 1, method: 'run.start', params: { assistant_id: a.assistant_id, input: { topic: 'over the protocol' } } }));
    assert.equal(res.type, 'success', JSON.stringify(res));
    let last;
    await waitUntil(async () => (last = await (await s.http(`/threads/${threadId}/state`)).json()).values?.steps === 5, 20000, 'the run done (2 steps, then the subgraph\'s 3: its own and the 2 it was given)')
      .catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(last)}`); });
  });

  test('raw HTTP: status codes, the array a delete answers, the count\'s number, X-Pagination-Total', async () => {
    const made = await jsonResponse(await post('/assistants', { graph_id: 'reporter', name: 'raw', metadata: { raw: true } }));
    assert.equal(made.name, 'raw');
    await errorResponse(await post('/assistants', { name: 'no graph' }), 422, /^graph_id is required$/);
    await errorResponse(await post('/assistants', { graph_id: 'agent', assistant_id: made.assistant_id }), 409, /^Assistant already exists$/);
    const patched = await jsonResponse(await s.http(`/assistants/${made.assistant_id}`, { method: 'PATCH', json: { name: 'renamed' } }));
    assert.deepEqual([patched.name, patched.version], ['renamed', 2]);
    const search = await post('/assistants/search', { metadata: { raw: true }, limit: 10 });
    assert.equal(search.headers.get('x-pagination-total'), '1');
    assert.equal(search.headers.get('x-pagination-next'), null);
    assert.equal((await jsonResponse(search)).length, 1);
    assert.equal(await jsonResponse(await post('/assistants/count', { metadata: { raw: true } })), 1);
    assert.equal(await jsonResponse(await post('/assistants/count', {})) >= 3, true);
    const versions = await jsonResponse(await post(`/assistants/${made.assistant_id}/versions`, {}));
    assert.deepEqual(versions.map((v) => v.name), ['renamed', 'raw']);
    assert.equal((await jsonResponse(await post(`/assistants/${made.assistant_id}/latest`, { version: 1 }))).name, 'raw');
    const sub = await jsonResponse(await s.http(`/assistants/agent/subgraphs/${encodeURIComponent('researcher')}?recurse=true`));
    assert.deepEqual(Object.keys(sub), ['researcher']);
    assert.deepEqual(await jsonResponse(await s.http(`/assistants/agent/subgraphs/${encodeURIComponent('a|b')}`)), {});
    assert.equal((await s.http(`/assistants/${made.assistant_id}`, { method: 'PUT', json: {} })).status, 405);
    assert.deepEqual(await jsonResponse(await s.http(`/assistants/${made.assistant_id}?delete_threads=false`, { method: 'DELETE' })), [made.assistant_id]);
    await errorResponse(await s.http(`/assistants/${made.assistant_id}`), 404, /^Assistant not found$/);
    const wipe = await post('/internal/truncate', { threads: true });
    assert.deepEqual([wipe.status, (await wipe.json()).error], [404, 'not_found'], 'no wipe without --test-truncate');
  });

  test('threads: count, a failed run leaves its thread "error", a state update while a run is in flight is 409', async () => {
    const tag = randomUUID();
    for (let i = 0; i < 3; i++) await client.threads.create({ metadata: { tag, i } });
    assert.equal(await client.threads.count({ metadata: { tag } }), 3);
    assert.equal(await client.threads.count({ metadata: { tag, i: 1 } }), 1);
    assert.equal(await client.threads.count({ metadata: { tag }, status: 'busy' }), 0);
    assert.equal(await jsonResponse(await post('/threads/count', { metadata: { tag } })), 3);

    const failing = await client.threads.create();
    const bad = await client.runs.create(failing.thread_id, 'agent', { input: null, checkpointId: randomUUID() });
    await runReaches(client, failing.thread_id, bad.run_id, ['error']);
    const t = await client.threads.get(failing.thread_id);
    assert.equal(t.status, 'error');
    assert.deepEqual(t.interrupts, {});

    const busy = await client.threads.create();
    const slow = await client.runs.create(busy.thread_id, 'agent', { input: question('take your time') });
    await rejectsWith(client.threads.updateState(busy.thread_id, { values: { approved: 'no' } }), 409, /^Thread is busy$/);
    await runReaches(client, busy.thread_id, slow.run_id, ['success']);
    const update = await client.threads.updateState(busy.thread_id, { values: { approved: 'late' } });
    assert.ok(update.checkpoint.checkpoint_id, 'once the run is over the update goes through');
  });
});

describe('POST /threads with supersteps: the gateway has a worker of the graph make the state', () => {
  test('rest.state.bulk goes to the graph\'s workers with the supersteps; the thread is answered once they answer', async () => {
    const redis = await startRedis();
    const tc = await startThreadcast({ redisUrl: redis.url });
    const rc = redisClient(redis.port);
    try {
      await tc.ready();
      // A scripted worker of graph "bulk": it registers, reads its stream and answers what it is asked.
      const K = '{tc:commands}';
      await rc.cmd('FCALL', 'threadcast_register', 2, `${K}:w:bulk`, `${K}:assistants`, 'bulk', 'scripted', 60000);
      await rc.cmd('XGROUP', 'CREATE', `${K}:a:bulk`, 'workers', '0', 'MKSTREAM');
      const asked = [];
      const serving = (async () => {
        for (let i = 0; i < 2; i++) {
          const got = await rc.cmd('XREADGROUP', 'GROUP', 'workers', 'scripted', 'COUNT', 1, 'BLOCK', 10000, 'STREAMS', `${K}:a:bulk`, '>');
          const [, [[, f]]] = got[0];
          const e = {};
          for (let j = 0; j < f.length; j += 2) e[f[j]] = f[j + 1];
          asked.push({ thread: e.thread, method: e.method, params: JSON.parse(e.params) });
          const answer = i === 0 ? { type: 'success', result: { checkpoint: { checkpoint_id: 'c1' } } }
            : { type: 'error', error: 'unknown_command', message: 'this worker does not handle rest.state.bulk' };
          await rc.cmd('SPUBLISH', e.reply, JSON.stringify({ corr: e.corr, ...answer }));
        }
      })();
      const create = (json) => tc.http('/threads', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(json) });
      const supersteps = [{ updates: [{ values: { n: 1 }, as_node: '__input__' }] }, { updates: [{ values: { n: 2 }, as_node: 'step' }] }];
      const made = await jsonResponse(await create({ thread_id: 'bulk-1', metadata: { graph_id: 'bulk' }, supersteps }));
      assert.deepEqual([made.thread_id, made.metadata], ['bulk-1', { graph_id: 'bulk' }]);
      assert.deepEqual(asked[0], { thread: 'bulk-1', method: 'rest.state.bulk',
        params: { thread_id: 'bulk-1', metadata: { graph_id: 'bulk' }, supersteps } });
      // A worker that cannot: 501 with its words; the thread is there (as the reference server leaves it).
      await errorResponse(await create({ thread_id: 'bulk-2', metadata: { graph_id: 'bulk' }, supersteps }), 501, /does not handle rest\.state\.bulk/);
      assert.equal((await tc.http('/threads/bulk-2')).status, 200);
      await serving;
      await errorResponse(await create({ supersteps }), 400, /^Thread [0-9a-f-]{36} has no graph ID$/);
      assert.deepEqual(tc.sanitizerReports(), []);
    } finally {
      rc.close();
      await tc.stop();
      await redis.cleanup();
    }
  });
});

describe('POST /internal/truncate', () => {
  test('only with --test-truncate: wipes threads, runs, assistants (but the system ones) and the store', async () => {
    const redis = await startRedis();
    const off = await startThreadcast({ redisUrl: redis.url });
    const on = await startThreadcast({ redisUrl: redis.url, env: { THREADCAST_TEST_TRUNCATE: '1' } });
    try {
      await Promise.all([off.ready(), on.ready()]);
      const call = (g, p, json) => g.http(p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(json) });
      const off404 = await call(off, '/internal/truncate', { threads: true });
      assert.equal(off404.status, 404, 'no such route without the setting');
      assert.equal((await off404.json()).error, 'not_found');
      const thread = await (await call(on, '/threads', { metadata: { doomed: true } })).json();
      assert.equal((await on.http('/store/items', { method: 'PUT', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ namespace: ['t'], key: 'k', value: { v: 1 } }) })).status, 204);
      const r = await call(on, '/internal/truncate', { runs: true, threads: true, assistants: true, store: true, checkpoint: true });
      assert.deepEqual([r.status, await r.json()], [200, { ok: true }]);
      assert.equal((await on.http(`/threads/${thread.thread_id}`)).status, 404);
      assert.equal(await (await on.http('/store/items?namespace=t&key=k')).json(), null);
      assert.equal(await (await call(on, '/threads/count', {})).json(), 0);
      assert.deepEqual(on.sanitizerReports(), []);
    } finally {
      await off.stop();
      await on.stop();
      await redis.cleanup();
    }
  });
});
