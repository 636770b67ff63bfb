// scripts/bench's own tools, checked for correctness (never for speed):
// loadgen counts every event once, publish spreads its
// events over the threads, and the replay scenario's reconnect is accepted;
// the blaster control delivers what it is POSTed to every subscriber; the
// SDK scenario's several subscriptions per connection are all answered; the
// storm reports every client upgraded; publish --run streams a REST run as a
// worker does, and loadgen --sse-get reads run streams, counting every unit
// and catching what a stream lacks, repeats or sends out of order.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import {
  startRedis, startThreadcast, stopAll, waitUntil, redisClient, threadcastBin, connect, repoRoot,
} from './lib/harness.mjs';

const bin = (name) => path.join(path.dirname(threadcastBin), name);
let redis, rc, tc;

before(async () => {
  redis = await startRedis();
  rc = redisClient(redis.port);
  tc = await startThreadcast({ redisUrl: redis.url });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready');
});

after(async () => {
  rc?.close();
  const reports = tc.sanitizerReports();
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, [], tc.stderr);
});

function run(name, args, env = process.env) {
  return new Promise((resolve, reject) => {
    const p = spawn(name === 'python3' ? name : bin(name), args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.on('error', reject);
    // JSON lines (scripts/bench.py's table is left out). On 'close', not 'exit': a process may
    // exit before its last output is read (the blaster's refusal came out empty).
    p.on('close', (code) => resolve({ code, lines: out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)), err }));
  });
}

test('loadgen receives every published event once, over many threads, with latencies', async () => {
  const lg = run('loadgen', ['--port', tc.port, '--thread', 'bt', '--threads', '5', '--conns', '50',
    '--expect', '40', '--duration', '60', '--hold', '60']);
  // Publish once every connection is subscribed: loadgen prints {"ready"} first.
  await waitUntil(async () => Number(await rc.cmd('PUBSUB', 'SHARDNUMSUB', 'tc:{bt-4}:live').then((r) => r[1])) > 0,
    10000, 'subscriptions');
  await new Promise((r) => setTimeout(r, 300));
  const pub = await run('publish', ['--redis-url', redis.url, '--threads', 'bt', '--nthreads', '5',
    '--count', '200', '--rate', '0']);
  assert.equal(pub.code, 0, pub.err);
  assert.equal(pub.lines[0].published, 200);
  for (let i = 0; i < 5; i++) assert.equal(await rc.cmd('XLEN', `tc:{bt-${i}}:events`), 40);
  const r = await lg;
  assert.equal(r.code, 0, r.err);
  const res = r.lines.at(-1);
  assert.deepEqual(r.lines[0], { ready: 50, failed: 0 });
  assert.equal(res.received, 2000);
  assert.equal(res.complete, 50);
  assert.equal(res.missing, 0);
  assert.equal(res.duplicates, 0);
  assert.equal(res.latency_us.samples, 2000);
});

test('the replay scenario: a reconnect from the first event replays the rest, once each', async () => {
  const pub = await run('publish', ['--redis-url', redis.url, '--threads', 'bt-replay', '--count', '301', '--rate', '0']);
  assert.equal(pub.code, 0, pub.err);
  const epoch = await rc.cmd('HGET', 'tc:{bt-replay}:meta', 'epoch');
  const sub = `s1.${Buffer.from('{"channels":["tasks"]}').toString('base64url')}`;
  const command = JSON.stringify({ id: 1, method: 'subscription.reconnect',
    params: { runId: '', lastEventId: `${epoch}:1`, subscriptions: [sub] } });
  const r = await run('loadgen', ['--port', tc.port, '--thread', 'bt-replay', '--conns', '1', '--expect', '300',
    '--duration', '30', '--command', command]);
  assert.equal(r.code, 0, r.err);
  const res = r.lines.at(-1);
  assert.deepEqual([res.received, res.missing, res.duplicates], [300, 0, 0]);
});

test('loadgen counts connections closed before the upgrade as failed', async () => {
  // A server that accepts and hangs up at once, as a gateway past its
  // handshake timeout does: loadgen must say so instead of waiting.
  const net = await import('node:net');
  const srv = net.createServer((s) => s.destroy());
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const r = await run('loadgen', ['--port', String(srv.address().port), '--thread', 'x', '--conns', '20',
      '--hold', '1', '--duration', '20']);
    assert.deepEqual(r.lines[0], { ready: 0, failed: 20 });
  } finally {
    srv.close();
  }
});

