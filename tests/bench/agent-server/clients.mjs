// One client process of scripts/bench's tokens scenario: the official SDK
// (@langchain/langgraph-sdk, pinned beside this file) starting runs of the
// token graph (graph.mjs) and watching them, against threadcast or the Agent
// Server alike. scripts/bench.py spreads a cell's runs over several of these.
//
//   node clients.mjs '<json>'
// {api, runs, viewers, tokens, pace, route, late, deadline_s}: for each of its
// `runs` runs, a thread (made before the window), a starter, `viewers`
// viewers, and with `late` one more viewer that joins halfway through.
// - starter: client.runs.stream(thread, "tokens", {streamMode:
//   "messages-tuple", streamResumable: true, config: {configurable: {tokens,
//   pace_ms}}}), as an app submits;
// - route "rest": each viewer is client.runs.joinStream(thread, run,
//   {streamMode: "messages-tuple", lastEventId: "-1"}), called as soon as the
//   starter learns the run's id (its metadata event): joined from the run's
//   start, as useStream does;
// - route "websocket" / "sse": each viewer is a ThreadStream on the thread
//   (client.threads.stream, that transport), subscribed to "messages" before
//   the run starts; the late one subscribes halfway (the SDK replays the
//   thread's events from its start).
// Prints {"ready": streams} once set up, starts every run when it reads "go"
// on stdin, and prints {"result": …} when every stream has ended or has every
// token (or deadline_s passed): per token received, receipt − emission (the
// token's stamp, µs), apart for starters and viewers; time to first token of
// each starter (from its request); per late viewer, how long after its join
// it had every token emitted before it (catch-up); per run, how long its
// model took from its first token to its last; counts of tokens missing
// and repeated per stream, and errors.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { load } from './resolve.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const from = [here, path.join(here, '../../integration')];
const { default: WebSocket } = await load('ws', from);
const { Client } = await load('@langchain/langgraph-sdk', from);

const spec = JSON.parse(process.argv[2]);
const { api, runs, viewers, tokens, pace, route = 'rest', late = false, deadline_s: deadlineS = 120 } = spec;
// Each stream has a client of its own, as each viewer of a run is an app of its own: one
// Client queues its requests beyond 4 at a time (the SDK's maxConcurrency), which would
// hold a run's later viewers back until earlier streams ended.
const newClient = () => new Client({ apiUrl: api, apiKey: null });
const client = newClient();
const nowUs = () => Number(process.hrtime.bigint() / 1000n); // graph.mjs's clock
const stampRe = /tok(\d+)@(\d+)/g;

const out = { starter_us: [], viewer_us: [], ttft_us: [], catchup_us: [], gen_us: [], received: 0, streams: 0, complete: 0, missing: 0, duplicates: 0, errors: [] };

/** What one stream got: each token index's count; latencies go to `into`. */
class Tally {
  constructor(into) {
    this.into = into;
    this.seen = new Uint8Array(tokens);
    this.got = 0;
    this.recv = new Float64Array(tokens); // receipt time per token (catch-up)
    this.emit = new Float64Array(tokens);
    out.streams++;
  }

  /** Takes a received event's payload; true once every token is in. */
  take(payload) {
    const now = nowUs();
    const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
    const found = [...text.matchAll(stampRe)];
    if (found.length !== 1) return this.got === tokens; // not a token (or a whole message)
    const i = Number(found[0][1]);
    const t = Number(found[0][2]);
    if (i >= tokens) return false;
    if (this.seen[i]++) {
      out.duplicates++;
      return this.got === tokens;
    }
    this.got++;
    out.received++;
    this.recv[i] = now;
    this.emit[i] = t;
    this.into?.push(now - t);
    if (this.first === undefined) this.first = now;
    return this.got === tokens;
  }

  end() {
    out.missing += tokens - this.got;
    if (this.got === tokens) out.complete++;
  }
}

const deadline = () => new Promise((r) => setTimeout(r, deadlineS * 1000).unref());
const streamMode = 'messages-tuple';

/** Drains an SDK run stream (runs.stream / runs.joinStream) into a tally. */
async function drainRun(iter, tally, onEvent) {
  for await (const ev of iter) {
    onEvent?.(ev);
    if (ev.event === 'error') out.errors.push(JSON.stringify(ev.data).slice(0, 300));
    if (ev.event?.startsWith('messages') && Array.isArray(ev.data)) tally.take(ev.data[0]?.content ?? '');
  }
  tally.end();
}

/** A protocol viewer: a ThreadStream subscribed to "messages", until it has every token. */
async function openThreadStream(threadId) {
  const thread = newClient().threads.stream(threadId, {
    assistantId: 'tokens', transport: route,
    webSocketFactory: (url) => new WebSocket(url),
  });
  const sub = await thread.subscribe(['messages']);
  return { thread, sub };
}

async function drainThreadStream({ thread, sub }, tally) {
  const it = sub[Symbol.asyncIterator]();
  const stop = deadline().then(() => ({ done: true }));
  for (;;) {
    const next = await Promise.race([it.next(), stop]);
    if (next.done) break;
    const ev = next.value;
    if (tally.take(ev?.params?.data ?? ev)) break;
  }
  tally.end();
  await thread.close().catch(() => {});
}

/** Catch-up of a late viewer that joined at `at` (µs): when it had every token emitted before. */
function catchUp(tally, at) {
  let last = at;
  for (let i = 0; i < tokens; i++) {
    if (!tally.seen[i]) continue;
    if (tally.emit[i] < at) last = Math.max(last, tally.recv[i]);
  }
  out.catchup_us.push(last - at);
}

