// The plain build under valgrind: every transport exercised, then SIGTERM.
// Valgrind must report no error and no byte left allocated.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { writeFileSync, mkdtempSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { startRedis, startThreadcast, startAgent, connect, stopAll, produce, waitUntil, sse, repoRoot } from './lib/harness.mjs';
import { mix } from './lib/events.mjs';

after(async () => { await stopAll(); });

// Everything the server does, on every transport: the workload both runs use.
async function workload(tc, redis) {
  await tc.ready(30000);
  const agent = await startAgent(redis.url);
  await produce(redis.url, 'vg1', mix(300));
  const ws = await connect(tc.url('vg1'));
  const sub = await ws.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['messages', 'tools'] } });
  assert.equal(sub.type, 'success');
  const s = await sse(`http://127.0.0.1:${tc.port}/threads/vg1/stream?channels=lifecycle`, { headers: { accept: 'text/event-stream' } });
  await produce(redis.url, 'vg1', mix(200, { start: false }));
  const run = await ws.request({ id: 2, method: 'run.start', params: { assistantId: 'a', input: 'valgrind' } });
  assert.equal(run.type, 'success');
  await waitUntil(() => ws.events.some((e) => e.method === 'tools' && e.params.data.event === 'tool-finished'), 60000, 'agent run');
  const r = await ws.request({ id: 3, method: 'subscription.reconnect',
    params: { runId: 'r', lastEventId: ws.events[0].eventId, subscriptions: [sub.result.subscriptionId] } });
  assert.equal(r.error, 'invalid_argument'); // already active here
  const cmd = await tc.http('/threads/vg1/commands', { method: 'POST', body: JSON.stringify({ id: 4, method: 'agent.getTree', params: {} }) });
  assert.equal((await cmd.json()).type, 'success');
  ws.sendRaw('{"id":');
  await agent.kill('SIGTERM');
  const gone = await connect(tc.url('vg2'));
  gone.sendRaw(JSON.stringify({ id: 9, method: 'state.get', params: { namespace: [] } })); // left waiting
  return { s };
}

test('valgrind: no errors, no leaks after WebSockets, SSE, commands, replay and a drain', { timeout: 180000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tc-vg-'));
  const wrapper = path.join(dir, 'threadcast');
  writeFileSync(wrapper, `#!/bin/sh\nexec valgrind --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=all ` +
    `--error-exitcode=99 ${path.join(repoRoot, 'build', 'threadcast')} "$@"\n`);
  chmodSync(wrapper, 0o755);
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url, env: { THREADCAST_BIN: wrapper },
    args: ['--drain-spread', '200', '--command-timeout', '3000'], bin: wrapper });
  const { s } = await workload(tc, redis);
  const { code } = await tc.stop('SIGTERM');
  s.close();
  assert.equal(code, 0, tc.stderr);
  // Proof that valgrind ran and found nothing.
  assert.match(tc.stderr, /ERROR SUMMARY: 0 errors from 0 contexts/, tc.stderr);
  assert.match(tc.stderr, /All heap blocks were freed -- no leaks are possible/, tc.stderr);
  await redis.cleanup();
});

// Under valgrind and ASan, request-lived objects come from malloc so those
// tools see each one; the plain build serves them from scratch chunks
// (src/scratch.h), which count their objects and say at exit if one was
// never freed. The same workload, plus a storm that fills and empties chunks.
test('scratch memory: every request-lived object freed by the time the plain build exits', { timeout: 120000 }, async () => {
  const redis = await startRedis();
  const tc = await startThreadcast({ redisUrl: redis.url, bin: path.join(repoRoot, 'build', 'threadcast'),
    args: ['--drain-spread', '200', '--command-timeout', '3000'] });
  const { s } = await workload(tc, redis);
  const storm = await Promise.all(Array.from({ length: 300 }, () => connect(tc.url('vg1'))));
  const subs = await Promise.all(storm.map((c, i) => c.request({ id: 1, method: 'subscription.subscribe',
    params: { channels: i % 2 ? ['messages'] : ['lifecycle', 'tools'] } })));
  assert.ok(subs.every((r) => r.type === 'success'));
  await waitUntil(() => storm.every((c) => c.events.length > 0), 30000, 'every storm client replayed');
  await Promise.all(storm.slice(0, 200).map((c) => c.close()));
  const { code } = await tc.stop('SIGTERM');
  s.close();
  assert.equal(code, 0, tc.stderr);
  assert.doesNotMatch(tc.stderr, /scratch objects were never freed/, tc.stderr);
  await redis.cleanup();
});
