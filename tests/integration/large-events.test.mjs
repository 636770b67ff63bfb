// Big events (a values snapshot of a long or multimodal thread): carried whole to every kind of
// client, live and replayed, among small ones, without tripping the slow-consumer bound that
// small frames are held to; the append functions refuse one past 16 MiB by name.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { connect, produce, waitUntil, sse, redisClient, gateway } from './lib/harness.mjs';

const MiB = 1024 * 1024;

/** A values event whose JSON is about `bytes` long, of bytes deflate cannot shrink much. */
function bigValues(bytes, tag) {
  const blob = crypto.randomBytes(Math.floor((bytes * 3) / 4)).toString('base64');
  return { method: 'values', params: { namespace: [], data: { tag, blob } } };
}

function smalls(n, from) {
  return Array.from({ length: n }, (_, i) => ({
    method: 'messages',
    params: { namespace: [], data: { event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: `t${from + i} ` } } },
  }));
}

const START = { method: 'lifecycle', params: { namespace: [], data: { event: 'started', graphName: 'agent' } } };
const FILTER = { channels: ['messages', 'values', 'lifecycle'] };

/** Checks a client's events against what was appended: every seq once, in order, each big one whole. */
function assertWhole(got, sent, who) {
  assert.deepEqual(got.map((e) => e.seq), sent.map((_, i) => i + 1), `${who}: seqs`);
  sent.forEach((ev, i) => {
    if (ev.method !== 'values') return;
    assert.equal(got[i].params.data.tag, ev.params.data.tag, `${who}: event ${i + 1}`);
    assert.ok(got[i].params.data.blob === ev.params.data.blob, `${who}: event ${i + 1} arrived whole`);
  });
}

