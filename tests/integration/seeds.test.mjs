// The other seeds' stream formats at the edge (issue 18), each checked
// against its seed document with the example LangGraph graph behind
// threadcast (two gateways behind HAProxy, two LangGraph workers):
// - seed 004, typed chunks: GET /threads/:t/runs/:r/chunks (SSE, id = sequence,
//   an end or fail sentinel) and …/chunks/status;
// - seed 003, NDJSON: GET /threads/:t/runs/:r/ndjson (an envelope per line,
//   a final reply line);
// - seed 002, the agent event protocol: POST /v1/agents/:agent/stream (the
//   start/delta/stop stages, continuation, exactly one terminal event), and
//   GET /v1/agents/:agent/threads/:t/runs/:r/stream to resume.
// Each: order, stages and indexes, one terminal, an interrupt round trip,
// and (last) resumption from a sequence after the gateway is SIGKILLed.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stopAll } from './lib/harness.mjs';
import {
  restStack, question, transcript, expectedTranscript, lines, ISO,
  jsonResponse, openSse, openNdjson, waitUntil,
} from './lib/rest.mjs';

after(stopAll);

/* ---- helpers --------------------------------------------------------------------------- */

/** A thread and a run of the example graph on it (REST API): {tid, rid}. */
async function startRun(s, input, extra = {}) {
  const tid = (await jsonResponse(await s.http('/threads', { method: 'POST', json: {} }))).thread_id;
  const run = await jsonResponse(await s.http(`/threads/${tid}/runs`, { method: 'POST', json: { assistant_id: 'agent', ...input, ...extra } }));
  return { tid, rid: run.run_id };
}

/** Another run on the thread, resuming its interrupt with value. */
async function resumeRun(s, tid, value) {
  const run = await jsonResponse(await s.http(`/threads/${tid}/runs`, { method: 'POST', json: { assistant_id: 'agent', command: { resume: value } } }));
  return run.run_id;
}

/** ids "1", "2", … consecutively from first. */
function assertConsecutive(ids, first, what) {
  ids.forEach((id, i) => assert.equal(String(id), String(first + i), `${what}: id ${i}`));
}

/* ---- seed 004 -------------------------------------------------------------------------- */

const TERMINAL004 = (e) => e.data.type === 'end' || e.data.type === 'fail';

function check004(events, rid, least = 10) {
  assert.ok(events.length > least, `a run's worth of chunks: ${events.length}`);
  assertConsecutive(events.map((e) => e.id), 1, 'sequences');
  for (const e of events.slice(0, -1)) {
    assert.equal(e.data.type, 'chunk', JSON.stringify(e.data));
    assert.equal(e.data.sequence, Number(e.id), 'sequence = id');
    assert.equal(typeof e.data.chunk.type, 'string');
    assert.ok(e.data.chunk.agentId === rid || e.data.chunk.agentId.startsWith(`${rid}/`), `agentId: ${e.data.chunk.agentId}`);
    assert.equal(typeof e.data.chunk.timestamp, 'number');
    assert.ok(!TERMINAL004(e), 'the terminal comes last');
  }
  assert.ok(TERMINAL004(events.at(-1)), `ends with end or fail: ${JSON.stringify(events.at(-1).data)}`);
  return events.slice(0, -1).map((e) => e.data.chunk);
}

/* ---- seed 002 -------------------------------------------------------------------------- */

const TERMINALS002 = ['done', 'error', 'aborted'];

/**
 * Checks a seed 002 stream: ids consecutive from 1, metadata first, every
 * event's data names its event, has the request id and an ISO timestamp,
 * each block start → deltas (deltaIndex 0, 1, …) → stop with blockIndex
 * 0, 1, … in order of start, exactly one terminal, last, after every stop.
 * Returns the blocks [{index, event, start, deltas, stop}].
 */
