// permessage-deflate (RFC 7692, issue 19) with real clients: the `ws` package
// (which checks RSV1 framing and inflates with its own zlib) and headless
// Chromium. threadcast compresses what it sends in each connection's running
// context; what clients send is inflated by lws, one message at a time (the
// response asks client_no_context_takeover).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import http from 'node:http';
import { startRedis, startThreadcast, connect, stopAll, produce, waitUntil } from './lib/harness.mjs';
import { mix } from './lib/events.mjs';

let redis, tc, plain, browser;
before(async () => {
  redis = await startRedis();
  [tc, plain] = await Promise.all([startThreadcast({ redisUrl: redis.url }),
    startThreadcast({ redisUrl: redis.url, args: ['--deflate', '0'] })]);
  await Promise.all([tc.ready(), plain.ready()]);
});
after(async () => {
  await browser?.close();
  const reports = [...tc.sanitizerReports(), ...plain.sanitizerReports()];
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, [], tc.stderr);
});

const ALL = ['values', 'updates', 'messages', 'tools', 'lifecycle', 'input', 'checkpoints', 'custom:progress'];

/** A `ws` client; deflate: whether it offers permessage-deflate. Resolves {c, extensions}. */
async function open(server, thread, deflate) {
  let extensions = null;
  const c = await connect(server.url(thread), { perMessageDeflate: deflate });
  extensions = c.ws.extensions;
  return { c, extensions, wire: () => c.ws._socket.bytesRead };
}

/** The Sec-WebSocket-Extensions of the upgrade's response to an offer. */
function extensionsAnswered(server, thread, offer) {
  return new Promise((resolve, reject) => {
    const req = http.get(server.url(thread).replace(/^ws/, 'http'), { headers: {
      Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
      'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', ...(offer ? { 'Sec-WebSocket-Extensions': offer } : {}) } });
    req.on('upgrade', (res, socket) => { socket.destroy(); resolve(res.headers['sec-websocket-extensions'] ?? ''); });
    req.on('response', (res) => reject(new Error(`HTTP ${res.statusCode}`)));
    req.on('error', reject);
  });
}

async function metric(server, name) {
  const text = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

test('negotiated when offered: the same frames, a fraction of the bytes; not when not offered or turned off', async () => {
  const thread = 'deflate1';
  // what each offer is answered (a browser's, Firefox's, one asking for no context takeover itself; none)
  assert.equal(await extensionsAnswered(tc, thread, 'permessage-deflate; client_max_window_bits'), 'permessage-deflate; client_no_context_takeover');
  assert.equal(await extensionsAnswered(tc, thread, 'permessage-deflate'), 'permessage-deflate; client_no_context_takeover');
  assert.equal(await extensionsAnswered(tc, thread, 'permessage-deflate; client_no_context_takeover'), 'permessage-deflate; client_no_context_takeover');
  assert.equal(await extensionsAnswered(tc, thread, 'x-webkit-deflate-frame'), '');
  assert.equal(await extensionsAnswered(tc, thread, null), '');
  assert.equal(await extensionsAnswered(plain, thread, 'permessage-deflate; client_max_window_bits'), '');
  const a = await open(tc, thread, true);                 // offers: permessage-deflate; client_max_window_bits
  const a2 = await open(tc, thread, true);                // a second subscriber with the same events
  const b = await open(tc, thread, false);                // offers nothing
  const d = await open(plain, thread, true);              // --deflate 0
  assert.equal(a.extensions, 'permessage-deflate');
  assert.equal(b.extensions, '');
  assert.equal(d.extensions, '');
  for (const x of [a, a2, b, d]) assert.equal((await x.c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } })).type, 'success');
  const before = [a.wire(), b.wire()];
  const events = mix(2000);
  await produce(redis.url, thread, events);
  await waitUntil(() => [a, a2, b, d].every((x) => x.c.events.length === events.length), 20000, 'every event on every client');
  // byte for byte the frames an uncompressed client gets
  assert.deepEqual(a.c.raw.slice(1), b.c.raw.slice(1));
  assert.deepEqual(a2.c.raw.slice(1), b.c.raw.slice(1));
  // both compressed subscribers were served by one compressor: each event compressed once
  assert.equal(await metric(tc, 'threadcast_deflaters'), 1);
  assert.deepEqual(d.c.raw.slice(1), b.c.raw.slice(1));
  const [wa, wb] = [a.wire() - before[0], b.wire() - before[1]];
  assert.ok(wa < wb * 0.5, `compressed: ${wa} bytes on the wire against ${wb}`);
  assert.ok(await metric(tc, 'threadcast_deflate_in_bytes_total') > await metric(tc, 'threadcast_deflate_out_bytes_total'));
  for (const x of [a, a2, b, d]) await x.c.close();
});

