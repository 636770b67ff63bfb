// Redis Cluster: three masters with a replica each, started by the test.
// threadcast is given one node; it finds the rest, sends each thread's
// commands and doorbell subscription to the master of its slot, and follows
// failovers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  startRedis, startThreadcast, connect, stopAll, produce, waitUntil, sleep, redisClient,
  storedEvents, firstDisorder,
} from './lib/harness.mjs';
import { mix } from './lib/events.mjs';

const ALL = ['messages', 'tools', 'lifecycle', 'values', 'custom:progress', 'updates'];
let nodes = [];
let tc;

/** CLUSTER NODES of one node: [{id, port, master, masterId, slots}]. */
async function topology(port) {
  const rc = redisClient(port);
  const text = await rc.cmd('CLUSTER', 'NODES');
  rc.close();
  return text.trim().split('\n').map((line) => {
    const f = line.split(' ');
    return {
      id: f[0],
      port: Number(f[1].split(':')[1].split('@')[0]),
      master: f[2].includes('master') && !f[2].includes('fail'),
      failed: f[2].includes('fail'),
      masterId: f[3],
      slots: f.slice(8),
    };
  });
}

async function clusterOk(port) {
  const rc = redisClient(port);
  const info = await rc.cmd('CLUSTER', 'INFO');
  rc.close();
  return info.includes('cluster_state:ok');
}

const live = () => nodes.filter((n) => n.proc.exitCode === null && n.proc.signalCode === null);

/** The port of the master serving a key, as a live node sees it. */
async function masterOf(key) {
  const rc = redisClient(live()[0].port);
  const slot = await rc.cmd('CLUSTER', 'KEYSLOT', key);
  const shards = await rc.cmd('CLUSTER', 'SLOTS');
  rc.close();
  const s = shards.find(([lo, hi]) => slot >= lo && slot <= hi);
  return s[2][1];
}

/** Thread ids, several per master, and the master port of each. */
async function spreadThreads(prefix, perMaster) {
  const byMaster = new Map();
  for (let i = 0; [...byMaster.values()].filter((l) => l.length >= perMaster).length < 3; i++) {
    assert.ok(i < 1000, 'thread ids fall on every master');
    const id = `${prefix}${i}`;
    const port = await masterOf(`tc:{${id}}:events`);
    if (!byMaster.has(port)) byMaster.set(port, []);
    if (byMaster.get(port).length < perMaster) byMaster.get(port).push(id);
  }
  return byMaster;
}

async function subscribeAll(threads) {
  const clients = new Map();
  await Promise.all(threads.map(async (t) => {
    const c = await connect(tc.url(t));
    const r = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } });
    assert.equal(r.type, 'success');
    clients.set(t, c);
  }));
  return clients;
}

/** Every client ends with exactly its thread's stored events, in order, once. */
async function assertComplete(clients, ms = 30000) {
  const want = new Map();
  for (const t of clients.keys()) {
    const rc = redisClient(await masterOf(`tc:{${t}}:events`));
    want.set(t, (await storedEvents(rc, t)).map((e) => e.seq));
    rc.close();
  }
  await waitUntil(() => [...clients].every(([t, c]) => c.events.length >= want.get(t).length), ms,
    'every event at every client');
  await sleep(200);
  for (const [t, c] of clients) {
    const got = c.events.map((e) => e.seq);
    assert.equal(firstDisorder(got), null, t);
    assert.deepEqual(got, want.get(t), t);
  }
}

before(async () => {
  nodes = await Promise.all(Array.from({ length: 6 }, () => startRedis({
    extra: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
      '--cluster-node-timeout', '1000', '--cluster-replica-validity-factor', '0'],
  })));
  const r = spawnSync('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`),
    '--cluster-replicas', '1', '--cluster-yes'], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  for (const n of nodes) await waitUntil(() => clusterOk(n.port), 20000, 'cluster_state:ok');
  await waitUntil(async () => (await topology(nodes[0].port)).filter((n) => n.master).length === 3
    && (await topology(nodes[0].port)).every((n) => !n.failed), 20000, 'three masters');

  // Seed threadcast with a replica: it must find the masters by itself.
  const replica = (await topology(nodes[0].port)).find((n) => !n.master);
  tc = await startThreadcast({ redisUrl: `redis://127.0.0.1:${replica.port}` });
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 20000, 'ready');
});