async function oneRun(threadId, wsViewers) {
  const starter = new Tally(out.starter_us);
  const tallies = [];
  const waits = [];
  const t0 = nowUs();
  let lateStarted = false;
  const startLate = () => {
    lateStarted = true;
    const tally = new Tally(null);
    const at = nowUs();
    if (route === 'rest') {
      waits.push(drainRun(newClient().runs.joinStream(threadId, runId, { streamMode, lastEventId: '-1' }), tally)
        .then(() => catchUp(tally, at)));
    } else {
      waits.push(openThreadStream(threadId).then((v) => drainThreadStream(v, tally)).then(() => catchUp(tally, at)));
    }
  };
  let runId;
  for (const v of wsViewers) {
    const tally = new Tally(out.viewer_us);
    waits.push(drainThreadStream(v, tally));
  }
  const iter = newClient().runs.stream(threadId, 'tokens', {
    input: { messages: [{ role: 'user', content: 'stream' }] }, streamMode, streamResumable: true,
    config: { configurable: { tokens, pace_ms: pace } },
  });
  await drainRun(iter, starter, (ev) => {
    if (ev.event === 'metadata' && !runId) {
      runId = ev.data.run_id;
      if (route === 'rest') {
        for (let v = 0; v < viewers; v++) {
          const tally = new Tally(out.viewer_us);
          waits.push(drainRun(newClient().runs.joinStream(threadId, runId, { streamMode, lastEventId: '-1' }), tally));
        }
      }
    }
    if (late && !lateStarted && starter.got >= tokens / 2) startLate();
  });
  if (starter.first !== undefined) out.ttft_us.push(starter.first - t0);
  // How long the model took to emit its tokens (first to last stamp): a server that makes the
  // model wait for its own sending (one event loop) stretches this rather than the latency.
  if (starter.got === tokens) out.gen_us.push(starter.emit[tokens - 1] - starter.emit[0]);
  await Promise.all(waits);
}

/** Reads stdin until it has said `word`. */
const heard = (word) => new Promise((resolve) => {
  let buf = '';
  process.stdin.on('data', (d) => {
    buf += d;
    if (buf.includes(word)) resolve();
  });
});

/**
 * Idle viewers (spec.idle = how many): one run that stays running (a token a
 * minute), then, on "go", that many viewers of it on the route; {"ready"} once
 * all are attached, exit on "stop". A REST viewer is attached once it has the
 * stream's first unit (its metadata), or with spec.attach "response" once the
 * stream's response has begun: LangGraph's Python server sends a join that asks
 * for messages-tuple nothing before the run's next token (a minute away here).
 */
async function idleViewers(n) {
  const threadId = (await client.threads.create()).thread_id;
  const run = await client.runs.create(threadId, 'tokens', {
    input: { messages: [{ role: 'user', content: 'idle' }] }, streamResumable: true,
    config: { configurable: { tokens: 10, pace_ms: 60000 } },
  });
  process.stdout.write(`${JSON.stringify({ started: run.run_id })}\n`);
  await heard('go');
  const held = [];
  const attached = [];
  for (let v = 0; v < n; v++) {
    if (route === 'rest' && spec.attach === 'response') {
      let began;
      attached.push(new Promise((resolve) => { began = resolve; }));
      const viewer = new Client({
        apiUrl: api, apiKey: null,
        callerOptions: { fetch: (...a) => fetch(...a).then((res) => { began(); return res; }) },
      });
      const it = viewer.runs.joinStream(threadId, run.run_id, { streamMode, lastEventId: '-1' })[Symbol.asyncIterator]();
      it.next().catch(() => {});
      held.push(it);
    } else if (route === 'rest') {
      const it = newClient().runs.joinStream(threadId, run.run_id, { streamMode, lastEventId: '-1' })[Symbol.asyncIterator]();
      attached.push(it.next()); // the metadata unit: attached
      held.push(it);
    } else {
      held.push(await openThreadStream(threadId));
    }
  }
  await Promise.all(attached);
  process.stdout.write(`${JSON.stringify({ ready: n })}\n`);
  await heard('stop');
  process.exit(0);
}

if (spec.idle) await idleViewers(spec.idle);

try {
  const threads = [];
  for (let r = 0; r < runs; r++) threads.push((await client.threads.create()).thread_id);
  const ws = [];
  for (const t of threads) {
    const vs = [];
    if (route !== 'rest') for (let v = 0; v < viewers; v++) vs.push(await openThreadStream(t));
    ws.push(vs);
  }
  process.stdout.write(`${JSON.stringify({ ready: runs * (1 + (route === 'rest' ? 0 : viewers)) })}\n`);
  await heard('go');
  const t0 = nowUs();
  await Promise.race([Promise.all(threads.map((t, i) => oneRun(t, ws[i]).catch((e) => out.errors.push(String(e?.stack ?? e).slice(0, 300))))),
    deadline().then(() => out.errors.push('deadline passed'))]);
  out.seconds = (nowUs() - t0) / 1e6;
} catch (e) {
  out.errors.push(String(e?.stack ?? e).slice(0, 500));
}
// Exits once the line is out: a pipe takes a large one in several writes.
process.stdout.write(`${JSON.stringify({ result: out })}\n`, () => process.exit(0));
