// SSE/HTTP transport: the same streams as the WebSocket, POST /commands, and a real
// browser's EventSource (headless Chromium, Debian's) reading the GET form.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { chromium } from 'playwright-core';
import { startRedis, startThreadcast, connect, stopAll, produce, waitUntil, sse, redisClient, gateway } from './lib/harness.mjs';
import { mix, expectedSeqs } from './lib/events.mjs';

// SSE/HTTP transport: the same streams as the WebSocket, and POST /commands.
describe('SSE streams and POST /commands', () => {
  let redis, tc;
  gateway({ args: ['--sse-heartbeat', '200'] }, (r, t) => { redis = r; tc = t; });

  const base = () => `http://127.0.0.1:${tc.port}`;
  const post = (thread, body) => sse(`${base()}/threads/${thread}/stream`, {
    method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

  test('SSE and WebSocket clients with the same filter get the same events, ids and order', async () => {
    const filter = { channels: ['messages', 'lifecycle', 'custom:progress'], namespaces: [[], ['researcher']] };
    const ws = await connect(tc.url('same1'));
    await ws.request({ id: 1, method: 'subscription.subscribe', params: filter });
    const s = await post('same1', filter);
    assert.equal(s.status, 200);
    assert.match(s.headers.get('content-type'), /^text\/event-stream/);
    const events = mix(2000);
    await produce(redis.url, 'same1', events);
    const want = expectedSeqs(filter, events);
    await waitUntil(() => ws.events.length >= want.length && s.events.length >= want.length, 10000, 'events');
    assert.deepEqual(s.events.map((e) => e.id), ws.events.map((e) => e.eventId));
    assert.deepEqual(s.events.map((e) => e.data.seq), want);
    assert.deepEqual(s.events.map((e) => e.event), ws.events.map((e) => e.method));
    assert.deepEqual(s.events.map((e) => e.data), ws.events); // the same envelope
    s.close();
    await ws.close();
  });

  test('drop an SSE stream mid-run and resume with Last-Event-ID: complete, no duplicate', async () => {
    const filter = { channels: ['messages', 'tools', 'lifecycle', 'values', 'custom:progress', 'updates'] };
    const first = await post('resume1', filter);
    const producing = produce(redis.url, 'resume1', mix(3000));
    await waitUntil(() => first.events.length >= 200, 10000, 'some events');
    first.close();
    await new Promise((r) => setTimeout(r, 50));
    const got = first.events.map((e) => e.data.seq);
    const last = first.events.at(-1).id;
    const second = await post('resume1', { ...filter, since: 5 }); // ignored: the header wins
    second.close();
    const third = await sse(`${base()}/threads/resume1/stream`, {
      method: 'POST', body: JSON.stringify({ ...filter, since: 1 }), headers: { 'last-event-id': last } });
    await producing;
    await waitUntil(() => got.length + third.events.length >= 3000, 10000, 'the rest');
    const union = [...got, ...third.events.map((e) => e.data.seq)];
    assert.deepEqual(union, Array.from({ length: 3000 }, (_, i) => i + 1));
    third.close();
  });

  test('GET with Accept: text/event-stream takes the filter from the query; since replays after it', async () => {
    await produce(redis.url, 'get1', mix(100));
    const ns = encodeURIComponent(JSON.stringify([['researcher']]));
    const s = await sse(`${base()}/threads/get1/stream?channels=custom:progress,values&namespaces=${ns}&since=40`,
      { headers: { accept: 'text/event-stream' } });
    const want = expectedSeqs({ channels: ['custom:progress', 'values'], namespaces: [['researcher']] }, mix(100)).filter((x) => x > 40);
    await waitUntil(() => s.events.length >= want.length, 5000, 'events');
    assert.deepEqual(s.events.map((e) => e.data.seq), want);
    s.close();
  });

  test('a stream whose history is gone starts with a resync event', async () => {
    const rc = redisClient(redis.port);
    await produce(redis.url, 'trim2', Array.from({ length: 1000 }, (_, i) => ({ method: 'tasks', params: { namespace: [], data: i } })),
      { args: ['--maxlen', '10'] });
    const oldest = Number((await rc.cmd('XRANGE', 'tc:{trim2}:events', '-', '+', 'COUNT', '1'))[0][0].split('-')[0]);
    const s = await post('trim2', { channels: ['tasks'], since: 3 });
    await waitUntil(() => s.events.length >= 1, 5000, 'resync');
    assert.equal(s.events[0].event, 'resync');
    assert.deepEqual(s.events[0].data, { restored: false, missedEvents: oldest - 4 });
    await waitUntil(() => s.events.length >= 1 + 1000 - oldest + 1, 5000, 'kept events');
    assert.equal(s.events[1].data.seq, oldest);
    s.close();
    const other = await sse(`${base()}/threads/trim2/stream?channels=tasks`,
      { headers: { accept: 'text/event-stream', 'last-event-id': 'otherepoch:5' } });
    await waitUntil(() => other.events.length >= 1, 5000, 'resync');
    assert.deepEqual(other.events[0].data, { restored: false });
    other.close();
    rc.close();
  });

  test('idle streams get heartbeat comments', async () => {
    const s = await post('idle1', { channels: ['tasks'] });
    await waitUntil(() => s.comments >= 2, 3000, 'heartbeats');
    s.close();
  });

  test('bad stream requests are 400 naming the field; the path still serves WebSockets', async () => {
    let s = await post('bad1', { channels: ['bogus'] });
    assert.equal(s.status, 400);
    assert.match(JSON.parse(s.body).message, /channels\[0\]/);
    s = await post('bad1', { channels: ['tasks'], since: -1 });
    assert.equal(s.status, 400);
    assert.match(JSON.parse(s.body).message, /since/);
    s = await sse(`${base()}/threads/bad1/stream`, { method: 'POST', body: '[1,2' });
    assert.equal(s.status, 400);
    s = await sse(`${base()}/threads/bad1/stream?channels=tasks&depth=x`, { headers: { accept: 'text/event-stream' } });
    assert.equal(s.status, 400);
    assert.match(JSON.parse(s.body).message, /depth/);
    s = await sse(`${base()}/threads/bad1/stream?channels=tasks`, { headers: { accept: 'text/event-stream', 'last-event-id': 'garbage' } });
    assert.equal(s.status, 400);
    const ws = await connect(tc.url('bad1'));
    await ws.close();
  });

  test('POST /commands: 200 for responses and errors, 400 for no command, 413 over the limit', async () => {
    await produce(redis.url, 'cmd1', [{ method: 'lifecycle', params: { namespace: [], data: { event: 'started', graphName: 'g' } } }]);
    const call = (body, thread = 'cmd1') => tc.http(`/threads/${thread}/commands`, { method: 'POST', body });
    // Protocol 0.0.21 by default (the official client's spelling) ...
    let r = await call(JSON.stringify({ id: 3, method: 'agent.getTree', params: {} }));
    assert.equal(r.status, 200);
    assert.deepEqual((await r.json()).result.tree, { namespace: [], status: 'started', graph_name: 'g' });
    // ... the seed's when the command is spelled so, or when asked.
    r = await call(JSON.stringify({ id: 3, method: 'agent.getTree', params: { runId: null } }));
    assert.deepEqual((await r.json()).result.tree, { namespace: [], status: 'started', graphName: 'g' });
    r = await tc.http('/threads/cmd1/commands?protocol=seed', { method: 'POST', body: JSON.stringify({ id: 3, method: 'agent.getTree', params: {} }) });
    assert.deepEqual((await r.json()).result.tree, { namespace: [], status: 'started', graphName: 'g' });
    r = await call(JSON.stringify({ id: 4, method: 'nope' }));
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { type: 'error', id: 4, error: 'unknown_command', message: 'unknown method "nope"' });
    r = await call('{"id":5');
    assert.equal(r.status, 400);
    assert.equal((await r.json()).id, null);
    r = await call(JSON.stringify({ id: 6, method: 'subscription.subscribe', params: { channels: ['tasks'] } }));
    assert.equal((await r.json()).error, 'not_supported');
    r = await call('x'.repeat(70000));
    assert.equal(r.status, 413);
    r = await call('{}', 'bad{thread');
    assert.equal(r.status, 400);
  });

  test('a slow SSE reader is cut off; others are unaffected', async () => {
    const slowTc = await startThreadcast({ redisUrl: redis.url, args: ['--max-queue-bytes', '1000000'] });
    await slowTc.ready();
    // A raw client that sends the request and never reads.
    const sock = net.createConnection({ port: slowTc.port, host: '127.0.0.1' });
    await new Promise((r) => sock.once('connect', r));
    sock.write('GET /threads/slow1/stream?channels=tasks HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n');
    sock.pause();
    const closed = new Promise((r) => sock.once('close', r));
    const good = await sse(`http://127.0.0.1:${slowTc.port}/threads/slow1/stream?channels=tasks`, { headers: { accept: 'text/event-stream' } });
    await new Promise((r) => setTimeout(r, 100));
    // 30 MB, more than the kernel's socket buffers can hide from the queue,
    // paced in batches of half the queue bound so the reader that reads keeps up.
    const big = 'q'.repeat(100000);
    for (let batch = 0; batch < 60; batch++) {
      await produce(redis.url, 'slow1', Array.from({ length: 5 }, () => ({ method: 'tasks', params: { namespace: [], data: big } })));
      await waitUntil(() => good.events.length >= (batch + 1) * 5, 10000, `the good reader (batch ${batch}, has ${good.events.length})`);
    }
    await waitUntil(async () => /threadcast_slow_consumer_cuts_total 1\n/.test(await (await slowTc.http('/metrics')).text()), 10000, 'cut');
    assert.deepEqual(good.events.map((e) => e.data.seq), Array.from({ length: 300 }, (_, i) => i + 1));
    sock.resume();
    await closed;
    good.close();
    await slowTc.stop();
    assert.deepEqual(slowTc.sanitizerReports(), []);
  });

  test('an SSE reader sent a burst over half its queue bound keeps receiving', async () => {
    // Past half the bound a connection stops reading its client. On an SSE
    // stream that once also stopped its writes for good (lws 4.1): the reader
    // never got the rest of the burst, nor anything after it.
    const t = await startThreadcast({ redisUrl: redis.url, args: ['--max-queue-bytes', '400000'] });
    await t.ready();
    const s = await sse(`http://127.0.0.1:${t.port}/threads/burst1/stream?channels=tasks`, { headers: { accept: 'text/event-stream' } });
    const big = 'b'.repeat(90000);
    // One call, so all three are queued in one go: 270 KB, over 200 KB.
    await produce(redis.url, 'burst1', Array.from({ length: 3 }, () => ({ method: 'tasks', params: { namespace: [], data: big } })));
    await waitUntil(() => s.events.length >= 3, 10000, 'the burst');
    await produce(redis.url, 'burst1', [{ method: 'tasks', params: { namespace: [], data: 'after' } }]);
    await waitUntil(() => s.events.length >= 4, 10000, 'the event after the burst');
    assert.equal(s.events[3].data.params.data, 'after');
    assert.match(await (await t.http('/metrics')).text(), /threadcast_slow_consumer_cuts_total 0\n/);
    s.close();
    await t.stop();
    assert.deepEqual(t.sanitizerReports(), []);
  });
});

// A real browser's EventSource (headless Chromium, Debian's) reads the GET form.
describe('EventSource in a real browser', () => {
  let redis, tc, browser;
  before(async () => {
    redis = await startRedis();
    tc = await startThreadcast({ redisUrl: redis.url });
    await tc.ready();
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  after(async () => {
    await browser?.close();
    const reports = tc.sanitizerReports();
    await stopAll();
    await redis.cleanup();
    assert.deepEqual(reports, [], tc.stderr);
  });

  test('EventSource in Chromium receives the filtered events with their ids and types', async () => {
    const page = await browser.newPage();
    // Same origin as the stream: the page is served by threadcast's /healthz host.
    await page.goto(`http://127.0.0.1:${tc.port}/healthz`);
    const events = mix(300);
    await produce(redis.url, 'browser1', events);
    const want = expectedSeqs({ channels: ['messages', 'lifecycle'] }, events);
    const got = await page.evaluate(async ({ n }) => {
      const seen = [];
      const es = new EventSource('/threads/browser1/stream?channels=messages,lifecycle');
      await new Promise((resolve, reject) => {
        const done = () => { if (seen.length >= n) resolve(); };
        for (const type of ['messages', 'lifecycle']) {
          es.addEventListener(type, (e) => {
            const d = JSON.parse(e.data);
            seen.push({ seq: d.seq, id: e.lastEventId, type: e.type, method: d.method });
            done();
          });
        }
        setTimeout(() => reject(new Error(`only ${seen.length} events`)), 10000);
      });
      es.close();
      return seen;
    }, { n: want.length });
    assert.deepEqual(got.map((e) => e.seq), want);
    for (const e of got) {
      assert.equal(e.type, e.method);
      assert.match(e.id, new RegExp(`:${e.seq}$`));
    }
    await page.close();
  });
});
