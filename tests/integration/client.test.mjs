// The client library (protocol/js) in Node against the real gateway: its
// reconnect logic under sockets dropped at random points over many runs, the
// message assembler, commands, resync, unsubscribe; and its JSDoc types, whose
// check (tsc --checkJs in scripts/test) must be able to fail.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { connect, ProtocolError } from '../../protocol/js/threadcast.js';
// Expected events: the tests' own reading of the filter rules, not the client's.
import { matches } from './lib/events.mjs';
import { MessageAssembler, assemble, messageText } from '../../protocol/js/messages.js';
import {
  startRedis, startThreadcast, stopAll, waitUntil, sleep, redisClient, storedEvents, repoRoot,
} from './lib/harness.mjs';

// The client library (protocol/js) in Node against the real gateway: its
// reconnect logic under sockets dropped at random points over many runs, the
// message assembler, commands, resync, unsubscribe.
describe('the client library against the gateway', () => {
  let redis, rc, tc, proxy;

  /** A TCP proxy in front of the gateway that can cut every connection, or refuse new ones. */
  function startProxy(targetPort) {
    const socks = new Set();
    let down = false;
    const server = net.createServer((client) => {
      if (down) { client.destroy(); return; }
      const upstream = net.connect(targetPort, '127.0.0.1');
      for (const s of [client, upstream]) {
        socks.add(s);
        s.on('error', () => {});
        s.on('close', () => { socks.delete(s); client.destroy(); upstream.destroy(); });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
      port: server.address().port,
      drops: 0,
      dropAll() { this.drops++; for (const s of socks) s.destroy(); },
      setDown(v) { down = v; if (v) this.dropAll(); },
      close() { this.dropAll(); server.close(); },
    })));
  }

  before(async () => {
    redis = await startRedis();
    rc = redisClient(redis.port);
    tc = await startThreadcast({ redisUrl: redis.url });
    await waitUntil(async () => (await tc.http('/readyz')).status === 200, 5000, 'ready');
    proxy = await startProxy(tc.port);
  });

  after(async () => {
    proxy?.close();
    rc?.close();
    const reports = tc.sanitizerReports();
    await stopAll();
    await redis.cleanup();
    assert.deepEqual(reports, [], tc.stderr);
  });

  function seeded(seed) {
    let s = seed >>> 0;
    return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 2 ** 32; };
  }

  const append = (thread, ev) => rc.cmd('FCALL', 'threadcast_append', 1, thread, JSON.stringify(ev));

  /** A scripted run: streamed messages at the root and in a subgraph, tools, progress. */
  function script(rand, nmsg = 6) {
    const out = [{ method: 'lifecycle', params: { namespace: [], data: { event: 'started', graph_name: 'agent' } } }];
    for (let m = 0; m < nmsg; m++) {
      const ns = m % 3 === 2 ? ['sub'] : [];
      const msg = (data) => out.push({ method: 'messages', params: { namespace: ns, data } });
      msg({ event: 'message-start', role: 'ai', id: `m${m}` });
      msg({ event: 'content-block-start', index: 0, content: { type: 'text', text: '' } });
      let text = '';
      const words = 10 + Math.floor(rand() * 20);
      for (let w = 0; w < words; w++) {
        const tok = `${w ? ' ' : ''}w${m}.${w}`;
        text += tok;
        msg({ event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: tok } });
        if (w % 7 === 3) out.push({ method: 'custom:progress', params: { namespace: ns, data: { name: 'progress', payload: { m, w } } } });
      }
      msg({ event: 'content-block-finish', index: 0, content: { type: 'text', text } });
      if (m % 2 === 0) {
        const args = JSON.stringify({ q: `query ${m}` });
        msg({ event: 'content-block-start', index: 1, content: { type: 'tool_call_chunk', id: `c${m}`, name: 'search', args: '' } });
        for (const n of [4, 9, args.length]) {
          msg({ event: 'content-block-delta', index: 1, delta: { type: 'block-delta', fields: { type: 'tool_call_chunk', args: args.slice(0, n) } } });
        }
        msg({ event: 'content-block-finish', index: 1, content: { type: 'tool_call', id: `c${m}`, name: 'search', args: JSON.parse(args) } });
        out.push({ method: 'tools', params: { namespace: [], data: { event: 'tool-started', tool_call_id: `c${m}`, tool_name: 'search' } } });
        out.push({ method: 'tools', params: { namespace: [], data: { event: 'tool-finished', tool_call_id: `c${m}`, output: m } } });
      }
      msg({ event: 'message-finish', usage: { output_tokens: words } });
    }
    out.push({ method: 'lifecycle', params: { namespace: [], data: { event: 'completed' } } });
    return out;
  }

  const FILTERS = {
    messages: { channels: ['messages'] },
    rootOps: { channels: ['lifecycle', 'tools'], depth: 0 },
    lateSub: { channels: ['messages'], namespaces: [['sub']] }, // all of it also matched by `messages`
    lateProgress: { channels: ['custom:progress'] }, // matched by nothing else
  };

  /** One run: produce a script while the proxy cuts the connection at random; compare. */
  async function droppedRun(seed) {
    const rand = seeded(seed);
    const thread = `drop-${seed}`;
    const events = script(rand);
    const conn = connect(`ws://127.0.0.1:${proxy.port}`, thread,
      { WebSocket, backoffMinMs: 2, backoffMaxMs: 40, random: rand });
    const got = {};
    const subscribeAs = (name) => {
      got[name] = [];
      return conn.subscribe(FILTERS[name], (e) => got[name].push(e));
    };
    subscribeAs('messages');
    subscribeAs('rootOps');
    let drops = 0;
    let producing = true;
    const dropper = (async () => {
      while (producing) {
        await sleep(5 + rand() * 60);
        if (producing) { proxy.dropAll(); drops++; }
      }
    })();
    for (let i = 0; i < events.length; i++) {
      await append(thread, events[i]);
      if (i === Math.floor(events.length / 3)) subscribeAs('lateSub');
      if (i === Math.floor(events.length / 2)) subscribeAs('lateProgress');
      if (rand() < 0.3) await sleep(1);
    }
    producing = false;
    await dropper;
    const stored = await storedEvents(rc, thread);
    assert.equal(stored.length, events.length);
    const want = Object.fromEntries(Object.entries(FILTERS).map(([k, f]) => [k, stored.filter((e) => matches(f, e))]));
    await waitUntil(() => Object.keys(FILTERS).every((k) => got[k].length >= want[k].length), 20000,
      `run ${seed}: every subscription to catch up`);
    await sleep(20); // nothing more may arrive
    for (const k of Object.keys(FILTERS)) {
      assert.deepEqual(got[k].map((e) => e.seq), want[k].map((e) => e.seq), `run ${seed}, ${k}: every event once, in order`);
      assert.deepEqual(got[k].map((e) => ({ seq: e.seq, method: e.method, params: e.params })), want[k]);
    }
    const transcript = assemble(got.messages);
    assert.deepEqual(transcript, assemble(want.messages));
    assert.equal(transcript.length, 6);
    assert.ok(transcript.every((m) => m.status === 'finished'));
    const reconnects = conn.reconnects;
    conn.close();
    return { drops, reconnects };
  }

  test('sockets dropped at random points over many runs: each subscription sees every event once, in order', async () => {
    let drops = 0;
    let reconnects = 0;
    for (let seed = 1; seed <= 16; seed++) {
      const r = await droppedRun(seed);
      drops += r.drops;
      reconnects += r.reconnects;
    }
    assert.ok(reconnects >= 16, `the connections were really cut (${drops} drops, ${reconnects} reconnects)`);
  });

  test('commands resolve with results, reject with the protocol error, and wait out a disconnect', async () => {
    await append('cmd1', { method: 'lifecycle', params: { namespace: [], data: { event: 'started', graph_name: 'g' } } });
    const conn = connect(`ws://127.0.0.1:${proxy.port}`, 'cmd1', { WebSocket, backoffMinMs: 5, backoffMaxMs: 20 });
    const tree = await conn.command('agent.getTree', {});
    assert.equal(tree.tree.graph_name, 'g');
    await assert.rejects(conn.command('agent.getTree', { run_id: 'nope' }),
      (e) => e instanceof ProtocolError && e.code === 'no_such_run');
    await assert.rejects(conn.command('no.such.method', {}), (e) => e.code === 'unknown_command');
    // While the gateway is unreachable, commands wait, then go out on the new connection.
    proxy.setDown(true);
    await waitUntil(() => conn.status === 'reconnecting', 2000, 'reconnecting');
    const waiting = conn.command('agent.getTree', {});
    await sleep(100);
    proxy.setDown(false);
    assert.equal((await waiting).tree.graph_name, 'g');
    conn.close();
    await assert.rejects(conn.command('agent.getTree', {}), (e) => e.code === 'closed');
  });

  test('a thread whose history was lost while disconnected: resync fires, the new history follows', async () => {
    const thread = 'lost1';
    const ev = (i) => ({ method: 'custom:x', params: { namespace: [], data: { i } } });
    const start = { method: 'lifecycle', params: { namespace: [], data: { event: 'started' } } };
    await append(thread, start);
    for (let i = 0; i < 5; i++) await append(thread, ev(i));
    const conn = connect(`ws://127.0.0.1:${proxy.port}`, thread, { WebSocket, backoffMinMs: 5, backoffMaxMs: 20 });
    const got = [];
    const resyncs = [];
    conn.on('resync', (r) => resyncs.push(r));
    conn.subscribe({ channels: ['custom:x'] }, (e) => got.push(e));
    await waitUntil(() => got.length === 5, 5000, 'first history');
    proxy.setDown(true);
    await rc.cmd('DEL', `tc:{${thread}}:events`, `tc:{${thread}}:meta`, `tc:{${thread}}:tree`, `tc:{${thread}}:values`);
    await append(thread, start);
    for (let i = 100; i < 103; i++) await append(thread, ev(i));
    proxy.setDown(false);
    await waitUntil(() => got.length === 8, 5000, 'the new history');
    assert.equal(resyncs.length, 1);
    assert.equal(resyncs[0].restored, false);
    assert.deepEqual(got.slice(5).map((e) => e.params.data.i), [100, 101, 102]);
    assert.notEqual(got[5].event_id.split(':')[0], got[0].event_id.split(':')[0], 'a new epoch');
    conn.close();
  });

  test('unsubscribe stops delivery at once and the server forgets the subscription', async () => {
    const thread = 'unsub1';
    await append(thread, { method: 'lifecycle', params: { namespace: [], data: { event: 'started' } } });
    const conn = connect(`ws://127.0.0.1:${tc.port}`, thread, { WebSocket });
    const a = [];
    const b = [];
    const subA = conn.subscribe({ channels: ['custom:a'] }, (e) => a.push(e));
    conn.subscribe({ channels: ['custom:b'] }, (e) => b.push(e));
    const { subscription_id: subscriptionId } = await subA.ready;
    assert.match(subscriptionId, /^s/);
    await append(thread, { method: 'custom:a', params: { namespace: [], data: {} } });
    await waitUntil(() => a.length === 1, 5000, 'first event');
    await subA.unsubscribe();
    await append(thread, { method: 'custom:a', params: { namespace: [], data: {} } });
    await append(thread, { method: 'custom:b', params: { namespace: [], data: {} } });
    await waitUntil(() => b.length === 1, 5000, 'event of the other subscription');
    assert.equal(a.length, 1);
    // The server no longer holds it: unsubscribing the id again is an error.
    await assert.rejects(conn.command('subscription.unsubscribe', { subscription_id: subscriptionId }),
      (e) => e.code === 'no_such_subscription');
    conn.close();
  });

  test('the message assembler follows the protocol rules for every delta kind', () => {
    const a = new MessageAssembler();
    const m = (data, namespace = [], node) => ({ method: 'messages', params: { namespace, node, data } });
    assert.equal(a.push({ method: 'tools', params: { namespace: [], data: {} } }), null);
    assert.equal(a.push(m({ event: 'content-block-start', index: 0, content: { type: 'text' } })), null, 'no open message');
    a.push(m({ event: 'message-start', role: 'ai', id: 'x', metadata: { model: 'm' } }));
    a.push(m({ event: 'message-start', role: 'ai', id: 'y' }, ['sub'], 'n')); // interleaved, other namespace
    a.push(m({ event: 'content-block-start', index: 0, content: { type: 'text', text: '' } }));
    a.push(m({ event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: 'Hel' } }));
    a.push(m({ event: 'content-block-start', index: 0, content: { type: 'reasoning', reasoning: '' } }, ['sub'], 'n'));
    a.push(m({ event: 'content-block-delta', index: 0, delta: { type: 'reasoning-delta', reasoning: 'hmm' } }, ['sub'], 'n'));
    a.push(m({ event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: 'lo' } }));
    a.push(m({ event: 'content-block-delta', index: 0, delta: { type: 'future-delta', x: 1 } }));
    a.push(m({ event: 'content-block-finish', index: 0, content: { type: 'text', text: 'Hello' } }));
    a.push(m({ event: 'content-block-start', index: 1, content: { type: 'tool_call_chunk', id: 'c', name: 's', args: '' } }));
    a.push(m({ event: 'content-block-delta', index: 1, delta: { type: 'block-delta', fields: { type: 'tool_call_chunk', args: '{"q"' } } }));
    a.push(m({ event: 'content-block-delta', index: 1, delta: { type: 'block-delta', fields: { type: 'tool_call_chunk', args: '{"q":1' } } }));
    assert.equal(a.messages[0].blocks[1].args, '{"q":1', 'block-delta replaces (shallow merge)');
    assert.equal(a.messages[0].blocks[1].type, 'tool_call_chunk');
    a.push(m({ event: 'content-block-delta', index: 1, delta: { type: 'tool-call-delta', args: '}' } }));
    assert.equal(a.messages[0].blocks[1].args, '{"q":1}', 'tool-call-delta appends');
    a.push(m({ event: 'content-block-finish', index: 1, content: { type: 'tool_call', id: 'c', name: 's', args: { q: 1 } } }));
    a.push(m({ event: 'content-block-start', index: 2, content: { type: 'image', base64: '' } }));
    a.push(m({ event: 'content-block-delta', index: 2, delta: { type: 'data-delta', data: 'AAA' } }));
    a.push(m({ event: 'content-block-delta', index: 2, delta: { type: 'data-delta', data: 'BBB', encoding: 'base64' } }));
    a.push(m({ event: 'message-finish', usage: { outputTokens: 3 } }));
    a.push(m({ event: 'error', message: 'model overloaded', code: '529' }, ['sub'], 'n'));
    const [x, y] = a.messages;
    assert.deepEqual(x, {
      id: 'x', role: 'ai', namespace: [], metadata: { model: 'm' }, status: 'finished', usage: { outputTokens: 3 },
      blocks: [{ type: 'text', text: 'Hello' }, { type: 'tool_call', id: 'c', name: 's', args: { q: 1 } },
        { type: 'image', base64: 'AAABBB' }],
    });
    assert.equal(messageText(x), 'Hello');
    assert.deepEqual(y, {
      id: 'y', role: 'ai', namespace: ['sub'], node: 'n', status: 'error',
      error: { message: 'model overloaded', code: '529' }, blocks: [{ type: 'reasoning', reasoning: 'hmm' }],
    });
    // After message-finish, a stray delta belongs to no message.
    assert.equal(a.push(m({ event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: '!' } })), null);
    assert.equal(messageText(x), 'Hello');
  });

  /** A stand-in WebSocket the test plays the server through, frame by frame. */
  class FakeSocket {
    static all = [];
    constructor(url) { this.url = url; this.sent = []; FakeSocket.all.push(this); setTimeout(() => this.onopen?.(), 0); }
    send(text) { this.sent.push(JSON.parse(text)); }
    close() { this.onclose?.(); }
    push(msg) { this.onmessage({ data: JSON.stringify(msg) }); }
    drop() { this.onclose(); }
  }

  test('a drop in the middle of a late subscription\'s replay resumes from where that replay was', async () => {
    FakeSocket.all = [];
    const conn = connect('http://gw.example:8080/base/', 'th/1', { WebSocket: FakeSocket, backoffMinMs: 1, backoffMaxMs: 2 });
    const a = [];
    const b = [];
    conn.subscribe({ channels: ['messages'] }, (e) => a.push(e.seq));
    await waitUntil(() => FakeSocket.all[0]?.sent.length === 1, 1000, 'subscribe');
    const s1 = FakeSocket.all[0];
    assert.equal(s1.url, 'ws://gw.example:8080/base/threads/th%2F1/stream/events');
    assert.deepEqual(s1.sent[0], { id: 1, method: 'subscription.subscribe', params: { channels: ['messages'] } });
    const ev = (seq, method = 'messages') => ({ type: 'event', event_id: `E:${seq}`, seq, method, params: { namespace: [], data: {} } });
    s1.push({ type: 'success', id: 1, result: { subscription_id: 'sA', replayed_events: 0 } });
    for (const seq of [3, 5, 7]) s1.push(ev(seq));
    // A late subscription: the server replays what only it matches (tools 2, 4, 6) below the position.
    conn.subscribe({ channels: ['tools'] }, (e) => b.push(e.seq));
    assert.deepEqual(s1.sent[1].method, 'subscription.subscribe');
    s1.push({ type: 'success', id: 2, result: { subscription_id: 'sB', replayed_events: 3 } });
    s1.push(ev(2, 'tools'));
    s1.drop(); // two of its replayed events never came
    await waitUntil(() => FakeSocket.all.length === 2 && FakeSocket.all[1].sent.length === 1, 1000, 'reconnect');
    const s2 = FakeSocket.all[1];
    assert.deepEqual(s2.sent[0], { id: 1, method: 'subscription.reconnect',
      params: { run_id: '', subscriptions: ['sA', 'sB'], last_event_id: 'E:2' } });
    s2.push({ type: 'success', id: 1, result: { restored: true, missedEvents: 0 } });
    // The server replays everything after 2 for both: A's 3, 5, 7 again are not delivered twice.
    for (const [seq, m] of [[3, 'messages'], [4, 'tools'], [5, 'messages'], [6, 'tools'], [7, 'messages'], [8, 'tools'], [9, 'messages']]) s2.push(ev(seq, m));
    assert.deepEqual(a, [3, 5, 7, 9]);
    assert.deepEqual(b, [2, 4, 6, 8]);
    conn.close();
  });

  test('a subscription\'s ready settles even when it ends before the server confirmed it', async () => {
    FakeSocket.all = [];
    const conn = connect('ws://gw.example', 't', { WebSocket: FakeSocket });
    const early = conn.subscribe({ channels: ['messages'] }, () => {});
    early.unsubscribe();
    await assert.rejects(early.ready, (e) => e.code === 'closed');
    const queued = conn.subscribe({ channels: ['tools'] }, () => {}); // never sent: not connected yet
    conn.close();
    await assert.rejects(queued.ready, (e) => e.code === 'closed');
  });
});

