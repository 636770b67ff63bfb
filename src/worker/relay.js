// From LangGraph's protocol stream to threadcast's producer contract.
//
// observe() (observe.js) yields a run's protocol events in 0.0.21's
// spelling, as graph.streamEvents(…, { version: "v3" }) gives them, close to
// what threadcast stores but not quite (see protocol/README.md, "The
// LangGraph worker"):
// - events carry `type` and a per-call `seq`, which threadcast assigns;
// - the root lifecycle never says `started` (threadcast starts a run on it)
//   nor `interrupted`, and names the graph "root";
// - an interrupt() shows up only as a `values` event {"__interrupt__": [...]}
//   and an `updates` event of node "__interrupt__", never as
//   `input.requested`;
// - state holds LangChain message objects, which JSON.stringify writes in
//   their {"lc":1,"type":"constructor",…} form;
// - an AI message's message-start has no role (the protocol requires one);
// - every node that emits something gets lifecycle events of its own
//   (["model:<task id>"]), which clients take for subgraphs: only those of
//   the graph's subgraphs are kept.
// A Relay turns each event into what threadcast stores, and appends them in
// order with FCALL threadcast_append_batch: what arrives while a call is out
// goes in the next one, so a token stream costs a few calls, not one each.
// What the REST API's stream modes need and the protocol's channels do not
// carry goes beside them as side events (observe.js' SIDE): LangGraph's own
// `{"__interrupt__": …}` values and updates, and the class of the error a
// run failed with.

import { randomUUID } from 'node:crypto';
import { keys } from './keys.js';
import { sideEvent } from './observe.js';

/** Most events per append call (the function takes up to 1000). */
const BATCH_MAX = 256;
/** Most bytes of events per append call (one bigger event goes alone): the call's arguments, held by Redis at once. */
const BATCH_BYTES = 8 * 1024 * 1024;
/** Events waiting to be appended past which the graph waits for Redis. */
const QUEUE_HIGH = 4096;
/** threadcast_append's cap on one event (protocol/README.md): a bigger one fails the run. */
export const EVENT_MAX = 16 * 1024 * 1024;

/**
 * An event the run made that threadcast cannot carry (over EVENT_MAX): the
 * run fails with it, visibly, rather than go on with a hole in its stream.
 */
export class EventTooLargeError extends Error {
  constructor(method, bytes) {
    super(`the run's ${method} event is ${bytes} bytes, over threadcast's limit of ${EVENT_MAX} bytes per event; the run cannot be streamed`);
    this.name = 'EventTooLargeError';
  }
}

/**
 * Whether JSON.stringify alone writes value as toJson does: nothing in it
 * has toDict or toJSON, nor is a bigint (most events: a token's delta is
 * plain data). Conservative: inherited keys count, and so does depth past 64.
 */
function plainData(value, depth = 0) {
  if (typeof value === 'bigint') return false;
  if (value === null || typeof value !== 'object') return true;
  if (depth > 64 || typeof value.toDict === 'function' || typeof value.toJSON === 'function') return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!plainData(value[i], depth + 1)) return false;
    return true;
  }
  for (const k in value) if (!plainData(value[k], depth + 1)) return false;
  return true;
}

/** JSON with LangChain objects written as plain dicts ({type, content, …}). */
export function toJson(value) {
  if (plainData(value)) return JSON.stringify(value); // the replacer below costs ~4× as much
  return JSON.stringify(value, function replacer(key, v) {
    const raw = this[key];
    if (raw && typeof raw === 'object' && typeof raw.toDict === 'function') {
      const { type, data } = raw.toDict();
      return { ...data, type };
    }
    return typeof v === 'bigint' ? String(v) : v;
  });
}

/** A plain-data copy of a value (state, tool output) as clients get it. */
export const plain = (value) => (value === undefined ? undefined : JSON.parse(toJson(value)));

const msgKey = (ns, node, runId) => `${ns.join('\u0000')}\u0001${node ?? ''}\u0001${runId ?? ''}`;

