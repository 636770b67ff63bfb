// Runtime commands through the bridge, answered by reference agents; and the bridge's
// faults: no worker, a switched-off bridge, a worker that dies holding a command.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startThreadcast, startAgent, connect, stopAll, waitUntil, redisClient, firstDisorder } from './lib/harness.mjs';
import { assemble, messageText } from '../../protocol/js/messages.js';

// Runtime commands through the bridge, answered by reference agents.
describe('runtime commands answered by reference agents', () => {
  let redis, tc, agents;
  before(async () => {
    redis = await startRedis();
    tc = await startThreadcast({ redisUrl: redis.url });
    agents = await Promise.all([startAgent(redis.url, { name: 'a1' }), startAgent(redis.url, { name: 'a2' })]);
    await tc.ready();
  });
  after(async () => {
    const reports = tc.sanitizerReports();
    await stopAll();
    await redis.cleanup();
    assert.deepEqual(reports, [], tc.stderr);
    for (const a of agents) assert.doesNotMatch(a.stderr, /AddressSanitizer|runtime error/);
  });

  const ALL = ['values', 'updates', 'messages', 'tools', 'lifecycle', 'input', 'checkpoints', 'custom:progress'];
  const isRootDone = (e) => e.method === 'lifecycle' && e.params.namespace.length === 0 && e.params.data.event === 'completed';

  /** AI messages assembled by the client library's assembler, with their text. */
  function assembleAi(events) {
    return assemble(events).filter((m) => m.role === 'ai').map((m) => ({ ...m, ns: JSON.stringify(m.namespace), text: messageText(m) }));
  }

  async function runToEnd(c, thread, content) {
    await c.request({ id: 1, method: 'subscription.subscribe', params: { channels: ALL } });
    const r = await c.request({ id: 2, method: 'run.start', params: { assistantId: 'agent', input: { messages: [{ role: 'user', content }] } } });
    return r;
  }

  test('run.start streams a full run; text reassembled from deltas is what the agent meant', async () => {
    const c = await connect(tc.url('ag1'));
    const r = await runToEnd(c, 'ag1', 'tell me about otters');
    assert.equal(r.type, 'success');
    assert.match(r.result.runId, /^run-/);
    await waitUntil(() => c.events.some(isRootDone), 15000, 'run to complete');
    const ev = c.events;
    assert.equal(firstDisorder(ev.map((e) => e.seq)), null);
    assert.deepEqual(ev.map((e) => e.seq), Array.from({ length: ev.length }, (_, i) => i + 1));
    const first = ev[0];
    assert.deepEqual([first.method, first.params.data.event, first.params.data.graphName], ['lifecycle', 'started', 'agent']);
    const msgs = assembleAi(ev);
    const root = msgs.filter((m) => m.ns === '[]');
    assert.equal(root.length, 2);
    for (const m of msgs) assert.equal(m.status, 'finished', `message ${m.id} finished`);
    // The deltas add up to the text each block finished with.
    const deltas = new Map();
    let current = null;
    for (const e of ev.filter((x) => x.method === 'messages')) {
      const d = e.params.data;
      if (d.event === 'message-start') current = d.id;
      if (d.event === 'content-block-delta' && d.delta.type === 'text-delta') {
        deltas.set(`${current}/${d.index}`, (deltas.get(`${current}/${d.index}`) ?? '') + d.delta.text);
      }
    }
    for (const m of msgs) assert.equal(deltas.get(`${m.id}/0`), m.text);
    // The human input comes first, as one complete message.
    const human = assemble(ev).filter((m) => m.role === 'human');
    assert.deepEqual(human.map((m) => messageText(m)), ['tell me about otters']);
    const lastValues = ev.filter((e) => e.method === 'values').at(-1).params.data.messages;
    assert.deepEqual(lastValues.filter((m) => m.role === 'ai').map((m) => m.content), root.map((m) => m.text));
    assert.match(root[0].text, /tell me about otters/);
    // The tool call streams as chunks and finishes parsed.
    const call = { final: root[0].blocks[1] };
    assert.equal(call.final.type, 'tool_call');
    assert.deepEqual(call.final.args, { query: 'tell me about otters' });
    // Streamed as block-deltas, each carrying the arguments so far (a shallow merge).
    const chunks = ev.filter((e) => e.method === 'messages' && e.params.data.delta?.type === 'block-delta')
      .map((e) => e.params.data.delta.fields.args);
    assert.ok(chunks.length >= 2);
    chunks.forEach((c, i) => i && assert.ok(c.startsWith(chunks[i - 1]) && c.length > chunks[i - 1].length));
    assert.deepEqual(JSON.parse(chunks.at(-1)), call.final.args);
    // Tools, the subgraph caused by the tool call, progress, checkpoints.
    const tools = ev.filter((e) => e.method === 'tools').map((e) => e.params.data.event);
    assert.deepEqual(tools, ['tool-started', 'tool-output-delta', 'tool-output-delta', 'tool-finished']);
    const sub = ev.find((e) => e.method === 'lifecycle' && e.params.namespace[0] === 'researcher' && e.params.data.event === 'started');
    assert.deepEqual(sub.params.data.cause, { type: 'toolCall', toolCallId: call.final.id });
    assert.equal(ev.filter((e) => e.method === 'custom:progress').length, 4);
    assert.equal(ev.filter((e) => e.method === 'checkpoints').length, 3);
    assert.ok(!ev.some((e) => e.method === 'input.requested'));
    await c.close();
  });

  test('interrupt round trip: input.requested → input.respond → the run completes', async () => {
    const c = await connect(tc.url('ag2'));
    await runToEnd(c, 'ag2', 'please interrupt me');
    const req = await waitUntil(() => c.events.find((e) => e.method === 'input.requested'), 15000, 'interrupt');
    await waitUntil(() => c.events.some((e) => e.method === 'lifecycle' && e.params.data.event === 'interrupted'), 5000, 'interrupted');
    const wrong = await c.request({ id: 3, method: 'input.respond', params: { namespace: [], interruptId: 'nope', response: 'x' } });
    assert.equal(wrong.error, 'no_such_interrupt');
    const ok = await c.request({ id: 4, method: 'input.respond', params: { namespace: [], interruptId: req.params.data.interruptId, response: 'yes' } });
    assert.deepEqual(ok.result, {});
    await waitUntil(() => c.events.some(isRootDone), 15000, 'completion');
    const root = assembleAi(c.events).filter((m) => m.ns === '[]');
    assert.match(root[1].text, /You answered: yes\./);
    const again = await c.request({ id: 5, method: 'input.respond', params: { namespace: [], interruptId: req.params.data.interruptId, response: 'x' } });
    assert.equal(again.error, 'no_such_interrupt');
    await c.close();
  });

  test('state.get, state.listCheckpoints and state.fork after a run', async () => {
    const c = await connect(tc.url('ag3'));
    await runToEnd(c, 'ag3', 'state please');
    await waitUntil(() => c.events.some(isRootDone), 15000, 'run');
    const lastValues = c.events.filter((e) => e.method === 'values').at(-1).params.data;
    const cks = c.events.filter((e) => e.method === 'checkpoints').map((e) => e.params.data.id);
    const s = await c.request({ id: 10, method: 'state.get', params: { namespace: [] } });
    assert.deepEqual(s.result.values, lastValues);
    assert.equal(s.result.checkpoint.id, cks.at(-1));
    const keys = await c.request({ id: 11, method: 'state.get', params: { namespace: [], keys: ['step'] } });
    assert.deepEqual(keys.result.values, { step: lastValues.step });
    const list = await c.request({ id: 12, method: 'state.listCheckpoints', params: { limit: 2 } });
    assert.deepEqual(list.result.checkpoints.map((x) => x.id), [cks[2], cks[1]]);
    const page = await c.request({ id: 13, method: 'state.listCheckpoints', params: { before: cks[1] } });
    assert.deepEqual(page.result.checkpoints.map((x) => x.id), [cks[0]]);
    const bad = await c.request({ id: 14, method: 'state.fork', params: { checkpointId: 'nope' } });
    assert.equal(bad.error, 'no_such_checkpoint');
    const fork = await c.request({ id: 15, method: 'state.fork', params: { checkpointId: cks[1] } });
    assert.equal(fork.type, 'success');
    assert.equal(fork.result.threadId, 'ag3');
    const n = c.events.filter(isRootDone).length;
    await waitUntil(() => c.events.filter(isRootDone).length > n, 15000, 'forked run');
    await c.close();
  });

  test('invalid params are refused by the gateway, naming the field', async () => {
    const c = await connect(tc.url('ag4'));
    const cases = [
      ['run.start', { input: 1 }, /params.assistantId/],
      ['run.start', { assistantId: 'a' }, /params.input/],
      ['input.respond', { namespace: [], response: 1 }, /params.interruptId/],
      ['input.inject', { namespace: [], message: { role: 'robot', content: 'x' } }, /params.message.role/],
      ['state.get', {}, /params.namespace/],
      ['state.listCheckpoints', { limit: -2 }, /params.limit/],
      ['state.fork', {}, /params.checkpointId/],
    ];
    let id = 0;
    for (const [method, params, re] of cases) {
      const r = await c.request({ id: ++id, method, params });
      assert.equal(r.error, 'invalid_argument', method);
      assert.match(r.message, re);
    }
    await c.close();
  });

  test('1,000 commands from 50 connections over 2 agents: each answered once, right id, right connection', async () => {
    const clients = await Promise.all(Array.from({ length: 50 }, (_, i) => connect(tc.url(`scale${i % 10}`))));
    clients.forEach((c, k) => {
      for (let i = 0; i < 20; i++) {
        c.sendRaw(JSON.stringify({ id: k * 1000 + i, method: i % 2 ? 'state.get' : 'state.listCheckpoints', params: { namespace: [] } }));
      }
    });
    await waitUntil(() => clients.every((c) => c.frames.length >= 20), 20000, 'answers');
    await new Promise((r) => setTimeout(r, 200));
    clients.forEach((c, k) => {
      const ids = c.frames.map((f) => f.id).sort((x, y) => x - y);
      assert.deepEqual(ids, Array.from({ length: 20 }, (_, i) => k * 1000 + i));
      assert.ok(c.frames.every((f) => f.type === 'success'), JSON.stringify(c.frames.find((f) => f.type !== 'success')));
    });
    const worked = new Set(agents.flatMap((a) => (a.logs.some((l) => l.msg === 'agent started') ? [a] : [])));
    assert.equal(worked.size, 2);
    await Promise.all(clients.map((c) => c.close()));
  });

  test('a client that leaves before its answer costs nothing', async () => {
    for (let i = 0; i < 20; i++) {
      const c = await connect(tc.url(`leave${i}`));
      c.sendRaw(JSON.stringify({ id: 1, method: 'run.start', params: { assistantId: 'a', input: 'bye' } }));
      c.ws.terminate();
    }
    const c = await connect(tc.url('after-leave'));
    const r = await c.request({ id: 1, method: 'state.get', params: { namespace: [] } });
    assert.equal(r.type, 'success');
    await c.close();
  });
});

// No worker, a switched-off bridge, and a worker that dies holding a command.
describe('no worker, a switched-off bridge, a dying worker', () => {
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
});
