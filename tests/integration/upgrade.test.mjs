// Upgrading the function libraries in place (a rolling deploy): a Redis that
// holds the single library `threadcast` of earlier versions (every function
// in one; fixtures/threadcast-single-library.lua is that library as it was
// last shipped) gets the three libraries of this version from the first
// gateway that connects, in one transaction, and producers, the store and the
// REST records go on as before. An instance of the earlier version that
// reloads its library afterwards is refused and changes nothing; tools that
// load the libraries themselves (threadcast-produce) load all three.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  startRedis, startThreadcast, connect, stopAll, produce, redisClient, waitUntil, functionLibraries,
} from './lib/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const oldLibrary = readFileSync(path.join(here, 'fixtures/threadcast-single-library.lua'), 'utf8');
const event = (data) => JSON.stringify({ method: 'custom', params: { namespace: [], data } });

let redis, rc;
const gateways = [];
before(async () => {
  redis = await startRedis();
  rc = redisClient(redis.port);
});
after(async () => {
  rc.close();
  const reports = gateways.flatMap((g) => g.sanitizerReports());
  await stopAll();
  await redis.cleanup();
  assert.deepEqual(reports, []);
});

/** Library name -> its functions, sorted. */
async function libraries() {
  const out = {};
  for (const lib of await rc.cmd('FUNCTION', 'LIST')) out[lib[1]] = lib[5].map((f) => f[1]).sort();
  return out;
}
const current = {
  threadcast: ['threadcast_append', 'threadcast_append_batch', 'threadcast_range', 'threadcast_register', 'threadcast_submit'],
  threadcast_store: ['threadcast_store'],
  threadcast_rest: ['threadcast_rest'],
};

test('a gateway replaces the single library of earlier versions, and a thread appended before goes on', async () => {
  assert.equal(await rc.cmd('FUNCTION', 'LOAD', oldLibrary), 'threadcast');
  assert.deepEqual(Object.keys(await libraries()), ['threadcast']);
  // Written by a producer while only the earlier version was there.
  assert.equal(await rc.cmd('FCALL', 'threadcast_append', 1, 'up-1', event('before')), 1);
  const epoch = await rc.cmd('HGET', 'tc:{up-1}:meta', 'epoch');

  const tc = await startThreadcast({ redisUrl: redis.url });
  gateways.push(tc);
  await tc.ready();
  assert.deepEqual(await libraries(), current);
  assert.deepEqual(Object.keys(current), functionLibraries);

  // The producer contract: the same thread, its history and seqs, delivered live.
  const c = await connect(tc.url('up-1'));
  const sub = await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['custom'] } });
  assert.equal(sub.type, 'success', JSON.stringify(sub));
  assert.equal(await rc.cmd('FCALL', 'threadcast_append', 1, 'up-1', event('after')), 2);
  assert.equal(await rc.cmd('FCALL', 'threadcast_append_batch', 1, 'up-1', 2, event('b1'), event('b2')), 3);
  await waitUntil(() => c.events.length >= 4, 5000, 'the replayed and the live events');
  assert.deepEqual(c.events.map((e) => [e.seq, e.params.data]), [[1, 'before'], [2, 'after'], [3, 'b1'], [4, 'b2']]);
  assert.equal(c.events[3].eventId, `${epoch}:4`, 'the same history');
  await c.close();

  // The store and the REST records answer through the gateway as before.
  const put = await tc.http('/store/items', { method: 'PUT', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ namespace: ['up'], key: 'k', value: { v: 1 } }) });
  assert.equal(put.status, 204, await put.text());
  const got = await tc.http('/store/items?namespace=up&key=k');
  assert.deepEqual((await got.json()).value, { v: 1 });
  const created = await tc.http('/threads', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ thread_id: 'up-rest', metadata: { a: 1 } }) });
  assert.equal(created.status, 200, await created.text());
  assert.deepEqual((await (await tc.http('/threads/up-rest')).json()).metadata, { a: 1 });
});

test('an instance of the earlier version reloading its library is refused and changes nothing', async () => {
  const refused = await rc.cmd('FUNCTION', 'LOAD', 'REPLACE', oldLibrary);
  assert.ok(refused instanceof Error, String(refused));
  assert.match(refused.message, /already exists/);
  assert.deepEqual(await libraries(), current);
  // A worker of any version finds a library named threadcast and loads none of its own.
  assert.equal((await rc.cmd('FUNCTION', 'LIST', 'LIBRARYNAME', 'threadcast')).length, 1);
  assert.equal(await rc.cmd('FCALL', 'threadcast_append', 1, 'up-1', event('still')), 5);
});

test('a gateway connecting to the libraries of its own version loads them again, unchanged', async () => {
  const tc = await startThreadcast({ redisUrl: redis.url });
  gateways.push(tc);
  await tc.ready();
  assert.deepEqual(await libraries(), current);
  assert.equal(await rc.cmd('FCALL', 'threadcast_append', 1, 'up-1', event('again')), 6);
});

test('threadcast-produce loads all three libraries into a Redis that has none', async () => {
  const fresh = await startRedis();
  try {
    const { seqs } = await produce(fresh.url, 'up-2', [event('one'), event('two')]);
    assert.deepEqual(seqs, [1, 2]);
    const fc = redisClient(fresh.port);
    const names = (await fc.cmd('FUNCTION', 'LIST')).map((l) => l[1]).sort();
    fc.close();
    assert.deepEqual(names, [...functionLibraries].sort());
  } finally {
    await fresh.cleanup();
  }
});
