// The Python worker's faults, end to end (protocol/README.md, "When a worker dies"): two Python
// workers behind the gateway, the example graph's model slowed to 80 ms a token so a run is
// mid-message when the fault comes. A worker SIGKILLed mid-run: the other takes the run over
// about 3 s later from the last checkpoint, the cut message closed with worker_lost, one run
// with one id, a REST stream joined across it sees everything once but the step that runs
// again. A worker SIGSTOPped past its lease, then SIGCONTed: its appends are FENCED, it stops
// and leaves the run to the worker that took it over. A worker closing (SIGTERM) lets its runs
// run for its grace, then leaves them to another. Redis restarted mid-run (appendonly): the
// run goes on where it was, nothing taken over. (python-worker.test.mjs has the rest.)
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stopAll, waitUntil, storedEvents, startRedis, redisClient, sleep } from './lib/harness.mjs';
import { assertIds } from './lib/rest.mjs';
import { stack, lines, transcriptOf, question, ok, ALL, isRoot, rootEvents, ended, assemble, textOf } from './lib/python.mjs';

after(stopAll);

let s;
before(async () => { s = await stack({ tokenMs: 80, appendonly: true }); });
after(async () => { await s?.done(); });

/** Waits until the thread's run is mid-answer (the model's second message, some of its text out). */
async function midAnswer(ws, q) {
  await waitUntil(() => (assemble(ws.events).find((m) => m.node === 'model' && lines.answer(q).startsWith(m.text) &&
    m.text.length >= 8)), 30000, 'the answer streaming');
}

/** The worker holding the thread's lock (running its run). */
async function holder(thread) {
  const owner = await s.rc.cmd('GET', `tc:{${thread}}:lg:lock`);
  const w = s.workers.find((x) => x.name === owner && x.alive());
  assert.ok(w, `a live worker runs thread ${thread}: ${owner}`);
  return w;
}

/**
 * Once the run is over, what a takeover must leave: one root started, no failure, completed; the
 * messages the client assembled are the state's, whole, with the state's ids; `cut` messages were
 * closed with worker_lost, each a beginning of the answer (the step ran again).
 */
async function whole(ws, q, { cut = 1, echoed = true } = {}) {
  const end = await ended(ws, 1, 60000);
  assert.deepEqual(end.params.data.event, 'completed');
  assert.deepEqual(rootEvents(ws.events), ['started', 'completed']);
  const state = await ok(ws, 'state.get', { namespace: [] });
  // (A REST run's input is not shown: its human message is in the state only.)
  const kept = state.values.messages.filter((m) => m.type !== 'tool' && (echoed || m.type !== 'human'));
  const msgs = assemble(ws.events);
  const done = msgs.filter((m) => m.done);
  assert.deepEqual(done.map((m) => m.id), kept.map((m) => m.id));
  assert.deepEqual(done.map((m) => m.text), transcriptOf(q).slice(echoed ? 0 : 1));
  assert.deepEqual(state.values.messages.filter((m) => m.type !== 'tool').map(textOf), transcriptOf(q));
  const lost = msgs.filter((m) => !m.done);
  assert.deepEqual(lost.map((m) => m.error), Array(cut).fill('worker_lost'));
  for (const m of lost) assert.ok(lines.answer(q).startsWith(m.text) && m.text.length < lines.answer(q).length, m.text);
  return { state, msgs };
}

