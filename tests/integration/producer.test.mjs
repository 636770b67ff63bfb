// The producer contract as agent runtimes use it: FCALL threadcast_append and
// threadcast_append_batch against a real redis-server, what they store, what
// they refuse, how they keep a thread's keys alive, and the batch doorbell
// reaching a live subscriber through threadcast; then threadcast-produce's
// batching as its users see it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  startRedis, startThreadcast, connect, stopAll, produce, produceBin, redisClient, storedEvents,
  waitUntil, sleep,
} from './lib/harness.mjs';

let redis, tc, rc;
before(async () => {
  redis = await startRedis();
  tc = await startThreadcast({ redisUrl: redis.url });
  await tc.ready();
  rc = redisClient(redis.port);
});
after(async () => {
  rc.close();
  const reports = tc.sanitizerReports();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, []);
});

const custom = (data, namespace = []) => ({ method: 'custom', params: { namespace, data } });
const batch = (thread, events, ...opts) => rc.cmd('FCALL', 'threadcast_append_batch', 1, thread,
  events.length, ...events.map((e) => (typeof e === 'string' ? e : JSON.stringify(e))), ...opts);
const meta = async (thread) => {
  const flat = await rc.cmd('HGETALL', `tc:{${thread}}:meta`);
  const m = {};
  for (let i = 0; i < flat.length; i += 2) m[flat[i]] = flat[i + 1];
  return m;
};

test('a batch takes consecutive seqs, answers the first, and reaches a live subscriber whole', async () => {
  const thread = 'pb-live';
  const c = await connect(tc.url(thread));
  const r = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['custom', 'values'] } });
  assert.equal(r.type, 'success');
  assert.equal(await batch(thread, [custom('a')]), 1);
  // JSON may hold raw newlines as whitespace, and multi-byte characters:
  // the doorbell frames each event by its byte length, not by lines.
  const events = [
    custom('b', ['sub:1']),
    '{"method":"values",\n"params":{"namespace":[],\n"data":{"text":"héllo ✓ 𝄞"}}}',
    custom({ n: 3, s: 'line\nbreak' }),
    custom('d'),
  ];
  assert.equal(await batch(thread, events), 2);
  assert.equal(await batch(thread, [custom('e')]), 6);
  await waitUntil(() => c.events.length >= 6, 5000, 'six events');
  assert.deepEqual(c.events.map((e) => e.seq), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(c.events.map((e) => e.method), ['custom', 'custom', 'values', 'custom', 'custom', 'custom']);
  assert.deepEqual(c.events[1].params.namespace, ['sub:1']);
  assert.equal(c.events[2].params.data.text, 'héllo ✓ 𝄞');
  assert.deepEqual(c.events[3].params.data, { n: 3, s: 'line\nbreak' });
  const stored = await storedEvents(rc, thread);
  assert.deepEqual(stored.map((e) => e.seq), [1, 2, 3, 4, 5, 6]);
  assert.equal((await meta(thread)).seq, '6');
  // The batch's values event is the thread's latest values.
  assert.match(await rc.cmd('HGET', `tc:{${thread}}:values`, ''), /^3\n.*héllo/s);
  await c.close();
});

test('a batch with one bad event changes nothing, and the error names the event', async () => {
  const thread = 'pb-refuse';
  assert.equal(await batch(thread, [custom(1)]), 1);
  const cases = [
    [[custom(2), { method: 'bogus', params: { namespace: [], data: 1 } }], /event 2\.method "bogus" is not an event method/],
    [[custom(2), custom(3), 'not json'], /event 3 must be a JSON object/],
    [[custom(2), { method: 'custom', seq: 9, params: { namespace: [], data: 1 } }], /event 2 must not carry/],
    [[{ method: 'lifecycle', params: { namespace: [], data: { event: 'started' } } },
      { method: 'lifecycle', params: { namespace: [], data: { event: 'nope' } } }], /lifecycle event 2\.params\.data\.event must be/],
    [[custom(2), { method: 'input.requested', params: { namespace: [], data: {} } }], /input\.requested event 2\.params\.data\.interrupt_id/],
  ];
  for (const [events, re] of cases) {
    const res = await batch(thread, events);
    assert.ok(res instanceof Error, `expected a refusal, got ${res}`);
    assert.match(res.message, /^ERR threadcast: /);
    assert.match(res.message, re);
    assert.doesNotMatch(res.message, /script:|user_function/);
  }
  const m = await meta(thread);
  assert.equal(m.seq, '1');
  assert.equal(m.run_status, undefined, 'the refused batch\'s lifecycle event left no trace');
  assert.equal(await rc.cmd('XLEN', `tc:{${thread}}:events`), 1);
  assert.equal(await rc.cmd('EXISTS', `tc:{${thread}}:tree`), 0);
  assert.equal(await batch(thread, [custom(2)]), 2);
});