after(async () => {
  const reports = tc ? tc.sanitizerReports() : [];
  await stopAll();
  await Promise.all(nodes.map((n) => n.cleanup()));
  assert.deepEqual(reports, [], tc?.stderr);
});

test('finds the three masters from a replica and reports the cluster in /readyz', async () => {
  const body = await (await tc.http('/readyz')).json();
  assert.equal(body.ready, true);
  assert.equal(body.redisCluster, true);
  assert.equal(body.redisMasters, 3);
  // The function the producers call is on every master.
  for (const m of (await topology(nodes[0].port)).filter((n) => n.master)) {
    const rc = redisClient(m.port);
    const libs = await rc.cmd('FUNCTION', 'LIST', 'LIBRARYNAME', 'threadcast');
    rc.close();
    assert.equal(libs.length, 1, `function loaded on ${m.port}`);
  }
});

test('threads spread over the masters: doorbells sharded per master, every event delivered', async () => {
  const byMaster = await spreadThreads('spread', 4);
  const threads = [...byMaster.values()].flat();
  const clients = await subscribeAll(threads);

  // Each master carries exactly the doorbell subscriptions of its own threads.
  for (const [port, ts] of byMaster) {
    const rc = redisClient(port);
    const chans = (await rc.cmd('PUBSUB', 'SHARDCHANNELS', 'tc:{spread*')).sort();
    rc.close();
    assert.deepEqual(chans, ts.map((t) => `tc:{${t}}:live`).sort(), `shard channels on ${port}`);
  }

  const seed = `redis://127.0.0.1:${nodes[0].port}`; // not every thread's master: MOVED is followed
  await Promise.all(threads.map((t) => produce(seed, t, mix(150))));
  await assertComplete(clients);
  await Promise.all([...clients.values()].map((c) => c.close()));
});

test('a manual failover mid-stream: no event lost, none twice', async () => {
  const byMaster = await spreadThreads('manual', 3);
  const threads = [...byMaster.values()].flat();
  const clients = await subscribeAll(threads);
  const [victim] = byMaster.keys();
  const seed = `redis://127.0.0.1:${[...byMaster.keys()][1]}`;

  const producing = Promise.all(threads.map(async (t) => {
    for (let round = 0; round < 8; round++) {
      await produce(seed, t, mix(40, { start: round === 0 }), { args: ['--retry-ms', '20000'] });
      await sleep(50);
    }
  }));
  await sleep(300);
  const top = await topology(victim);
  const victimId = top.find((n) => n.port === victim).id;
  const replica = top.find((n) => !n.master && n.masterId === victimId);
  const rc = redisClient(replica.port);
  assert.equal(await rc.cmd('CLUSTER', 'FAILOVER'), 'OK');
  rc.close();
  await waitUntil(async () => (await topology(replica.port)).find((n) => n.port === replica.port).master,
    20000, 'the replica to take over');
  await producing;

  assert.notEqual(await masterOf(`tc:{${byMaster.get(victim)[0]}}:events`), victim, 'the slot moved');
  await assertComplete(clients);
  // The doorbells followed their slots: subscribed on the new master, gone from the old.
  const channels = async (port) => {
    const c = redisClient(port);
    const list = (await c.cmd('PUBSUB', 'SHARDCHANNELS', 'tc:{manual*')).sort();
    c.close();
    return list;
  };
  const moved = byMaster.get(victim).map((t) => `tc:{${t}}:live`).sort();
  assert.deepEqual(await channels(replica.port), moved);
  assert.deepEqual(await channels(victim), []);
  assert.equal((await tc.http('/readyz')).status, 200);
  await Promise.all([...clients.values()].map((c) => c.close()));
});