test('compressed commands are inflated one by one; large ones too; an idle connection lets its compressor go', async () => {
  const { c, extensions } = await open(tc, 'deflate2', { threshold: 0 }); // every message compressed
  assert.match(extensions, /permessage-deflate/);
  // several compressed commands in a row, each inflated alone (the client honours client_no_context_takeover)
  for (let id = 1; id <= 5; id++) {
    const r = await c.request({ id, method: 'subscription.subscribe', params: { channels: ALL } });
    assert.equal(r.type, 'success', JSON.stringify(r));
  }
  // 60 KB, compressed to little: inflated through lws' 256-byte pieces and joined
  const big = await c.request({ id: 6, method: 'no.such.method', params: { pad: 'x'.repeat(60000) } });
  assert.equal(big.type, 'error');
  assert.equal(big.error, 'unknown_command');
  // replies are not compressed: a connection that has had no event holds no compressor
  assert.equal(await metric(tc, 'threadcast_deflaters'), 0);
  // a bomb: 4 MB that deflate to a few KB is cut at --max-frame-bytes (1009), not inflated whole
  const bomb = await open(tc, 'deflate2', { threshold: 0 });
  bomb.c.sendRaw(JSON.stringify({ id: 1, method: 'x', params: { pad: 'x'.repeat(4000000) } }));
  const cut = await bomb.c.closed;
  assert.equal(cut.code, 1009);
  await produce(redis.url, 'deflate2', mix(50));
  await waitUntil(() => c.events.length > 0, 10000, 'events');
  assert.ok(await metric(tc, 'threadcast_deflaters') >= 1, 'a compressor while it receives');
  await waitUntil(async () => (await metric(tc, 'threadcast_deflaters')) === 0, 15000, 'the compressor freed once quiet');
  assert.equal(await metric(tc, 'threadcast_deflate_memory_bytes'), 0);
  // and a new one for the next events: still decoded by the client's inflater
  const n = c.events.length;
  await produce(redis.url, 'deflate2', mix(30, { start: false }));
  await waitUntil(() => c.events.length > n, 10000, 'more events');
  assert.deepEqual(c.events.map((e) => e.seq), c.events.map((_, i) => i + 1));
  await c.close();
});

// A large compressed message inflates to many pieces, and nothing else comes
// after it to wake lws for the rest: it is answered all the same (lws 4.1's
// libuv idle handle stops after one piece, and ws.c wakes it; 4.3's keeps
// going: src/lwsver.h TC_LWS_IDLE_STOPS_EARLY). Each on a new connection,
// with nothing sent before or after it.
test('a large compressed command that nothing follows is answered (src/lwsver.h)', async () => {
  for (let i = 1; i <= 3; i++) {
    const { c } = await open(tc, `deflate-alone${i}`, { threshold: 0 });
    const r = await Promise.race([c.request({ id: 1, method: 'no.such.method', params: { pad: 'x'.repeat(60000) } }),
      new Promise((res) => setTimeout(() => res('no answer within 10 s'), 10000))]);
    assert.equal(r.error, 'unknown_command', JSON.stringify(r));
    await c.close();
  }
});

test('headless Chromium negotiates it, decodes every event, and its compressed commands are understood', async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${tc.port}/healthz`);
  const events = mix(500);
  const got = page.evaluate(async ({ url, n }) => {
    const ws = new WebSocket(url);
    const seqs = [];
    const replies = [];
    await new Promise((resolve, reject) => {
      ws.onopen = () => ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['values', 'updates', 'messages', 'tools', 'lifecycle', 'input', 'checkpoints', 'custom:progress'] } }));
      ws.onmessage = (m) => {
        const f = JSON.parse(m.data);
        if (f.type === 'event') seqs.push(f.seq); else replies.push(f);
        if (f.id === 1) window.subscribed = true;
        if (seqs.length >= n) resolve();
      };
      ws.onerror = () => reject(new Error('websocket error'));
      setTimeout(() => reject(new Error(`only ${seqs.length} events`)), 20000);
    });
    ws.close();
    return { extensions: ws.extensions, seqs, replies };
  }, { url: tc.url('deflate3'), n: events.length });
  await page.waitForFunction(() => window.subscribed === true, null, { timeout: 10000 });
  await produce(redis.url, 'deflate3', events);
  const r = await got;
  assert.match(r.extensions, /^permessage-deflate/);
  assert.deepEqual(r.seqs, events.map((_, i) => i + 1));
  assert.equal(r.replies[0].type, 'success');
  await page.close();
});

test('a client that breaks the compression (bad RSV1 data) is closed, and only it', async () => {
  const { c } = await open(tc, 'deflate4', true);
  const other = await open(tc, 'deflate4', true);
  // a frame claiming compression (RSV1) whose payload is not deflate data
  const sock = c.ws._socket;
  const payload = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x00]);
  const mask = Buffer.from([1, 2, 3, 4]);
  const masked = Buffer.from(payload.map((x, i) => x ^ mask[i % 4]));
  sock.write(Buffer.concat([Buffer.from([0xc1, 0x80 | payload.length]), mask, masked]));
  const closed = await Promise.race([c.closed, new Promise((r) => setTimeout(() => r(null), 5000))]);
  assert.ok(closed, 'the connection is closed');
  assert.equal((await other.c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } })).type, 'success');
  await other.c.close();
});