test('malformed calls get a usage error', async () => {
  const t = 'pb-usage';
  const ev = JSON.stringify(custom(1));
  const cases = [
    [['FCALL', 'threadcast_append_batch', 1, t, 0, ev], /count must be an integer from 1 to 1000/],
    [['FCALL', 'threadcast_append_batch', 1, t, 1001, ev], /count must be an integer from 1 to 1000/],
    [['FCALL', 'threadcast_append_batch', 1, t, 'x', ev], /count must be an integer/],
    [['FCALL', 'threadcast_append_batch', 1, t, 3, ev, ev], /count is 3 but only 2 events follow/],
    [['FCALL', 'threadcast_append_batch', 1, t, 1, ev, 'MAXLEN', 0], /MAXLEN must be a positive integer/],
    // Decimal digits only: what Lua's tonumber also reads (1e3, 0x10, 10.0) XADD would not.
    [['FCALL', 'threadcast_append', 1, t, ev, 'MAXLEN', '1e3'], /MAXLEN must be a positive integer/],
    [['FCALL', 'threadcast_append', 1, t, ev, 'MAXLEN', '0x10'], /MAXLEN must be a positive integer/],
    [['FCALL', 'threadcast_append', 1, t, ev, 'MAXLEN', '1'.repeat(19)], /at most 18 digits/],
    [['FCALL', 'threadcast_append', 1, t, ev, 'TTL', '10.0'], /TTL must be a positive integer/],
    [['FCALL', 'threadcast_append', 1, t, ev, 'TTL', '-5'], /TTL must be a positive integer/],
    [['FCALL', 'threadcast_append', 1, t, ev, 'TTL', '12345678901'], /at most 10 digits/],
    [['FCALL', 'threadcast_append_batch', 1, t, 1, ev, 'COLOR', 'red'], /unknown option COLOR/],
    [['FCALL', 'threadcast_append_batch', 1, t, 1, ev, 'TTL'], /TTL needs a value/],
    [['FCALL', 'threadcast_append', 1, t], /usage: FCALL threadcast_append/],
    [['FCALL', 'threadcast_append_batch', 1, 'bad{id}', 1, ev], /thread id must be/],
  ];
  for (const [args, re] of cases) {
    const res = await rc.cmd(...args);
    assert.ok(res instanceof Error, `${args.slice(4).join(' ')}: expected a refusal, got ${res}`);
    assert.match(res.message, re);
  }
  assert.equal(await rc.cmd('EXISTS', `tc:{${t}}:meta`), 0);
});

test('FENCE: an append is taken only while the thread\'s lock holds its owner', async () => {
  const t = 'pb-fence';
  await rc.cmd('SET', `tc:{${t}}:lg:lock`, 'worker-a', 'PX', '5000');
  assert.equal(await batch(t, [custom(1), custom(2)], 'FENCE', 'worker-a'), 1);
  assert.equal(await rc.cmd('FCALL', 'threadcast_append', 1, t, JSON.stringify(custom(3)), 'FENCE', 'worker-a'), 3);
  for (const res of [await batch(t, [custom(4)], 'FENCE', 'worker-b'),
    await rc.cmd('FCALL', 'threadcast_append', 1, t, JSON.stringify(custom(4)), 'FENCE', 'worker-b')]) {
    assert.ok(res instanceof Error, String(res));
    assert.match(res.message, /^ERR threadcast: FENCED: the lock of thread pb-fence is not held by worker-b$/);
  }
  await rc.cmd('DEL', `tc:{${t}}:lg:lock`);
  const lapsed = await batch(t, [custom(4)], 'FENCE', 'worker-a');
  assert.match(lapsed.message, /FENCED/, 'a lapsed lock fences its old owner too');
  assert.equal(await batch(t, [custom(4)]), 4, 'without FENCE the lock is not looked at');
  assert.equal((await meta(t)).seq, '4', 'the refused appends changed nothing');
  assert.match((await rc.cmd('FCALL', 'threadcast_append', 1, t, JSON.stringify(custom(5)), 'FENCE', '')).message, /FENCE must be 1 to 200/);
});