function check002(events) {
  assertConsecutive(events.map((e) => e.id), 1, 'ids');
  assert.equal(events[0].event, 'metadata');
  const requestId = events[0].data.requestId;
  for (const e of events) {
    assert.equal(e.data.event, e.event, 'event: line = data.event');
    assert.equal(e.data.requestId, requestId);
    assert.match(e.data.timestamp, ISO);
  }
  const terminals = events.filter((e) => TERMINALS002.includes(e.event));
  assert.equal(terminals.length, 1, `exactly one terminal: ${events.map((e) => e.event).join(' ')}`);
  assert.equal(events.at(-1), terminals[0], 'the terminal is last');
  const blocks = new Map();
  for (const e of events.filter((x) => x.data.stage)) {
    const st = e.data.stage;
    if (st === 'start') {
      assert.equal(e.data.blockIndex, blocks.size, 'blockIndex counts blocks in order of start');
      assert.equal(e.data.blockId, `b${e.data.blockIndex}`);
      blocks.set(e.data.blockId, { index: e.data.blockIndex, event: e.event, start: e.data, deltas: [], stop: null });
      continue;
    }
    const b = blocks.get(e.data.blockId);
    assert.ok(b, `a ${st} of a started block: ${JSON.stringify(e.data)}`);
    assert.equal(b.event, e.event, 'one event type per block');
    assert.equal(b.stop, null, `nothing after a block's stop: ${JSON.stringify(e.data)}`);
    if (st === 'delta') {
      assert.equal(e.data.deltaIndex, b.deltas.length, 'deltaIndex counts within the block');
      b.deltas.push(e.data.delta);
    } else {
      assert.equal(st, 'stop');
      assert.equal(e.data.blockIndex, b.index);
      b.stop = e.data;
    }
  }
  for (const b of blocks.values()) assert.ok(b.stop, `block ${b.index} stopped`);
  return [...blocks.values()];
}

/* ---- the formats, one stack --------------------------------------------------------------- */