/**
 * Messages started and not finished among events (oldest first): what a
 * run stopped halfway (a worker killed, a run cancelled) leaves open.
 * Returns [{ namespace, node, run_id, id }].
 */
export function openMessages(events) {
  const open = new Map();
  for (const ev of events) {
    if (ev.method !== 'messages') continue;
    const { namespace, node, data } = ev.params;
    const key = msgKey(namespace, node, data.run_id);
    if (data.event === 'message-start') open.set(key, { namespace, node, run_id: data.run_id, id: data.id });
    else if (data.event === 'message-finish' || data.event === 'error') open.delete(key);
  }
  return [...open.values()];
}

/** The `error` event that closes an open message (see openMessages). */
export function closeMessage(m, message, code) {
  const data = { event: 'error', message, code };
  if (m.run_id) data.run_id = m.run_id;
  const params = { namespace: m.namespace, data };
  if (m.node) params.node = m.node;
  return { method: 'messages', params };
}

/*
 * When a relay flushes: at the end of the work that queued its events
 * (process.nextTick from the promise chain that carried them in: after that
 * chain has settled, before the event loop runs anything else). It used to
 * wait for the next loop turn (setImmediate), and a token stamped in one turn
 * then waited for whatever the turn's poll phase ran first — other runs'
 * replies, the steps of runs starting: 10 runs × 1 viewer at 20 ms a token,
 * the starters' p50 2.4 → 1.5 ms and p99 20–27 → 12 ms, CPU unchanged; at full
 * speed the same CPU (five pairs, medians 66.8 and 67.3 µs a delivered token).
 *
 * The appends made in one tick go to Redis together (Appends, one pipeline: one
 * write, their answers in one read): several runs' relays whose answers came
 * back in one read send their next appends together. Order within a run is
 * kept: a relay has at most one append out.
 */
const endOfTick = () => new Promise((resolve) => process.nextTick(resolve));

/**
 * The FCALLs of one Redis client made in one tick, sent in one pipeline. Bounded by what it
 * carries: one call per relay with an append out, each at most BATCH_BYTES (one bigger event
 * alone); the pipeline's text is a copy of theirs for as long as the write takes, as a lone
 * call's is (ioredis goes to buffers past V8's longest string).
 */
class Appends {
  constructor(redis) {
    this.redis = redis;
    this.calls = [];
  }

  call(args) {
    return new Promise((resolve, reject) => {
      if (this.calls.push({ args, resolve, reject }) === 1) process.nextTick(() => this.send());
    });
  }

  send() {
    const calls = this.calls;
    this.calls = [];
    const fail = (err) => { for (const c of calls) c.reject(err); };
    try {
      if (calls.length === 1) {
        this.redis.call(...calls[0].args).then(calls[0].resolve, calls[0].reject);
        return;
      }
      const p = this.redis.pipeline();
      for (const c of calls) p.call(...c.args);
      p.exec().then((answers) => answers.forEach(([err, value], i) => (err ? calls[i].reject(err) : calls[i].resolve(value))), fail);
    } catch (err) { // a client that throws rather than rejects: each run still gets its answer
      fail(err);
    }
  }
}

const appendsOf = new WeakMap();
function appendsFor(redis) {
  let a = appendsOf.get(redis);
  if (!a) appendsOf.set(redis, (a = new Appends(redis)));
  return a;
}

/** Whether an append was refused by its FENCE: the thread's lock is another worker's now. */
export const isFenced = (e) => /\bFENCED\b/.test(String(e?.message ?? ''));

