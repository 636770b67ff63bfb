// scripts/bench's own tools, checked for correctness (never for speed):
// loadgen counts every event once, publish spreads its
// events over the threads, and the replay scenario's reconnect is accepted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import {
  startRedis, startThreadcast, stopAll, waitUntil, redisClient, threadcastBin,
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

function run(name, args) {
  return new Promise((resolve, reject) => {
    const p = spawn(bin(name), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.on('error', reject);
    p.on('exit', (code) => resolve({ code, lines: out.split('\n').filter(Boolean).map((l) => JSON.parse(l)), err }));
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