// The SDK scenario's subscriptions (scripts/bench.py SDK_SUBSCRIPTIONS).
const sdkSubscriptions = [
  { channels: ['messages', 'lifecycle', 'input'] },
  { channels: ['values', 'lifecycle', 'input'] },
  { channels: ['lifecycle', 'input'] },
  { channels: ['values', 'checkpoints', 'lifecycle', 'input', 'messages', 'tools'], namespaces: [[]], depth: 1 },
];
const sdkCommands = sdkSubscriptions.flatMap((params, i) =>
  ['--command', JSON.stringify({ id: i + 1, method: 'subscription.subscribe', params })]);

async function startBlaster() {
  const { freePort } = await import('./lib/harness.mjs');
  const port = await freePort();
  const p = spawn(bin('blaster'), ['--port', String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => { err += d; });
  const net = await import('node:net');
  await waitUntil(() => new Promise((r) => {
    const s = net.connect(port, '127.0.0.1', () => { s.destroy(); r(true); });
    s.on('error', () => r(false));
  }), 5000, 'blaster listening');
  return { port, proc: p, stderr: () => err };
}

test('the blaster writes every POSTed event to every subscriber of its thread, byte for byte', async () => {
  const b = await startBlaster();
  try {
    const lg = run('loadgen', ['--port', String(b.port), '--thread', 'bb', '--threads', '3', '--conns', '30',
      '--expect', '20', '--duration', '30', '--hold', '30', ...sdkCommands]);
    const watcher = await connect(`ws://127.0.0.1:${b.port}/threads/bb-1/stream/events`);
    await new Promise((r) => setTimeout(r, 500)); // loadgen's 30 upgraded (it prints ready; we only publish)
    const pub = await run('publish', ['--http', `127.0.0.1:${b.port}`, '--threads', 'bb', '--nthreads', '3',
      '--count', '60', '--rate', '0', '--spelling', '0.0.21', '--methods', 'messages,values']);
    assert.equal(pub.code, 0, pub.err);
    const r = await lg;
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(r.lines[0], { ready: 30, failed: 0 });
    const res = r.lines.at(-1);
    assert.deepEqual([res.received, res.missing, res.duplicates, res.complete], [600, 0, 0, 30]);
    assert.equal(res.replies, 0, 'the blaster answers no command');
    assert.equal(res.latency_us.samples, 600);
    await waitUntil(() => watcher.events.length === 20, 5000, 'the watcher has thread bb-1\'s 20 events');
    const ev = watcher.events[0];
    assert.equal(ev.seq, 1);
    assert.match(ev.event_id, /^[0-9a-f]{13}:1$/, 'an event id as long as threadcast\'s, snake_case');
    // Methods cycle over all events: bb-1 gets events 1, 4, 7, … of the run (values, messages, …).
    assert.deepEqual(watcher.events.slice(0, 3).map((e) => e.method), ['values', 'messages', 'values']);
    assert.equal(typeof ev.params.timestamp, 'number');
    assert.equal(res.event_bytes, 30 * watcher.raw.slice(0, 20).reduce((n, t) => n + Buffer.byteLength(t), 0),
      'event_bytes sums the frames\' payloads');
    watcher.close();
    // What is not a thread's path, or not a WebSocket upgrade, is refused.
    const net = await import('node:net');
    for (const [req, status] of [['GET /nope HTTP/1.1\r\nHost: x\r\n\r\n', '404'],
      ['GET /threads/x/stream HTTP/1.1\r\nHost: x\r\n\r\n', '400']]) {
      const answer = await new Promise((resolve, reject) => {
        let got = '';
        const s = net.connect(b.port, '127.0.0.1', () => s.write(req));
        s.on('data', (d) => { got += d; });
        s.on('close', () => resolve(got));
        s.on('error', reject);
      });
      assert.match(answer, new RegExp(`^HTTP/1.1 ${status} `));
    }
  } finally {
    b.proc.kill('SIGTERM');
  }
  const bad = await run('blaster', ['--port', '0']);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /bad option --port 0/);
});