describe('the Python worker\'s faults', () => {
  test('a worker SIGKILLed mid-run: the other takes the run over from the last checkpoint about 3 s later; a REST stream joined across it sees it all, once', { timeout: 90000 }, async () => {
    const client = s.client();
    const { thread_id: thread } = await client.threads.create();
    const q = 'a question for a worker that dies';
    const ws = await s.ws(thread);
    await ok(ws, 'subscription.subscribe', { channels: ALL });
    const parts = [];
    const streaming = (async () => {
      for await (const p of client.runs.stream(thread, 'agent', { input: question(q), streamMode: ['updates', 'values', 'messages-tuple'] })) parts.push(p);
    })();
    await midAnswer(ws, q);
    const victim = await holder(thread);
    const survivor = s.workers.find((w) => w !== victim && w.alive());
    const seqAtKill = ws.events.at(-1).seq;
    const killedAt = Date.now();
    await victim.kill('SIGKILL');
    await streaming;
    const { state } = await whole(ws, q, { echoed: false });

    // Taken over by the survivor, from the last checkpoint, about 3 s later (claim-idle and lease: 3 s).
    const took = survivor.logs.find((l) => l.msg === 'taking over a run' && l.thread === thread);
    assert.equal(took?.from, 'the last checkpoint');
    const next = ws.events.find((e) => e.seq > seqAtKill);
    assert.deepEqual(next.params.data.code, 'worker_lost', 'the first event after the kill closes the cut message');
    const after = next.params.timestamp - killedAt;
    assert.ok(after >= 2000 && after <= 7000, `taken over ${after} ms after the kill`);

    // One run, its id throughout; its REST record says success.
    const runId = parts[0].data.run_id;
    assert.equal(parts[0].event, 'metadata');
    assert.equal((await client.runs.get(thread, runId)).status, 'success');
    assert.deepEqual((await client.runs.list(thread)).map((r) => r.run_id), [runId]);
    assert.equal((await storedEvents(s.rc, thread)).filter(isRoot)[0].params.data.runId, runId);

    // The REST stream: every event once, in order; each step's update once (the cut step made none);
    // the last values the state; exactly as a replay of the run from its start.
    assertIds(parts.slice(1));
    assert.deepEqual(parts.filter((p) => p.event === 'updates').map((p) => Object.keys(p.data)[0]), ['model', 'tools', 'model', 'researcher', 'approve']);
    assert.deepEqual(parts.filter((p) => p.event === 'values').at(-1).data, state.values);
    const replay = [];
    for await (const p of client.runs.joinStream(thread, runId, { lastEventId: '-1' })) replay.push(p);
    assert.deepEqual(replay.filter((p) => p.event !== 'metadata'), parts.slice(1));
    // Its messages: the cut answer's beginning under one id, then the answer again under another.
    const texts = new Map();
    for (const p of parts.filter((x) => x.event === 'messages')) {
      const [chunk] = p.data;
      texts.set(chunk.id, (texts.get(chunk.id) ?? '') + textOf(chunk));
    }
    const answers = [...texts.values()].filter((t) => t && lines.answer(q).startsWith(t));
    assert.equal(answers.length, 2, JSON.stringify([...texts]));
    assert.ok(answers[0].length < lines.answer(q).length && answers[1] === lines.answer(q));
    await ws.close();
  });

  test('a worker SIGSTOPped past its lease, then SIGCONTed: its appends are FENCED, it stops; the run is the taker\'s, whole', { timeout: 90000 }, async () => {
    if (s.workers.filter((w) => w.alive()).length < 2) await s.addWorker('py3');
    const thread = 'py-stop';
    const q = 'a question for a worker that stalls';
    const ws = await s.ws(thread);
    await ok(ws, 'subscription.subscribe', { channels: ALL });
    const { run_id: runId } = await ok(ws, 'run.start', { assistant_id: 'agent', input: question(q) });
    await midAnswer(ws, q);
    const stalled = await holder(thread);
    const taker = s.workers.find((w) => w !== stalled && w.alive());
    stalled.proc.kill('SIGSTOP');
    try {
      await taker.waitLog((l) => l.msg === 'taking over a run' && l.thread === thread, 15000);
      await waitUntil(() => ws.events.some((e) => e.params.data?.code === 'worker_lost'), 10000, 'the cut message closed');
    } finally {
      stalled.proc.kill('SIGCONT');
    }
    await stalled.waitLog((l) => /lost the thread's lock/.test(l.msg) && l.thread === thread, 15000);
    await whole(ws, q);
    assert.equal(await s.rc.cmd('HGET', `tc:{${thread}}:lg:run`, 'run_id'), runId, 'one run, its id kept');
    assert.ok(!stalled.logs.some((l) => l.msg === 'run over' && l.thread === thread), 'the stalled worker reported no end');
    assert.ok(taker.logs.some((l) => l.msg === 'run over' && l.thread === thread && l.run_id === runId));
    assert.ok(stalled.alive(), 'it serves on');
    await ws.close();
  });

  test('a worker closing (SIGTERM) lets its run go on for its grace (10 s), then leaves it to another, which goes on from the last checkpoint', { timeout: 90000 }, async () => {
    if (s.workers.filter((w) => w.alive()).length < 2) await s.addWorker('py4');
    const client = s.client();
    const { thread_id: thread } = await client.threads.create();
    const run = await client.runs.create(thread, 'steps', { input: { text: 'slow and long', pause: 6 } });
    await waitUntil(async () => (await s.rc.cmd('GET', `tc:{${thread}}:lg:lock`)) !== null, 10000, 'the run to start');
    const closing = await holder(thread);
    const other = s.workers.find((w) => w !== closing && w.alive());
    const t0 = Date.now();
    closing.proc.kill('SIGTERM');
    const { code } = await closing.exit;
    const tookMs = Date.now() - t0;
    assert.equal(code, 0);
    assert.ok(tookMs >= 9000 && tookMs < 15000, `exited ${tookMs} ms after SIGTERM`);
    const values = await client.runs.join(thread, run.run_id);
    assert.deepEqual(values.log, ['first saw slow and long', 'second done'], 'first ran once: the taker went on after it');
    assert.equal((await client.runs.get(thread, run.run_id)).status, 'success');
    const took = other.logs.find((l) => l.msg === 'taking over a run' && l.thread === thread);
    assert.equal(took?.from, 'the last checkpoint');
    const root = (await storedEvents(s.rc, thread)).filter(isRoot).map((e) => e.params.data.event);
    assert.deepEqual(root, ['started', 'completed']);
  });

  test('Redis restarted mid-run (appendonly): the run goes on where it was, whole, nothing taken over', { timeout: 90000 }, async () => {
    if (s.workers.filter((w) => w.alive()).length < 2) await s.addWorker('py5');
    const thread = 'py-redis-restart';
    const q = 'a question asked while Redis restarts';
    const ws = await s.ws(thread);
    await ok(ws, 'subscription.subscribe', { channels: ALL });
    await ok(ws, 'run.start', { assistant_id: 'agent', input: question(q) });
    await midAnswer(ws, q);
    const runner = await holder(thread);
    await s.redis.stop('SIGTERM');
    s.rc.close();
    s.redis = await startRedis({ appendonly: true, port: s.redis.port, dir: s.redis.dir });
    s.rc = redisClient(s.redis.port);
    await whole(ws, q, { cut: 0 });
    for (const w of s.workers) assert.ok(!w.logs.some((l) => l.msg === 'taking over a run' && l.thread === thread), `${w.name} took nothing over`);
    assert.ok(runner.logs.some((l) => l.msg === 'run over' && l.thread === thread && l.status === 'completed'));
    await ws.close();
  });
});

describe('Redis stalled past the lease and the claim delay', () => {
  test('the worker running the run keeps it: nothing lost, repeated or taken over', { timeout: 90000 }, async () => {
    if (s.workers.filter((w) => w.alive()).length < 2) await s.addWorker('py6');
    const thread = 'py-redis-stall';
    const q = 'a question asked while Redis stalls';
    const ws = await s.ws(thread);
    await ok(ws, 'subscription.subscribe', { channels: ALL });
    await ok(ws, 'run.start', { assistant_id: 'agent', input: question(q) });
    await midAnswer(ws, q);
    const runner = await holder(thread);
    // Every lease lapses and every entry looks idle on Redis' clock when it wakes up.
    s.redis.proc.kill('SIGSTOP');
    await sleep(4500);
    s.redis.proc.kill('SIGCONT');
    await whole(ws, q, { cut: 0 });
    for (const w of s.workers) assert.ok(!w.logs.some((l) => l.msg === 'taking over a run' && l.thread === thread), `${w.name} took nothing over`);
    assert.ok(!runner.logs.some((l) => /lost the thread's lock/.test(l.msg) && l.thread === thread), 'the worker kept the thread');
    await ws.close();
  });
});