describe('big events', () => {
  let redis, tc;
  gateway({}, (r, t) => { redis = r; tc = t; });
  const base = () => `http://127.0.0.1:${tc.port}`;

  test('a 4 MiB values event reaches WebSocket and SSE clients whole, live, between small events', async () => {
    const thread = 'big-live';
    const sent = [START, ...smalls(300, 0), bigValues(4 * MiB, 'a'), ...smalls(300, 300), bigValues(4 * MiB, 'b'),
      ...smalls(50, 600)];
    const plain = await connect(tc.url(thread), { perMessageDeflate: false });
    const deflated = await connect(tc.url(thread));
    for (const c of [plain, deflated])
      assert.equal((await c.request({ id: 1, method: 'subscription.subscribe', params: FILTER })).type, 'success');
    const stream = await sse(`${base()}/threads/${thread}/stream`, {
      method: 'POST', body: JSON.stringify(FILTER), headers: { 'content-type': 'application/json' } });
    assert.equal(stream.status, 200);
    await produce(redis.url, thread, sent);
    const done = () => plain.events.length >= sent.length && deflated.events.length >= sent.length
      && stream.events.length >= sent.length;
    await waitUntil(done, 30000, 'every event at every client');
    assertWhole(plain.events, sent, 'websocket');
    assertWhole(deflated.events, sent, 'websocket, permessage-deflate');
    assertWhole(stream.events.map((e) => e.data), sent, 'sse');
    assert.deepEqual(stream.events.map((e) => e.id), plain.events.map((e) => e.eventId));
    stream.close();
    await plain.close();
    await deflated.close();
  });

  test('replayed: to a late subscribe, a reconnect from before it, an SSE stream since a seq', async () => {
    const thread = 'big-replay';
    const sent = [START, ...smalls(100, 0), bigValues(4 * MiB, 'c'), ...smalls(100, 100), bigValues(4 * MiB, 'd')];
    await produce(redis.url, thread, sent);

    const late = await connect(tc.url(thread));
    const r = await late.request({ id: 1, method: 'subscription.subscribe', params: FILTER });
    assert.equal(r.result.replayedEvents, sent.length);
    await waitUntil(() => late.events.length >= sent.length, 30000, 'the replay');
    assertWhole(late.events, sent, 'subscribe');

    const back = await connect(tc.url(thread), { perMessageDeflate: false });
    const rr = await back.request({ id: 1, method: 'subscription.reconnect', params: {
      runId: 'any', lastEventId: late.events[50].eventId, subscriptions: [r.result.subscriptionId] } });
    assert.equal(rr.result.restored, true);
    await waitUntil(() => back.events.length >= sent.length - 51, 30000, 'the reconnect replay');
    assertWhole([...late.events.slice(0, 51), ...back.events], sent, 'reconnect');

    const since = await sse(`${base()}/threads/${thread}/stream?since=10&channels=messages,values,lifecycle`,
      { headers: { accept: 'text/event-stream' } });
    await waitUntil(() => since.events.length >= sent.length - 10, 30000, 'the SSE replay');
    assertWhole([...late.events.slice(0, 10), ...since.events.map((e) => e.data)], sent, 'sse since');
    since.close();
    await late.close();
    await back.close();
  });

  test('a client that reads nothing is still cut off once big frames pass their own bound', async () => {
    const thread = 'big-stalled';
    const c = await connect(tc.url(thread), { perMessageDeflate: false });
    assert.equal((await c.request({ id: 1, method: 'subscription.subscribe', params: FILTER })).type, 'success');
    const cuts = async () => Number(/^threadcast_slow_consumer_cuts_total (\d+)$/m.exec(await (await tc.http('/metrics')).text())[1]);
    const before = await cuts();
    c.ws._socket.pause(); // the kernel's buffers fill, then the gateway's queue
    const sent = [START, ...Array.from({ length: 24 }, (_, i) => bigValues(4 * MiB, `s${i}`))];
    await produce(redis.url, thread, sent);
    await waitUntil(async () => (await cuts()) > before, 30000, 'the gateway cuts the client off');
    c.ws._socket.resume();
    const closed = await c.closed;
    assert.equal(closed.code, 1013);
    assert.ok(c.events.length < sent.length, 'not everything was delivered');
    // What did arrive is a prefix, each event whole.
    assertWhole(c.events, sent.slice(0, c.events.length), 'before the cut');
  });

  test('meta keeps the size of the history\'s largest entry; replays read small entries with plain XRANGE, big ones with the function', async () => {
    const rc = redisClient(redis.port);
    // Redis counts a function's own XRANGEs under xrange too: what tells the paths apart is how many
    // FCALL_ROs a replay takes (a plain replay: one, past meta's head).
    const calls = async () => {
      const info = await rc.cmd('INFO', 'commandstats');
      const n = (cmd) => Number((new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(info) || [0, 0])[1]);
      return { xrange: n('xrange'), fcall_ro: n('fcall_ro') };
    };
    /** The bytes of a stream entry's fields, names included, as the function counts them. */
    const largest = async (thread) => {
      let max = 0;
      for (const [, fields] of await rc.cmd('XRANGE', `tc:{${thread}}:events`, '-', '+'))
        max = Math.max(max, fields.reduce((b, f) => b + Buffer.byteLength(f), 0));
      return max;
    };
    const replay = async (thread, n) => {
      const before = await calls();
      const c = await connect(tc.url(thread), { perMessageDeflate: false });
      const r = await c.request({ id: 1, method: 'subscription.subscribe', params: FILTER });
      assert.equal(r.result.replayedEvents, n);
      await waitUntil(() => c.events.length >= n, 30000, 'the replay');
      assert.deepEqual(c.events.map((e) => e.seq), Array.from({ length: n }, (_, i) => i + 1));
      await c.close();
      const after = await calls();
      return { xrange: after.xrange - before.xrange, fcall_ro: after.fcall_ro - before.fcall_ro };
    };

    const thread = 'entry-max';
    await produce(redis.url, thread, [START, ...smalls(1200, 0)]);
    const max = await largest(thread);
    assert.deepEqual(await rc.cmd('HMGET', `tc:{${thread}}:meta`, 'entry_max', 'entry_seq'), [String(max), '1201']);
    // 1201 events in pages of 512, counted then sent; one function call reads past meta's head.
    const small = await replay(thread, 1201);
    assert.ok(small.xrange >= 3, `plain reads: ${JSON.stringify(small)}`);
    assert.ok(small.fcall_ro <= 2, `function reads: ${JSON.stringify(small)}`);

    // A bigger entry raises it; a smaller one leaves it.
    await produce(redis.url, thread, [bigValues(256 * 1024, 'm')]);
    const raised = await largest(thread);
    assert.ok(raised > 256 * 1024);
    assert.equal(await rc.cmd('HGET', `tc:{${thread}}:meta`, 'entry_max'), String(raised));
    await produce(redis.url, thread, smalls(1, 1200));
    assert.equal(await rc.cmd('HGET', `tc:{${thread}}:meta`, 'entry_max'), String(raised));
    // Entries of up to 256 KiB: too few to a plain read that stays within 4 MiB; the function reads,
    // counting then sending (no more than 1 MiB a read: the 256 KiB one with a few hundred others).
    const big = await replay(thread, 1203);
    assert.ok(big.fcall_ro >= 5, `function reads: ${JSON.stringify(big)}`);

    // A history begun by an earlier version has no entry_max, and gets none: its entries were not measured.
    const old = 'entry-max-old';
    await produce(redis.url, old, [START, ...smalls(10, 0)]);
    assert.equal(await rc.cmd('HDEL', `tc:{${old}}:meta`, 'entry_max', 'entry_seq'), 2);
    await produce(redis.url, old, [bigValues(1024, 'o')]);
    assert.deepEqual(await rc.cmd('HMGET', `tc:{${old}}:meta`, 'entry_max', 'entry_seq'), [null, null]);
    const unknown = await replay(old, 12);
    assert.ok(unknown.fcall_ro >= 2, `function reads: ${JSON.stringify(unknown)}`); // the count, the tail

    // An event appended as an earlier version's library does it (its library loaded again during a
    // rolling deploy: seq taken, the entry added, entry_max not raised) leaves the history unmeasured
    // from there, for good: later appends do not measure it again, and replays read it with the function.
    const mixed = 'entry-max-mixed';
    await produce(redis.url, mixed, [START, ...smalls(10, 0)]);
    assert.deepEqual(await rc.cmd('HMGET', `tc:{${mixed}}:meta`, 'entry_seq'), ['11']);
    assert.equal(await rc.cmd('HINCRBY', `tc:{${mixed}}:meta`, 'seq', 1), 12);
    const earlier = JSON.stringify(bigValues(512 * 1024, 'e'));
    assert.equal(await rc.cmd('XADD', `tc:{${mixed}}:events`, '12-0', 'm', 'values', 'n', '', 'e', earlier), '12-0');
    await produce(redis.url, mixed, smalls(1, 10));
    assert.deepEqual(await rc.cmd('HMGET', `tc:{${mixed}}:meta`, 'seq', 'entry_seq'), ['13', '11']);
    const unmeasured = await replay(mixed, 13);
    assert.ok(unmeasured.fcall_ro >= 2, `function reads: ${JSON.stringify(unmeasured)}`);
    rc.close();
  });

  test('the append functions take 16 MiB and refuse a byte more, naming the size', async () => {
    const rc = redisClient(redis.port);
    const fill = (n) => `{"method":"values","params":{"namespace":[],"data":{"s":"${'x'.repeat(n)}"}}}`;
    const shell = fill(0).length;
    const ok = await rc.cmd('FCALL', 'threadcast_append', 1, 'big-limit', fill(16 * MiB - shell));
    assert.equal(ok, 1);
    const refused = await rc.cmd('FCALL', 'threadcast_append', 1, 'big-limit', fill(16 * MiB - shell + 1));
    assert.ok(refused instanceof Error);
    assert.match(refused.message, /event is 16777217 bytes; the limit is 16777216/);
    assert.equal(await rc.cmd('HGET', 'tc:{big-limit}:meta', 'seq'), '1');
    rc.close();
  });
});
