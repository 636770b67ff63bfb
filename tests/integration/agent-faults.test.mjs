// No worker, a switched-off bridge, and a worker that dies holding a command.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, startAgent, connect, stopAll, waitUntil, redisClient } from './lib/harness.mjs';

after(async () => { await stopAll(); });

test('no worker: refused at once, naming the assistant; a silent worker: timed out', async () => {
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url, args: ['--command-timeout', '800'] });
  await tc.ready();
  const rc = redisClient(redis.port);
  const c = await connect(tc.url('nw1'));
  let t0 = Date.now();
  let r = await c.request({ id: 1, method: 'run.start', params: { assistantId: 'a', input: 'x' } });
  assert.equal(r.error, 'unknown_error');
  assert.equal(r.message, 'no worker serves assistant "a" (no worker is running)');
  assert.ok(Date.now() - t0 < 500, `took ${Date.now() - t0} ms`);
  // Another assistant is served: the error says which.
  await rc.cmd('FCALL', 'threadcast_register', 2, '{tc:commands}:w:b', '{tc:commands}:assistants', 'b', 'silent', 60000);
  r = await c.request({ id: 2, method: 'run.start', params: { assistantId: 'a', input: 'x' } });
  assert.equal(r.error, 'invalid_argument');
  assert.equal(r.message, 'no worker serves assistant "a" (live: b)');
  // A worker that is registered but never answers: the gateway's timeout.
  t0 = Date.now();
  r = await c.request({ id: 3, method: 'run.start', params: { assistantId: 'b', input: 'x' } });
  const took = Date.now() - t0;
  assert.equal(r.error, 'unknown_error');
  assert.match(r.message, /no agent worker answered within 800 ms/);
  assert.ok(took >= 700 && took < 3000, `took ${took} ms`);
  assert.equal(await rc.cmd('XLEN', '{tc:commands}:a:b'), 1, 'queued on the stream of b\'s workers');
  assert.equal((await c.request({ id: 4, method: 'nope' })).error, 'unknown_command');
  await c.close();
  rc.close();
  assert.equal((await tc.stop()).code, 0);
  assert.deepEqual(tc.sanitizerReports(), [], tc.stderr);
  await redis.cleanup();
});

test('--commands off: runtime methods answer not_supported', async () => {
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url, args: ['--commands', 'off'] });
  const c = await connect(tc.url('off1'));
  for (const method of ['run.start', 'input.respond', 'input.inject', 'state.get', 'state.listCheckpoints', 'state.fork']) {
    const r = await c.request({ id: 1, method, params: {} });
    assert.equal(r.error, 'not_supported', method);
  }
  await c.close();
  await tc.stop();
  await redis.cleanup();
});

test('a worker dies holding an unacknowledged command: another claims it, the client gets one answer', async () => {
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url, args: ['--command-timeout', '20000'] });
  await tc.ready();
  const rc = redisClient(redis.port);
  const hung = await startAgent(redis.url, { name: 'hung', args: ['--stall', 'state.get', '--claim-idle-ms', '300'] });
  const c = await connect(tc.url('dead1'));
  await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready');
  const answer = c.request({ id: 77, method: 'state.get', params: { namespace: [] } });
  // The hung worker has read it: it is pending in the group, owned by "hung".
  await waitUntil(async () => {
    const p = await rc.cmd('XPENDING', 'tc:commands', 'workers');
    return Array.isArray(p) && p[0] === 1 && p[3] && p[3][0][0] === 'hung';
  }, 5000, 'pending on the hung worker');
  await hung.kill('SIGKILL');
  const rescuer = await startAgent(redis.url, { name: 'rescuer', args: ['--claim-idle-ms', '300'] });
  const r = await answer;
  assert.equal(r.type, 'success');
  assert.equal(r.id, 77);
  await rescuer.waitLog((l) => l.msg === 'claimed a command another worker left');
  await new Promise((res) => setTimeout(res, 300));
  assert.equal(c.frames.filter((f) => f.id === 77).length, 1);
  const p = await rc.cmd('XPENDING', 'tc:commands', 'workers');
  assert.equal(p[0], 0, 'acknowledged');
  rc.close();
  await c.close();
  await tc.stop();
  await redis.cleanup();
});