// The browser client's JSDoc types are checked against @langchain/protocol
// 0.0.21 by `tsc --checkJs` in scripts/test. That check must be able to
// fail: a copy of the client with one field misspelled the seed's way does not
// type-check, and the error names the field.
describe('the type check of the client can fail', () => {
  const dir = path.join(repoRoot, 'protocol', 'js');

  function typecheck(mutate, source = readFileSync(path.join(dir, 'threadcast.js'), 'utf8')) {
    const name = `.misspelled-${process.pid}`;
    const file = path.join(dir, `${name}.js`);
    const cfg = path.join(dir, `${name}.tsconfig.json`);
    const base = JSON.parse(readFileSync(path.join(dir, 'tsconfig.json'), 'utf8'));
    writeFileSync(file, mutate(source));
    writeFileSync(cfg, JSON.stringify({ ...base, files: [path.basename(file)] }));
    try {
      return spawnSync(path.join(dir, 'node_modules', '.bin', 'tsc'), ['-p', cfg], { cwd: dir, encoding: 'utf8' });
    } finally {
      rmSync(file, { force: true });
      rmSync(cfg, { force: true });
    }
  }

  test('a misspelled protocol field in the client fails the type check', () => {
    assert.ok(existsSync(path.join(dir, 'node_modules', '.bin', 'tsc')), 'scripts/test installs protocol/js first');
    const same = typecheck((src) => src);
    assert.equal(same.status, 0, same.stdout + same.stderr);
    const read = typecheck((src) => src.replace('sub.id = r.subscription_id;', 'sub.id = r.subscriptionId;'));
    assert.notEqual(read.status, 0);
    assert.match(read.stdout, /subscriptionId/);
    const sent = typecheck((src) => src.replace('const params = { run_id: this.runId', 'const params = { runId: this.runId'));
    assert.notEqual(sent.status, 0);
    assert.match(sent.stdout, /run_id/);
    // An application's command params are checked too.
    const app = `import { connect } from './threadcast.js';
const conn = connect('ws://x', 't');
await conn.command('run.start', { assistant_id: 'agent', input: null });
await conn.command('input.respond', { namespace: [], interrupt_id: 'i', response: 1 });
`;
    const good = typecheck((src) => src, app);
    assert.equal(good.status, 0, good.stdout + good.stderr);
    const wrong = typecheck((src) => src.replace("{ assistant_id: 'agent'", "{ assistantId: 'agent'"), app);
    assert.notEqual(wrong.status, 0);
    assert.match(wrong.stdout, /assistant_id/);
  });
});
