// A stalled Redis and a client that stops reading: everyone else is served,
// nothing is lost, memory stays bounded.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { startRedis, startThreadcast, connect, stopAll, produce, waitUntil, redisClient, sleep } from './lib/harness.mjs';

/**
 * A subscriber that keeps only the seqs (100 of them receive 30 MB each);
 * no permessage-deflate, or the repetitive test payload would shrink to
 * nothing on the wire and never fill a socket.
 */
function lean(url) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const c = { ws, seqs: [], closed: new Promise((r) => ws.on('close', (code) => r({ code }))) };
    ws.on('message', (d) => {
      const head = d.toString('utf8', 0, 80);
      const m = head.match(/"seq":(\d+)/);
      if (m) c.seqs.push(Number(m[1]));
      else if (head.includes('"type":"success"')) resolve(c);
    });
    ws.on('open', () => ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } })));
  });
}

after(async () => { await stopAll(); });

const rssKb = (pid) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]);

test('Redis stalls for 3 s (DEBUG SLEEP): readiness follows, clients stay, nothing is lost', async () => {
  const redis = await startRedis({ extra: ['--enable-debug-command', 'local'] });
  const tc = await startThreadcast({ redisUrl: redis.url, args: ['--redis-ping-interval', '300'] });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready');
  const clients = await Promise.all([0, 1, 2].map(() => connect(tc.url('stall1'))));
  await Promise.all(clients.map((c) => c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } })));
  const ev = (i) => ({ method: 'tasks', params: { namespace: [], data: i } });
  await produce(redis.url, 'stall1', Array.from({ length: 100 }, (_, i) => ev(i)));
  const rc = redisClient(redis.port);
  const sleeping = rc.cmd('DEBUG', 'SLEEP', '3');
  await waitUntil(async () => (await tc.http('/readyz')).status === 503, 3000, 'unready while Redis stalls');
  const during = produce(redis.url, 'stall1', Array.from({ length: 100 }, (_, i) => ev(100 + i)));
  await sleeping;
  await during;
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready again');
  await waitUntil(() => clients.every((c) => c.events.length >= 200), 10000, 'all events');
  for (const c of clients) {
    assert.deepEqual(c.events.map((e) => e.seq), Array.from({ length: 200 }, (_, i) => i + 1));
    assert.equal(c.ws.readyState, 1);
  }
  rc.close();
  assert.equal((await tc.stop()).code, 0);
  assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
  await redis.cleanup();
});

test('one WebSocket that never reads is cut (1013); 100 that read get everything; RSS stays bounded', async () => {
  const redis = await startRedis();
  // Under ASan, freed memory waits in a quarantine (256 MB by default) that
  // would look like growth: keep it small so RSS measures threadcast.
  const asan = `${process.env.ASAN_OPTIONS ? `${process.env.ASAN_OPTIONS}:` : ''}quarantine_size_mb=4:thread_local_quarantine_size_kb=64`;
  const tc = await startThreadcast({ redisUrl: redis.url, args: ['--max-queue-bytes', '1000000'],
    env: { ASAN_OPTIONS: asan } });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready');
  const readers = await Promise.all(Array.from({ length: 100 }, () => lean(tc.url('slowws'))));
  const stuck = await lean(tc.url('slowws'));
  stuck.ws._socket.pause();
  const rss0 = rssKb(tc.proc.pid);
  const big = 'w'.repeat(50000);
  // 30 MB in batches of a fifth of the queue bound, so readers keep up.
  for (let b = 0; b < 150; b++) {
    await produce(redis.url, 'slowws', Array.from({ length: 4 }, () => ({ method: 'tasks', params: { namespace: [], data: big } })));
    await waitUntil(() => readers.every((c) => c.seqs.length >= (b + 1) * 4), 20000, 'readers');
  }
  const rss1 = rssKb(tc.proc.pid);
  await waitUntil(async () => /threadcast_slow_consumer_cuts_total 1\n/.test(await (await tc.http('/metrics')).text()), 5000, 'cut');
  const want = Array.from({ length: 600 }, (_, i) => i + 1);
  for (const c of readers) assert.deepEqual(c.seqs, want);
  // A client that reads nothing cannot read the 1013 close frame either:
  // the server gives it 2 s, then drops the socket and frees its queue.
  stuck.ws._socket.resume();
  const { code } = await stuck.closed;
  assert.ok(code === 1013 || code === 1006, `closed with ${code}`);
  assert.ok(tc.logs.some((l) => l.msg === 'slow consumer cut off'));
  // 100 readers × ≤ 1 MB queues is the worst case; 30 MB went through.
  assert.ok(rss1 - rss0 < 150 * 1024, `RSS grew ${rss1 - rss0} kB`);
  for (const c of readers) c.ws.close();
  assert.equal((await tc.stop()).code, 0);
  assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
  await redis.cleanup();
});

