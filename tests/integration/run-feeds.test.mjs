// A run's stream is translated once per gateway and shared (src/run/feed.h):
// every viewer of one run in one format gets the same units, whenever it
// joins, while the gateway translates each of the run's events once; a
// viewer that needs units the feed's log no longer holds gets the run whole
// from a feed of its own. Raw HTTP against one gateway (its /metrics count
// the translation), a LangGraph worker serving lib/rest-graphs.mjs.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, startWorker, redisClient, storedEvents, stopAll } from './lib/harness.mjs';
import { graphsModule, question, openSse, assertFraming, sleep, waitUntil } from './lib/rest.mjs';

after(stopAll);

const MODES = ['values', 'updates', 'messages-tuple'];

/** A counter or gauge of the gateway's /metrics. */
async function metric(gw, name) {
  const text = await (await fetch(`http://127.0.0.1:${gw.port}/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(text);
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

/** Events of the thread's stream from the one after `after` through the run's root end. */
async function runEvents(rc, thread, afterSeq) {
  const all = (await storedEvents(rc, thread)).filter((e) => e.seq > afterSeq);
  const end = all.findIndex((e) => e.method === 'lifecycle' && e.params.namespace.length === 0
    && ['completed', 'failed', 'interrupted'].includes(e.params.data.event));
  assert.ok(end >= 0, 'the run ended');
  return all.slice(0, end + 1);
}

/** [id, event, data] of each event: what two viewers must agree on. */
const units = (events) => events.map((e) => [e.id, e.event, e.data]);

describe('one translation per run and format, shared by its viewers', () => {
  let redis, gw, worker, rc;
  const base = () => `http://127.0.0.1:${gw.port}`;
  before(async () => {
    redis = await startRedis();
    // A small queue bound keeps the feeds' logs small (4 queues' worth, 16
    // KiB; a run of "agent" makes about 38 KiB): the second test outgrows one.
    gw = await startThreadcast({ redisUrl: redis.url, args: ['--max-queue-bytes', '4096'] });
    await gw.ready();
    worker = await startWorker(redis.url, { name: 'feeds', args: ['--graphs', graphsModule],
      env: { THREADCAST_FAKE_TOKEN_MS: '25' } });
    rc = redisClient(redis.port);
  });
  after(async () => {
    rc?.close();
    await worker?.kill('SIGTERM');
    const reports = gw?.sanitizerReports() ?? [];
    await gw?.stop();
    await redis?.cleanup();
    assert.deepEqual(reports, [], 'no sanitizer report');
  });

  /** A thread and a background run of "agent" on it; resolves {tid, run}. */
  async function backgroundRun(q) {
    const tid = (await (await fetch(`${base()}/threads`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).json()).thread_id;
    const res = await fetch(`${base()}/threads/${tid}/runs`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'agent', input: question(q), stream_mode: MODES }),
    });
    assert.equal(res.status, 200);
    return { tid, run: await res.json() };
  }

  /** Joins the run's stream from its start (Last-Event-ID -1); onEvent(ev) for each event. */
  async function viewer(tid, rid, onEvent) {
    const { res, sse } = await openSse(`${base()}/threads/${tid}/runs/${rid}/stream`, { headers: { 'last-event-id': '-1' } }, { onEvent });
    assert.equal(res.status, 200);
    return sse;
  }

  test('viewers joining at different moments get the same stream; the run is translated once', async () => {
    const events0 = await metric(gw, 'threadcast_run_events_translated_total');
    const units0 = await metric(gw, 'threadcast_run_units_total');
    const { tid, run } = await backgroundRun('how do otters sleep?');
    const viewers = [];
    for (let i = 0; i < 6; i++) {
      viewers.push(await viewer(tid, run.run_id));
      await sleep(150); // the later ones catch up from the feed's log
    }
    await Promise.all(viewers.map((v) => v.done));
    const first = viewers[0].events;
    assertFraming(first);
    assert.equal(first[0].event, 'metadata');
    assert.ok(first.some((e) => e.event === 'messages'), 'the model streamed');
    for (const [i, v] of viewers.entries()) assert.deepEqual(units(v.events), units(first), `viewer ${i} got the stream the first one got`);

    const expected = await runEvents(rc, tid, Number(first[0].id) >> 3);
    assert.equal(await metric(gw, 'threadcast_run_events_translated_total') - events0, expected.length,
      'each of the run\'s events translated once, not once per viewer');
    assert.equal(await metric(gw, 'threadcast_run_units_total') - units0, first.length - 1,
      'the units one viewer got (its metadata is its own) were made once');
    await waitUntil(async () => await metric(gw, 'threadcast_run_feeds') === 0, 5000, 'the feed to go with its last viewer');
  });

  // One unit goes to every viewer of a feed in one turn of the gateway's loop: they are written in
  // the order they joined. A run's starter joins first; written last, it waited for the writes to
  // every viewer after it, and an app holding a starter and its viewers read its tokens last.
  test('each unit is written to the viewers in the order they joined', async () => {
    const { tid, run } = await backgroundRun('tell me how sea otters keep warm in cold water');
    const arrivals = []; // [viewer, unit id, ms], in the order the units reached this process
    const viewers = [];
    for (let i = 0; i < 6; i++) viewers.push(await viewer(tid, run.run_id, (ev) => arrivals.push([i, ev.id, performance.now()])));
    // Once the later ones caught up from the feed's log (their first writes may still wait on the socket):
    await waitUntil(() => viewers.every((v) => v.events.length === viewers[0].events.length), 10000, 'the viewers to catch up');
    await sleep(100);
    const joined = arrivals.length; // every unit after this one went out to all six, each at once
    await Promise.all(viewers.map((v) => v.done));
    const units = new Map(); // id → {order, first, last}
    for (const [i, id, at] of arrivals.slice(joined)) {
      const u = units.get(id) ?? { order: [], first: at, last: at };
      u.order.push(i);
      u.last = at;
      units.set(id, u);
    }
    // The order this process reads six sockets in is the order they were written only when it was
    // waiting for them: a unit that came while it still read the one before (a busy machine) can
    // find some sockets still readable from it, and those are read first. The model's tokens are
    // 25 ms apart: a unit is kept if this process had read the one before it 5 ms before it came.
    const kept = [];
    let before = null;
    for (const u of units.values()) {
      if (u.order.length === 6 && before && u.first - before.last >= 5) kept.push(u.order);
      before = u;
    }
    assert.ok(kept.length >= 5, `units the six got, one at a time, after they all joined: ${kept.length}`);
    for (const o of kept) assert.deepEqual(o, [0, 1, 2, 3, 4, 5], 'a unit reached the viewers in the order they joined');
  });

  test('a viewer that needs units the log no longer holds gets the run whole from a feed of its own', async () => {
    const events0 = await metric(gw, 'threadcast_run_events_translated_total');
    const { tid, run } = await backgroundRun('tell me everything about sea otters and their rafts');
    const early = await viewer(tid, run.run_id);
    // Once the run's output is past the log's bound (4 x 4 KiB), a viewer from the start.
    await waitUntil(() => early.events.reduce((n, e) => n + e.rawData.length, 0) > 24 * 1024, 30000, 'the stream to outgrow the log');
    const late = await viewer(tid, run.run_id);
    const both = await metric(gw, 'threadcast_run_feeds');
    await Promise.all([early.done, late.done]);
    assert.equal(both, 2, 'the late viewer had a feed of its own');
    assert.deepEqual(units(late.events), units(early.events), 'the late viewer got the whole run, as the early one did');
    const expected = await runEvents(rc, tid, Number(early.events[0].id) >> 3);
    assert.equal(await metric(gw, 'threadcast_run_events_translated_total') - events0, 2 * expected.length,
      'two feeds, each translating the run once');
  });
});
