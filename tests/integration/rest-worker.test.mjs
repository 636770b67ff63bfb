// The LangGraph worker's side of the REST API (issue 17), driven through
// Redis alone, as the gateway and threadcast_rest drive it: rest.run and
// rest.cancel entries XADDed to the assistant's command stream, the bridge
// methods (rest.state.get, rest.state.update, rest.history, rest.copy)
// submitted with a reply channel. What the worker reports to threadcast_rest
// (run.started, run.finished) is read from a Redis MONITOR, so the test holds
// whether or not the function library defines threadcast_rest yet.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { startRedis, startWorker, stopAll, waitUntil, storedEvents, redisClient, repoRoot, loadLibrary } from './lib/harness.mjs';
import { Redis } from '../../src/worker/test/fixtures.js';

const graphsModule = path.join(repoRoot, 'src/worker/test/graphs.js');

let redis;
let worker;
let rc;          // raw commands
let mon;         // MONITOR (a raw socket): the FCALLs of threadcast_rest
let sub;         // the reply channel of the bridge methods
const calls = [];        // [{op, args}]
const answers = new Map(); // corr → answer
let corrSeq = 0;

before(async () => {
  redis = await startRedis();
  rc = redisClient(redis.port);
  // The function libraries, as a gateway loads them (the test plays the
  // gateway; a worker loads only threadcast.lua when it finds none).
  await loadLibrary(rc);
  mon = await monitor(redis.port, (args) => {
    if (String(args[0]).toLowerCase() === 'fcall' && args[1] === 'threadcast_rest') calls.push({ op: args[4], args: JSON.parse(args[5]) });
  });
  sub = new Redis(redis.url);
  await sub.ssubscribe('tc:reply:test');
  sub.on('smessage', (_ch, msg) => {
    const m = JSON.parse(msg);
    answers.set(m.corr, m);
  });
  worker = await startWorker(redis.url, { name: 'rest-w1', args: ['--graphs', graphsModule] });
});

after(async () => {
  mon?.destroy();
  sub?.disconnect();
  rc?.close();
  if (worker) await worker.kill('SIGTERM');
  await stopAll();
  await redis?.cleanup();
  assert.doesNotMatch(worker?.stderr ?? '', /"level":"error"/, worker?.stderr);
});

/**
 * MONITOR on a socket of its own: each command's arguments, unquoted as
 * Redis quotes them (sdscatrepr: \\ \" \n \r \t \a \b \xHH).
 */
