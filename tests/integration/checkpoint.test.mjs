// RedisSaver (src/worker/checkpoint.js), the LangGraph checkpointer on plain
// Redis, against a real redis-server: the official conformance suite
// (@langchain/langgraph-checkpoint-validation, run with vitest inside
// src/worker), then what the suite does not cover — real graphs (a subgraph,
// an interrupt resumed by another saver, a fork), the keys (one hash tag per
// thread, nothing else), deleteThread, the TTL, two savers at once, binary
// payloads, awkward namespaces. Needs `(cd src/worker && npm ci)`; not threadcast.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot, startRedis, stopAll, sleep } from './lib/harness.mjs';

const workerDir = path.join(repoRoot, 'src', 'worker');

// What @langchain/langgraph-checkpoint-validation 1.1.1 (pinned in
// src/worker/package-lock.json) defines, per method: validate() runs the first
// five, deltaChannelHistoryTests the last.
const SUITE = { put: 22, putWrites: 6, getTuple: 40, list: 649, deleteThread: 1, getDeltaChannelHistory: 8 };
const SUITE_TOTAL = Object.values(SUITE).reduce((a, b) => a + b, 0);

let redis;
let fx; // src/worker/test/fixtures.js: ioredis, LangGraph, RedisSaver
const clients = [];

before(async () => {
  if (!existsSync(path.join(workerDir, 'node_modules'))) {
    throw new Error('src/worker/node_modules is missing: run (cd src/worker && npm ci) first');
  }
  fx = await import(path.join(workerDir, 'test', 'fixtures.js'));
  redis = await startRedis();
});

after(async () => {
  for (const c of clients) c.disconnect();
  await stopAll();
  await redis?.cleanup();
});

/** A new connection to database 0 (the conformance suite flushes database 1). */
function connect() {
  const c = new fx.Redis(redis.url);
  clients.push(c);
  return c;
}

/**
 * Runs the conformance suite (vitest, in its own process group) with the JSON
 * reporter; resolves with the exit code, the report and the console output.
 */
async function runSuite(env = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'tc-conformance-'));
  const reportFile = path.join(dir, 'report.json');
  try {
    const child = spawn('npx', ['--no-install', 'vitest', 'run', '--config', 'vitest.config.js',
      '--reporter=default', '--reporter=json', `--outputFile.json=${reportFile}`], {
      cwd: workerDir,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, CI: '1', NO_COLOR: '1', TC_CKPT_REDIS_URL: `${redis.url}/1`, ...env },
    });
    let output = '';
    child.stdout.on('data', (d) => { output += d; });
    child.stderr.on('data', (d) => { output += d; });
    const timer = setTimeout(() => process.kill(-child.pid, 'SIGKILL'), 150000);
    const code = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(signal ?? c)));
    clearTimeout(timer);
    const report = existsSync(reportFile) ? JSON.parse(readFileSync(reportFile, 'utf8')) : null;
    return { code, report, output };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Test counts of a vitest JSON report by saver method ("…RedisSaver#list" → list), and by status. */
function countByMethod(report) {
  const counts = {};
  const statuses = {};
  for (const file of report.testResults) {
    for (const a of file.assertionResults) {
      const method = a.ancestorTitles.find((t) => t.includes('#'))?.split('#').pop() ?? '?';
      counts[method] = (counts[method] ?? 0) + 1;
      statuses[a.status] = (statuses[a.status] ?? 0) + 1;
    }
  }
  return { counts, statuses };
}

test(`the official conformance suite passes: all ${SUITE_TOTAL} specs, none skipped`, async () => {
  const { code, report, output } = await runSuite();
  assert.ok(report, `no report; vitest said:\n${output}`);
  assert.equal(code, 0, output);
  assert.equal(report.success, true, output);
  assert.equal(report.numFailedTests, 0, output);
  assert.equal(report.numPendingTests + report.numTodoTests, 0, 'nothing skipped');
  assert.equal(report.numPassedTests, report.numTotalTests);
  const { counts, statuses } = countByMethod(report);
  assert.deepEqual(statuses, { passed: SUITE_TOTAL });
  assert.deepEqual(counts, SUITE, 'every spec of the pinned suite ran');
  assert.match(output, new RegExp(`Tests\\s+${SUITE_TOTAL} passed \\(${SUITE_TOTAL}\\)`));
});