test('a slot migrated to another master mid-stream: the doorbell follows it', async () => {
  const byMaster = await spreadThreads('moving', 2);
  const [from, to] = [...byMaster.keys()];
  const [thread, stays] = byMaster.get(from);
  const clients = await subscribeAll([thread, stays, ...byMaster.get(to)]);
  const seed = `redis://127.0.0.1:${from}`;
  await Promise.all([...clients.keys()].map((t) => produce(seed, t, mix(60))));

  // CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE the keys, then the slot is the target's.
  const top = await topology(from);
  const idOf = (port) => top.find((n) => n.port === port).id;
  const src = redisClient(from);
  const dst = redisClient(to);
  const slot = await src.cmd('CLUSTER', 'KEYSLOT', `tc:{${thread}}:events`);
  assert.equal(await dst.cmd('CLUSTER', 'SETSLOT', slot, 'IMPORTING', idOf(from)), 'OK');
  assert.equal(await src.cmd('CLUSTER', 'SETSLOT', slot, 'MIGRATING', idOf(to)), 'OK');
  const keys = await src.cmd('CLUSTER', 'GETKEYSINSLOT', slot, '100');
  assert.ok(keys.length >= 3, 'the thread has keys to move');
  assert.equal(await src.cmd('MIGRATE', '127.0.0.1', to, '', '0', '5000', 'KEYS', ...keys), 'OK');
  for (const port of top.filter((n) => n.master).map((n) => n.port)) {
    const c = redisClient(port);
    assert.equal(await c.cmd('CLUSTER', 'SETSLOT', slot, 'NODE', idOf(to)), 'OK');
    c.close();
  }
  src.close();
  dst.close();
  await waitUntil(async () => (await masterOf(`tc:{${thread}}:events`)) === to, 10000, 'the slot to move');

  await Promise.all([...clients.keys()].map((t) => produce(seed, t, mix(60, { start: false }))));
  await assertComplete(clients);
  const c = redisClient(to);
  assert.ok((await c.cmd('PUBSUB', 'SHARDCHANNELS', `tc:{${thread}}:live`)).length === 1);
  c.close();
  await Promise.all([...clients.values()].map((x) => x.close()));
});

test('a master killed: gateway follows the promoted replica, clients stay and complete', async () => {
  const byMaster = await spreadThreads('killed', 3);
  const threads = [...byMaster.values()].flat();
  const clients = await subscribeAll(threads);
  const ports = [...byMaster.keys()];
  const victim = ports[0];
  const seed = `redis://127.0.0.1:${ports[1]}`;

  await Promise.all(threads.map((t) => produce(seed, t, mix(100))));
  // Replication is asynchronous: let it catch up, so the kill loses nothing.
  const vc = redisClient(victim);
  assert.ok((await vc.cmd('WAIT', '1', '2000')) >= 1, 'the replica has every write');
  vc.close();

  nodes.find((n) => n.port === victim).proc.kill('SIGKILL');
  await waitUntil(async () => (await tc.http('/readyz')).status === 503, 10000, 'unready while a master is gone');
  await waitUntil(async () => {
    const top = await topology(ports[1]);
    return top.filter((n) => n.master).length === 3 && await clusterOk(ports[1]);
  }, 30000, 'a replica promoted');
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 20000, 'ready again');

  await Promise.all(threads.map((t) => produce(seed, t, mix(100, { start: false }), { args: ['--retry-ms', '20000'] })));
  await assertComplete(clients);
  for (const c of clients.values()) {
    assert.equal(await Promise.race([c.closed.then(() => 'closed'), sleep(0).then(() => 'open')]), 'open');
  }
  const metrics = await (await tc.http('/metrics')).text();
  const maps = Number(/threadcast_redis_slot_map_changes_total (\d+)/.exec(metrics)[1]);
  assert.ok(maps >= 2, `the slot map was re-read after the failover (${maps} changes)`);
  await Promise.all([...clients.values()].map((c) => c.close()));
});