test('BATCH: a call sent again (its answer lost when Redis restarted) is appended once and answers its seq again', async () => {
  const t = 'pb-batch';
  assert.equal(await batch(t, [custom(1), custom(2)], 'BATCH', 'w:1'), 1);
  assert.equal(await batch(t, [custom(1), custom(2)], 'BATCH', 'w:1'), 1, 'the same call again: the seq it had');
  assert.equal(await rc.cmd('FCALL', 'threadcast_append', 1, t, JSON.stringify(custom(3)), 'BATCH', 'w:2'), 3);
  assert.equal(await rc.cmd('FCALL', 'threadcast_append', 1, t, JSON.stringify(custom(3)), 'BATCH', 'w:2'), 3);
  assert.deepEqual((await storedEvents(rc, t)).map((e) => [e.seq, e.params.data]), [[1, 1], [2, 2], [3, 3]]);
  assert.equal((await meta(t)).batch, 'w:2\n3');
  // only the last call is remembered; a call without BATCH is always appended
  assert.equal(await batch(t, [custom(4)], 'BATCH', 'w:3'), 4);
  assert.equal(await batch(t, [custom(4)]), 5);
  assert.equal(await batch(t, [custom(1), custom(2)], 'BATCH', 'w:1'), 6, 'an older id is a new call');
  // a refused call stores nothing, so it can be sent again with its id once fixed
  const refused = await batch(t, [custom(7), '{"method":"nope","params":{"namespace":[],"data":1}}'], 'BATCH', 'w:4');
  assert.ok(refused instanceof Error, String(refused));
  assert.equal(await batch(t, [custom(7)], 'BATCH', 'w:4'), 8);
  assert.match((await batch(t, [custom(9)], 'BATCH', '')).message, /BATCH must be 1 to 200/);
});

test('a batch keeps the run, tree and interrupt indexes as the events one by one would', async () => {
  const one = 'pb-idx-1', many = 'pb-idx-n';
  const ev = [
    custom('before'),
    { method: 'lifecycle', params: { namespace: [], data: { event: 'started', graph_name: 'g' } } },
    { method: 'lifecycle', params: { namespace: ['sub:1'], data: { event: 'started', graphName: 's' } } },
    { method: 'input.requested', params: { namespace: ['sub:1'], data: { interrupt_id: 'i1', payload: 1 } } },
    { method: 'input.requested', params: { namespace: ['sub:1'], data: { interrupt_id: 'i2', payload: 2 } } },
    { method: 'input.answered', params: { namespace: ['sub:1'], data: { interrupt_ids: ['i1'] } } },
    { method: 'checkpoints', params: { namespace: [], data: { id: 'c1', step: 1 } } },
    { method: 'lifecycle', params: { namespace: [], data: { event: 'interrupted' } } },
  ];
  for (const e of ev) await rc.cmd('FCALL', 'threadcast_append', 1, one, JSON.stringify(e), 'RUN', 'r1');
  assert.equal(await batch(many, ev, 'RUN', 'r1'), 1);
  // The same, but for the epochs, expiries and timestamps the function filled in.
  const untimed = (a) => a.map((s) => s.replace(/"timestamp":\d+/g, '"timestamp":0'));
  const strip = (m) => { const { epoch, expires_at, ...rest } = m; return Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, untimed([v])[0]])); };
  const [m1, mn] = [await meta(one), await meta(many)];
  assert.deepEqual(strip(mn), strip(m1));
  assert.equal(mn.run_seq, '2');
  assert.equal(mn.run_id, 'r1');
  assert.equal(mn.run_status, 'interrupted');
  for (const k of ['tree', 'interrupts']) {
    assert.deepEqual(untimed(await rc.cmd('HGETALL', `tc:{${many}}:${k}`)),
      untimed(await rc.cmd('HGETALL', `tc:{${one}}:${k}`)), k);
  }
  assert.deepEqual(await rc.cmd('HKEYS', `tc:{${many}}:interrupts`), ['i2']);
});