test('a REST request made while Redis is down waits for it (a restart is no error), and is refused with 503 only when it stays down', async () => {
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready');
  let again;
  try {
    await redis.stop('SIGKILL');
    await waitUntil(async () => (await tc.http('/readyz')).status === 503, 5000, 'unready without Redis');
    // Sent while Redis is down; Redis comes back (empty) on the same port a second later.
    const asked = tc.http('/threads', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal((await tc.http('/readyz')).status, 503, 'still down when Redis returns');
    again = await startRedis({ port: redis.port, dir: redis.dir });
    const res = await asked;
    assert.equal(res.status, 200, await res.clone().text());
    const thread = await res.json();
    assert.match(thread.thread_id, /^[0-9a-f-]{36}$/);
    assert.equal((await tc.http(`/threads/${thread.thread_id}`)).status, 200, 'made in the Redis that came back');
    // Down for good: refused once the wait is over, with the reason, and nothing else breaks.
    await again.stop('SIGKILL');
    await waitUntil(async () => (await tc.http('/readyz')).status === 503, 5000, 'unready again');
    const refused = await tc.http('/threads', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(refused.status, 503);
    assert.match(await refused.text(), /the event store \(Redis\) is unavailable/);
    assert.equal((await tc.http('/healthz')).status, 200, 'the gateway itself is alive');
  } finally {
    await again?.cleanup();
    await redis.cleanup();
    await tc.stop();
  }
});

/** A run that stays pending, with no event at all: its worker is registered and never takes it. */
async function pendingRun(tc, rc) {
  await rc.cmd('FCALL', 'threadcast_register', 2, '{tc:commands}:w:agent', '{tc:commands}:assistants', 'agent', 'silent', 600000);
  const json = { method: 'POST', headers: { 'content-type': 'application/json' } };
  const { thread_id: thread } = await (await tc.http('/threads', { ...json, body: '{}' })).json();
  const run = await (await tc.http(`/threads/${thread}/runs`, { ...json, body: JSON.stringify({ assistant_id: 'agent', input: {} }) })).json();
  assert.equal(run.status, 'pending');
  return { thread, run };
}

// The chaos test's slowest gateway-SIGKILL clients (issue 27): a stream resumed on another gateway
// while its run was quiet got its headers only with the run's next event, 4-5 s later.
test('a run stream resumed or joined while its run sends nothing answers its headers at once', async () => {
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready');
  const rc = redisClient(redis.port);
  try {
    const { thread, run } = await pendingRun(tc, rc);
    for (const headers of [{ 'last-event-id': '0' }, { 'last-event-id': '7' }]) {
      const ac = new AbortController();
      // (without the fix the headers never came: nothing of the run was ever sent)
      const res = await Promise.race([tc.http(`/threads/${thread}/runs/${run.run_id}/stream`, { headers, signal: ac.signal }),
        sleep(5000).then(() => null)]);
      assert.ok(res, `headers for ${JSON.stringify(headers)}`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type'), /^text\/event-stream/);
      ac.abort();
    }
  } finally {
    rc.close();
    await redis.cleanup();
    await tc.stop();
  }
  assert.deepEqual(tc.sanitizerReports(), []);
});

test('a read whose Redis connection breaks before its answer is sent again once Redis is back: a run stream opened then is served, not refused', async () => {
  const redis = await startRedis({ appendonly: true, extra: ['--enable-debug-command', 'local', '--appendfsync', 'always'] });
  const tc = await startThreadcast({ redisUrl: redis.url });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready');
  let again;
  const rc = redisClient(redis.port);
  try {
    const { thread, run } = await pendingRun(tc, rc);
    // Redis busy for 3 s: the stream's first read (the run's record) is sent and waits; Redis dies under it.
    rc.cmd('DEBUG', 'SLEEP', '3').catch(() => {});
    await new Promise((r) => setTimeout(r, 200));
    const ac = new AbortController();
    const opened = tc.http(`/threads/${thread}/runs/${run.run_id}/stream`, { signal: ac.signal });
    await new Promise((r) => setTimeout(r, 300));
    await redis.stop('SIGKILL');
    again = await startRedis({ appendonly: true, port: redis.port, dir: redis.dir });
    const res = await opened;
    assert.equal(res.status, 200, await res.clone().text().catch(() => ''));
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    ac.abort();
  } finally {
    rc.close();
    await again?.cleanup();
    await redis.cleanup();
    await tc.stop();
  }
});