export class Relay {
  /**
   * redis: an ioredis client; thread; assistant (graph_name of the root);
   * runId (RUN of the run's started event); log(level, msg, fields).
   */
  constructor({ redis, thread, assistant, runId, log, appendOpts = [], subgraphs = new Set(), regain = null }) {
    Object.assign(this, { redis, thread, assistant, runId, log, appendOpts, subgraphs, regain });
    this.queue = [];            // event JSON texts waiting to be appended
    this.sizes = [];            // their byte lengths
    this.queuedBytes = 0;
    this.flushing = null;
    this.seenInterrupts = new Set();
    this.open = new Map();      // messages of this run not finished yet
    this.terminal = null;       // the root's last lifecycle event, held until the run is over
    this.failed = null;         // an append error that nothing could fix
    this.batchId = randomUUID(); // with a count, each append's BATCH: ioredis resends what was in flight
    this.batches = 0;            // when its connection breaks (a Redis restart), and it must not land twice
  }

  /**
   * Queues one event (a protocol event object) as threadcast stores it;
   * throws EventTooLargeError for one threadcast cannot carry.
   */
  async push(ev) {
    if (this.failed) throw this.failed; // an append failed: nothing after it may land (a hole)
    for (const out of this.fix(ev)) this.enqueue(out);
    if (this.queue.length >= QUEUE_HIGH || this.queuedBytes >= BATCH_BYTES) await this.drain();
  }

  /**
   * The root lifecycle event that opens a run: threadcast resets its run
   * state on it. extra joins its data (a REST run's `runId`).
   */
  started(extra = {}) {
    this.enqueue({ method: 'lifecycle', params: { namespace: [], data: { event: 'started', graph_name: this.assistant, ...extra } } });
  }

  /** Appends an event as it is (no fix-ups). */
  raw(ev) {
    this.enqueue(ev);
  }

  /**
   * The fix-ups listed at the top of this file; returns what to append.
   * subgraphs: the graph's subgraph paths ("researcher", "researcher|inner").
   */
  fix(ev) {
    const { method, params } = ev;
    const ns = params.namespace ?? [];
    const out = { method, params: { ...params } };
    const data = params.data;
    if (method === 'lifecycle' && ns.length === 0) {
      out.params.data = { ...data, graph_name: this.assistant };
      if (data.event === 'completed' || data.event === 'failed' || data.event === 'interrupted') {
        this.terminal = out; // said when the run is over: an interrupt may turn it into "interrupted"
        return [];
      }
      if (data.event === 'started') return []; // the worker said it first
      return [out];
    }
    if (method === 'lifecycle' && !this.subgraphs.has(ns.map((seg) => seg.split(':')[0]).join('|'))) return [];
    if (method === 'values' && data && Array.isArray(data.__interrupt__)) {
      const asked = [sideEvent(ns, 'values', { __interrupt__: data.__interrupt__ })];
      for (const it of data.__interrupt__) {
        // A subgraph's interrupt bubbles up: seen at its namespace, then at the root's.
        if (!it?.id || this.seenInterrupts.has(it.id)) continue;
        this.seenInterrupts.add(it.id);
        asked.push({ method: 'input.requested', params: { namespace: ns, timestamp: params.timestamp, data: { interrupt_id: it.id, payload: it.value } } });
      }
      return asked;
    }
    if (method === 'updates' && (params.node === '__interrupt__' || data?.node === '__interrupt__')) {
      return [sideEvent(ns, 'updates', { __interrupt__: data?.values ?? [] })];
    }
    if (method === 'messages') {
      const key = msgKey(ns, params.node, data?.run_id);
      // The protocol requires a role; LangGraph leaves it out on AI messages.
      if (data?.event === 'message-start' && !data.role) out.params.data = { ...data, role: 'ai' };
      if (data?.event === 'message-start') this.open.set(key, { namespace: ns, node: params.node, run_id: data.run_id, id: data.id });
      else if (data?.event === 'message-finish' || data?.event === 'error') this.open.delete(key);
    }
    return [out];
  }

  /** The class and message of the exception a run failed with (its stream's `error` event). */
  failure(error) {
    const name = typeof error?.name === 'string' && error.name ? error.name : 'Error';
    this.enqueue(sideEvent([], 'error', { error: name, message: String(error?.message ?? error) }));
  }