test('the suite fails a saver that loses pending writes (so the run above can fail)', async () => {
  const { code, report, output } = await runSuite({ TC_CKPT_SABOTAGE: 'drop-writes' });
  assert.notEqual(code, 0, output);
  assert.ok(report, output);
  assert.equal(report.success, false);
  assert.equal(report.numTotalTests, SUITE_TOTAL);
  assert.ok(report.numFailedTests >= 10, `only ${report.numFailedTests} failed`);
  const failedIn = new Set();
  for (const file of report.testResults) {
    for (const a of file.assertionResults) {
      if (a.status === 'failed') failedIn.add(a.ancestorTitles.find((t) => t.includes('#')).split('#').pop());
    }
  }
  assert.ok(failedIn.has('putWrites') && failedIn.has('getTuple'), [...failedIn].join());
  assert.ok(!failedIn.has('put') && !failedIn.has('deleteThread'), 'writes-free specs still pass');
});

/* ---- real graphs ---------------------------------------------------------------------- */

async function collect(iterable) {
  const out = [];
  for await (const x of iterable) out.push(x);
  return out;
}

const history = (graph, config) => collect(graph.getStateHistory(config));

/** What a state snapshot says, without the ids and timestamps that differ per run. */
const shape = (s) => ({ values: s.values, next: s.next, source: s.metadata.source, step: s.metadata.step,
  ns: s.config.configurable.checkpoint_ns, parent: Boolean(s.parentConfig),
  interrupts: s.tasks.flatMap((t) => t.interrupts.map((i) => i.value)) });

/** Every key in database 0 (tests below flush it first). */
const allKeys = async (c) => (await c.keys('*')).sort();
const waitFor = async (ok) => { for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10)); assert.ok(ok()); };

test('a graph interrupted on one saver resumes on another, with the state and history MemorySaver gives', async () => {
  const a = connect();
  const b = connect();
  await a.flushdb();
  const thread = 'graph-1';
  const config = { configurable: { thread_id: thread } };
  const onA = fx.buildGraph(new fx.RedisSaver({ client: a }));
  const onB = fx.buildGraph(new fx.RedisSaver({ client: b })); // another worker, another connection

  const first = await onA.invoke({ log: ['please interrupt'] }, config);
  assert.deepEqual(first.__interrupt__.map((i) => i.value), [{ question: 'go on?' }]);
  const stateB = await onB.getState(config);
  assert.deepEqual(stateB.next, ['agent']);
  assert.deepEqual(stateB.tasks[0].interrupts.map((i) => i.value), [{ question: 'go on?' }]);
  const done = await onB.invoke(new fx.Command({ resume: 'yes' }), config);
  assert.deepEqual(done.log, ['please interrupt', 'agent saw please interrupt', 'answer yes', 'plan please interrupt', 'read']);
  assert.deepEqual(done.data, Uint8Array.from({ length: 256 }, (_, i) => i));
  assert.equal((await history(onA, config)).length, 4);

  // The subgraph checkpointed in its own namespace, beside the root's.
  const saver = new fx.RedisSaver({ client: b });
  const byNs = {};
  for await (const t of saver.list({ configurable: { thread_id: thread } })) {
    byNs[t.config.configurable.checkpoint_ns] = (byNs[t.config.configurable.checkpoint_ns] ?? 0) + 1;
  }
  const child = Object.keys(byNs).filter((ns) => ns !== '');
  assert.equal(child.length, 1);
  assert.match(child[0], /^research:[0-9a-f-]{36}$/);
  assert.deepEqual(byNs, { '': 4, [child[0]]: 4 });
  const sub = await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: child[0] } });
  assert.deepEqual(sub.checkpoint.channel_values.notes, ['plan please interrupt', 'read']);

  // The same run (without the Uint8Array, which MemorySaver cannot read back)
  // on RedisSaver and on MemorySaver: the same state and history.
  const config2 = { configurable: { thread_id: 'graph-2' } };
  const onRedis = fx.buildGraph(new fx.RedisSaver({ client: a }), { bytes: false });
  const inMemory = fx.buildGraph(new fx.MemorySaver(), { bytes: false });
  for (const g of [onRedis, inMemory]) {
    await g.invoke({ log: ['please interrupt'] }, config2);
    await g.invoke(new fx.Command({ resume: 'yes' }), config2);
  }
  assert.deepEqual(shape(await onRedis.getState(config2)), shape(await inMemory.getState(config2)));
  const redisHistory = (await history(onRedis, config2)).map(shape);
  assert.deepEqual(redisHistory, (await history(inMemory, config2)).map(shape));
  assert.deepEqual(redisHistory.map((s) => s.next), [[], ['research'], ['agent'], ['__start__']]);
  assert.deepEqual(redisHistory[2].interrupts, [{ question: 'go on?' }]);
});