test('a thread\'s keys live TTL past a refresh, refreshed once an eighth of the TTL has passed', async () => {
  const t = 'pb-ttl';
  const keys = ['meta', 'events', 'tree', 'values', 'interrupts'].map((k) => `tc:{${t}}:${k}`);
  const ev = [
    { method: 'lifecycle', params: { namespace: [], data: { event: 'started' } } },
    { method: 'values', params: { namespace: [], data: { x: 1 } } },
    { method: 'input.requested', params: { namespace: [], data: { interrupt_id: 'i', payload: 0 } } },
  ];
  assert.equal(await batch(t, ev, 'TTL', 80), 1);
  for (const k of keys) {
    const ms = await rc.cmd('PTTL', k);
    assert.ok(ms > 78000 && ms <= 80000, `${k}: PTTL ${ms}`);
  }
  await sleep(1100);
  // Within the first eighth (10 s of 80): no refresh, the keys keep ageing.
  await batch(t, [custom(1)], 'TTL', 80);
  for (const k of ['meta', 'events']) {
    const ms = await rc.cmd('PTTL', `tc:{${t}}:${k}`);
    assert.ok(ms < 79000, `${k} was refreshed early: PTTL ${ms}`);
  }
  // A different TTL applies at once.
  await batch(t, [custom(2)], 'TTL', 8);
  for (const k of keys) {
    const ms = await rc.cmd('PTTL', k);
    assert.ok(ms > 6000 && ms <= 8000, `${k} after TTL 8: PTTL ${ms}`);
  }
  await sleep(1100);
  // More than an eighth (1 s of 8) has passed: this append refreshes them all.
  await batch(t, [custom(3)], 'TTL', 8);
  for (const k of keys) {
    const ms = await rc.cmd('PTTL', k);
    assert.ok(ms > 7500 && ms <= 8000, `${k} not refreshed: PTTL ${ms}`);
  }
  assert.equal((await meta(t)).ttl, '8');
});

test('threadcast-produce sends batches, prints every seq, and names the line of a refused event', async () => {
  const t = 'pb-tool';
  const good = Array.from({ length: 40 }, (_, i) => custom(i));
  const { seqs } = await produce(redis.url, t, good);
  assert.deepEqual(seqs, Array.from({ length: 40 }, (_, i) => i + 1));

  // Line 4 (after a blank line) is bad: its batch of the default 16 is refused whole.
  const lines = [custom('a'), custom('b'), '', '{"method":"nope","params":{"namespace":[],"data":1}}', custom('c')]
    .map((e) => (typeof e === 'string' ? e : JSON.stringify(e)));
  const refused = await produce(redis.url, t, lines, { allowFail: true });
  assert.equal(refused.code, 1);
  assert.deepEqual(refused.seqs, []);
  assert.match(refused.stderr, /^threadcast-produce: event 4: ERR threadcast: event\.method "nope"/m);
  assert.match(refused.stderr, /events 1-5 not appended: a batch is appended whole or not at all/);
  assert.equal((await meta(t)).seq, '40');

  // --batch 1: each on its own, so the good ones are appended.
  const single = await produce(redis.url, t, lines, { allowFail: true, args: ['--batch', '1'] });
  assert.equal(single.code, 1);
  assert.deepEqual(single.seqs, [41, 42, 43]);
  assert.match(single.stderr, /^threadcast-produce: event 4: ERR threadcast: event\.method "nope"/m);
  assert.doesNotMatch(single.stderr, /not appended/);
  assert.deepEqual((await storedEvents(rc, t)).slice(40).map((e) => e.params.data), ['a', 'b', 'c']);
});

test('threadcast-produce does not hold a slow producer\'s event back to fill a batch', async () => {
  const t = 'pb-slow';
  const p = spawn(produceBin, ['--redis-url', redis.url, t], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  const exited = new Promise((r) => p.on('exit', r));
  try {
    p.stdin.write(JSON.stringify(custom(1)) + '\n');
    // The pipe stays open: the first event is appended (and its seq printed)
    // while the producer is still waiting for more.
    await waitUntil(() => out === '1\n', 5000, 'the first seq');
    p.stdin.write(JSON.stringify(custom(2)) + '\n' + JSON.stringify(custom(3)) + '\n');
    await waitUntil(() => out === '1\n2\n3\n', 5000, 'the next seqs');
    p.stdin.end();
    assert.equal(await exited, 0);
  } finally {
    p.kill('SIGKILL');
  }
});
