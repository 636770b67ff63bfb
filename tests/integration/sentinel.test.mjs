// Redis behind Sentinel: threadcast asks the Sentinels for the master and
// follows a failover to the promoted replica, keeping its clients.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  startRedis, startThreadcast, connect, stopAll, produce, waitUntil, sleep, redisClient,
  storedEvents, firstDisorder, freePort, redisServerBin, track,
} from './lib/harness.mjs';
import { mix } from './lib/events.mjs';

const ALL = ['messages', 'tools', 'lifecycle', 'values', 'custom:progress', 'updates'];
let primary, replica, sentinels = [], tc;

// A node's role; null while it cannot be asked (a Sentinel promoting a replica
// kills its clients' connections: ECONNRESET mid-question).
async function role(port) {
  const rc = redisClient(port);
  try { return (await rc.cmd('ROLE'))[0]; } catch { return null; } finally { rc.close(); }
}

async function startSentinel(masterPort, dir) {
  const port = await freePort();
  const conf = path.join(dir, `sentinel-${port}.conf`);
  writeFileSync(conf, [
    `port ${port}`, 'bind 127.0.0.1', `dir ${dir}`,
    `sentinel monitor tcmaster 127.0.0.1 ${masterPort} 1`,
    'sentinel down-after-milliseconds tcmaster 1000',
    'sentinel failover-timeout tcmaster 5000',
  ].join('\n') + '\n');
  const proc = track(spawn(redisServerBin, [conf, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  proc.stdout.on('data', (d) => { out += d; });
  await waitUntil(() => out.includes('+monitor master tcmaster'), 10000, 'sentinel to monitor');
  return { port, proc, out: () => out };
}

before(async () => {
  primary = await startRedis();
  replica = await startRedis({ extra: ['--replicaof', '127.0.0.1', String(primary.port)] });
  await waitUntil(async () => {
    const rc = redisClient(replica.port);
    const info = await rc.cmd('INFO', 'replication');
    rc.close();
    return info.includes('master_link_status:up');
  }, 10000, 'replication');
  sentinels = [await startSentinel(primary.port, primary.dir)];
  // The first Sentinel listed does not exist: the next one is asked.
  const dead = await freePort();
  tc = await startThreadcast({
    redisUrl: 'redis://127.0.0.1:1',
    args: ['--redis-sentinels', `127.0.0.1:${dead},127.0.0.1:${sentinels[0].port}`,
      '--redis-sentinel-master', 'tcmaster', '--redis-backoff-max', '500'],
  });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 20000, 'ready');
});

after(async () => {
  const reports = tc ? tc.sanitizerReports() : [];
  for (const s of sentinels) s.proc.kill('SIGKILL');
  await stopAll();
  await replica.cleanup();
  await primary.cleanup();
  assert.deepEqual(reports, [], tc?.stderr);
});

test('the master named by the Sentinel serves; a failover is followed without losing clients or events', async () => {
  assert.ok(tc.logs.some((l) => l.msg === 'cannot reach a sentinel'), 'the dead Sentinel was tried first');
  assert.ok(tc.logs.some((l) => l.msg === 'redis master named by sentinel' && l.node === `127.0.0.1:${primary.port}`));

  const threads = ['sen-a', 'sen-b', 'sen-c'];
  const clients = await Promise.all(threads.map(async (t) => {
    const c = await connect(tc.url(t));
    assert.equal((await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } })).type, 'success');
    return c;
  }));
  await Promise.all(threads.map((t) => produce(primary.url, t, mix(120))));
  const pc = redisClient(primary.port);
  assert.ok(await pc.cmd('WAIT', '1', '2000') >= 1, 'the replica has every write');
  pc.close();

  primary.proc.kill('SIGKILL');
  await waitUntil(async () => (await tc.http('/readyz')).status === 503, 10000, 'unready without a master');
  await waitUntil(async () => (await role(replica.port)) === 'master', 30000, 'the Sentinel to promote the replica');
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 20000, 'ready on the new master');
  assert.ok(tc.logs.some((l) => l.msg === 'redis master named by sentinel' && l.node === `127.0.0.1:${replica.port}`));

  await Promise.all(threads.map((t) => produce(replica.url, t, mix(120, { start: false }))));
  const rc = redisClient(replica.port);
  for (const [i, t] of threads.entries()) {
    const want = (await storedEvents(rc, t)).map((e) => e.seq);
    assert.equal(want.length, 240);
    await waitUntil(() => clients[i].events.length >= want.length, 20000, `${t} complete`);
    await sleep(100);
    const got = clients[i].events.map((e) => e.seq);
    assert.equal(firstDisorder(got), null);
    assert.deepEqual(got, want, t);
    assert.equal(await Promise.race([clients[i].closed.then(() => 'closed'), sleep(0).then(() => 'open')]), 'open');
  }
  rc.close();
  await Promise.all(clients.map((c) => c.close()));
});

test('a bad Sentinel list is refused at start with a precise error', async () => {
  const bad = await startThreadcast({ args: ['--redis-sentinels', '127.0.0.1:notaport'] }).catch((e) => e);
  assert.match(String(bad.message), /--redis-sentinels \/ THREADCAST_REDIS_SENTINELS: "127\.0\.0\.1:notaport" is not host:port/);
});