test('forking from an earlier checkpoint keeps the branches\' channel values apart', async () => {
  const c = connect();
  await c.flushdb();
  const graph = fx.buildLineGraph(new fx.RedisSaver({ client: c }));
  const config = { configurable: { thread_id: 'fork-1' } };
  assert.equal((await graph.invoke({ x: 'in' }, config)).x, 'b');
  const before = await history(graph, config);
  const afterA = before.find((s) => s.next[0] === 'b');
  assert.equal(afterA.values.x, 'a');

  // updateState on the checkpoint after a: the new x gets the version counter
  // the original branch's x got from b. Integer versions would make both the
  // same blob, and the fork would read 'b'.
  const forkConfig = await graph.updateState(afterA.config, { x: 'forked' }, 'a');
  assert.equal((await graph.getState(forkConfig)).values.x, 'forked');
  assert.equal((await graph.getState(before[0].config)).values.x, 'b', 'the original branch is intact');
  const saver = new fx.RedisSaver({ client: c });
  const forkTuple = await saver.getTuple(forkConfig);
  const origTuple = await saver.getTuple(before[0].config);
  const [vFork, vOrig] = [forkTuple.checkpoint.channel_versions.x, origTuple.checkpoint.channel_versions.x];
  assert.match(vFork, /^\d{32}\.\d{16}$/);
  assert.equal(vFork.split('.')[0], vOrig.split('.')[0], 'same counter on both branches');
  assert.notEqual(vFork, vOrig);
  assert.ok(vFork > (await saver.getTuple(afterA.config)).checkpoint.channel_versions.x, 'versions increase');

  // Running on from the fork goes through b again; from the original, nothing is left to do.
  assert.equal((await graph.invoke(null, forkConfig)).x, 'b');
  const after = await history(graph, config);
  assert.equal(after.length, before.length + 2, 'the fork and its run of b');
  assert.equal(after[0].values.x, 'b');
  assert.equal(after[1].values.x, 'forked');
});

/* ---- keys ----------------------------------------------------------------------------- */

