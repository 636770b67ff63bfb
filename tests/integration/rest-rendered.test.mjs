// Runs their worker renders (protocol/README.md, "Run streams": a root `started` with
// `rendered: true`): the gateway passes the worker's `sse` side events through as the run's
// stream, byte for byte, filtered as LangGraph's Python server filters a run stream or a join,
// and answers a wait with the last `values` (or the `error`). The test plays the worker: it takes
// the rest.run entries the gateway's runs leave for assistant "py" and appends the run's events
// with threadcast_append_batch, as a worker does. Read through @langchain/langgraph-sdk and raw HTTP.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@langchain/langgraph-sdk';
import { startRedis, startThreadcast, redisClient, stopAll, waitUntil } from './lib/harness.mjs';
import { openSse, assertFraming } from './lib/rest.mjs';

after(stopAll);

const K = '{tc:commands}';
const SIDE = 'custom:threadcast.modes';

/** A protocol event of the run. */
const event = (method, data, namespace = []) => ({ method, params: { namespace, data } });
/** A rendered unit: the side event {mode: "sse", data: {event: name, data}}, data given as JSON text. */
const unit = (name, text, namespace = []) => ({ unit: [name, text], namespace });

/** The event's JSON text, a unit's data spliced in as written (numbers as the Python server writes them). */
function eventText(e) {
  if (!e.unit) return JSON.stringify(e);
  const [name, text] = e.unit;
  return `{"method":"${SIDE}","params":{"namespace":${JSON.stringify(e.namespace)},`
    + `"data":{"mode":"sse","data":{"event":${JSON.stringify(name)},"data":${text}}}}}`;
}

/** What a stream says of a script's units: [name, data parsed]. */
const units = (script) => script.filter((e) => e.unit).map((e) => [e.unit[0], JSON.parse(e.unit[1])]);

/** [id, event, data] of SDK stream parts. */
const parts = (ps) => ps.map((p) => [p.id, p.event, p.data]);

/** A rendered run that completes: units of most kinds, and what a rendered run ignores between them. */
const SUCCESS = [
  unit('values', '{"messages":[],"n":1.0}'),
  event('values', { n: 99 }), // the protocol's own: not translated
  event(SIDE, { mode: 'values', data: { __interrupt__: [] } }), // a side event of another mode
  unit('updates', '{"agent":{"n":2}}'),
  unit('messages/metadata', '{"m1":{"metadata":{"langgraph_node":"agent"}}}'),
  event('messages', { event: 'message-start', role: 'ai', id: 'm1' }, ['agent:1']),
  unit('messages/partial', '[{"content":"Hi","type":"ai","id":"m1"}]'),
  unit('messages', '[{"content":"Hi","type":"AIMessageChunk","id":"m1"},{"langgraph_node":"agent"}]'),
  event('lifecycle', { event: 'started' }, ['sub:1']),
  unit('values|sub:1', '{"inner": true, "score": 0.50}', ['sub:1']),
  unit('custom', '{"note":"x"}'),
  unit('values', '{"messages":[{"content":"Hi","type":"ai","id":"m1"}],"n":2.0,"big":12345678901234567}'),
];
const SUCCESS_LAST_VALUES = '{"messages":[{"content":"Hi","type":"ai","id":"m1"}],"n":2.0,"big":12345678901234567}';

/** A rendered run that fails: the worker renders its error; the gateway adds none. */
const FAILURE = [
  unit('values', '{"n":1}'),
  unit('error', '{"error":"ValueError","message":"bad input"}'),
];

