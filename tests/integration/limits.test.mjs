// Hostile frames are refused cleanly, and the process keeps serving others.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, gateway } from './lib/harness.mjs';

let redis, tc;
gateway({ args: ['--max-frame-bytes', '4096'] }, (r, t) => { redis = r; tc = t; });

async function stillServing() {
  const c = await connect(tc.url('ok'));
  const r = await c.request({ id: 1, method: 'nope' });
  assert.equal(r.error, 'unknown_command');
  await c.close();
}

test('a 1 MiB message closes with 1009 naming the limit', async () => {
  const c = await connect(tc.url('big'));
  c.sendRaw('x'.repeat(1 << 20));
  const { code, reason } = await c.closed;
  assert.equal(code, 1009);
  assert.match(reason, /4096 bytes/);
  await stillServing();
});

test('a message just under the limit is answered', async () => {
  const c = await connect(tc.url('edge'));
  const cmd = JSON.stringify({ id: 1, method: 'nope', params: { pad: '' } });
  const padded = cmd.replace('"pad":""', `"pad":"${'p'.repeat(4090 - cmd.length)}"`);
  assert.ok(padded.length <= 4096 && padded.length > 4000);
  const r = await new Promise((res) => { c.pending.set(1, res); c.sendRaw(padded); });
  assert.equal(r.error, 'unknown_command');
  await c.close();
});

test('a binary message closes with 1003', async () => {
  const c = await connect(tc.url('bin'));
  c.sendRaw(Buffer.from([1, 2, 3]), { binary: true });
  assert.equal((await c.closed).code, 1003);
  await stillServing();
});

test('invalid UTF-8 in a text message closes with 1007', async () => {
  const c = await connect(tc.url('utf'));
  c.sendRaw(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), { binary: false });
  assert.equal((await c.closed).code, 1007);
  await stillServing();
});

test('a fragmented message is reassembled; fragments over the limit close 1009', async () => {
  const c = await connect(tc.url('frag'));
  const text = JSON.stringify({ id: 42, method: 'nope', params: {} });
  const reply = new Promise((res) => c.pending.set(42, res));
  c.ws.send(text.slice(0, 10), { fin: false });
  c.ws.send(text.slice(10, 20), { fin: false });
  c.ws.send(text.slice(20), { fin: true });
  assert.equal((await reply).error, 'unknown_command');
  for (let i = 0; i < 5; i++) c.ws.send('y'.repeat(1000), { fin: false });
  assert.equal((await c.closed).code, 1009);
  await stillServing();
});

test('garbage then good commands on one connection: both answered, connection kept', async () => {
  const c = await connect(tc.url('mixed'));
  c.sendRaw('\u0000\u0001garbage');
  c.sendRaw('{"id":');
  const r = await c.request({ id: 9, method: 'nope' });
  assert.equal(r.error, 'unknown_command');
  assert.equal(c.nullIdErrors.length, 2);
  assert.equal(c.ws.readyState, 1);
  await c.close();
});