test('every key of a thread carries its hash tag {T} exactly once; there are no other keys', async () => {
  const c = connect();
  await c.flushdb();
  const threads = ['keys.1:a-b_c', 'k2'];
  const saver = new fx.RedisSaver({ client: c });
  const graph = fx.buildGraph(saver);
  for (const t of threads) {
    await graph.invoke({ log: ['please interrupt'] }, { configurable: { thread_id: t } });
    await graph.invoke(new fx.Command({ resume: 'ok' }), { configurable: { thread_id: t } });
  }
  const keys = await allKeys(c);
  const expected = threads.flatMap((t) => Object.values(saver.threadKeys(t))).sort();
  assert.deepEqual(keys, expected);
  assert.equal(keys.length, 10);
  for (const t of threads) {
    const mine = keys.filter((k) => k.includes(`{${t}}`));
    assert.equal(mine.length, 5, t);
    for (const k of mine) {
      assert.equal(k.split('{').length - 1, 1, k);
      assert.equal(k.split('}').length - 1, 1, k);
      assert.ok(k.startsWith(`tc:{${t}}:lg:`), k);
    }
  }

  // keyPrefix moves everything; list() without a thread sees its prefix's threads only.
  const other = new fx.RedisSaver({ client: c, keyPrefix: 'app:' });
  const cfg = await other.put({ configurable: { thread_id: 'k3' } }, fx.emptyCheckpoint(), { source: 'input', step: -1, parents: {} }, {});
  await other.putWrites(cfg, [['x', 1]], 'task');
  assert.deepEqual((await allKeys(c)).filter((k) => k.startsWith('app:')),
    ['app:{k3}:lg:cp', 'app:{k3}:lg:idx', 'app:{k3}:lg:w', 'app:{k3}:lg:widx']);
  const threadsOf = async (s) => {
    const seen = new Set();
    for await (const t of s.list({})) seen.add(t.config.configurable.thread_id);
    return [...seen].sort();
  };
  assert.deepEqual(await threadsOf(other), ['k3']);
  assert.deepEqual(await threadsOf(saver), ['k2', 'keys.1:a-b_c']);
});

test('thread ids that cannot be a hash tag are refused, before anything is written', async () => {
  const c = connect();
  await c.flushdb();
  const saver = new fx.RedisSaver({ client: c });
  const meta = { source: 'input', step: -1, parents: {} };
  for (const bad of ['', 'a{b', 'a}b', '{a}', 42]) {
    await assert.rejects(saver.put({ configurable: { thread_id: bad } }, fx.emptyCheckpoint(), meta, {}),
      /thread_id must be a non-empty string without braces/, String(bad));
    await assert.rejects(saver.putWrites({ configurable: { thread_id: bad, checkpoint_id: 'c' } }, [['x', 1]], 't'), /braces/);
    await assert.rejects(saver.deleteThread(bad), /braces/);
  }
  assert.deepEqual(await allKeys(c), []);
  assert.throws(() => new fx.RedisSaver({ client: c, keyPrefix: 'a{' }), /keyPrefix/);
  assert.throws(() => new fx.RedisSaver({}), /client/);
});

test('deleteThread removes every key of the thread and nothing of another', async () => {
  const c = connect();
  await c.flushdb();
  const saver = new fx.RedisSaver({ client: c });
  const graph = fx.buildGraph(saver);
  for (const t of ['del-1', 'del-2']) {
    await graph.invoke({ log: ['please interrupt'] }, { configurable: { thread_id: t } });
    await graph.invoke(new fx.Command({ resume: 'ok' }), { configurable: { thread_id: t } });
  }
  const before2 = (await allKeys(c)).filter((k) => k.includes('{del-2}'));
  const history2 = (await history(graph, { configurable: { thread_id: 'del-2' } })).map(shape);
  assert.equal(before2.length, 5);
  assert.ok((await allKeys(c)).some((k) => k.includes('{del-1}')));

  await saver.deleteThread('del-1');
  assert.deepEqual(await allKeys(c), before2, 'only del-2 is left, whole');
  assert.equal(await saver.getTuple({ configurable: { thread_id: 'del-1' } }), undefined);
  const listed = [];
  for await (const t of saver.list({ configurable: { thread_id: 'del-1' } })) listed.push(t);
  assert.deepEqual(listed, []);
  assert.deepEqual((await history(graph, { configurable: { thread_id: 'del-2' } })).map(shape), history2);
  await saver.deleteThread('del-1'); // a thread already gone: no error
});

/* ---- the worker's fence --------------------------------------------------------------------- */