describe('runs rendered by their worker', () => {
  let redis, gw, rc, client;
  let seen = '-'; // the last rest.run entry taken
  const base = () => `http://127.0.0.1:${gw.port}`;

  before(async () => {
    redis = await startRedis();
    gw = await startThreadcast({ redisUrl: redis.url });
    await gw.ready();
    rc = redisClient(redis.port);
    const registered = await rc.cmd('FCALL', 'threadcast_register', 2, `${K}:w:py`, `${K}:assistants`, 'py', 'test-worker', 600000);
    assert.ok(!(registered instanceof Error), String(registered));
    client = new Client({ apiUrl: base(), apiKey: null });
  });

  after(async () => {
    rc?.close();
    const reports = gw ? gw.sanitizerReports() : [];
    if (gw) await gw.stop();
    await redis?.cleanup();
    assert.deepEqual(reports, [], `no sanitizer report:\n${gw?.stderr}`);
  });

  /** The next run the gateway handed to assistant "py" (its rest.run entry): {runId, threadId}. */
  async function nextRun() {
    const entry = await waitUntil(async () => {
      const rows = await rc.cmd('XRANGE', `${K}:a:py`, seen === '-' ? '-' : `(${seen}`, '+', 'COUNT', 1);
      return rows.length ? rows[0] : null;
    }, 10000, 'a rest.run entry');
    seen = entry[0];
    const f = Object.fromEntries(entry[1].map((v, i, a) => (i % 2 ? null : [v, a[i + 1]])).filter(Boolean));
    assert.equal(f.method, 'rest.run');
    return { runId: f.corr, threadId: f.thread };
  }

  /**
   * Plays a run as its worker: the root started (rendered unless told), the script, the
   * run's end reported, then its root end (so that a client that asks finds the run over).
   */
  async function play({ runId, threadId }, script, { status = 'success', rendered = true } = {}) {
    const start = event('lifecycle', { event: 'started', run_id: runId, graph_name: 'py', ...(rendered ? { rendered: true } : {}) });
    const texts = [start, ...script].map(eventText);
    assert.equal(typeof await rc.cmd('FCALL', 'threadcast_append_batch', 1, threadId, texts.length, ...texts), 'number');
    const [code] = await rc.cmd('FCALL', 'threadcast_rest', 1, K, 'run.finished', JSON.stringify({ body: { run_id: runId, status } }));
    assert.equal(code, 200);
    const end = status === 'success' ? { event: 'completed' } : { event: 'failed', error: 'bad input' };
    assert.equal(typeof await rc.cmd('FCALL', 'threadcast_append', 1, threadId, JSON.stringify(event('lifecycle', end))), 'number');
  }

  /** A run of "py" on a new thread, played with script: {runId, threadId}. */
  async function playedRun(script, opts) {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'py', { streamMode: ['values'] });
    const r = await nextRun();
    assert.equal(r.runId, run.run_id);
    await play(r, script, opts);
    return r;
  }

  const gather = async (gen) => {
    const out = [];
    for await (const p of gen) out.push(p);
    return out;
  };

  test('a run\'s own stream gets every unit its worker rendered, whatever its stream_mode, with ids from 1', async () => {
    const thread = await client.threads.create();
    const stream = gather(client.runs.stream(thread.thread_id, 'py', { streamMode: ['values'], input: {} }));
    const r = await nextRun();
    await play(r, SUCCESS);
    const got = await stream;
    assert.deepEqual(parts(got), [['0', 'metadata', { run_id: r.runId, attempt: 1 }],
      ...units(SUCCESS).map(([name, data], i) => [String(i + 1), name, data])]);
  });

  test('a join gets every unit without stream_mode; with it, the units the Python server\'s filter passes', async () => {
    const r = await playedRun(SUCCESS);
    const all = units(SUCCESS);
    const join = (opts) => gather(client.runs.joinStream(r.threadId, r.runId, { lastEventId: '-1', ...opts }));
    const expect = (keep) => [['0', 'metadata', { run_id: r.runId, attempt: 1 }],
      ...all.filter(([name]) => keep(name)).map(([name, data], i) => [String(i + 1), name, data])];
    assert.deepEqual(parts(await join({})), expect(() => true), 'no stream_mode: every unit');
    assert.deepEqual(parts(await join({ streamMode: ['values'] })), expect((n) => n === 'values' || n === 'values|sub:1'),
      'values: its own name, and its subgraphs\' ("values|…")');
    assert.deepEqual(parts(await join({ streamMode: 'messages-tuple' })), expect((n) => n.startsWith('messages')),
      'messages-tuple: every name that starts with "messages"');
    assert.deepEqual(parts(await join({ streamMode: ['messages'] })), expect((n) => n.startsWith('messages')));
    assert.deepEqual(parts(await join({ streamMode: ['updates', 'custom'] })), expect((n) => n === 'updates' || n === 'custom'));
    assert.deepEqual(parts(await join({ streamMode: ['debug'] })), expect(() => false), 'nothing of a mode the run did not render');
  });

  test('joins that came before the run began follow it live, each with its own filter', async () => {
    const metric = async () => Number(/^threadcast_run_feeds (\d+)$/m.exec(await (await fetch(`${base()}/metrics`)).text())[1]);
    await waitUntil(async () => await metric() === 0, 10000, 'the earlier streams\' feeds to go');
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'py', { streamMode: ['values'] });
    const everything = gather(client.runs.joinStream(thread.thread_id, run.run_id));
    const values = gather(client.runs.joinStream(thread.thread_id, run.run_id, { streamMode: ['values'] }));
    await waitUntil(async () => await metric() === 2, 10000, 'both joins to follow the run (a feed each)');
    await play(await nextRun(), SUCCESS);
    const all = units(SUCCESS);
    const metadata = ['0', 'metadata', { run_id: run.run_id, attempt: 1 }]; // (a pending run is joined from its start)
    assert.deepEqual(parts(await everything), [metadata, ...all.map(([name, data], i) => [String(i + 1), name, data])]);
    assert.deepEqual(parts(await values), [metadata, ...all.filter(([name]) => name.startsWith('values'))
      .map(([name, data], i) => [String(i + 1), name, data])]);
  });

  test('a stream resumed with Last-Event-ID gets exactly what followed that id, with the same ids', async () => {
    const r = await playedRun(SUCCESS);
    const all = units(SUCCESS).map(([name, data], i) => [String(i + 1), name, data]);
    assert.deepEqual(parts(await gather(client.runs.joinStream(r.threadId, r.runId, { lastEventId: '3' }))), all.slice(3));
    assert.deepEqual(parts(await gather(client.runs.joinStream(r.threadId, r.runId, { lastEventId: String(all.length) }))), [],
      'after the last unit: nothing');
    const values = all.filter(([, name]) => name.startsWith('values')).map(([, name, data], i) => [String(i + 1), name, data]);
    assert.deepEqual(parts(await gather(client.runs.joinStream(r.threadId, r.runId, { lastEventId: '1', streamMode: ['values'] }))),
      values.slice(1), 'a filtered stream resumes in its own numbering');
    // Raw: what followed id 5, byte for byte.
    const { res, sse } = await openSse(`${base()}/threads/${r.threadId}/runs/${r.runId}/stream`, { headers: { 'last-event-id': '5' } });
    assert.equal(res.status, 200);
    await sse.done;
    assert.deepEqual(sse.events.map((e) => [e.id, e.event, e.rawData]),
      SUCCESS.filter((e) => e.unit).slice(5).map((e, i) => [String(i + 6), ...e.unit]));
  });

  test('the units are the worker\'s bytes: numbers and spacing as it wrote them', async () => {
    const r = await playedRun(SUCCESS);
    const { res, sse } = await openSse(`${base()}/threads/${r.threadId}/runs/${r.runId}/stream`, { headers: { 'last-event-id': '-1' } });
    assert.equal(res.status, 200);
    await sse.done;
    assertFraming(sse.events);
    assert.deepEqual(sse.events.map((e) => [e.id, e.event, e.rawData]), [
      ['0', 'metadata', JSON.stringify({ run_id: r.runId, attempt: 1 })],
      ...SUCCESS.filter((e) => e.unit).map((e, i) => [String(i + 1), ...e.unit])]);
  });

  test('a wait answers the last values as the worker wrote them', async () => {
    const r = await playedRun(SUCCESS);
    assert.deepEqual(await client.runs.join(r.threadId, r.runId), JSON.parse(SUCCESS_LAST_VALUES));
    const res = await fetch(`${base()}/threads/${r.threadId}/runs/${r.runId}/join`);
    assert.equal(res.status, 200);
    assert.equal((await res.text()).trim(), SUCCESS_LAST_VALUES);
  });

  test('a failed run: the worker\'s error unit and no other; the wait answers {"__error__": its data}', async () => {
    const r = await playedRun(FAILURE, { status: 'error' });
    const got = await gather(client.runs.joinStream(r.threadId, r.runId, { lastEventId: '-1' }));
    assert.deepEqual(parts(got), [['0', 'metadata', { run_id: r.runId, attempt: 1 }],
      ['1', 'values', { n: 1 }], ['2', 'error', { error: 'ValueError', message: 'bad input' }]]);
    assert.deepEqual(parts(await gather(client.runs.joinStream(r.threadId, r.runId, { lastEventId: '-1', streamMode: ['values'] }))),
      [['0', 'metadata', { run_id: r.runId, attempt: 1 }], ['1', 'values', { n: 1 }]], 'the error only to a stream whose modes pass it');
    assert.deepEqual(await client.runs.join(r.threadId, r.runId), { __error__: { error: 'ValueError', message: 'bad input' } });
  });

  test('a run whose started does not say rendered is translated from its protocol events, its sse side events ignored', async () => {
    const r = await playedRun(SUCCESS, { rendered: false });
    const got = await gather(client.runs.joinStream(r.threadId, r.runId, { lastEventId: '-1' }));
    // The join falls back to the run's stream_mode (values): the protocol's values event, and the
    // {"__interrupt__": []} values side event a worker gives for LangGraph's own.
    assert.deepEqual(parts(got), [['0', 'metadata', { run_id: r.runId, attempt: 1 }],
      ['1', 'values', { n: 99 }], ['2', 'values', { __interrupt__: [] }]]);
    assert.deepEqual(await client.runs.join(r.threadId, r.runId), { __interrupt__: [] });
  });
});