describe('the seeds\' formats over the example graph', () => {
  let s;
  before(async () => { s = await restStack({ tokenMs: 10, gatewayArgs: ['--sse-heartbeat', '300'] }); });
  after(async () => { await s?.done(); });

  test('seed 004: a whole run as chunks, sequences from 1, one end; its status', async () => {
    const q = 'what do chunks say';
    const { tid, rid } = await startRun(s, { input: question(q) });
    const { res, sse } = await openSse(`${s.apiUrl}/threads/${tid}/runs/${rid}/chunks`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    await sse.done;
    assert.equal(sse.error, null);
    const chunks = check004(sse.events, rid);
    assert.equal(sse.events.at(-1).data.type, 'end');
    const root = chunks.filter((c) => c.agentId === rid);
    assert.equal(root.filter((c) => c.type === 'text_delta').map((c) => c.delta).join(''), lines.searching + lines.answer(q));
    assert.ok(root.every((c) => c.agentType === 'agent'), 'the root chunks name the graph');
    const start = chunks.find((c) => c.type === 'tool_start');
    assert.deepEqual([start.toolName, start.arguments], ['search', { query: q }]);
    const end = chunks.find((c) => c.type === 'tool_end');
    assert.equal(end.toolCallId, start.toolCallId);
    assert.equal(end.success, true);
    const subStart = chunks.find((c) => c.type === 'subagent_start');
    const subEnd = chunks.find((c) => c.type === 'subagent_end');
    assert.ok(subStart && subEnd && chunks.indexOf(subStart) < chunks.indexOf(subEnd), 'a sub-agent starts, then ends');
    assert.equal(subEnd.subSessionId, subStart.subSessionId);
    assert.equal(chunks.filter((c) => c.agentId === subStart.subSessionId && c.type === 'text_delta').map((c) => c.delta).join(''), lines.summary);
    assert.ok(chunks.some((c) => c.type === 'state_patch' && c.patches.some((p) => p.op === 'add' && p.path === '/messages/-')), 'message appends as JSON Patch');
    const output = chunks.at(-1);
    assert.equal(output.type, 'output');
    assert.deepEqual(transcript(output.output), expectedTranscript(q));
    assert.deepEqual(await jsonResponse(await s.http(`/threads/${tid}/runs/${rid}/chunks/status`)), { run_id: rid, status: 'ended' });
    // Read again, the same stream byte for byte (a finished run's chunks; heartbeats aside).
    const again = await openSse(`${s.apiUrl}/threads/${tid}/runs/${rid}/chunks`);
    await again.sse.done;
    assert.deepEqual(again.sse.events.map((e) => e.lines), sse.events.map((e) => e.lines));
    // Resumed after sequence k (?last_event_id, as an EventSource's first request can): exactly the rest.
    const k = 7;
    const rest = await openSse(`${s.apiUrl}/threads/${tid}/runs/${rid}/chunks?last_event_id=${k}`);
    await rest.sse.done;
    assert.deepEqual(rest.sse.events.map((e) => [e.id, e.rawData]), sse.events.slice(k).map((e) => [e.id, e.rawData]));
  });

  test('seed 004: status active while the run runs; unknown run 404', async () => {
    const { tid, rid } = await startRun(s, { input: question('a longer one') });
    const st = await jsonResponse(await s.http(`/threads/${tid}/runs/${rid}/chunks/status`));
    assert.equal(st.status, 'active');
    const res = await s.http(`/threads/${tid}/runs/nope/chunks`);
    assert.equal(res.status, 404);
    await waitUntil(async () => (await jsonResponse(await s.http(`/threads/${tid}/runs/${rid}/chunks/status`))).status === 'ended', 30000, 'the run to end');
  });

  test('seed 004: an interrupt round trip (the interrupt chunk, the output, end; the resumed run)', async () => {
    const q = 'please interrupt before answering';
    const { tid, rid } = await startRun(s, { input: question(q) });
    const first = await openSse(`${s.apiUrl}/threads/${tid}/runs/${rid}/chunks`);
    await first.sse.done;
    const chunks = check004(first.sse.events, rid);
    assert.equal(first.sse.events.at(-1).data.type, 'end', 'a run stopped at an interrupt ends well');
    const intr = chunks.find((c) => c.type === 'custom' && c.eventName === 'interrupt');
    assert.equal(intr.data.value.question, 'Approve the answer?');
    const output = chunks.at(-1);
    assert.equal(output.type, 'output');
    assert.deepEqual(output.output.__interrupt__.map((i) => i.value), [intr.data.value]);
    const rid2 = await resumeRun(s, tid, 'yes');
    const second = await openSse(`${s.apiUrl}/threads/${tid}/runs/${rid2}/chunks`);
    await second.sse.done;
    const chunks2 = check004(second.sse.events, rid2, 2);
    assert.equal(second.sse.events.at(-1).data.type, 'end');
    assert.ok(chunks2.some((c) => c.type === 'state_patch' && c.patches.some((p) => p.path === '/approved' && p.value === 'yes')));
    assert.equal(chunks2.at(-1).output.approved, 'yes');
    assert.equal((await s.head(tid)).approved, 'yes');
  });

  /* ---- seed 003 ---- */

  function check003(ls, tid, rid) {
    assert.ok(ls.length > 5, `a run's worth of lines: ${ls.length}`);
    assertConsecutive(ls.map((l) => l.event_id), 1, 'event_id');
    for (const l of ls) assert.equal(l.session_id, tid, 'session_id on every line');
    assert.equal(ls[0].type, 'run_start');
    assert.equal(ls[0].run_id, rid);
    assert.equal(ls[0].agent, 'agent');
    const replies = ls.filter((l) => 'reply' in l);
    assert.equal(replies.length, 1, 'exactly one reply line');
    assert.equal(ls.at(-1), replies[0], 'the reply is last');
    for (const l of ls.slice(0, -1)) assert.equal(typeof l.type, 'string');
    // node spans: every node_enter has its node_exit, same node_id and name, and lines in between carry it
    const open = new Map();
    for (const l of ls.slice(0, -1)) {
      if (l.type === 'node_enter') {
        assert.ok(!open.has(l.node_id), `a new span: ${l.node_id}`);
        open.set(l.node_id, l.id);
      } else if (l.type === 'node_exit') {
        assert.equal(open.get(l.node_id), l.id, `node_exit closes its span: ${JSON.stringify(l)}`);
        open.delete(l.node_id);
      } else if (l.node_id !== undefined) {
        assert.ok(open.has(l.node_id), `a line's node_id is an open span: ${JSON.stringify(l)}`);
      }
    }
    assert.equal(open.size, 0, 'every span closed before the reply');
    return ls;
  }

  test('seed 003: a whole run as NDJSON, the envelope, node spans, the reply line', async () => {
    const q = 'ndjson please';
    const { tid, rid } = await startRun(s, { input: question(q) });
    const { res, nd } = await openNdjson(`${s.apiUrl}/threads/${tid}/runs/${rid}/ndjson`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^application\/x-ndjson/);
    await nd.done;
    assert.equal(nd.error, null);
    const ls = check003(nd.lines, tid, rid);
    assert.equal(ls[0].message, q);
    assert.ok(nd.raw.every((r) => !r.startsWith(':')), 'no comment lines');
    const enters = ls.filter((l) => l.type === 'node_enter').map((l) => l.id);
    assert.deepEqual(enters.slice(0, 3), ['model', 'tools', 'model'], 'the root nodes, in order');
    assert.ok(ls.filter((l) => l.type === 'node_exit').every((l) => l.result === 'Ok'));
    const said = ls.filter((l) => l.type === 'message_chunk' && l.id === 'model').map((l) => l.content).join('');
    assert.equal(said, lines.searching + lines.answer(q));
    const call = ls.find((l) => l.type === 'tool_call');
    assert.deepEqual([call.name, call.arguments], ['search', { query: q }]);
    const tstart = ls.find((l) => l.type === 'tool_start');
    const tend = ls.find((l) => l.type === 'tool_end');
    assert.equal(tstart.call_id, call.call_id);
    assert.equal(tend.call_id, call.call_id);
    assert.equal(tend.is_error, false);
    assert.equal(typeof tend.result, 'string');
    assert.ok(ls.some((l) => l.type === 'values' && typeof l.state === 'object'));
    const reply = ls.at(-1);
    assert.equal(reply.status, 'completed');
    assert.ok([lines.answer(q), lines.summary].includes(reply.reply), `the reply is the last AI message: ${reply.reply}`);
    // resumed after event k: exactly the rest
    const k = 9;
    const rest = await openNdjson(`${s.apiUrl}/threads/${tid}/runs/${rid}/ndjson?last_event_id=${k}`);
    await rest.nd.done;
    assert.deepEqual(rest.nd.raw, nd.raw.slice(k));
  });

  test('seed 003: an interrupt round trip (tool_approval, the interrupted reply; the resumed run)', async () => {
    const q = 'please interrupt the ndjson';
    const { tid, rid } = await startRun(s, { input: question(q) });
    const first = await openNdjson(`${s.apiUrl}/threads/${tid}/runs/${rid}/ndjson`);
    await first.nd.done;
    const ls = check003(first.nd.lines, tid, rid);
    const approval = ls.find((l) => l.type === 'tool_approval');
    assert.equal(approval.arguments.question, 'Approve the answer?');
    assert.equal(ls.at(-1).status, 'interrupted');
    const rid2 = await resumeRun(s, tid, 'no');
    const second = await openNdjson(`${s.apiUrl}/threads/${tid}/runs/${rid2}/ndjson`);
    await second.nd.done;
    const ls2 = check003(second.nd.lines, tid, rid2);
    assert.equal(ls2.at(-1).status, 'completed');
    assert.equal(ls2.filter((l) => l.type === 'values').at(-1).state.approved, 'no');
  });

  /* ---- seed 002 ---- */

  const agentStream = (json, agent = 'agent') => openSse(`${s.apiUrl}/v1/agents/${agent}/stream`, { method: 'POST', json });

  test('seed 002: metadata, the stage pattern with indexes, done with content and usage; heartbeats', async () => {
    const q = 'stages please';
    const { res, sse } = await agentStream({ messages: [{ role: 'user', content: [{ type: 'text', text: q }] }] });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    await sse.done;
    assert.equal(sse.error, null);
    const events = sse.events;
    const blocks = check002(events);
    const meta = events[0].data;
    assert.equal(meta.agentId, 'agent');
    assert.equal(meta.requestId, meta.runId, 'the request is the run');
    assert.match(res.headers.get('location'), new RegExp(`/v1/agents/agent/threads/${meta.threadId}/runs/${meta.runId}/stream$`));
    const texts = blocks.filter((b) => b.event === 'text');
    assert.deepEqual(texts.map((b) => b.deltas.join('')), [lines.searching, lines.answer(q)]);
    assert.deepEqual(texts.map((b) => b.stop.text), [lines.searching, lines.answer(q)]);
    const call = blocks.find((b) => b.event === 'tool_call');
    assert.equal(call.start.toolName, 'search');
    assert.deepEqual(call.stop.input, { query: q });
    const result = blocks.find((b) => b.event === 'tool_result');
    assert.equal(result.start.toolCallId, call.start.toolCallId);
    assert.equal(result.stop.status, 'success');
    assert.ok(call.index < result.index && result.index < texts[1].index, 'blocks in the order they happened');
    const done = events.at(-1);
    assert.equal(done.event, 'done');
    assert.equal(done.data.finishReason, 'stop');
    assert.equal(done.data.threadId, meta.threadId);
    assert.deepEqual(done.data.content.map((c) => c.type), ['text', 'tool_use', 'tool_result', 'text']);
    for (const k of ['inputTokens', 'outputTokens', 'totalTokens']) assert.equal(typeof done.data.usage[k], 'number');
    assert.ok(sse.comments >= 1, `": heartbeat" comments while the run streams (every 300 ms here): ${sse.comments}`);
    assert.match(sse.text, /^: heartbeat$/m);
    assert.deepEqual(transcript(await s.head(meta.threadId)), expectedTranscript(q));
  });

  test('seed 002: continuation, done with action_required; actionResults answer it on the same thread', async () => {
    const q = 'please interrupt the agent';
    const first = await agentStream({ messages: [{ role: 'user', content: q }] });
    await first.sse.done;
    check002(first.sse.events);
    const threadId = first.sse.events[0].data.threadId;
    const cont = first.sse.events.find((e) => e.event === 'continuation');
    assert.equal(cont.data.kind, 'input');
    assert.equal(cont.data.payload.question, 'Approve the answer?');
    assert.equal(typeof cont.data.actionId, 'string');
    assert.equal(first.sse.events.at(-1).data.finishReason, 'action_required');
    // an action the thread does not wait for: 400 invalid_action_id, nothing runs
    const bad = await agentStream({ messages: [], threadId, context: { actionResults: [{ actionId: 'nope', result: 'yes' }] } });
    assert.equal(bad.res.status, 400);
    assert.equal(JSON.parse(bad.body).code, 'invalid_action_id');
    const second = await agentStream({ messages: [], threadId, context: { actionResults: [{ actionId: cont.data.actionId, result: 'yes' }] } });
    await second.sse.done;
    check002(second.sse.events);
    assert.equal(second.sse.events[0].data.threadId, threadId);
    const done = second.sse.events.at(-1);
    assert.equal(done.event, 'done');
    assert.equal(done.data.finishReason, 'stop');
    assert.equal((await s.head(threadId)).approved, 'yes');
  });

  test('seed 002: errors before the stream: the seed\'s status, an error event as the body', async () => {
    const refused = async (json, status, code, agent) => {
      const r = await agentStream(json, agent);
      assert.equal(r.res.status, status, r.body);
      assert.match(r.res.headers.get('content-type'), /^application\/json/);
      const e = JSON.parse(r.body);
      assert.equal(e.event, 'error');
      assert.equal(e.code, code);
      assert.equal(typeof e.message, 'string');
      assert.equal(e.retryable, false);
      assert.match(e.timestamp, ISO);
      return e;
    };
    await refused({}, 400, 'invalid_message_format');
    await refused({ messages: [] }, 400, 'invalid_message_format');
    await refused({ messages: [{ role: 'robot', content: 'hi' }] }, 400, 'invalid_message_format');
    await refused({ messages: [{ role: 'user', content: [{ type: 'image', url: 'x' }] }] }, 400, 'invalid_message_format');
    await refused({ messages: [{ role: 'user', content: 'hi' }], threadId: 'no such thread!' }, 400, 'invalid_message_format');
    await refused({ messages: [{ role: 'user', content: 'hi' }], threadId: 'never-made' }, 404, 'thread_not_found');
    await refused({ messages: [], context: { actionResults: [{ actionId: 'a', result: 1 }] } }, 400, 'invalid_action_id');
    const e = await refused({ messages: [{ role: 'user', content: 'hi' }] }, 404, 'agent_not_found', 'nobody');
    assert.match(e.message, /nobody/);
  });

  test('seed 002: a cancelled run ends in aborted, its open blocks stopped first; a client gone cancels', async () => {
    const { res, sse } = await agentStream({ messages: [{ role: 'user', content: 'cancel me half way' }] });
    await waitUntil(() => sse.events.filter((e) => e.data.stage === 'delta').length >= 2, 30000, 'deltas');
    const meta = sse.events[0].data;
    const c = await s.http(`/threads/${meta.threadId}/runs/${meta.runId}/cancel`, { method: 'POST' });
    assert.ok(c.status < 300, `cancel: ${c.status}`);
    await sse.done;
    check002(sse.events);
    assert.equal(sse.events.at(-1).event, 'aborted');
    assert.equal(res.status, 200);
    // the client goes away mid-run: the run is cancelled (the seed's client cancel)
    const gone = await agentStream({ messages: [{ role: 'user', content: 'leaving early' }] });
    await waitUntil(() => gone.sse.events.some((e) => e.data.stage === 'delta'), 30000, 'a delta');
    const m = gone.sse.events[0].data;
    gone.sse.close();
    await gone.sse.done;
    await waitUntil(async () => (await jsonResponse(await s.http(`/threads/${m.threadId}/runs/${m.runId}`))).status === 'interrupted', 15000, 'the run cancelled');
  });
});

/* ---- resumption through a SIGKILL, all three formats ---------------------------------------- */

describe('each format resumes from its last sequence after the gateway is SIGKILLed', () => {
  test('chunks, NDJSON and the agent event stream: the pieces are exactly the whole', async () => {
    const s = await restStack({ tokenMs: 40 });
    try {
      const direct = `http://127.0.0.1:${s.gws[0].port}`; // every stream on the gateway to be killed
      const a = await startRun(s, { input: question('chunks through a kill') });
      const b = await startRun(s, { input: question('lines through a kill') });
      const chunks = await openSse(`${direct}/threads/${a.tid}/runs/${a.rid}/chunks`);
      const nd = await openNdjson(`${direct}/threads/${b.tid}/runs/${b.rid}/ndjson`);
      const aep = await openSse(`${direct}/v1/agents/agent/stream`, { method: 'POST', json: { messages: [{ role: 'user', content: 'events through a kill' }] } });
      await waitUntil(() => chunks.sse.events.length >= 8 && nd.nd.lines.length >= 8 && aep.sse.events.length >= 8, 30000, 'each stream under way');
      s.gws[0].proc.kill('SIGKILL');
      await Promise.all([chunks.sse.done, nd.nd.done, aep.sse.done]);
      const meta = aep.sse.events[0].data;
      assert.ok(!chunks.sse.events.some(TERMINAL004), 'the chunks stream was cut before its end');
      assert.ok(!aep.sse.events.some((e) => TERMINALS002.includes(e.event)), 'the agent stream was cut before its end');
      // through HAProxy (the survivor), from the last id each received
      const again = (f) => waitUntil(async () => { try { const r = await f(); return r.res.status === 200 ? r : null; } catch { return null; } }, 15000, 'the survivor');
      const c2 = await again(() => openSse(`${s.apiUrl}/threads/${a.tid}/runs/${a.rid}/chunks`, { headers: { 'Last-Event-ID': chunks.sse.events.at(-1).id } }));
      const n2 = await again(() => openNdjson(`${s.apiUrl}/threads/${b.tid}/runs/${b.rid}/ndjson?last_event_id=${nd.nd.lines.at(-1).event_id}`));
      const aepUrl = `${s.apiUrl}/v1/agents/agent/threads/${meta.threadId}/runs/${meta.runId}/stream`;
      const e2 = await again(() => openSse(aepUrl, { headers: { 'Last-Event-ID': aep.sse.events.at(-1).id } }));
      await Promise.all([c2.sse.done, n2.nd.done, e2.sse.done]);
      // the whole of each, read again from the start
      const cFull = await openSse(`${s.apiUrl}/threads/${a.tid}/runs/${a.rid}/chunks`);
      const nFull = await openNdjson(`${s.apiUrl}/threads/${b.tid}/runs/${b.rid}/ndjson`);
      const eFull = await openSse(aepUrl);
      await Promise.all([cFull.sse.done, nFull.nd.done, eFull.sse.done]);
      const ev = (e) => [e.id, e.event ?? null, e.rawData];
      assert.deepEqual([...chunks.sse.events, ...c2.sse.events].map(ev), cFull.sse.events.map(ev), 'chunks: nothing lost, nothing repeated');
      check004(cFull.sse.events, a.rid);
      assert.deepEqual([...nd.nd.raw, ...n2.nd.raw], nFull.nd.raw, 'NDJSON: nothing lost, nothing repeated');
      assert.deepEqual([...aep.sse.events, ...e2.sse.events].map(ev), eFull.sse.events.map(ev), 'agent events: nothing lost, nothing repeated');
      check002(eFull.sse.events);
      assert.equal(eFull.sse.events.at(-1).event, 'done');
    } finally {
      await s.done();
    }
  });
});
