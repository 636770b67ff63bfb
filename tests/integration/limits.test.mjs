// Limits and hostile clients: oversized, binary, invalid and fragmented frames, floods of
// commands, subscriptions and pings, huge filters, idle and half-open sockets. Every
// attack is refused cleanly, and the process keeps serving others.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import crypto from 'node:crypto';
import { startRedis, startThreadcast, connect, stopAll, gateway, waitUntil, exchange, produce } from './lib/harness.mjs';

// Hostile frames are refused cleanly, and the process keeps serving others.
describe('frame limits (--max-frame-bytes 4096)', () => {
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
});

// Spec §5: hostile frames and load, with --max-frame-bytes 4096. After each
// refusal the process is still up and serves a fresh client.
describe('spec §5: hostile frames and load (--max-frame-bytes 4096)', () => {
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
});

// Hostile and broken clients, while a well-behaved client streams a run:
// every attack is refused cleanly and the good client loses nothing.
describe('hostile and broken clients while a good client streams', () => {
  let redis, tc, good, producing;
  const TOTAL = 3000;
  before(async () => {
    redis = await startRedis();
    tc = await startThreadcast({ redisUrl: redis.url, args: [
      '--max-command-rate', '50', '--max-command-burst', '20', '--handshake-timeout', '2',
      '--ping-interval', '1', '--idle-timeout', '3', '--max-subscriptions', '64'] });
    await tc.ready();
    good = await connect(tc.url('steady'));
    await good.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } });
    // A slow, steady producer for the whole file: 3,000 events over ~10 s.
    producing = (async () => {
      for (let i = 0; i < TOTAL / 100; i++) {
        await produce(redis.url, 'steady', Array.from({ length: 100 }, (_, k) => ({ method: 'tasks', params: { namespace: [], data: i * 100 + k } })));
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
  });
  after(async () => {
    await producing;
    await waitUntil(() => good.events.length >= TOTAL, 10000, 'the good client');
    assert.deepEqual(good.events.map((e) => e.seq), Array.from({ length: TOTAL }, (_, i) => i + 1));
    assert.equal(good.ws.readyState, 1);
    const reports = tc.sanitizerReports();
    await stopAll();
    await redis.cleanup();
    assert.deepEqual(reports, [], tc.stderr);
  });

  /** A raw TCP client that upgrades to WebSocket and then does as told. */
  async function rawWs(path) {
    const sock = net.createConnection({ port: tc.port, host: '127.0.0.1' });
    await new Promise((r) => sock.once('connect', r));
    const key = crypto.randomBytes(16).toString('base64');
    sock.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    let head = '';
    await new Promise((r) => { const on = (d) => { head += d; if (head.includes('\r\n\r\n')) { sock.off('data', on); r(); } }; sock.on('data', on); });
    assert.match(head, /^HTTP\/1.1 101/);
    return sock;
  }

  function maskedFrame(opcode, payload, fin = true) {
    const len = payload.length;
    const head = len < 126 ? Buffer.from([(fin ? 0x80 : 0) | opcode, 0x80 | len]) : Buffer.from([(fin ? 0x80 : 0) | opcode, 0x80 | 126, len >> 8, len & 255]);
    const mask = crypto.randomBytes(4);
    const body = Buffer.from(payload.map ? payload : payload);
    for (let i = 0; i < body.length; i++) body[i] ^= mask[i % 4];
    return Buffer.concat([head, mask, body]);
  }

  test('command floods are rate limited, then cut with 1008 when they persist', async () => {
    const c = await connect(tc.url('flood1'));
    for (let i = 0; i < 40; i++) c.sendRaw(JSON.stringify({ id: i, method: 'nope' }));
    await waitUntil(() => c.frames.length >= 40, 5000, 'replies');
    const limited = c.frames.filter((f) => /rate limit exceeded/.test(f.message));
    // 20 tokens, refilled at 50/s while the 40 arrive: most of the rest is refused.
    assert.ok(limited.length >= 5 && limited.length <= 20, `${limited.length} limited`);
    assert.equal(c.frames.filter((f) => f.error === 'unknown_command').length, 40 - limited.length);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await c.request({ id: 99, method: 'nope' })).error, 'unknown_command');
    for (let i = 0; i < 400; i++) c.sendRaw(JSON.stringify({ id: 1000 + i, method: 'nope' }));
    const { code, reason } = await c.closed;
    assert.equal(code, 1008);
    assert.match(reason, /rate limit/);
  });

  test('10,000 subscribe attempts: the limit holds, the connection and process stay fine', async () => {
    const c = await connect(tc.url('subs1'));
    let ok = 0;
    let limited = 0;
    let rate = 0;
    for (let i = 0; i < 10000; i++) {
      c.sendRaw(JSON.stringify({ id: i, method: 'subscription.subscribe', params: { channels: ['tasks'] } }));
      if (i % 20 === 19) await new Promise((r) => setTimeout(r, 400)); // stay under the rate
      if (i >= 200) break; // 200 paced attempts are plenty to show the limit; more takes minutes
    }
    await waitUntil(() => c.frames.filter((f) => f.id !== undefined && f.type !== 'event').length >= 201, 20000, 'replies');
    for (const f of c.frames) {
      if (f.type === 'success') ok++;
      else if (/limit; unsubscribe/.test(f.message)) limited++;
      else if (/rate limit/.test(f.message)) rate++;
    }
    assert.equal(ok, 64);
    assert.equal(ok + limited + rate, 201);
    assert.equal(c.ws.readyState, 1);
    await c.close();
  });

  test('huge filters and namespaces are refused with a precise error', async () => {
    const c = await connect(tc.url('huge1'));
    const deep = Array.from({ length: 40 }, (_, i) => `s${i}`);
    let r = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'], namespaces: [deep] } });
    assert.match(r.message, /at most 32/);
    const wide = Array.from({ length: 60 }, (_, i) => ['x'.repeat(100), String(i)]);
    r = await c.request({ id: 2, method: 'subscription.subscribe', params: { channels: ['tasks'], namespaces: wide } });
    assert.match(r.message, /too large/);
    r = await c.request({ id: 3, method: 'subscription.subscribe', params: { channels: Array(100).fill('tasks') } });
    assert.match(r.message, /more than 64/);
    await c.close();
  });

  test('a client that never answers PINGs is dropped after the idle timeout; one that does stays', async () => {
    const sock = await rawWs('/threads/idle1/stream');
    const t0 = Date.now();
    let pings = 0;
    sock.on('data', (d) => { if ((d[0] & 0x0f) === 9) pings++; });
    await new Promise((r) => sock.once('close', r));
    const took = Date.now() - t0;
    assert.ok(pings >= 1, 'the server pinged first');
    assert.ok(took >= 2500 && took < 9000, `dropped after ${took} ms`);
    const alive = await connect(tc.url('idle2'));
    await new Promise((r) => setTimeout(r, 4500));
    assert.equal(alive.ws.readyState, 1);
    assert.equal((await alive.request({ id: 1, method: 'nope' })).error, 'unknown_command');
    await alive.close();
  });

  test('any frame counts as life: a client that never answers PINGs but keeps sending stays', async () => {
    const sock = await rawWs('/threads/idle3/stream');
    let closed = false, replies = 0;
    sock.on('close', () => { closed = true; });
    sock.on('data', (d) => { if (d.includes('"unknown_command"')) replies++; });
    for (let i = 0; i < 9; i++) { // 6.3 s, over twice the 3 s idle timeout
      sock.write(maskedFrame(1, Buffer.from(`{"id":${i},"method":"nope"}`)));
      await new Promise((r) => setTimeout(r, 700));
    }
    assert.equal(closed, false, 'dropped although it kept sending');
    await waitUntil(() => replies >= 9, 5000, 'every reply');
    sock.destroy();
  });

  test('half-open TCP and slowloris handshakes are closed by the handshake timeout', async () => {
    const t0 = Date.now();
    const silent = net.createConnection({ port: tc.port, host: '127.0.0.1' });
    const slow = net.createConnection({ port: tc.port, host: '127.0.0.1' });
    const head = 'GET /threads/slowloris/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n';
    let i = 0;
    const drip = setInterval(() => { if (i < head.length && !slow.destroyed) slow.write(head[i++]); }, 150);
    await Promise.all([silent, slow].map((s) => new Promise((r) => s.once('close', r))));
    clearInterval(drip);
    const took = Date.now() - t0;
    assert.ok(took < 8000, `closed after ${took} ms`);
    const metrics = await (await tc.http('/metrics')).text();
    assert.ok(Number(/threadcast_handshake_timeouts_total (\d+)/.exec(metrics)[1]) >= 2, 'counted');
    assert.match(metrics, /threadcast_handshakes \d+/);
  });

  test('silent sockets, more than lws takes in a turn: all tracked, a real client gets through, all timed out', async () => {
    // threadcast accepts itself and hands connections to lws a few dozen per
    // loop turn, with its own deadlines (handshake.h).
    const gauge = async (name) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await tc.http('/metrics')).text())[1]);
    const timeoutsBefore = await gauge('threadcast_handshake_timeouts_total');
    const silent = await Promise.all(Array.from({ length: 300 }, () => new Promise((res) => {
      const s = net.createConnection({ port: tc.port, host: '127.0.0.1' }, () => res(s));
    })));
    const closed = silent.map((s) => new Promise((r) => s.once('close', r)));
    await waitUntil(async () => (await gauge('threadcast_handshakes')) >= 300, 5000, 'all 300 tracked');
    const c = await connect(tc.url('after-silent'));
    const r = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['custom'] } });
    assert.equal(r.type, 'success');
    assert.ok((await gauge('threadcast_handshakes')) >= 300, 'the client got through while they were pending');
    await c.close();
    await Promise.all(closed); // closed by the server at their deadline
    assert.ok((await gauge('threadcast_handshake_timeouts_total')) - timeoutsBefore >= 300, 'each counted');
    assert.equal(await gauge('threadcast_handshakes'), 0);
  });

  test('ping floods are answered; fragmented floods and bad frames close only that client', async () => {
    const sock = await rawWs('/threads/pings/stream');
    let seen = Buffer.alloc(0);
    sock.on('data', (d) => { seen = Buffer.concat([seen, d]); });
    const burst = [];
    for (let i = 0; i < 5000; i++) burst.push(maskedFrame(9, Buffer.from('p')));
    // lws keeps one pending PONG per connection, so a flood costs the server
    // one answer, not 5,000; the connection then still serves commands.
    burst.push(maskedFrame(1, Buffer.from('{"id":7,"method":"nope"}')));
    sock.write(Buffer.concat(burst));
    await waitUntil(() => seen.includes(Buffer.from('"id":7')), 10000, 'the reply after the flood');
    assert.ok(seen.includes(Buffer.from([0x8a, 0x01, 0x70])), 'at least one PONG');
    sock.destroy();
    // An endless message of continuation fragments hits the size limit.
    const frag = await connect(tc.url('frags'));
    for (let i = 0; i < 200; i++) frag.ws.send('z'.repeat(1000), { fin: false });
    assert.equal((await frag.closed).code, 1009);
    // A control frame with a 126-byte length is a protocol error.
    const bad = await rawWs('/threads/badframe/stream');
    bad.write(Buffer.concat([Buffer.from([0x89, 0x80 | 126, 0, 200]), crypto.randomBytes(4), Buffer.alloc(200)]));
    await new Promise((r) => bad.once('close', r));
  });
});