  /** Closes the messages this run left open (cancelled, failed) with `error` events. */
  closeOpen(message, code) {
    for (const m of this.open.values()) this.enqueue(closeMessage(m, message, code));
    this.open.clear();
  }

  /**
   * Ends the run: its root lifecycle event with status (completed, failed,
   * interrupted), keeping what LangGraph said with it (error). Then waits
   * until everything is appended.
   */
  async end(status, extra = {}) {
    const data = { ...(this.terminal?.params.data ?? {}), event: status, graph_name: this.assistant, ...extra };
    if (status !== 'failed') delete data.error;
    this.enqueue({ method: 'lifecycle', params: { namespace: [], data } });
    await this.drain();
  }

  /** Queues one event; one over EVENT_MAX throws EventTooLargeError (nothing is queued). */
  enqueue(ev) {
    delete ev.type;
    delete ev.seq;
    const json = toJson(ev);
    const bytes = Buffer.byteLength(json);
    if (bytes > EVENT_MAX) throw new EventTooLargeError(ev.method, bytes);
    this.queue.push(json);
    this.sizes.push(bytes);
    this.queuedBytes += bytes;
    if (!this.flushing) this.flushing = endOfTick().then(() => this.flush());
  }

  /**
   * Resolves once every event the run has made so far is appended — those
   * still on their way to the queue too (LangGraph's stream, observe.js:
   * promise hops, settled within a loop turn). A checkpoint is written only
   * after it (checkpoint.js, FencedTx): a worker killed in between must not
   * leave a step saved whose events nobody will ever see (the taker goes on
   * after it).
   */
  async settle() {
    for (let turn = 0; turn < 8; turn++) {
      await new Promise((r) => setImmediate(r));
      await this.drain();
      if (!this.queue.length && !this.flushing) return;
    }
  }

  /** Resolves once everything queued so far is appended. */
  async drain() {
    while (this.flushing) await this.flushing;
    if (this.failed) throw this.failed;
  }

  async flush() {
    try {
      while (this.queue.length) {
        let n = 0;
        let bytes = 0;
        while (n < this.queue.length && n < BATCH_MAX && (n === 0 || bytes + this.sizes[n] <= BATCH_BYTES)) bytes += this.sizes[n++];
        const batch = this.queue.splice(0, n);
        this.sizes.splice(0, n);
        this.queuedBytes -= bytes;
        await this.append(batch);
      }
    } catch (e) {
      this.failed = e;
      this.queue.length = 0;
      this.sizes.length = 0;
      this.queuedBytes = 0;
    } finally {
      this.flushing = null;
    }
  }

  /**
   * Appends a batch; an event the function refuses is logged and left out.
   * A FENCED append is sent again once regain() says the lock is this
   * worker's again (its lease lapsed while Redis stalled, nobody took it);
   * else it throws.
   */
  async append(batch) {
    const id = `${this.batchId}:${++this.batches}`;
    let regained = 0;
    for (;;) {
      try {
        await appendsFor(this.redis).call(['FCALL', 'threadcast_append_batch', 1, keys.append(this.thread), batch.length, ...batch,
          ...this.appendOpts, 'RUN', this.runId, 'BATCH', id]);
        return;
      } catch (e) {
        if (isFenced(e)) {
          if (regained++ < 2 && this.regain && await this.regain()) continue;
          throw e;
        }
        // "ERR threadcast: event 3 must be …", "… lifecycle event 3.params…"
        const m = /^ERR threadcast: (?:[\w.:-]+ )?event (\d+)\b/.exec(e.message);
        const k = m ? Number(m[1]) : 0;
        if (!k || k > batch.length) throw e;
        this.log('error', 'event refused by threadcast_append, left out', { thread: this.thread, error: e.message, event: batch[k - 1].slice(0, 200) });
        batch.splice(k - 1, 1);
        if (!batch.length) return;
      }
    }
  }
}