test('WorkerSaver: a fenced thread\'s checkpoints are written only while its lock is the worker\'s; a refusal is sent again once the lock is regained', async () => {
  const c = connect();
  await c.flushdb();
  const saver = new fx.WorkerSaver({ client: c }, () => null, 'w1');
  const graph = fx.buildGraph(saver);
  const cfg = { configurable: { thread_id: 'fx-1' } };
  const lock = 'tc:{fx-1}:lg:lock';
  const stored = async () => (await allKeys(c)).filter((k) => k !== lock);
  const log = async () => (await graph.getState(cfg)).values.log;
  let asked = 0;
  let onAsk = async () => false;
  let settled = 0;
  saver.fence('fx-1', { regain: () => { asked++; return onAsk(); }, settle: async () => { settled++; } });

  await assert.rejects(graph.invoke({ log: ['a'] }, cfg), /FENCED/, 'no lock: refused');
  assert.deepEqual(await stored(), [], 'nothing of the refused write is stored');
  assert.ok(asked >= 1, 'the saver asked to regain the lock');
  await c.set(lock, 'w2');
  await assert.rejects(graph.invoke({ log: ['a'] }, cfg), /FENCED/, 'another worker\'s lock: refused');
  assert.deepEqual(await stored(), []);

  await c.set(lock, 'w1');
  await graph.invoke({ log: ['a'] }, cfg);
  assert.ok((await stored()).length > 0);
  assert.ok((await log()).includes('a'));

  assert.ok(settled >= 1, 'each write waited for the run\'s events first');

  // A write waits until the run's events before it are appended: nothing of it is stored meanwhile.
  let release;
  const appended = new Promise((r) => { release = r; });
  let waiting = 0;
  saver.fence('fx-1', { regain: async () => false, settle: () => { waiting++; return appended; } });
  const cps = await c.hlen('tc:{fx-1}:lg:cp');
  const running = graph.invoke({ log: ['late'] }, cfg);
  await waitFor(() => waiting > 0);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(await c.hlen('tc:{fx-1}:lg:cp'), cps, 'no checkpoint before the events');
  release();
  await running;
  assert.ok((await c.hlen('tc:{fx-1}:lg:cp')) > cps, 'written once they are');
  saver.fence('fx-1', { regain: () => { asked++; return onAsk(); } });

  // The lease lapsed (Redis stalled) and nobody took it: regained, the same write goes through.
  await c.del(lock);
  asked = 0;
  onAsk = async () => { await c.set(lock, 'w1'); return true; };
  await graph.invoke({ log: ['b'] }, cfg);
  assert.ok(asked >= 1, 'the lock was regained');
  assert.ok((await log()).includes('b'));

  // Over: unfenced, whoever holds the lock. A lost run's thread stays fenced.
  await c.set(lock, 'w2');
  saver.unfence('fx-1');
  await graph.invoke({ log: ['c'] }, cfg);
  assert.ok((await log()).includes('c'));
  saver.fence('fx-1', { regain: async () => true });
  saver.unfence('fx-1', { lost: true });
  const before = await c.hlen('tc:{fx-1}:lg:cp');
  await assert.rejects(graph.invoke({ log: ['d'] }, cfg), /FENCED/);
  assert.equal(await c.hlen('tc:{fx-1}:lg:cp'), before, 'a lost run writes no checkpoint');
  assert.ok(!(await log()).includes('d'));
});

/* ---- TTL ------------------------------------------------------------------------------ */