function monitor(port, onCommand) {
  return new Promise((resolve, reject) => {
    const sock = net.createConnection({ port, host: '127.0.0.1' });
    let buf = '';
    sock.on('error', reject);
    sock.on('connect', () => sock.write('MONITOR\r\n'));
    sock.on('data', (d) => {
      buf += d.toString('latin1');
      let nl;
      while ((nl = buf.indexOf('\r\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 2);
        if (line === '+OK') {
          resolve(sock);
          continue;
        }
        const args = [];
        const re = /"((?:[^"\\]|\\.)*)"/g;
        for (let m; (m = re.exec(line));) {
          const bytes = m[1].replace(/\\(x[0-9a-f]{2}|.)/g, (_, e) => (e[0] === 'x' ? String.fromCharCode(parseInt(e.slice(1), 16))
            : ({ n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' })[e] ?? e));
          args.push(Buffer.from(bytes, 'latin1').toString('utf8'));
        }
        onCommand(args);
      }
    });
  });
}

const stream = (a) => `{tc:commands}:a:${a}`;

/**
 * A REST run, created as the gateway creates it (threadcast_rest's
 * threads.create and runs.create): the function hands it to the worker.
 * temporary: a stateless run (its thread made for it).
 */
async function restRun(thread, runId, { temporary, ...params }, assistant = 'steps') {
  const rest = async (op, args) => {
    const [status, body] = await rc.cmd('FCALL', 'threadcast_rest', 1, '{tc:commands}', op,
      JSON.stringify({ query: {}, ids: { run_id: runId, thread_id: thread }, after_seq: 0, ...args }));
    assert.ok(status < 300, `${op}: ${status} ${body}`);
  };
  if (!temporary) await rest('threads.create', { path: {}, body: { thread_id: thread, if_exists: 'do_nothing' } });
  await rest('runs.create', { path: { thread_id: thread }, body: { assistant_id: assistant, ...params }, stateless: !!temporary });
}

async function restCancel(thread, runId, action, assistant = 'steps') {
  await rc.cmd('XADD', stream(assistant), '*', 'thread', thread, 'method', 'rest.cancel',
    'params', JSON.stringify({ run_id: runId, thread_id: thread, action }), 'corr', `${runId}:cancel`, 'reply', '', 'deadline', '0');
}

/** A bridge method: submitted with a reply channel; resolves with the worker's answer. */
async function ask(thread, method, params, assistant = 'steps') {
  const corr = `test:${++corrSeq}`;
  await rc.cmd('XADD', stream(assistant), '*', 'thread', thread, 'method', method, 'params', JSON.stringify(params),
    'corr', corr, 'reply', 'tc:reply:test', 'deadline', String(Date.now() + 30000));
  return waitUntil(() => answers.get(corr), 20000, `the answer to ${method}`);
}

async function result(thread, method, params) {
  const a = await ask(thread, method, params);
  assert.equal(a.type, 'success', JSON.stringify(a));
  return a.result;
}

const called = (op, runId) => calls.filter((c) => c.op === op && c.args.run_id === runId);
const finished = (runId, ms = 20000) => waitUntil(() => called('run.finished', runId)[0]?.args, ms, `run.finished of ${runId}`);
// run.finished is reported before the run's last events are appended (a
// client whose stream just ended must find the run finished); the worker
// releases the thread after them. What a run appended is read once it has.
const released = (t) => waitUntil(async () => (await rc.cmd('GET', `tc:{${t}}:lg:lock`)) === null, 10000, `thread ${t} released`);
const rootLifecycle = (events) => events.filter((e) => e.method === 'lifecycle' && e.params.namespace.length === 0);

describe('REST runs', () => {
  test('a run that succeeds: run.started, the root started event with runId, RUN, run.finished with the values', async () => {
    const t = 'rw-ok';
    await restRun(t, 'run-ok-1', { input: { text: 'hello' }, metadata: { who: 'test' } });
    const fin = await finished('run-ok-1');
    await released(t);
    assert.deepEqual(fin, { run_id: 'run-ok-1', status: 'success', values: { text: 'hello', log: ['first saw hello', 'second done'] }, interrupts: {}, next: [] });
    const [started] = called('run.started', 'run-ok-1');
    assert.deepEqual(started.args, { run_id: 'run-ok-1', after_seq: 0 });
    assert.ok(calls.indexOf(started) < calls.findIndex((c) => c.op === 'run.finished' && c.args.run_id === 'run-ok-1'));
    const events = await storedEvents(rc, t);
    const root = rootLifecycle(events);
    assert.deepEqual([root[0].params.data.event, root.at(-1).params.data.event], ['started', 'completed']);
    assert.equal(root.filter((e) => e.params.data.event === 'started').length, 1);
    assert.equal(root[0].seq, started.args.after_seq + 1, 'the run\'s events follow after_seq');
    assert.equal(root[0].params.data.runId, 'run-ok-1');
    assert.equal(await rc.cmd('HGET', `tc:{${t}}:meta`, 'run_id'), 'run-ok-1', 'appended with RUN <run_id>');
    assert.ok(events.some((e) => e.method === 'values'), 'the graph\'s events are appended');
    // The checkpoints the run wrote carry its id; a second run's after_seq is where the first ended.
    const history = await result(t, 'rest.history', {});
    assert.ok(history.length >= 3);
    for (const h of history) assert.equal(h.metadata.run_id, 'run-ok-1');
    await restRun(t, 'run-ok-2', { input: { text: 'again' } });
    assert.equal((await finished('run-ok-2')).status, 'success');
    assert.equal(called('run.started', 'run-ok-2')[0].args.after_seq, events.at(-1).seq);
    // The lock is released and the entries acknowledged. (run.finished is reported first,
    // while the worker still holds the thread: the release follows the run's end.)
    await released(t);
    await waitUntil(async () => (await rc.cmd('XPENDING', stream('steps'), 'workers'))[0] === 0, 5000, 'the entries acknowledged');
  });

  test('a run that stops at interrupt(): a success, with the interrupts (the thread waits); a command resumes it', async () => {
    const t = 'rw-ask';
    await restRun(t, 'run-ask-1', { input: { text: 'ask me' } });
    const fin = await finished('run-ask-1');
    assert.equal(fin.status, 'success'); // as the reference server: the run succeeded, the thread is interrupted
    assert.deepEqual(fin.next, ['second']);
    const [[taskId, list]] = Object.entries(fin.interrupts);
    assert.match(taskId, /^[0-9a-f-]{36}$/);
    assert.deepEqual(list.map((i) => i.value), [{ question: 'go on?' }]);
    await released(t);
    assert.equal(rootLifecycle(await storedEvents(rc, t)).at(-1).params.data.event, 'interrupted');
    const state = await result(t, 'rest.state.get', {});
    assert.deepEqual(state.next, ['second']);
    assert.deepEqual(state.interrupts, list);
    assert.deepEqual(state.tasks[0].interrupts, list);
    await restRun(t, 'run-ask-2', { command: { resume: 'yes' } });
    const done = await finished('run-ask-2');
    assert.equal(done.status, 'success');
    assert.equal(done.values.answer, 'yes');
    assert.deepEqual(done.interrupts, {});
  });

  test('interrupt_before stops the run before a node: a success with next, resumed with input null', async () => {
    const t = 'rw-before';
    await restRun(t, 'run-before-1', { input: { text: 'x' }, interrupt_before: ['second'] });
    const fin = await finished('run-before-1');
    assert.equal(fin.status, 'success');
    assert.deepEqual(fin.next, ['second']);
    assert.deepEqual(fin.values.log, ['first saw x']);
    await restRun(t, 'run-before-2', { input: null });
    assert.deepEqual((await finished('run-before-2')).values.log, ['first saw x', 'second done']);
  });

  test('a run whose graph throws: error with the exception; a bad command fails at once', async () => {
    const t = 'rw-fail';
    await restRun(t, 'run-fail-1', { input: { text: 'fail now' } });
    const fin = await finished('run-fail-1');
    assert.equal(fin.status, 'error');
    assert.deepEqual(fin.error, { error: 'Error', message: 'the second step failed on purpose' });
    await released(t);
    const root = rootLifecycle(await storedEvents(rc, t));
    assert.equal(root.at(-1).params.data.event, 'failed');
    assert.equal(root.at(-1).params.data.error, 'the second step failed on purpose');
    await restRun(t, 'run-fail-2', { command: { goto: 42 } });
    const bad = await finished('run-fail-2');
    assert.equal(bad.status, 'error');
    assert.deepEqual(bad.error, { error: 'InputError', message: 'command.goto must be a node name or {node, input}' });
    await restRun(t, 'run-fail-3', { input: null, checkpoint_id: 'nope' });
    assert.equal((await finished('run-fail-3')).error.message, 'thread "rw-fail" has no checkpoint "nope"');
    await released(t);
    assert.equal(rootLifecycle(await storedEvents(rc, t)).filter((e) => e.params.data.runId === 'run-fail-3').length, 1);
  });

  test('rest.cancel interrupt: the run ends interrupted, what it did so far kept', async () => {
    const t = 'rw-cancel';
    await restRun(t, 'run-cancel-1', { input: { text: 'slow please' } });
    await waitUntil(async () => (await storedEvents(rc, t)).some((e) => e.method === 'updates'), 10000, 'the first step');
    await restCancel(t, 'run-cancel-1', 'interrupt');
    const fin = await finished('run-cancel-1');
    assert.equal(fin.status, 'interrupted');
    assert.equal(fin.rollback, undefined);
    assert.deepEqual(fin.values.log, ['first saw slow please']);
    await released(t);
    const end = rootLifecycle(await storedEvents(rc, t)).at(-1);
    assert.deepEqual(end.params.data, { event: 'interrupted', graph_name: 'steps', cancelled: true, action: 'interrupt' });
    assert.deepEqual((await result(t, 'rest.state.get', {})).values.log, ['first saw slow please']);
  });

  test('rest.cancel rollback: the checkpoints the run wrote are gone, the state is what it was', async () => {
    const t = 'rw-rollback';
    await restRun(t, 'run-rb-1', { input: { text: 'before' } });
    await finished('run-rb-1');
    const stateBefore = await result(t, 'rest.state.get', {});
    const historyBefore = await result(t, 'rest.history', { limit: 100 });
    const keysBefore = await Promise.all(['idx', 'cp', 'blobs', 'widx', 'w'].map((k) => rc.cmd(k.endsWith('idx') ? 'ZCARD' : 'HLEN', `tc:{${t}}:lg:${k}`)));
    await restRun(t, 'run-rb-2', { input: { text: 'slow and doomed' } });
    await waitUntil(async () => (await storedEvents(rc, t)).filter((e) => e.method === 'updates').length >= 3, 10000, 'the first step of the second run');
    await restCancel(t, 'run-rb-2', 'rollback');
    const fin = await finished('run-rb-2');
    assert.equal(fin.status, 'interrupted');
    assert.equal(fin.rollback, true);
    assert.deepEqual(fin.values, stateBefore.values);
    assert.deepEqual(await result(t, 'rest.state.get', {}), stateBefore);
    assert.deepEqual(await result(t, 'rest.history', { limit: 100 }), historyBefore);
    const keysAfter = await Promise.all(['idx', 'cp', 'blobs', 'widx', 'w'].map((k) => rc.cmd(k.endsWith('idx') ? 'ZCARD' : 'HLEN', `tc:{${t}}:lg:${k}`)));
    assert.deepEqual(keysAfter, keysBefore, 'nothing the run wrote is left');
    assert.equal(await rc.cmd('EXISTS', `tc:{${t}}:lg:undo`), 0);
    // The thread goes on from there.
    await restRun(t, 'run-rb-3', { input: { text: 'after' } });
    assert.deepEqual((await finished('run-rb-3')).values.log, ['first saw before', 'second done', 'first saw after', 'second done']);
  });
});

describe('REST runs cancelled before they start', () => {
  test('a run whose record says cancelled (its rest.cancel went to a worker that had nothing to stop) never runs', async () => {
    for (const [t, action] of [['rw-marked-i', 'interrupt'], ['rw-marked-r', 'rollback']]) {
      const runId = `run-marked-${action}`;
      // threadcast_rest writes the mark with the cancel entry; here it is there before the worker reads the run.
      await rc.cmd('HSET', `{tc:commands}:r:${runId}`, 'cancel', action);
      await restRun(t, runId, { input: { text: 'never' } });
      const fin = await finished(runId);
      assert.equal(fin.status, 'interrupted');
      assert.equal(fin.rollback, action === 'rollback' ? true : undefined);
      assert.equal(called('run.started', runId).length, 0, 'never started');
      // Its start and end only, so run streams and waits that joined it end.
      assert.deepEqual((await storedEvents(rc, t)).map((e) => [e.method, e.params.namespace, e.params.data]), [
        ['lifecycle', [], { event: 'started', graph_name: 'steps', runId }],
        ['lifecycle', [], { event: 'interrupted', graph_name: 'steps', cancelled: true, action }],
      ], 'nothing of the graph appended');
      assert.equal(await rc.cmd('EXISTS', `tc:{${t}}:lg:idx`), 0, 'no checkpoint');
      await released(t);
    }
  });

  test('a run held back by its thread\'s lock is cancelled by the mark too, and the thread goes on', async () => {
    const t = 'rw-marked-wait';
    await rc.cmd('SET', `tc:{${t}}:lg:lock`, 'someone-else', 'PX', '3000');
    await restRun(t, 'run-marked-wait', { input: { text: 'held' } });
    await new Promise((r) => setTimeout(r, 500));
    await rc.cmd('HSET', '{tc:commands}:r:run-marked-wait', 'cancel', 'interrupt');
    const fin = await finished('run-marked-wait', 5000);
    assert.equal(fin.status, 'interrupted');
    assert.equal(called('run.started', 'run-marked-wait').length, 0);
    assert.deepEqual(await storedEvents(rc, t), [], 'its end waits for the thread');
    await waitUntil(async () => (await storedEvents(rc, t)).length === 2, 8000, 'its start and end, once the other lock lapsed');
    assert.deepEqual((await storedEvents(rc, t)).map((e) => e.params.data.event), ['started', 'interrupted']);
    await waitUntil(async () => (await rc.cmd('GET', `tc:{${t}}:lg:lock`)) === null, 5000, 'the lock free again');
    await restRun(t, 'run-after-marked', { input: { text: 'after' } });
    assert.deepEqual((await finished('run-after-marked')).values.log, ['first saw after', 'second done']);
  });
});

describe('REST runs whose worker died', () => {
  test('before its start was appended: the worker that takes it over starts it, so its streams find all of it', async () => {
    const t = 'rw-unstarted';
    const runId = 'run-unstarted-1';
    await rc.cmd('FCALL', 'threadcast_rest', 1, '{tc:commands}', 'threads.create',
      JSON.stringify({ query: {}, path: {}, ids: { thread_id: t }, body: { thread_id: t } }));
    // runs.create hands the run over; in the same transaction a worker that will never answer reads it.
    await rc.cmd('MULTI');
    await rc.cmd('FCALL', 'threadcast_rest', 1, '{tc:commands}', 'runs.create', JSON.stringify({ query: {}, path: { thread_id: t },
      ids: { run_id: runId, thread_id: t }, after_seq: 0, body: { assistant_id: 'steps', input: { text: 'hello' } } }));
    await rc.cmd('XREADGROUP', 'GROUP', 'workers', 'dead-worker', 'COUNT', '1', 'STREAMS', stream('steps'), '>');
    const [, read] = await rc.cmd('EXEC');
    const id = read[0][1][0][0];
    // What it did before it died: recorded the run (its thread's lock has lapsed); nothing appended, nothing reported.
    await rc.cmd('HSET', `tc:{${t}}:lg:run`, 'entry', `${stream('steps')} ${id}`, 'run_id', runId, 'status', 'running', 'recorded', '0',
      'assistant', 'steps', 'base', '', 'input', JSON.stringify({ input: { text: 'hello' } }), 'configurable', '{}',
      'rest', JSON.stringify({ options: {}, metadata: {}, config: {}, dispose: false, observe: { events: false, debug: false, runId } }));
    const fin = await finished(runId, 30000);
    assert.equal(fin.status, 'success');
    assert.deepEqual(fin.values.log, ['first saw hello', 'second done']);
    assert.equal(called('run.started', runId).length, 1, 'the taker reported its start');
    await released(t);
    const root = rootLifecycle(await storedEvents(rc, t));
    const seen = root.map((e) => e.params.data.event);
    assert.deepEqual([seen[0], seen.filter((e) => e === 'started').length, seen.at(-1)], ['started', 1, 'completed'], seen.join());
    assert.equal(root[0].params.data.runId, runId, 'a run stream follows the run from this event');
    assert.ok(worker.logs.some((l) => l.msg === 'taking over a run' && l.thread === t && l.from === 'the start'));
  });
});

describe('REST runs across workers, stateless runs', () => {
  test('a rest.cancel read by a worker that does not run it reaches the lock owner (tc:worker:<name>)', async () => {
    const other = await startWorker(redis.url, { name: 'rest-alias', args: ['--graphs', graphsModule], env: { TC_TEST_GRAPHS: 'alias' } });
    try {
      const t = 'rw-forward';
      await restRun(t, 'run-fw-1', { input: { text: 'slow, cancelled from afar' } });
      await waitUntil(async () => (await storedEvents(rc, t)).some((e) => e.method === 'updates'), 10000, 'the first step');
      assert.equal(await rc.cmd('GET', `tc:{${t}}:lg:lock`), 'rest-w1');
      await restCancel(t, 'run-fw-1', 'rollback', 'steps-b');
      const fin = await finished('run-fw-1');
      assert.deepEqual([fin.status, fin.rollback, fin.values], ['interrupted', true, {}]);
      assert.deepEqual(await result(t, 'rest.state.get', {}), { values: {}, next: [], tasks: [], checkpoint: null, created_at: null,
        parent_checkpoint: null, interrupts: [] }, 'the thread\'s first run rolled back: no checkpoint left');
      // A cancel for a run that is over changes nothing.
      await restRun(t, 'run-fw-2', { input: { text: 'quick' } });
      await finished('run-fw-2');
      await released(t);
      await restCancel(t, 'run-fw-1', 'rollback', 'steps-b');
      await waitUntil(() => other.logs.filter((l) => l.msg === 'rest.cancel for a run that is not running').length === 1, 10000, 'the stale cancel');
      assert.deepEqual((await result(t, 'rest.state.get', {})).values.log, ['first saw quick', 'second done']);
    } finally {
      await other.kill('SIGTERM');
    }
  });

  test('a temporary run with on_completion delete leaves no checkpoints; "keep" keeps them', async () => {
    await restRun('rw-temp', 'run-temp-1', { input: { text: 'gone' }, temporary: true, on_completion: 'delete' });
    assert.equal((await finished('run-temp-1')).status, 'success');
    await released('rw-temp');
    for (const k of ['idx', 'cp', 'blobs', 'widx', 'w', 'run', 'undo']) assert.equal(await rc.cmd('EXISTS', `tc:{rw-temp}:lg:${k}`), 0, k);
    assert.ok((await storedEvents(rc, 'rw-temp')).length > 0, 'its events stay for the streams that read them');
    await restRun('rw-temp-kept', 'run-temp-2', { input: { text: 'kept' }, temporary: true, on_completion: 'keep' });
    await finished('run-temp-2');
    assert.equal((await result('rw-temp-kept', 'rest.state.get', {})).values.text, 'kept');
  });
});

describe('REST state through the bridge', () => {
  test('rest.state.get: a thread that never ran; the head; a checkpoint; an unknown checkpoint', async () => {
    assert.deepEqual(await result('rw-never', 'rest.state.get', {}),
      { values: {}, next: [], tasks: [], checkpoint: null, created_at: null, parent_checkpoint: null, interrupts: [] });
    assert.deepEqual(await result('rw-never', 'rest.history', {}), []);
    const t = 'rw-state';
    await restRun(t, 'run-state-1', { input: { text: 'state' } });
    const fin = await finished('run-state-1');
    const state = await result(t, 'rest.state.get', {});
    const history = await result(t, 'rest.history', {});
    assert.deepEqual(state.values, fin.values);
    assert.deepEqual(state.next, []);
    assert.deepEqual(state.tasks, []);
    assert.deepEqual(Object.keys(state.checkpoint).sort(), ['checkpoint_id', 'checkpoint_map', 'checkpoint_ns', 'thread_id']);
    assert.equal(state.checkpoint.thread_id, t);
    assert.equal(state.checkpoint.checkpoint_ns, '');
    assert.deepEqual(history[0], state, 'history starts at the head');
    assert.deepEqual(state.parent_checkpoint, history[1].checkpoint);
    assert.match(state.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(state.metadata.source, 'loop');
    assert.equal(state.metadata.step, 2);
    assert.equal('checkpoint_ns' in state.metadata, false);
    // An older checkpoint, by id or by {checkpoint}: what the graph had before second ran.
    const older = await result(t, 'rest.state.get', { checkpoint_id: history[1].checkpoint.checkpoint_id });
    assert.deepEqual(older.values.log, ['first saw state']);
    assert.deepEqual(older.next, ['second']);
    assert.equal(older.tasks[0].name, 'second');
    assert.deepEqual(await result(t, 'rest.state.get', { checkpoint: { checkpoint_id: history[1].checkpoint.checkpoint_id } }), older);
    const unknown = await ask(t, 'rest.state.get', { checkpoint_id: 'nope' });
    assert.deepEqual([unknown.type, unknown.error, unknown.message], ['error', 'no_such_checkpoint', 'thread "rw-state" has no checkpoint "nope"']);
  });

  test('rest.history: limit, before, metadata; bad limits refused', async () => {
    const t = 'rw-history';
    await restRun(t, 'run-h-1', { input: { text: 'one' } });
    await finished('run-h-1');
    await restRun(t, 'run-h-2', { input: { text: 'two' } });
    await finished('run-h-2');
    const all = await result(t, 'rest.history', { limit: 1000 });
    assert.equal(all.length, 8, 'input, first, second and the end, twice');
    const ids = all.map((s) => s.checkpoint.checkpoint_id);
    assert.deepEqual([...ids].sort().reverse(), ids, 'newest first');
    assert.deepEqual((await result(t, 'rest.history', {})).length, 8);
    assert.deepEqual(await result(t, 'rest.history', { limit: 3 }), all.slice(0, 3));
    assert.deepEqual(await result(t, 'rest.history', { limit: 2, before: ids[2] }), all.slice(3, 5));
    assert.deepEqual(await result(t, 'rest.history', { limit: 2, before: { configurable: { checkpoint_id: ids[2] } } }), all.slice(3, 5));
    const inputs = await result(t, 'rest.history', { metadata: { source: 'input' } });
    assert.deepEqual(inputs.map((s) => s.checkpoint.checkpoint_id), all.filter((s) => s.metadata.source === 'input').map((s) => s.checkpoint.checkpoint_id));
    assert.equal(inputs.length, 2);
    assert.deepEqual((await result(t, 'rest.history', { metadata: { run_id: 'run-h-1' } })).length, 4);
    for (const limit of [0, 1001, 2.5, 'ten']) {
      const a = await ask(t, 'rest.history', { limit });
      assert.equal(a.error, 'invalid_argument');
      assert.equal(a.message, `limit must be an integer from 1 to 1000 (got ${JSON.stringify(limit)})`);
    }
  });

  test('rest.state.update: a new head as a node wrote it; as of an older checkpoint; refused input', async () => {
    const t = 'rw-update';
    await restRun(t, 'run-u-1', { input: { text: 'u' } });
    await finished('run-u-1');
    await released(t);
    const { checkpoint } = await result(t, 'rest.state.update', { values: { text: 'edited', log: ['edit'] }, as_node: 'second' });
    assert.deepEqual(Object.keys(checkpoint).sort(), ['checkpoint_id', 'checkpoint_ns', 'thread_id']);
    assert.equal(checkpoint.thread_id, t);
    const state = await result(t, 'rest.state.get', {});
    assert.deepEqual(state.checkpoint.checkpoint_id, checkpoint.checkpoint_id);
    assert.equal(state.values.text, 'edited');
    assert.deepEqual(state.values.log, ['first saw u', 'second done', 'edit']);
    assert.equal(state.metadata.source, 'update');
    // From an older checkpoint: a fork; the head is the fork now.
    const history = await result(t, 'rest.history', { limit: 100 });
    const afterFirst = history.find((s) => s.next[0] === 'second');
    const fork = await result(t, 'rest.state.update', { values: { log: ['forked'] }, as_node: 'first', checkpoint_id: afterFirst.checkpoint.checkpoint_id });
    const head = await result(t, 'rest.state.get', {});
    assert.equal(head.checkpoint.checkpoint_id, fork.checkpoint.checkpoint_id);
    assert.deepEqual(head.parent_checkpoint.checkpoint_id, afterFirst.checkpoint.checkpoint_id);
    assert.deepEqual(head.values.log, ['first saw u', 'forked']);
    const bad = await ask(t, 'rest.state.update', { values: { text: 'x' }, as_node: 'nowhere' });
    assert.deepEqual([bad.type, bad.error], ['error', 'invalid_argument']);
    assert.match(bad.message, /^cannot update the state: .*nowhere/);
    const noCp = await ask(t, 'rest.state.update', { values: { text: 'x' }, checkpoint_id: 'nope' });
    assert.equal(noCp.error, 'no_such_checkpoint');
    const notObject = await ask(t, 'rest.state.update', { values: 'text' });
    assert.deepEqual([notObject.error, notObject.message], ['invalid_argument', 'values must be an object, a list of objects or null']);
    assert.equal(await rc.cmd('GET', `tc:{${t}}:lg:lock`), null, 'the thread is free again');
  });

  test('rest.copy: the new thread has every checkpoint; each thread goes on by itself', async () => {
    const t = 'rw-copy-src';
    const to = 'rw-copy-dst';
    await restRun(t, 'run-c-1', { input: { text: 'copied' } });
    await finished('run-c-1');
    assert.deepEqual(await result(t, 'rest.copy', { new_thread_id: to }), {});
    const renamed = (states, id) => JSON.parse(JSON.stringify(states).replaceAll(`"thread_id":"${t}"`, `"thread_id":"${id}"`));
    const src = await result(t, 'rest.history', { limit: 100 });
    const dst = await result(to, 'rest.history', { limit: 100 });
    assert.equal(dst.length, src.length);
    assert.deepEqual(dst, renamed(src, to));
    await restRun(to, 'run-c-2', { input: { text: 'only the copy' } });
    await finished('run-c-2');
    assert.equal((await result(to, 'rest.history', { limit: 100 })).length, src.length + 4);
    assert.deepEqual(await result(t, 'rest.history', { limit: 100 }), src, 'the original is untouched');
    const bad = await ask(t, 'rest.copy', { new_thread_id: 'a{b}' });
    assert.deepEqual([bad.error, bad.message], ['invalid_argument', 'new_thread_id must be a thread id ([A-Za-z0-9._:-]{1,128})']);
  });
});

describe('what the worker registers for the REST API', () => {
  test('{tc:commands}:ainfo:<assistant>: name, created_at once, the drawable graph (and with xray), the schemas, the subgraphs', async () => {
    const info = {};
    const flat = await rc.cmd('HGETALL', '{tc:commands}:ainfo:steps');
    for (let i = 0; i < flat.length; i += 2) info[flat[i]] = flat[i + 1];
    assert.deepEqual(Object.keys(info).sort(), ['created_at', 'graph', 'graph_xray', 'name', 'schemas', 'subgraphs']);
    assert.deepEqual(JSON.parse(info.subgraphs), {}, 'steps has none');
    assert.equal(info.name, 'steps');
    assert.match(info.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const graph = JSON.parse(info.graph);
    assert.deepEqual(graph.nodes.map((n) => n.id), ['__start__', 'first', 'second', '__end__']);
    assert.deepEqual(graph.edges.map((e) => `${e.source}>${e.target}`).sort(), ['__start__>first', 'first>second', 'second>__end__']);
    const schemas = JSON.parse(info.schemas);
    assert.equal(schemas.graph_id, 'steps');
    assert.deepEqual(Object.keys(schemas.state_schema.properties), ['text', 'log', 'answer']);
    assert.deepEqual(Object.keys(schemas).sort(), ['config_schema', 'context_schema', 'graph_id', 'input_schema', 'output_schema', 'state_schema']);
    const agentGraph = JSON.parse(await rc.cmd('HGET', '{tc:commands}:ainfo:agent', 'graph'));
    assert.ok(agentGraph.nodes.some((n) => n.id === 'researcher'));
    // With xray the subgraph's own nodes are drawn inside it ("researcher:<node>").
    const xray = JSON.parse(await rc.cmd('HGET', '{tc:commands}:ainfo:agent', 'graph_xray'));
    assert.ok(xray.nodes.some((n) => n.id.startsWith('researcher:')), JSON.stringify(xray.nodes.map((n) => n.id)));
    assert.ok(xray.nodes.length > agentGraph.nodes.length);
    const subgraphs = JSON.parse(await rc.cmd('HGET', '{tc:commands}:ainfo:agent', 'subgraphs'));
    assert.deepEqual(Object.keys(subgraphs), ['researcher']);
    assert.deepEqual(Object.keys(subgraphs.researcher).sort(), ['config', 'input', 'output', 'state']);
    assert.equal(subgraphs.researcher.state.type, 'object');
    // Another worker registering the same assistants keeps created_at.
    const second = await startWorker(redis.url, { name: 'rest-w2', args: ['--graphs', graphsModule] });
    try {
      assert.equal(await rc.cmd('HGET', '{tc:commands}:ainfo:steps', 'created_at'), info.created_at);
    } finally {
      await second.kill('SIGTERM');
    }
  });
});