test('the SDK scenario: four subscriptions per connection, each answered, each event once per connection', async () => {
  const lg = run('loadgen', ['--port', tc.port, '--thread', 'bsdk', '--conns', '20', '--expect', '50',
    '--duration', '60', '--hold', '60', '--path', '/threads/%s/stream/events', ...sdkCommands]);
  await waitUntil(async () => Number(await rc.cmd('PUBSUB', 'SHARDNUMSUB', 'tc:{bsdk}:live').then((x) => x[1])) > 0,
    10000, 'subscriptions');
  const watcher = await connect(`ws://127.0.0.1:${tc.port}/threads/bsdk/stream/events`);
  await watcher.request({ id: 1, method: 'subscription.subscribe', params: sdkSubscriptions[3] });
  await new Promise((r) => setTimeout(r, 300));
  const pub = await run('publish', ['--redis-url', redis.url, '--threads', 'bsdk', '--count', '50', '--rate', '0',
    '--methods', 'messages,messages,messages,tools,values']);
  assert.equal(pub.code, 0, pub.err);
  const r = await lg;
  assert.equal(r.code, 0, r.err);
  const res = r.lines.at(-1);
  assert.deepEqual([res.replies, res.errors], [80, 0], 'every subscribe of every connection answered');
  assert.deepEqual([res.received, res.missing, res.duplicates, res.complete], [1000, 0, 0, 20]);
  await waitUntil(() => watcher.events.length === 50, 5000, 'the watcher\'s events');
  assert.deepEqual(watcher.events.slice(0, 5).map((e) => e.method), ['messages', 'messages', 'messages', 'tools', 'values']);
  assert.ok(watcher.events.every((e) => typeof e.event_id === 'string' && !('eventId' in e)), 'snake_case frames');
  watcher.close();
  const tooMany = await run('loadgen', ['--port', tc.port, '--thread', 'x', '--conns', '1',
    ...Array.from({ length: 65 }, () => ['--command', '{}']).flat()]);
  assert.equal(tooMany.code, 2);
  assert.match(tooMany.err, /at most 64 --command/);
});

