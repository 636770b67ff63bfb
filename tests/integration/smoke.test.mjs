import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, connect, stopAll } from './lib/harness.mjs';

let redis, tc;
before(async () => { redis = await startRedis(); tc = await startThreadcast({ redisUrl: redis.url }); });
after(async () => { await stopAll(); await redis.cleanup(); });

test('unknown method gets unknown_command with its id', async () => {
  const c = await connect(tc.url('t1'));
  const r = await c.request({ id: 1, method: 'nope', params: {} });
  assert.equal(r.type, 'error');
  assert.equal(r.id, 1);
  assert.equal(r.error, 'unknown_command');
  await c.close();
});