test('with ttlSeconds every write refreshes the TTL of all five keys of the thread; reads do not', async () => {
  const c = connect();
  await c.flushdb();
  const saver = new fx.RedisSaver({ client: c, ttlSeconds: 100 });
  const keys = Object.values(saver.threadKeys('ttl-1'));
  const ttls = () => Promise.all(keys.map((k) => c.pttl(k)));
  const shorten = () => Promise.all(keys.map((k) => c.pexpire(k, 3000)));
  const meta = { source: 'loop', step: 0, parents: {} };
  const cp1 = { ...fx.emptyCheckpoint(), id: fx.uuid6(-1), channel_values: { x: 'one' }, channel_versions: { x: 1 } };
  const cfg1 = await saver.put({ configurable: { thread_id: 'ttl-1' } }, cp1, meta, { x: 1 });
  await saver.putWrites(cfg1, [['x', 'two']], 'task');
  for (const t of await ttls()) assert.ok(t > 95000 && t <= 100000, `ttl ${t}`);

  await shorten();
  await saver.getTuple(cfg1);
  for await (const _ of saver.list({ configurable: { thread_id: 'ttl-1' } })) { /* a read */ }
  for (const t of await ttls()) assert.ok(t > 0 && t <= 3000, `a read refreshed: ${t}`);

  await saver.putWrites(cfg1, [['y', 'three']], 'task2'); // touches w and widx only...
  for (const t of await ttls()) assert.ok(t > 95000, `putWrites left ${t}`); // ...and refreshes all five

  await shorten();
  const cp2 = { ...fx.emptyCheckpoint(), id: fx.uuid6(-1), channel_values: { x: 'two' }, channel_versions: { x: 2 } };
  await saver.put(cfg1, cp2, { ...meta, step: 1 }, { x: 2 });
  for (const t of await ttls()) assert.ok(t > 95000, `put left ${t}`);

  // The thread expires whole.
  await Promise.all(keys.map((k) => c.pexpire(k, 50)));
  await sleep(150);
  assert.equal(await saver.getTuple({ configurable: { thread_id: 'ttl-1' } }), undefined);
  assert.deepEqual(await allKeys(c), []);

  // Without ttlSeconds nothing expires.
  const forever = new fx.RedisSaver({ client: c });
  const cfg3 = await forever.put({ configurable: { thread_id: 'ttl-2' } }, cp1, meta, { x: 1 });
  await forever.putWrites(cfg3, [['x', 'two']], 'task');
  for (const k of Object.values(forever.threadKeys('ttl-2'))) assert.equal(await c.ttl(k), -1, k);

  assert.throws(() => new fx.RedisSaver({ client: c, ttlSeconds: 0 }), /ttlSeconds/);
  assert.throws(() => new fx.RedisSaver({ client: c, ttlSeconds: 1.5 }), /ttlSeconds/);
});

/* ---- two savers at once --------------------------------------------------------------- */

test('two savers on two connections: concurrent puts, racing writes, concurrent runs', async () => {
  const A = new fx.RedisSaver({ client: connect() });
  const B = new fx.RedisSaver({ client: connect() });
  await clients.at(-1).flushdb();
  const thread = 'conc-1';
  const meta = (i) => ({ source: 'loop', step: i, parents: {} });
  const ids = Array.from({ length: 60 }, () => fx.uuid6(-1));
  assert.deepEqual([...ids].sort(), ids, 'uuid6 ids sort in creation order');
  await Promise.all(ids.map((id, i) => (i % 2 ? A : B).put(
    { configurable: { thread_id: thread, checkpoint_ns: '', checkpoint_id: ids[i - 1] } },
    { ...fx.emptyCheckpoint(), id, channel_values: { n: i }, channel_versions: { n: i + 1 } },
    meta(i), { n: i + 1 })));
  const listed = [];
  for await (const t of A.list({ configurable: { thread_id: thread, checkpoint_ns: '' } })) listed.push(t);
  assert.deepEqual(listed.map((t) => t.checkpoint.id), [...ids].reverse());
  listed.reverse().forEach((t, i) => {
    assert.equal(t.checkpoint.channel_values.n, i);
    assert.equal(t.metadata.step, i);
    assert.equal(t.parentConfig?.configurable.checkpoint_id, ids[i - 1]);
  });
  const page = [];
  for await (const t of B.list({ configurable: { thread_id: thread, checkpoint_ns: '' } },
    { before: { configurable: { checkpoint_id: ids[40] } }, limit: 5, filter: { source: 'loop' } })) page.push(t.checkpoint.id);
  assert.deepEqual(page, ids.slice(35, 40).reverse());

  // The same (task, idx) written by both at once: one write survives. A
  // regular write keeps the first; a special one (an error) the last.
  const cfg = { configurable: { thread_id: thread, checkpoint_ns: '', checkpoint_id: ids[59] } };
  await Promise.all(Array.from({ length: 20 }, (_, i) => [
    A.putWrites(cfg, [['ch', `A${i}`]], `task-${i}`), B.putWrites(cfg, [['ch', `B${i}`]], `task-${i}`),
    A.putWrites(cfg, [[fx.ERROR, `eA${i}`]], `err-${i}`), B.putWrites(cfg, [[fx.ERROR, `eB${i}`]], `err-${i}`),
  ]).flat());
  const writes = (await A.getTuple(cfg)).pendingWrites;
  assert.equal(writes.length, 40);
  for (let i = 0; i < 20; i++) {
    const regular = writes.filter(([task]) => task === `task-${i}`);
    assert.equal(regular.length, 1);
    assert.ok([`A${i}`, `B${i}`].includes(regular[0][2]));
    assert.equal(writes.filter(([task]) => task === `err-${i}`).length, 1);
  }
  await B.putWrites(cfg, [['ch', 'later']], 'task-0');
  await B.putWrites(cfg, [[fx.ERROR, 'later']], 'err-0');
  const again = (await A.getTuple(cfg)).pendingWrites;
  assert.deepEqual(again.find(([t]) => t === 'task-0'), writes.find(([t]) => t === 'task-0'), 'first regular write kept');
  assert.deepEqual(again.find(([t]) => t === 'err-0'), ['err-0', fx.ERROR, 'later'], 'special write replaced');

  // Real runs on different threads through both savers at once.
  const gA = fx.buildGraph(A);
  const gB = fx.buildGraph(B);
  const runs = await Promise.all(Array.from({ length: 6 }, (_, i) =>
    (i % 2 ? gA : gB).invoke({ log: [`hello ${i}`] }, { configurable: { thread_id: `conc-run-${i}` } })));
  runs.forEach((r, i) => assert.deepEqual(r.log, [`hello ${i}`, `agent saw hello ${i}`, `plan hello ${i}`, 'read']));
  for (let i = 0; i < 6; i++) {
    const h = await history(i % 2 ? gB : gA, { configurable: { thread_id: `conc-run-${i}` } });
    assert.equal(h.length, 4);
  }
});

