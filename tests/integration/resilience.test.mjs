// Redis restarts under connected clients and a retrying producer.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll, produce, waitUntil } from './lib/harness.mjs';

after(async () => { await stopAll(); });

test('restart redis-server (appendonly) mid-stream: clients get every acknowledged event', async () => {
  const redis = await startRedis({ appendonly: true });
  const tc = await startThreadcast({ redisUrl: redis.url, args: ['--redis-backoff-max', '200'] });
  await tc.ready();
  const clients = await Promise.all([0, 1, 2].map(() => connect(tc.url('rr1'))));
  await Promise.all(clients.map((c) => c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['tasks'] } })));
  const events = Array.from({ length: 3000 }, (_, i) => ({ method: 'tasks', params: { namespace: [], data: i } }));
  const producing = produce(redis.url, 'rr1', events, { args: ['--retry-ms', '15000', '--pipeline', '1'] });
  await waitUntil(() => clients[0].events.length >= 200, 10000, 'first events');
  await redis.stop('SIGTERM');
  await waitUntil(async () => (await tc.http('/readyz')).status === 503, 5000, 'unready');
  const again = await startRedis({ appendonly: true, port: redis.port, dir: redis.dir });
  const { seqs } = await producing;
  assert.ok(seqs.length === 3000, `all events acknowledged (${seqs.length})`);
  const last = Math.max(...seqs);
  await waitUntil(() => clients.every((c) => c.events.length && c.events.at(-1).seq >= last), 15000, 'catch up');
  for (const c of clients) {
    const got = c.events.map((e) => e.seq);
    // Every acknowledged seq arrived, in order, once; a retried append may
    // add one unacknowledged seq, which is delivered too.
    assert.deepEqual(got, Array.from({ length: last }, (_, i) => i + 1));
    for (const s of seqs) assert.ok(got.includes(s));
    assert.equal(c.ws.readyState, 1, 'still connected');
  }
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready again');
  assert.equal((await tc.stop()).code, 0);
  assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
  await again.cleanup();
});
