// Large events from a graph (issue 26): a graph's state can be big (a long
// or multimodal thread), and so its `values` events. An event of up to
// 16 MiB the LangGraph worker makes is carried whole — through Redis, two
// gateways and HAProxy, to WebSocket, SSE and REST clients, live and
// replayed; a bigger one fails its run, visibly (its stream's error event,
// the run and thread "error", the worker's log), never dropped in silence.
// (large-events.test.mjs: the same for any producer's events.)
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, stopAll, waitUntil } from './lib/harness.mjs';
import { openSse, restStack } from './lib/rest.mjs';

after(stopAll);

const here = path.dirname(fileURLToPath(import.meta.url));
const MiB = 1024 * 1024;
const blobOf = (v) => (v && typeof v.blob === 'string' ? v.blob : null);

describe('large events from a graph', () => {
  let s;
  let client;
  before(async () => {
    s = await restStack({ graphs: path.join(here, 'lib/env-graphs.mjs') });
    client = s.client();
  });
  after(async () => { await s?.done(); });

  /** Subscribers of a thread's values: a WebSocket on one gateway, an SSE stream on the other. */
  async function watch(thread, [a, b]) {
    const ws = await connect(s.gws[a].url(thread));
    await ws.request({ id: 1, method: 'subscription.subscribe', params: { channels: ['values'] } });
    const { sse } = await openSse(`http://127.0.0.1:${s.gws[b].port}/threads/${thread}/stream`, { method: 'POST', json: { channels: ['values'] } });
    return {
      ws: () => ws.events.map((e) => blobOf(e.params.data)).filter(Boolean),
      sse: () => sse.events.map((e) => blobOf(e.data.params.data)).filter(Boolean),
      close: () => { sse.close(); return ws.close(); },
    };
  }

  for (const bytes of [4 * MiB, 16 * MiB - 4096]) {
    test(`a values event of ${(bytes / MiB).toFixed(2)} MiB reaches WebSocket, SSE and REST clients whole, live and replayed`, async () => {
      const thread = (await client.threads.create()).thread_id;
      const live = await watch(thread, [0, 1]);
      const parts = [];
      for await (const p of client.runs.stream(thread, 'big', { input: { bytes }, streamMode: ['values'] })) parts.push(p);
      const want = 'x'.repeat(bytes);
      const rest = parts.filter((p) => p.event === 'values').map((p) => blobOf(p.data)).filter(Boolean);
      assert.equal(rest.length, 1, 'the REST stream carries the big values event');
      assert.ok(rest[0] === want, `REST: ${rest[0].length} bytes`);
      await waitUntil(() => live.ws().length && live.sse().length, 30000, 'the live subscribers to get it');
      assert.ok(live.ws()[0] === want && live.sse()[0] === want, 'whole over WebSocket and SSE');
      assert.equal((await client.runs.list(thread))[0].status, 'success');
      await live.close();

      const again = await watch(thread, [1, 0]);
      const run = (await client.runs.list(thread))[0];
      const joined = [];
      for await (const p of client.runs.joinStream(thread, run.run_id, { lastEventId: '-1', streamMode: ['values'] })) joined.push(p);
      assert.ok(joined.filter((p) => p.event === 'values').map((p) => blobOf(p.data)).some((b) => b === want), 'REST replay');
      await waitUntil(() => again.ws().length && again.sse().length, 30000, 'the replays');
      assert.ok(again.ws()[0] === want && again.sse()[0] === want, 'whole in WebSocket and SSE replays');
      await again.close();
      assert.equal((await client.threads.getState(thread)).values.blob.length, bytes);
    });
  }

  test('an event over 16 MiB fails its run, visibly: the stream\'s error event, the run and thread "error", the worker\'s log', async () => {
    const thread = (await client.threads.create()).thread_id;
    const parts = [];
    for await (const p of client.runs.stream(thread, 'big', { input: { bytes: 16 * MiB + 1 }, streamMode: ['values'] })) parts.push(p);
    const err = parts.find((p) => p.event === 'error');
    assert.ok(err, `an error event: ${parts.map((p) => p.event).join()}`);
    assert.match(err.data.message, /the run's (updates|values) event is \d+ bytes, over threadcast's limit of 16777216 bytes per event/);
    const run = (await client.runs.list(thread))[0];
    assert.equal(run.status, 'error');
    const t = await client.threads.get(thread);
    assert.equal(t.status, 'error');
    assert.equal(t.error.error, 'EventTooLargeError');
    assert.ok(s.workers.some((w) => w.logs.some((l) => l.msg === 'run failed' && l.thread === thread && /over threadcast's limit/.test(l.error))));
  });
});