/* ---- payloads and names --------------------------------------------------------------- */

test('binary payloads survive: raw bytes from the serde, and Uint8Array values', async () => {
  const c = connect();
  await c.flushdb();
  // A serde whose bytes are not UTF-8 (JSON bytes XOR 0xA5) under its own type tag.
  const json = new fx.JsonPlusSerializer();
  const xor = (u8) => u8.map((b) => b ^ 0xa5);
  const serde = {
    async dumpsTyped(v) { const [type, data] = await json.dumpsTyped(v); return [`xor-${type}`, xor(data)]; },
    async loadsTyped(type, data) {
      assert.match(type, /^xor-(json|bytes)$/);
      assert.equal(Object.getPrototypeOf(data), Uint8Array.prototype, 'the serde gets a plain Uint8Array');
      return json.loadsTyped(type.slice(4), xor(data));
    },
  };
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  for (const saver of [new fx.RedisSaver({ client: c, serde }), new fx.RedisSaver({ client: c })]) {
    const thread = `bin-${saver.serde === serde ? 'xor' : 'json'}`;
    const cp = { ...fx.emptyCheckpoint(), id: fx.uuid6(-1), channel_values: { raw: all, text: 'é\u0000☃' }, channel_versions: { raw: 1, text: 1 } };
    const meta = { source: 'input', step: -1, parents: {}, note: 'ü' };
    const cfg = await saver.put({ configurable: { thread_id: thread } }, cp, meta, { raw: 1, text: 1 });
    await saver.putWrites(cfg, [['raw', all], ['nested', { bytes: all }]], 'task');
    const got = await saver.getTuple({ configurable: { thread_id: thread } });
    assert.deepEqual(got.checkpoint, cp);
    assert.deepEqual(got.metadata, meta);
    assert.deepEqual(got.pendingWrites, [['task', 'raw', all], ['task', 'nested', { bytes: all }]]);
    const [listed] = await collect(saver.list({ configurable: { thread_id: thread } }, { filter: { note: 'ü' } }));
    assert.deepEqual(listed, got);
  }
  // The default serde stores a top-level Uint8Array as raw bytes, type "bytes".
  const stored = await c.hvalsBuffer('tc:{bin-json}:lg:blobs');
  assert.ok(stored.some((b) => b.includes(Buffer.from('bytes')) && b.includes(Buffer.from(all))));
});

