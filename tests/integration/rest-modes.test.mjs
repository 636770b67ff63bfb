// A run's stream modes as the Agent Server (@langchain/langgraph-api) sends
// them (issue 26), through @langchain/langgraph-sdk's runs.stream / joinStream
// and as raw HTTP, against two gateways behind HAProxy and two LangGraph
// workers serving lib/mode-graphs.mjs: graphs that run as they would anywhere
// else (a model's answer stays a string in the state), every mode's shape,
// the ids (0 the metadata, then 1, 2, 3 …, the same on every gateway, so a
// stream resumes on either), interrupts, the error's class, and what the
// worker adds for the REST modes: never seen by the protocol's subscribers,
// and only for the runs that ask for it.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopAll, connect, storedEvents, waitUntil } from './lib/harness.mjs';
import { restStack, collect, assertIds, tuples, assembleTuples, jsonResponse, openSse, randomUUID, lines } from './lib/rest.mjs';

after(stopAll);

const here = path.dirname(fileURLToPath(import.meta.url));
const modeGraphs = path.join(here, 'lib/mode-graphs.mjs');
const hi = { messages: [{ role: 'user', content: 'hi', id: 'hi-1' }] };
const names = (parts) => parts.map((p) => p.event);

describe('stream modes as the Agent Server sends them', () => {
  let s;
  let client;
  before(async () => {
    s = await restStack({ graphs: modeGraphs });
    client = s.client();
  });
  after(async () => { await s?.done(); });

  const thread = async () => (await client.threads.create()).thread_id;
  const stream = (tid, assistant, payload) => collect(client.runs.stream(tid, assistant, payload)).done;

  test('a model\'s answer stays a string in the graph\'s state: the graph ends as it would anywhere else', async () => {
    const tid = await thread();
    const parts = await stream(tid, 'loop', { input: hi, streamMode: 'updates' });
    assert.deepEqual(parts.filter((p) => p.event === 'updates').map((p) => Object.keys(p.data)[0]), ['model', 'tool', 'model']);
    const state = await client.threads.getState(tid);
    assert.deepEqual(state.values.messages.map((m) => [m.type, m.content]),
      [['human', 'hi'], ['ai', 'begin'], ['tool', 'tool_call__begin'], ['ai', 'end']]);
    // the example graph too: its models' answers, strings in its own state
    const tid2 = await thread();
    await client.runs.wait(tid2, 'agent', { input: { messages: [{ role: 'user', content: 'otters' }] } });
    const ai = (await s.head(tid2)).messages.filter((m) => m.type === 'ai');
    assert.ok(ai.length >= 3 && ai.every((m) => typeof m.content === 'string'), JSON.stringify(ai.map((m) => m.content)));
  });

  test('metadata {run_id, attempt} as id 0, then 1, 2, 3 …; values; an interrupt_before stop ends with {"__interrupt__": []}', async () => {
    const tid = await thread();
    const parts = await stream(tid, 'loop', { input: hi, interruptBefore: ['tool'] });
    assert.deepEqual(parts.map((p) => p.id), parts.map((_, i) => String(i)));
    assert.deepEqual(parts[0], { id: '0', event: 'metadata', data: { run_id: parts[0].data.run_id, attempt: 1 } });
    assert.deepEqual(names(parts), ['metadata', 'values', 'values', 'values']);
    assert.deepEqual(parts[2].data.messages.map((m) => m.content), ['hi', 'begin']);
    assert.deepEqual(parts[3].data, { __interrupt__: [] });
    assert.deepEqual((await client.threads.getState(tid)).next, ['tool']);
    // a wait answers the last values event, as the Agent Server does
    const tid2 = await thread();
    assert.deepEqual(await client.runs.wait(tid2, 'loop', { input: hi, interruptBefore: ['tool'] }), { __interrupt__: [] });
  });

  test('messages-tuple: the model\'s tokens and the message a node returned without streaming it', async () => {
    const tid = await thread();
    const parts = await stream(tid, 'loop', { input: hi, streamMode: 'messages-tuple' });
    assert.deepEqual([...new Set(names(parts))], ['metadata', 'messages']);
    const ts = tuples(parts);
    assert.deepEqual(ts.map((t) => t.chunk.content), [...'begin', 'tool_call__begin', ...'end']);
    assert.deepEqual(assembleTuples(ts).map((m) => [m.text, [...m.nodes][0], [...m.types][0]]),
      [['begin', 'model', 'ai'], ['tool_call__begin', 'tool', 'tool'], ['end', 'model', 'ai']]);
  });

  test('messages-tuple without streamSubgraphs: a subgraph\'s message once, whole, from the node that ran the subgraph (as LangGraph streams it)', async () => {
    const tid = await thread();
    const parts = await stream(tid, 'agent', { input: { messages: [{ role: 'user', content: 'otters' }] }, streamMode: 'messages-tuple' });
    const ts = tuples(parts);
    assert.deepEqual([...new Set(names(parts))], ['metadata', 'messages'], 'no subgraph event');
    const { messages } = (await client.threads.getState(tid)).values;
    const summary = messages.at(-1);
    assert.equal(summary.content, lines.summary);
    assert.deepEqual(ts.filter((t) => t.chunk.id === summary.id).map((t) => [t.chunk.content, t.meta.langgraph_node, t.meta.langgraph_checkpoint_ns]),
      [[lines.summary, 'researcher', '']]);
    // every AI message of the state is on the stream with the state's text
    const streamed = assembleTuples(ts);
    assert.deepEqual(messages.filter((m) => m.type === 'ai').map((m) => streamed.find((x) => x.id === m.id)?.text), messages.filter((m) => m.type === 'ai').map((m) => m.content));
  });

  test('messages: metadata and partials as the model streams, complete for the root values\' new messages', async () => {
    const tid = await thread();
    const parts = await stream(tid, 'loop', { input: hi, streamMode: ['messages', 'values'] });
    assert.deepEqual([...new Set(names(parts))].sort(),
      ['messages/complete', 'messages/metadata', 'messages/partial', 'metadata', 'values']);
    assert.equal(parts.at(-1).event, 'messages/complete');
    const partial = new Map();
    const completed = [];
    for (const p of parts) {
      if (p.event === 'messages/metadata') assert.deepEqual(Object.keys(p.data).length, 1);
      if (p.event === 'messages/partial') partial.set(p.data[0].id, p.data[0].content);
      if (p.event === 'messages/complete') {
        for (const m of p.data) {
          if (m.type === 'ai') assert.equal(m.content, partial.get(m.id), 'the last partial is the message');
          completed.push(m.content);
        }
      }
    }
    assert.deepEqual(completed, ['hi', 'begin', 'tool_call__begin', 'end']);
    assert.deepEqual([...partial.values()], ['begin', 'end']);
  });

  test('an error event named by the exception\'s class; runs.wait\'s __error__ too; GraphRecursionError', async () => {
    const tid = await thread();
    const parts = await stream(tid, 'failing', { input: hi, streamMode: 'values' });
    assert.deepEqual(parts.at(-1), { id: String(parts.length - 1), event: 'error', data: { error: 'CustomError', message: 'it went boom' } });
    await assert.rejects(client.runs.wait(await thread(), 'failing', { input: hi }), /CustomError: it went boom/);
    await assert.rejects(client.runs.wait(await thread(), 'loop', { input: hi, config: { recursion_limit: 2 } }), /^Error: GraphRecursionError: /);
  });

  test('checkpoints from the input checkpoint (step -1), tasks in between, debug checkpoints that are the history\'s', async () => {
    const tid = await thread();
    const parts = await stream(tid, 'loop', { input: hi, streamMode: ['tasks', 'checkpoints'] });
    const cps = parts.filter((p) => p.event === 'checkpoints').map((p) => p.data);
    assert.deepEqual(cps.map((c) => [c.metadata.source, c.metadata.step, c.next]),
      [['input', -1, ['__start__']], ['loop', 0, ['model']], ['loop', 1, ['tool']], ['loop', 2, ['model']], ['loop', 3, []]]);
    for (const c of cps) assert.deepEqual(Object.keys(c).sort(), ['metadata', 'next', 'values']);
    assert.deepEqual(cps[0].values, { messages: [] });
    const tasks = parts.filter((p) => p.event === 'tasks').map((p) => p.data);
    assert.deepEqual(tasks.map((t) => [t.name, 'result' in t]), [['model', false], ['model', true], ['tool', false], ['tool', true], ['model', false], ['model', true]]);
    assert.deepEqual(tasks[3].result.messages.map((m) => m.content), ['tool_call__begin']);

    const tid2 = await thread();
    const debug = (await stream(tid2, 'loop', { input: hi, streamMode: 'debug' })).filter((p) => p.event === 'debug');
    assert.deepEqual([...new Set(debug.map((p) => p.data.type))].sort(), ['checkpoint', 'task', 'task_result']);
    const mine = debug.filter((p) => p.data.type === 'checkpoint').map((p) => p.data.payload);
    const history = (await client.threads.getHistory(tid2, { limit: mine.length })).reverse();
    assert.deepEqual(mine.map((c) => [c.metadata.step, c.checkpoint, c.parent_checkpoint]),
      history.map((h) => [h.metadata.step, h.checkpoint, h.parent_checkpoint]));
    assert.equal(mine[0].parent_checkpoint, null);
    assert.ok(mine.every((c) => Object.keys(c.config.configurable).every((k) => !k.startsWith('__'))), 'no internal keys');
  });

  test('events: LangChain\'s callback events; tools: LangGraph\'s own tool events', async () => {
    const tid = await thread();
    const parts = await stream(tid, 'loop', { input: hi, streamMode: 'events' });
    assert.deepEqual([...new Set(names(parts))], ['metadata', 'events']);
    assert.deepEqual([...new Set(parts.slice(1).map((p) => p.data.event))].sort(),
      ['on_chain_end', 'on_chain_start', 'on_chat_model_end', 'on_chat_model_start', 'on_chat_model_stream']);
    assert.equal(parts.filter((p) => p.data.event === 'on_chat_model_stream').length, 'beginend'.length);

    const tid2 = await thread();
    const tools = (await stream(tid2, 'agent', { input: { messages: [{ role: 'user', content: 'otters' }] }, streamMode: ['tools'] }))
      .filter((p) => p.event === 'tools').map((p) => p.data);
    assert.deepEqual(tools.map((t) => [t.event, t.name, t.toolCallId]), [['on_tool_start', 'search', 'call_1'], ['on_tool_end', 'search', 'call_1']]);
    assert.deepEqual(JSON.parse(tools[0].input), { query: 'otters' });
    assert.match(tools[1].output.content, /3 results for "otters"/);
  });

  test('joinStream: the same ids on both gateways; Last-Event-ID resumes exactly, on either', async () => {
    const tid = await thread();
    const run = await client.runs.create(tid, 'loop', { input: hi, streamMode: ['values', 'messages-tuple', 'updates'] });
    const whole = await collect(client.runs.joinStream(tid, run.run_id, { lastEventId: '-1' })).done;
    assertIds(whole);
    assert.equal(whole[0].id, '0');
    for (const g of s.gws) {
      const url = `http://127.0.0.1:${g.port}/threads/${tid}/runs/${run.run_id}/stream`;
      const all = await openSse(url, { headers: { 'Last-Event-ID': '-1' } });
      await all.sse.done;
      assert.deepEqual(all.sse.events.map((e) => [e.id, e.event, e.data]), whole.map((p) => [p.id, p.event, p.data]), `gateway ${g.port}`);
      for (const from of ['0', '5', String(whole.length - 2)]) {
        const rest = await openSse(url, { headers: { 'Last-Event-ID': from } });
        await rest.sse.done;
        assert.deepEqual(rest.sse.events.map((e) => [e.id, e.event, e.data]),
          whole.filter((p) => Number(p.id) > Number(from)).map((p) => [p.id, p.event, p.data]), `gateway ${g.port} after ${from}`);
      }
    }
  });

  test('the worker\'s side events: only for the runs that ask, never to the protocol\'s subscribers', async () => {
    const tid = randomUUID();
    await client.threads.create({ threadId: tid });
    const ws = await connect(`ws://127.0.0.1:${s.gws[0].port}/threads/${tid}/stream/events`);
    const every = ['values', 'updates', 'messages', 'tools', 'lifecycle', 'input', 'checkpoints', 'tasks', 'custom'];
    assert.equal((await ws.request({ id: 1, method: 'subscription.subscribe', params: { channels: every } })).type, 'success');
    await stream(tid, 'loop', { input: hi, streamMode: ['values'] });
    const plain = (await storedEvents(s.rc, tid)).filter((e) => e.method === 'custom:threadcast.modes').map((e) => e.params.data.mode);
    assert.deepEqual(plain, [], 'a values stream records no debug chunks nor callback events');
    await stream(tid, 'loop', { input: hi, streamMode: ['debug', 'events'] });
    const modes = new Set((await storedEvents(s.rc, tid)).filter((e) => e.method === 'custom:threadcast.modes').map((e) => e.params.data.mode));
    assert.deepEqual([...modes].sort(), ['debug', 'events']);
    const ended = () => ws.events.filter((e) => e.method === 'lifecycle' && !e.params.namespace.length && e.params.data.event === 'completed');
    await waitUntil(() => ended().length === 2, 10000, 'both runs to end on the subscriber');
    assert.deepEqual(ws.events.filter((e) => !every.includes(e.method) && !e.method.startsWith('input.')), [], 'nothing but the channels asked for');
    assert.ok(ws.events.some((e) => e.method === 'messages'));
    // asked for by its name, a subscriber gets them
    const named = await connect(`ws://127.0.0.1:${s.gws[1].port}/threads/${tid}/stream/events`);
    const r = await named.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['custom:threadcast.modes'] } });
    assert.ok(r.result.replayed_events > 0 || (await waitUntil(() => named.events.length > 0, 5000, 'the side events')));
    await ws.close();
    await named.close();

    // a join asking for events of a run that did not: none (they were never recorded)
    const run = await client.runs.create(tid, 'loop', { input: hi });
    await client.runs.join(tid, run.run_id);
    const joined = await collect(client.runs.joinStream(tid, run.run_id, { lastEventId: '-1', streamMode: ['events', 'values'] })).done;
    assert.deepEqual([...new Set(names(joined))], ['metadata', 'values']);
  });

  test('raw HTTP: the same stream, "tools" accepted as a stream mode, a wait\'s __error__', async () => {
    const tid = await thread();
    const { res, sse } = await openSse(`${s.apiUrl}/threads/${tid}/runs/stream`, { method: 'POST',
      json: { assistant_id: 'loop', input: hi, stream_mode: ['updates', 'tools'] } });
    assert.equal(res.status, 200);
    await sse.done;
    assert.deepEqual(sse.events.map((e) => [e.id, e.event]), [['0', 'metadata'], ['1', 'updates'], ['2', 'updates'], ['3', 'updates']]);
    const wait = await jsonResponse(await s.http(`/threads/${await thread()}/runs/wait`, { method: 'POST', json: { assistant_id: 'failing', input: hi } }));
    assert.deepEqual(wait, { __error__: { error: 'CustomError', message: 'it went boom' } });
  });
});