test('publish refuses what it does not know, precisely', async () => {
  for (const [args, msg] of [[['--bogus', '1'], /unknown option --bogus/],
    [['--spelling', 'camel'], /--spelling must be seed or 0.0.21/],
    [['--methods', Array.from({ length: 17 }, () => 'tasks').join(',')], /at most 16 methods/],
    [['--rest', '1'], /--rest and --dry-run go with --run/],
    [['--run', 'r1', '--batch', '2'], /--run appends one thread's run, one event per call/]]) {
    const r = await run('publish', ['--redis-url', redis.url, '--threads', 'x', '--count', '1', ...args]);
    assert.equal(r.code, 2);
    assert.match(r.err, msg);
  }
});

test('the storm scenario reports every client upgraded, with the server\'s user and kernel CPU', async () => {
  const env = { ...process.env, TC_BENCH_BUILD: path.dirname(threadcastBin), TC_STORM_NETNS: '0' };
  for (const kind of ['threadcast', 'blaster']) {
    const r = await run('python3', [path.join(repoRoot, 'scripts/bench.py'), '--storm-child', kind,
      '--storm-conns', '300'], env);
    assert.equal(r.code, 0, r.err);
    const res = r.lines.at(-1);
    assert.deepEqual([res.conns, res.upgraded, res.failed, res.netns], [300, 300, 0, false]);
    assert.ok(res.storm_seconds > 0 && res.storm_seconds < 60, `storm_seconds ${res.storm_seconds}`);
    assert.ok(res.connects_per_s > 0);
    for (const k of ['storm_user_s', 'storm_sys_s']) assert.ok(res[k] >= 0, `${k} ${res[k]}`);
    assert.equal(res.storm_cpu_s, res.storm_user_s + res.storm_sys_s);
  }
  const bad = await run('python3', [path.join(repoRoot, 'scripts/bench.py'), '--only', 'a,nope'], env);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /unknown scenario nope/);
});

// What a run stream in the modes values, messages-tuple and updates makes of a
// publish --run run (scripts/bench.py rest_units): its metadata, each text
// delta, each tool call chunk (the block's start and deltas), each tool's
// result, each updates and values event.
const restUnits = (k) => 1 + k['messages/content-block-delta/text-delta'] + k['messages/content-block-start/tool_call_chunk']
  + k['messages/content-block-delta/tool_call_chunk'] + k['tools/tool-finished'] + k.updates + k.values;

test('the REST scenario: publish --run streams a REST run, every SSE viewer and every SDK WebSocket gets all of it once', async () => {
  const thread = 'brest';
  await rc.cmd('FCALL', 'threadcast_register', 2, '{tc:commands}:w:bench', '{tc:commands}:assistants', 'bench', 'bench-worker', 600000);
  const post = (p, body) => tc.http(p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal((await post('/threads', { thread_id: thread })).status, 200);
  const created = await post(`/threads/${thread}/runs`, { assistant_id: 'bench', input: { messages: [{ role: 'user', content: 'otters?' }] } });
  assert.equal(created.status, 200);
  const runId = (await created.json()).run_id;

  const dry = await run('publish', ['--redis-url', redis.url, '--threads', thread, '--run', runId, '--count', '150', '--dry-run', '1']);
  assert.equal(dry.code, 0, dry.err);
  const { events, kinds } = dry.lines[0];
  assert.equal(events, 2 + 3 * 57, 'rounded up to whole turns of 57 events');
  assert.equal(Object.values(kinds).reduce((a, b) => a + b, 0), events);
  assert.deepEqual([kinds['messages/content-block-delta/text-delta'], kinds.updates, kinds.values], [120, 6, 6]);
  const units = restUnits(kinds);

  const stream = `/threads/%s/runs/${runId}/stream?stream_mode=values&stream_mode=messages-tuple&stream_mode=updates`;
  const sse = run('loadgen', ['--port', tc.port, '--thread', thread, '--conns', '6', '--sse-get', stream,
    '--last-event-id', '-1', '--expect', String(units), '--duration', '60', '--hold', '60']);
  const ws = run('loadgen', ['--port', tc.port, '--thread', thread, '--conns', '5', '--path', '/threads/%s/stream/events',
    '--gaps', '1', '--expect', String(events - kinds.updates), '--duration', '60', '--hold', '60', ...sdkCommands]);
  await waitUntil(async () => /threadcast_connections\{transport="sse"\} 6\b/.test(await (await tc.http('/metrics')).text())
    && Number(await rc.cmd('PUBSUB', 'SHARDNUMSUB', `tc:{${thread}}:live`).then((x) => x[1])) > 0, 10000, 'viewers attached');
  await new Promise((r) => setTimeout(r, 500)); // the WebSockets' subscribes answered
  const pub = await run('publish', ['--redis-url', redis.url, '--threads', thread, '--run', runId, '--rest', '1',
    '--count', '150', '--rate', '2000']);
  assert.equal(pub.code, 0, pub.err);
  assert.equal(pub.lines[0].published, events);
  assert.deepEqual(pub.lines[0].kinds, kinds, 'the run is the one --dry-run described');

  const r = await sse;
  assert.equal(r.code, 0, r.err);
  const res = r.lines.at(-1);
  assert.deepEqual(r.lines[0], { ready: 6, failed: 0 });
  assert.deepEqual([res.connected, res.ended, res.complete, res.min_received, res.max_received],
    [6, 6, 6, units, units], 'every stream ended after every unit of the run');
  assert.deepEqual([res.received, res.missing, res.duplicates, res.errors], [6 * units, 0, 0, 0]);
  assert.equal(res.latency_us.samples, 6 * (kinds.updates + kinds.values), 'updates and values carry their send time');
  assert.ok(res.latency_us.p50 > 0 && res.latency_us.p50 < 10e6, `latency ${res.latency_us.p50} µs`);
  assert.ok(res.wire_bytes > res.event_bytes && res.event_bytes > 6 * units * 100, 'bytes counted');

  const w = await ws;
  assert.equal(w.code, 0, w.err);
  const wres = w.lines.at(-1);
  assert.deepEqual([wres.replies, wres.errors], [20, 0]);
  assert.deepEqual([wres.received, wres.missing, wres.duplicates, wres.complete, wres.min_received],
    [5 * (events - kinds.updates), 0, 0, 5, events - kinds.updates], 'every event but updates (no SDK subscription has them)');
  assert.equal(wres.latency_us.samples, wres.received);

  const rec = await (await tc.http(`/threads/${thread}/runs/${runId}`)).json();
  assert.equal(rec.status, 'success', 'run.finished was reported');
  const rows = await rc.cmd('XRANGE', `tc:{${thread}}:events`, '-', '+');
  const first = JSON.parse(rows[0][1][rows[0][1].indexOf('e') + 1]);
  const last = JSON.parse(rows.at(-1)[1][rows.at(-1)[1].indexOf('e') + 1]);
  assert.deepEqual([rows.length, first.method, first.params.data.event, first.params.data.run_id, last.params.data.event],
    [events, 'lifecycle', 'started', runId, 'completed']);
});

test('loadgen --sse-get counts the units a stream lacks, repeats or sends out of order', async () => {
  const net = await import('node:net');
  const requests = [];
  const now = () => `${BigInt(Date.now()) * 1000000n}`;
  const srv = net.createServer((s) => {
    let req = '';
    s.on('data', async (d) => {
      req += d;
      if (!req.includes('\r\n\r\n')) return;
      requests.push(req);
      if (req.startsWith('GET /missing')) {
        s.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n');
        return;
      }
      const parts = ['HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n',
        'id: 10\nevent: metadata\ndata: {}\n\n', ': heartbeat\n\n', 'id: 30\nevent: val', `ues\ndata: {"t":${now()}}\n\n`,
        'id: 20\r\ndata: {}\r\n\r\n', // a step back (CRLF lines)
        'data: {}\n\n', // no id
        'id: 40\nevent: error\ndata: {"error":"Error"}\n', '\n', 'id: 50\n\n'];
      for (const p of parts) {
        s.write(p);
        await new Promise((r) => setTimeout(r, 20));
      }
      s.end();
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const port = String(srv.address().port);
    const r = await run('loadgen', ['--port', port, '--thread', 'x', '--conns', '2', '--sse-get', '/runs/%s/stream',
      '--last-event-id', '7', '--expect', '6', '--duration', '20']);
    assert.equal(r.code, 1, 'what is wrong fails the run');
    const res = r.lines.at(-1);
    assert.deepEqual([res.connected, res.ended, res.received, res.min_received, res.max_received], [2, 2, 10, 5, 5]);
    assert.deepEqual([res.duplicates, res.missing, res.errors, res.complete], [4, 2, 2, 0],
      'per stream: a step back and a unit without id, one unit short of 6, one error event; none complete');
    assert.equal(res.latency_us.samples, 2);
    assert.match(requests[0], /^GET \/runs\/x\/stream HTTP\/1\.1\r\n/);
    assert.match(requests[0], /\r\nLast-Event-ID: 7\r\n/);
    const ok = await run('loadgen', ['--port', port, '--thread', 'x', '--conns', '3', '--sse-get', '/runs/%s', '--duration', '20']);
    assert.deepEqual([ok.code, ok.lines.at(-1).complete, ok.lines.at(-1).ended], [1, 3, 3], 'without --expect, every stream that ended is complete');
    const refused = await run('loadgen', ['--port', port, '--thread', 'x', '--conns', '2', '--sse-get', '/missing/%s', '--duration', '20']);
    assert.deepEqual([refused.lines.at(-1).failed, refused.lines.at(-1).connected], [2, 0]);
    assert.match(refused.err, /answered HTTP\/1\.1 404 Not Found/);
  } finally {
    srv.close();
  }
});

test('loadgen --sse-get counts the units that come in one read with a chunked stream\'s end', async () => {
  // A loaded machine's gateway (or a late read) hands over a run stream's
  // last units and its last chunk at once: the stream has ended, and the
  // counts the last one's end prints must hold those units.
  const net = await import('node:net');
  const chunk = (t) => `${Buffer.byteLength(t).toString(16)}\r\n${t}\r\n`;
  const unit = (i) => chunk(`id: ${i}\nevent: values\ndata: {"i":${i}}\n\n`);
  const srv = net.createServer((s) => {
    let req = '';
    s.on('data', (d) => {
      req += d;
      if (!req.includes('\r\n\r\n')) return;
      s.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n'
        + chunk('id: 0\nevent: metadata\ndata: {}\n\n'));
      setTimeout(() => s.end(unit(1) + unit(2) + unit(3) + '0\r\n\r\n'), 100);
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const r = await run('loadgen', ['--port', String(srv.address().port), '--thread', 'x', '--conns', '4',
      '--sse-get', '/runs/%s/stream', '--expect', '4', '--duration', '20']);
    const res = r.lines.at(-1);
    assert.deepEqual([res.connected, res.ended, res.complete, res.min_received, res.max_received, res.received],
      [4, 4, 4, 4, 4, 16], 'every stream, the last to end too, counted with all four units');
    assert.deepEqual([r.code, res.missing, res.duplicates, res.errors], [0, 0, 0, 0]);
  } finally {
    srv.close();
  }
});

/** scripts/bench.py run with args into a temporary --out: its results file, parsed. */
async function benchResults(args, extraEnv = {}) {
  const os = await import('node:os');
  const fs = await import('node:fs');
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-results-'));
  const env = { ...process.env, TC_BENCH_BUILD: path.dirname(threadcastBin), ...extraEnv };
  try {
    const r = await run('python3', [path.join(repoRoot, 'scripts/bench.py'), ...args, '--out', out], env);
    assert.equal(r.code, 0, r.err);
    const file = fs.readdirSync(out).find((f) => f.endsWith('.json'));
    return { ...JSON.parse(fs.readFileSync(path.join(out, file))), log: r.err };
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
}

test('the rest scenario measures both sides of one run and checks every viewer got all of it', async () => {
  const [res] = (await benchResults(['--only', 'rest', '--runs', '1', '--rest-viewers', '4', '--rest-events', '200',
    '--rest-rate', '500'])).rest.threadcast;
  assert.equal(res.error, undefined, res.error);
  const events = 2 + 4 * 57; // 200 rounded up to whole turns
  assert.deepEqual([res.rest_events, res.ws_events, res.rest_viewers, res.ws_viewers], [events, events, 4, 4]);
  // Per turn: 40 text deltas, 4 tool call chunks, a tool result, 2 updates, 2 values; and the metadata.
  assert.deepEqual([res.rest_expected_per_viewer, res.rest_delivered], [1 + 4 * 49, 4 * 4 * 49]);
  assert.deepEqual([res.ws_expected_per_viewer, res.ws_delivered], [events - 8, 4 * (events - 8)]);
  assert.deepEqual([res.rest_lost, res.ws_lost], [0, 0]);
  assert.equal(res.rest_events_translated, events, 'one feed translated the run once for the four viewers');
  assert.ok(res.rest_bytes_out > 0 && res.ws_bytes_out > 0);
  for (const k of ['us_per_delivered', 'us_per_event_viewer']) {
    // CPU is read in clock ticks: a short window on a busy machine may read 0 for a side.
    assert.ok(res[`rest_${k}`] >= 0 && res[`ws_${k}`] >= 0 && Number.isFinite(res[`rest_${k}`] + res[`ws_${k}`]), k);
    if (res[`ws_${k}`] > 0) assert.equal(res[`rest_vs_ws_${k}`], res[`rest_${k}`] / res[`ws_${k}`]);
  }
  assert.equal(res.first, 'rest');
});

test('the tokens scenario: a LangGraph run through the worker reaches its starter and every viewer, each token once, stamped', async () => {
  // One run of 20 tokens at full speed on each route: the starter (runs.stream), two viewers
  // joined from the run's start and one joined halfway (REST), one ThreadStream (WebSocket).
  // The stack serves a warm-up cell first (two runs, one viewer each), not reported.
  const all = await benchResults(['--only', 'tokens', '--systems', 'threadcast', '--runs', '1',
    '--tokens-cells', '1x2@0/rest+late,1x1@0/websocket', '--tokens', '20', '--tokens-clients', '1', '--tokens-idle', '0',
    '--tokens-warmup', '2x1@0/rest']);
  assert.match(all.log, /tokens threadcast warm-up 2x1@0\/rest: 80 of 80 tokens/);
  const results = all.tokens;
  assert.deepEqual(Object.keys(results).filter((k) => k !== 'title'), ['threadcast'], '--systems threadcast leaves the peer out');
  const [res] = results.threadcast;
  assert.equal(res.error, undefined, res.error);
  assert.ok(!Object.keys(res).some((k) => k.startsWith('2x1@0/rest ')), 'the warm-up is not in the results');
  const cell = (name) => Object.fromEntries(Object.entries(res).filter(([k]) => k.startsWith(`${name} `))
    .map(([k, v]) => [k.slice(name.length + 1), v]));
  const rest = cell('1x2@0/rest+late');
  const ws = cell('1x1@0/websocket');
  // REST: the starter, two viewers from the start, the late one; WebSocket: the starter and one viewer.
  assert.deepEqual([rest.streams, rest.expected, rest.received, rest.complete, rest.lost], [4, 80, 80, 4, 0], JSON.stringify(rest.errors));
  assert.deepEqual([ws.streams, ws.expected, ws.received, ws.complete, ws.lost], [2, 40, 40, 2, 0], JSON.stringify(ws.errors));
  for (const c of [rest, ws]) {
    assert.deepEqual(c.errors, []);
    assert.deepEqual([c.runs, c.tokens, c.pace_ms, c.clients, c.client_cpu.length], [1, 20, 0, 1, 1]);
    for (const k of ['starter_p50_ms', 'starter_p99_ms', 'viewer_p50_ms', 'viewer_p99_ms', 'ttft_p50_ms']) {
      assert.ok(c[k] >= 0 && c[k] < 60000, `${k} ${c[k]}`);
    }
    assert.ok(c.starter_p99_ms >= c.starter_p50_ms);
    assert.ok(c.gen_p50_ms >= 0 && c.tokens_per_s > 0, 'the model\'s emission span and the delivery rate');
    // CPU is read in clock ticks: a short window may read 0 for a process.
    for (const k of ['server', 'gateway', 'worker', 'redis']) assert.ok(c[`${k}_us_per_token`] >= 0, k);
  }
  assert.ok(rest.catchup_p50_ms >= 0, 'the late viewer caught up');
  assert.equal(ws.catchup_p50_ms, undefined, 'no late viewer on that cell');
});

/** The Python venv the tokens-py scenario runs from (scripts/lib.sh's tc_python_env dev: made from
 * the lock when missing or stale, else at once), as an absolute path. */
function pythonEnv() {
  return new Promise((resolve, reject) => {
    const p = spawn('bash', ['-c', 'source scripts/lib.sh && tc_python_env dev'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(path.resolve(repoRoot, out.trim().split('\n').at(-1))) : reject(new Error(err))));
  });
}

/** A cell's figures out of a tokens scenario's result for one system ("<cell> <key>" keys). */
const tokenCell = (res, name) => Object.fromEntries(Object.entries(res).filter(([k]) => k.startsWith(`${name} `))
  .map(([k, v]) => [k.slice(name.length + 1), v]));

test('the tokens-py scenario: Python LangGraph runs through the Python worker and through LangGraph\'s Python server, each token once, stamped', async () => {
  // Both sides of one bench run on tests/bench/agent-server-py/: a run of 20 tokens at full speed
  // with two viewers from the start and one joined halfway, and a run at 20 ms a token with one
  // viewer; each stack serves a warm-up run first, not reported.
  const venv = await pythonEnv();
  const all = await benchResults(['--only', 'tokens-py', '--systems', 'threadcast,agent-server-py', '--runs', '1',
    '--tokens-py-cells', '1x2@0/rest+late,1x1@20/rest', '--tokens', '20', '--tokens-clients', '1', '--tokens-idle', '0',
    '--tokens-warmup', '1x1@0/rest'], { TC_BENCH_PY_VENV: venv });
  const results = all['tokens-py'];
  assert.deepEqual(Object.keys(results).filter((k) => k !== 'title'), ['threadcast', 'agent-server-py']);
  assert.equal(all.tokens, undefined, 'the JavaScript tokens scenario did not run');
  for (const kind of ['threadcast', 'agent-server-py']) {
    assert.match(all.log, new RegExp(`tokens-py ${kind} warm-up 1x1@0/rest: 40 of 40 tokens`));
    const [res] = results[kind];
    assert.equal(res.error, undefined, res.error);
    assert.ok(!Object.keys(res).some((k) => k.startsWith('1x1@0/rest ')), 'the warm-up is not in the results');
    const fast = tokenCell(res, '1x2@0/rest+late');
    const paced = tokenCell(res, '1x1@20/rest');
    // The starter, two viewers from the start and the late one; the starter and one viewer.
    // Every stream gets every token; threadcast's once each. LangGraph's Python server may repeat
    // some to a viewer that joins (it subscribes the viewer's queue before replaying what the run
    // stored, and what arrives in between is in both): counted, apart, as duplicates.
    assert.deepEqual([fast.streams, fast.expected, fast.received, fast.complete, fast.missing], [4, 80, 80, 4, 0], `${kind} ${JSON.stringify(fast.errors)}`);
    assert.deepEqual([paced.streams, paced.expected, paced.received, paced.complete, paced.missing], [2, 40, 40, 2, 0], `${kind} ${JSON.stringify(paced.errors)}`);
    for (const c of [fast, paced]) assert.equal(c.lost, c.missing + c.duplicates);
    if (kind === 'threadcast') assert.deepEqual([fast.duplicates, paced.duplicates], [0, 0]);
    for (const c of [fast, paced]) {
      assert.deepEqual(c.errors, []);
      for (const k of ['starter_p50_ms', 'starter_p99_ms', 'viewer_p50_ms', 'viewer_p99_ms', 'ttft_p50_ms']) {
        assert.ok(c[k] >= 0 && c[k] < 60000, `${kind} ${k} ${c[k]}`);
      }
      // CPU is read in clock ticks: a short window may read 0 for a process.
      assert.ok(c.server_us_per_token >= 0, kind);
      // How busy the machine was: the server side's wait for its core, and the load average.
      assert.ok(c.server_runq_wait_share >= 0 && c.server_runq_wait_ms >= 0 && c.loadavg >= 0, kind);
    }
    // The Python graph paces its model: 20 tokens 20 ms apart are emitted over at least 19 × 20 ms.
    assert.ok(paced.gen_p50_ms >= 380 && paced.gen_p50_ms < 5000, `${kind} emitted over ${paced.gen_p50_ms} ms`);
    assert.ok(fast.catchup_p50_ms >= 0, 'the late viewer caught up');
  }
  // threadcast's side is three processes (its Python worker among them), the peer's one.
  const tc = tokenCell(results.threadcast[0], '1x1@20/rest');
  for (const k of ['gateway', 'worker', 'redis']) assert.ok(tc[`${k}_us_per_token`] >= 0, k);
  assert.equal(tc['agent-server-py_us_per_token'], undefined);
  const peer = tokenCell(results['agent-server-py'][0], '1x1@20/rest');
  assert.equal(peer.worker_us_per_token, undefined);
  assert.equal(peer['agent-server-py_us_per_token'], peer.server_us_per_token);
});

test('the tokens-py scenario: idle viewers of LangGraph\'s Python server, on REST joins (attached once answered) and its protocol SSE', async () => {
  const venv = await pythonEnv();
  const all = await benchResults(['--only', 'tokens-py', '--systems', 'agent-server-py', '--runs', '1',
    '--tokens-py-cells', '1x1@0/rest', '--tokens', '10', '--tokens-clients', '1', '--tokens-idle', '20',
    '--tokens-warmup', ''], { TC_BENCH_PY_VENV: venv });
  const [res] = all['tokens-py']['agent-server-py'];
  assert.equal(res.error, undefined, res.error);
  assert.equal(res['idle rest error'], undefined, res['idle rest error']);
  assert.equal(res['idle sse error'], undefined, res['idle sse error']);
  // RSS is read in pages, per process: 20 viewers may read as little as nothing, never nonsense.
  for (const route of ['rest', 'sse']) assert.ok(Number.isFinite(res[`idle ${route} kib_per_viewer`]), route);
  assert.equal(res['idle websocket kib_per_viewer'], undefined, 'the Python server has no WebSocket route here');
});