test('namespaces, task ids and checkpoint ids with spaces, %, ! and | stay apart', async () => {
  const c = connect();
  await c.flushdb();
  const saver = new fx.RedisSaver({ client: c });
  const thread = 'names-1';
  const namespaces = ['', 'a', 'a b', 'a!', 'a%20b', 'a ', 'a|b:1', 'a%', '!'];
  const ids = {};
  for (const ns of namespaces) {
    ids[ns] = [];
    let parent;
    for (let i = 0; i < 3; i++) {
      const id = `${fx.uuid6(-1)}${i === 2 ? ' x%20' : ''}`;
      ids[ns].push(id);
      const cfg = await saver.put({ configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: parent } },
        { ...fx.emptyCheckpoint(), id, channel_values: { v: `${ns}/${i}` }, channel_versions: { v: i + 1 } },
        { source: 'loop', step: i, parents: {}, ns }, { v: i + 1 });
      await saver.putWrites(cfg, [['w', `${ns}/${i}`]], `task ${ns} %20`);
      parent = id;
    }
  }
  for (const ns of namespaces) {
    const listed = await collect(saver.list({ configurable: { thread_id: thread, checkpoint_ns: ns } }));
    assert.deepEqual(listed.map((t) => t.checkpoint.id), [...ids[ns]].reverse(), JSON.stringify(ns));
    for (const t of listed) {
      assert.equal(t.metadata.ns, ns);
      assert.equal(t.config.configurable.checkpoint_ns, ns);
      assert.deepEqual(t.pendingWrites.map((w) => w[0]), [`task ${ns} %20`]);
    }
    const latest = await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: ns } });
    assert.equal(latest.checkpoint.id, ids[ns][2]);
    assert.equal(latest.checkpoint.channel_values.v, `${ns}/2`);
    assert.deepEqual(latest.pendingWrites, [[`task ${ns} %20`, 'w', `${ns}/2`]]);
    const before = await collect(saver.list({ configurable: { thread_id: thread, checkpoint_ns: ns } },
      { before: latest.config }));
    assert.deepEqual(before.map((t) => t.checkpoint.id), [ids[ns][1], ids[ns][0]]);
  }
  const everything = await collect(saver.list({ configurable: { thread_id: thread } }));
  assert.equal(everything.length, namespaces.length * 3);
  const allIds = everything.map((t) => t.checkpoint.id);
  assert.deepEqual(allIds, [...allIds].sort().reverse(), 'newest first across namespaces');
});

test('pending writes come back in LangGraph\'s order: task path, task id, then idx as a number', async () => {
  const c = connect();
  await c.flushdb();
  const saver = new fx.RedisSaver({ client: c });
  const cfg = await saver.put({ configurable: { thread_id: 'order-1' } }, fx.emptyCheckpoint(),
    { source: 'loop', step: 0, parents: {} }, {});
  const twelve = Array.from({ length: 12 }, (_, i) => ['ch', i]);
  // Stored in an order none of the keys gives: task "z" has the first path.
  await saver.putWrites(cfg, twelve, 'a', '~__pregel_pull, 2');
  await saver.putWrites(cfg, [[fx.ERROR, 'boom']], 'a', '~__pregel_pull, 2');
  await saver.putWrites(cfg, [['__interrupt__', 'ask']], 'a', '~__pregel_pull, 2');
  await saver.putWrites(cfg, [['ch', 'z']], 'z', '~__pregel_pull, 1');
  await saver.putWrites(cfg, [['ch', 'input']], 'y'); // no task path: sorts first
  const got = (await saver.getTuple(cfg)).pendingWrites;
  assert.deepEqual(got, [
    ['y', 'ch', 'input'],
    ['z', 'ch', 'z'],
    ['a', '__interrupt__', 'ask'], // idx -3
    ['a', fx.ERROR, 'boom'], // idx -1
    ...twelve.map(([ch, v]) => ['a', ch, v]), // 0, 1, 2, …, 10, 11 (not 0, 1, 10, 11, 2, …)
  ]);
});
