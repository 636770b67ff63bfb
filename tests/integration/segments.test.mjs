// Frames queued for a connection leave in few, large TCP segments: a replay
// batch is coalesced into writes of up to 64 KiB, and a large event leaves in
// one write. The server's socket is read with `ss -ti` (segs_out, bytes_sent),
// so the test sees what the kernel sent, not what the client's reads merged.
// The clients offer no permessage-deflate: this is the uncompressed path
// (deflate.test.mjs tests the compressed one).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startRedis, startThreadcast, connect, stopAll, produce, waitUntil } from './lib/harness.mjs';

let redis, tc;
before(async () => {
  redis = await startRedis();
  tc = await startThreadcast({ redisUrl: redis.url });
  await tc.ready();
});
after(async () => {
  const reports = tc.sanitizerReports();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, []);
});

/** segs_out and bytes_sent of the server's side of client's connection. */
function serverSocket(client) {
  const { localPort, remotePort } = client.ws._socket;
  const out = execFileSync('ss', ['-tinH', 'state', 'established',
    `( sport = :${remotePort} and dport = :${localPort} )`], { encoding: 'utf8' });
  const segs = /segs_out:(\d+)/.exec(out);
  const bytes = /bytes_sent:(\d+)/.exec(out);
  assert.ok(segs && bytes, `ss printed no counters for the connection: ${out}`);
  return { segs: Number(segs[1]), bytes: Number(bytes[1]) };
}

const padded = (i, n) => ({ method: 'custom:progress',
  params: { namespace: [], data: { name: 'progress', payload: { i, pad: 'x'.repeat(n) } } } });

test('a replay leaves in segments of kilobytes, not one per frame', async () => {
  const thread = 'seg-replay';
  const N = 400;
  await produce(redis.url, thread, Array.from({ length: N }, (_, i) => padded(i, 400)));
  const c = await connect(tc.url(thread), { perMessageDeflate: false });
  const before = serverSocket(c);
  const r = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['custom:progress'] } });
  assert.equal(r.type, 'success');
  await waitUntil(() => c.events.length >= N, 15000, 'the replay');
  assert.deepEqual(c.events.map((e) => e.seq), Array.from({ length: N }, (_, i) => i + 1));
  const after = serverSocket(c);
  const segs = after.segs - before.segs, bytes = after.bytes - before.bytes;
  assert.ok(bytes > N * 400, `sent ${bytes} bytes`);
  // Coalesced writes of up to 64 KiB leave in 4-8 segments here; frame by
  // frame, or in lws' 276-byte pieces (tx_packet_size unset), in 19-700
  // (fewer than the writes when the kernel's autocorking merges them).
  assert.ok(segs <= 16, `${N} frames (${bytes} bytes) left in ${segs} segments`);
  await c.close();
});

test('a 48 KiB event leaves in one write', async () => {
  const thread = 'seg-live';
  const c = await connect(tc.url(thread), { perMessageDeflate: false });
  const r = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['custom:progress'] } });
  assert.equal(r.type, 'success');
  const before = serverSocket(c);
  await produce(redis.url, thread, [padded(0, 48 * 1024)]);
  await waitUntil(() => c.events.length >= 1, 10000, 'the event');
  assert.equal(c.events[0].params.data.payload.pad.length, 48 * 1024);
  const after = serverSocket(c);
  assert.ok(after.bytes - before.bytes > 48 * 1024);
  // One write is one segment on loopback (MTU 64 KiB); lws' 276-byte pieces
  // left in 16-173 here.
  assert.ok(after.segs - before.segs <= 3, `a 48 KiB frame left in ${after.segs - before.segs} segments`);
  await c.close();
});
