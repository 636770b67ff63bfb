// Spec §5: hostile frames and load, with --max-frame-bytes 4096. After each
// refusal the process is still up and serves a fresh client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, gateway, waitUntil, exchange } from './lib/harness.mjs';

const LIMIT = 4096;
let tc;
gateway({ args: ['--max-frame-bytes', String(LIMIT)] }, (_r, t) => { tc = t; });

async function stillServing() {
  assert.equal(tc.exitCode, null, 'threadcast is still running');
  assert.equal(tc.signal, null, 'threadcast is still running');
  assert.equal((await tc.http('/healthz')).status, 200);
  const c = await connect(tc.url('spec-fresh'));
  const r = await c.request({ id: 7, method: 'subscription.subscribe', params: { channels: ['messages'] } });
  assert.deepEqual([r.type, r.id], ['success', 7],
    `${JSON.stringify(r)}\nlast log lines:\n${tc.stderr.split('\n').slice(-20).join('\n')}`);
  await c.close();
}

/** A valid command padded with whitespace to exactly n bytes. */
function padded(id, n) {
  const cmd = JSON.stringify({ id, method: 'nope', params: {} });
  const text = cmd.slice(0, -1) + ' '.repeat(n - cmd.length) + '}';
  assert.equal(Buffer.byteLength(text), n);
  return text;
}

test('a 1 MiB text frame → close 1009 with a reason naming bytes', async () => {
  const c = await connect(tc.url('spec-big'));
  c.sendRaw('x'.repeat(1 << 20));
  const { code, reason } = await c.closed;
  assert.equal(code, 1009);
  assert.match(reason, /bytes/);
  assert.deepEqual(c.frames, [], 'no reply to the oversized frame');
  await stillServing();
});

test('frames just under and exactly at --max-frame-bytes are answered', async () => {
  const c = await connect(tc.url('spec-edge'));
  const replies = await exchange(c, [padded(1, 4000), padded(2, LIMIT)]);
  assert.deepEqual(replies.map((r) => [r.id, r.error]), [[1, 'unknown_command'], [2, 'unknown_command']]);
  assert.equal(c.ws.readyState, 1);
  await c.close();
});

test('one byte over --max-frame-bytes → close 1009', async () => {
  const c = await connect(tc.url('spec-over'));
  c.sendRaw(padded(1, LIMIT + 1));
  const { code, reason } = await c.closed;
  assert.equal(code, 1009);
  assert.match(reason, /bytes/);
  assert.deepEqual(c.frames, []);
  await stillServing();
});

test('a binary frame → close 1003', async () => {
  const c = await connect(tc.url('spec-bin'));
  c.sendRaw(Buffer.from(JSON.stringify({ id: 1, method: 'nope', params: {} })), { binary: true });
  const { code } = await c.closed;
  assert.equal(code, 1003);
  assert.deepEqual(c.frames, []);
  await stillServing();
});

test('invalid UTF-8 in a text frame → close 1007', async () => {
  const c = await connect(tc.url('spec-utf8'));
  c.sendRaw(Buffer.from([0x7b, 0x22, 0xff, 0xff, 0x22, 0x7d]), { binary: false });
  const { code } = await c.closed;
  assert.equal(code, 1007);
  assert.deepEqual(c.frames, []);
  await stillServing();
});

test('a fragmented message is reassembled and answered once', async () => {
  const c = await connect(tc.url('spec-frag'));
  const text = JSON.stringify({ id: 42, method: 'subscription.subscribe', params: { channels: ['messages'] } });
  const cut = [7, 20, 33];
  const start = c.frames.length;
  c.ws.send(text.slice(0, cut[0]), { fin: false });
  c.ws.send(text.slice(cut[0], cut[1]), { fin: false });
  c.ws.send(text.slice(cut[1], cut[2]), { fin: false });
  c.ws.send(text.slice(cut[2]), { fin: true });
  const replies = await exchange(c, []);
  const mine = c.frames.slice(start).filter((f) => f.id === 42);
  assert.equal(mine.length, 1);
  assert.equal(mine[0].type, 'success', JSON.stringify(mine[0]));
  assert.deepEqual(replies.map((r) => r.id), [42], 'nothing else was answered');
  await c.close();
});

test('10,000 commands in one burst: each answered exactly once, in order; the socket stays open', async () => {
  const c = await connect(tc.url('spec-burst'));
  const n = 10000;
  for (let i = 1; i <= n; i++) c.sendRaw(`{"id":${i},"method":"nope","params":{}}`);
  await waitUntil(() => c.frames.length >= n || c.ws.readyState !== 1, 30000, 'all replies');
  assert.equal(c.ws.readyState, 1, 'still open');
  assert.equal(c.frames.length, n);
  const ids = c.frames.map((f) => f.id);
  const firstOut = ids.findIndex((id, i) => id !== i + 1);
  assert.equal(firstOut, -1, `reply ${firstOut} has id ${ids[firstOut]}`);
  assert.ok(c.frames.every((f) => f.error === 'unknown_command'));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(c.frames.length, n, 'no extra replies');
  assert.equal(c.ws.readyState, 1, 'still open');
  await c.close();
});

test('50 concurrent connections × 200 commands: every connection gets all its replies', async () => {
  const clients = await Promise.all(Array.from({ length: 50 }, (_, k) => connect(tc.url(`spec-many-${k % 7}`))));
  for (let i = 1; i <= 200; i++) for (const c of clients) c.sendRaw(`{"id":${i},"method":"nope","params":{}}`);
  await waitUntil(() => clients.every((c) => c.frames.length >= 200), 30000, 'replies on every connection');
  const want = Array.from({ length: 200 }, (_, i) => i + 1);
  for (const c of clients) {
    assert.deepEqual(c.frames.map((f) => f.id), want);
    assert.equal(c.ws.readyState, 1);
  }
  await Promise.all(clients.map((c) => c.close()));
  await stillServing();
});
