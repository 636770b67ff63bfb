// threadcast client: one WebSocket per thread, subscriptions, runtime commands,
// and reconnects that the application never sees as gaps or duplicates.
//
//   import { connect } from './threadcast.js';
//   const conn = connect('ws://localhost:8080', 'thread-1');
//   const sub = conn.subscribe({ channels: ['messages', 'lifecycle'] }, (event) => { … });
//   const { run_id } = await conn.command('run.start', { assistant_id: 'agent', input: … });
//   sub.unsubscribe();  conn.close();
//
// No dependencies; runs in browsers and in Node (pass `WebSocket` from the `ws`
// package in the options). Wire format: protocol 0.0.21 (snake_case field names, the
// official client's), on /threads/:thread_id/stream/events; see protocol/README.md.
//
// How the sequence stays whole. Every event carries event_id "<epoch>:<seq>".
// Each subscription remembers the last seq it delivered and delivers only
// higher ones, so a replay that overlaps what was seen is cut, and a new epoch
// (the thread's history was recreated) starts it afresh. After a drop the
// connection comes back with `subscription.reconnect`, naming its
// subscriptions and the last event_id every one of them is complete up to; the
// server replays what followed. When it answers `restored: false` the
// application's `resync` handlers run: events were lost for good and state
// should be reloaded (`state.get`).

/** @typedef {import('@langchain/protocol').Channel} Channel */
/** @typedef {import('@langchain/protocol').Namespace} Namespace */
/** @typedef {import('@langchain/protocol').Event} ProtocolEvent */
/** @typedef {import('@langchain/protocol').ErrorCode} ErrorCode */
/** @typedef {import('@langchain/protocol').SubscribeResult} SubscribeResult */
/** @typedef {import('@langchain/protocol').ReconnectResult} ReconnectResult */
// The protocol's results are Extensible (any field goes); the client reads
// exactly these, so a misspelled field name fails the type check.
/** @typedef {Pick<SubscribeResult, 'subscription_id' | 'replayed_events'>} SubscribeAnswer */
/** @typedef {Pick<ReconnectResult, 'restored' | 'missed_events' | 'current_namespaces'>} ReconnectAnswer */
/** @typedef {Pick<import('@langchain/protocol').RunResult, 'run_id'>} RunAnswer */
/** @typedef {Pick<ProtocolEvent, 'type' | 'event_id' | 'seq' | 'method' | 'params'>} EventFrame */

/**
 * The params and results of the runtime commands, as protocol 0.0.21 types
 * them: `command('run.start', { assistantId: … })` does not type-check.
 * @typedef {{
 *   'run.start': import('@langchain/protocol').RunStartParams,
 *   'input.respond': import('@langchain/protocol').InputRespondParams,
 *   'input.inject': import('@langchain/protocol').InputInjectParams,
 *   'state.get': import('@langchain/protocol').StateGetParams,
 *   'state.listCheckpoints': import('@langchain/protocol').ListCheckpointsParams,
 *   'state.fork': import('@langchain/protocol').StateForkParams,
 *   'agent.getTree': import('@langchain/protocol').AgentGetTreeParams,
 * }} CommandParams
 * @typedef {{
 *   'run.start': import('@langchain/protocol').RunResult,
 *   'input.respond': import('@langchain/protocol').InputResult,
 *   'input.inject': import('@langchain/protocol').InputResult,
 *   'state.get': import('@langchain/protocol').StateGetResult,
 *   'state.listCheckpoints': import('@langchain/protocol').ListCheckpointsResult,
 *   'state.fork': import('@langchain/protocol').StateForkResult,
 *   'agent.getTree': import('@langchain/protocol').AgentResult,
 * }} CommandResults
 */

/**
 * @typedef {object} Filter
 * @property {Channel[]} channels
 * @property {Namespace[]} [namespaces]  prefixes; absent or [] = every namespace
 * @property {number} [depth]            levels below the prefix (0 = the prefix itself)
 */

/**
 * @typedef {object} ConnectOptions
 * @property {any} [WebSocket]  constructor; defaults to globalThis.WebSocket
 * @property {string | (() => string | Promise<string>)} [token]  bearer token (sent as
 *   ?access_token=…), or a function asked before every connect (for refreshes)
 * @property {number} [backoffMinMs]  first reconnect delay (250)
 * @property {number} [backoffMaxMs]  longest reconnect delay (10000)
 * @property {number} [maxQueuedCommands]  commands held while disconnected (256)
 * @property {number} [historyLimit]  events kept to feed subscriptions added later (10000)
 * @property {() => number} [random]  for the jitter (Math.random)
 */

export const CHANNELS = Object.freeze(['values', 'updates', 'messages', 'tools', 'lifecycle',
  'input', 'checkpoints', 'tasks', 'custom']);

/** A command the server refused; `code` is the protocol's ErrorCode. */
export class ProtocolError extends Error {
  /** @param {ErrorCode | 'connection_lost' | 'closed' | 'queue_full'} code @param {string} message */
  constructor(code, message) {
    super(message);
    this.name = 'ProtocolError';
    this.code = code;
  }
}

/**
 * Opens a connection to a thread. `url` is the gateway's base URL (ws://, wss://,
 * http:// or https://; an http page may pass location.origin).
 * @param {string} url @param {string} threadId @param {ConnectOptions} [options]
 */
export function connect(url, threadId, options = {}) {
  return new ThreadConnection(url, threadId, options);
}

/** The channel an event belongs to (`input.requested` → input, `custom:x` → itself). */
export function channelOf(method) {
  if (method.startsWith('custom:')) return method;
  const dot = method.indexOf('.');
  return dot < 0 ? method : method.slice(0, dot);
}

/** Whether an event passes a filter, by the rules the server applies. */
export function matches(filter, event) {
  const method = event.method;
  const ch = channelOf(method);
  if (!filter.channels.includes(/** @type {Channel} */ (ch))) return false;
  const ns = event.params?.namespace ?? [];
  const prefixes = filter.namespaces && filter.namespaces.length ? filter.namespaces : [[]];
  return prefixes.some((p) => p.length <= ns.length && p.every((seg, i) => seg === ns[i]) &&
    (filter.depth === undefined || ns.length - p.length <= filter.depth));
}

/** Parses "<epoch>:<seq>"; null when it is not one. */
export function parseEventId(id) {
  if (typeof id !== 'string') return null;
  const colon = id.lastIndexOf(':');
  const seq = Number(id.slice(colon + 1));
  if (colon <= 0 || !Number.isSafeInteger(seq)) return null;
  return { epoch: id.slice(0, colon), seq };
}

function streamUrl(base, threadId, token) {
  const u = new URL(base);
  if (u.protocol === 'http:') u.protocol = 'ws:';
  else if (u.protocol === 'https:') u.protocol = 'wss:';
  u.pathname = `${u.pathname.replace(/\/+$/, '')}/threads/${encodeURIComponent(threadId)}/stream/events`;
  if (token) u.searchParams.set('access_token', token);
  return u.toString();
}

class Subscription {
  /** @param {ThreadConnection} conn @param {Filter} filter @param {(e: ProtocolEvent) => void} onEvent */
  constructor(conn, filter, onEvent) {
    this.conn = conn;
    this.filter = filter;
    this.onEvent = onEvent;
    /** @type {string | null} the server's subscription_id, once it answered */
    this.id = null;
    this.state = 'new'; // new → subscribing → active → closed
    this.epoch = null;
    this.lastSeq = 0;
    this.replayLeft = 0; // events still to come from its own replay
    this.backfill = []; // events the connection had before it, to merge into its replay
    /** @type {Promise<SubscribeResult>} resolves when the server confirmed it */
    this.ready = new Promise((resolve, reject) => { this._ready = { resolve, reject }; });
    this.ready.catch(() => {}); // observed through the handle when the application cares
  }

  /** Stops delivery at once; resolves when the server confirmed. */
  unsubscribe() {
    return this.conn._unsubscribe(this);
  }

  _deliver(event, id) {
    if (this.state !== 'active') return;
    if (id.epoch !== this.epoch) { this.epoch = id.epoch; this.lastSeq = 0; }
    if (id.seq <= this.lastSeq) return;
    this.lastSeq = id.seq;
    this.onEvent(event);
  }

  // Events the connection received before this subscription's replay that
  // match it and so are missing from the replay, up to (below) seq.
  _flushBackfill(below) {
    while (this.backfill.length && (below === undefined || this.backfill[0].id.seq < below)) {
      const b = this.backfill.shift();
      this._deliver(b.event, b.id);
    }
  }
}

class ThreadConnection {
  /** @param {string} url @param {string} threadId @param {ConnectOptions} options */
  constructor(url, threadId, options) {
    this.url = url;
    this.threadId = threadId;
    this.options = options;
    this.WebSocket = options.WebSocket ?? globalThis.WebSocket;
    if (!this.WebSocket) throw new Error('no WebSocket: pass options.WebSocket (e.g. from the ws package)');
    this.random = options.random ?? Math.random;
    /** 'connecting' | 'open' | 'reconnecting' | 'closed' */
    this.status = 'connecting';
    this.attempt = 0;
    this.reconnects = 0;
    this.runId = '';
    /** @type {Set<Subscription>} */
    this.subs = new Set();
    this.replaying = []; // subscriptions whose replay is under way, in command order
    this.pending = new Map(); // id → {resolve, reject, internal}
    this.queue = []; // commands waiting for the connection
    this.nextId = 1;
    this.epoch = null;
    this.maxSeq = 0;
    this.history = []; // {event, id} of the current run, for subscriptions added later
    this.listeners = { status: new Set(), resync: new Set(), event: new Set() };
    this.ws = null;
    this.timer = null;
    this._open();
  }

  /**
   * on('status', ({status, attempt, delayMs}) => …), on('resync', (info) => …),
   * on('event', (event) => …) for every event the connection receives. Returns off().
   */
  on(name, fn) {
    this.listeners[name].add(fn);
    return () => this.listeners[name].delete(fn);
  }

  /**
   * Subscribes; onEvent gets every matching event once, in seq order, from the
   * start of the current run. Returns a handle: `unsubscribe()`, `ready`, `id`.
   * @param {Filter} filter @param {(e: ProtocolEvent) => void} onEvent
   */
  subscribe(filter, onEvent) {
    if (this.status === 'closed') throw new ProtocolError('closed', 'the connection is closed');
    const sub = new Subscription(this, { ...filter }, onEvent);
    this.subs.add(sub);
    if (this.status === 'open') this._sendSubscribe(sub);
    return sub;
  }

  /**
   * Sends a runtime command (run.start, input.respond, state.get, agent.getTree …);
   * resolves with its result, rejects with a ProtocolError. Commands issued while
   * disconnected wait for the connection; a command in flight when it drops is
   * rejected with code 'connection_lost' (it may or may not have run).
   * @template {keyof CommandParams} M
   * @param {M} method @param {CommandParams[M]} [params]
   * @returns {Promise<CommandResults[M]>}
   */
  command(method, params) {
    params ??= /** @type {CommandParams[M]} */ ({});
    if (this.status === 'closed') return Promise.reject(new ProtocolError('closed', 'the connection is closed'));
    return new Promise((resolve, reject) => {
      const job = { method, params, resolve, reject };
      if (this.status === 'open') this._send(job);
      else if (this.queue.length >= (this.options.maxQueuedCommands ?? 256)) {
        reject(new ProtocolError('queue_full', 'too many commands are waiting for the connection'));
      } else this.queue.push(job);
    }).then((result) => {
      const run = /** @type {RunAnswer} */ (result);
      if (method === 'run.start' && run && typeof run.run_id === 'string') this.runId = run.run_id;
      return result;
    });
  }

  /** Closes for good: no reconnect; waiting commands are rejected. */
  close() {
    if (this.status === 'closed') return;
    this._setStatus('closed');
    clearTimeout(this.timer);
    const ws = this.ws;
    this.ws = null;
    if (ws) { ws.onclose = ws.onmessage = ws.onerror = ws.onopen = null; ws.close(1000); }
    this._failPending('closed', 'the connection was closed');
    for (const job of this.queue.splice(0)) job.reject(new ProtocolError('closed', 'the connection was closed'));
    for (const sub of this.subs) {
      sub.state = 'closed';
      sub._ready.reject(new ProtocolError('closed', 'the connection was closed')); // no-op once confirmed
    }
    this.subs.clear();
  }

  // ---- internals -------------------------------------------------------------------

  _emit(name, arg) {
    for (const fn of this.listeners[name]) {
      try { fn(arg); } catch (e) { setTimeout(() => { throw e; }); }
    }
  }

  _setStatus(status, extra = {}) {
    this.status = status;
    this._emit('status', { status, attempt: this.attempt, reconnects: this.reconnects, ...extra });
  }

  async _open() {
    let token = this.options.token;
    try {
      if (typeof token === 'function') token = await token();
    } catch { token = undefined; }
    if (this.status === 'closed') return;
    const ws = new this.WebSocket(streamUrl(this.url, this.threadId, token));
    this.ws = ws;
    ws.onopen = () => this._onOpen();
    ws.onmessage = (m) => this._onMessage(typeof m.data === 'string' ? m.data : String(m.data));
    ws.onerror = () => {}; // onclose follows
    ws.onclose = () => this._onClose();
  }

  _onOpen() {
    this.nextId = 1;
    // Subscriptions the server knew come back with one reconnect, from the last
    // event every one of them is complete up to.
    const known = [...this.subs].filter((s) => s.id !== null);
    if (known.length) {
      // A subscription still in its own replay (its backfill waits in it too)
      // is complete only up to what it delivered; the others up to the head.
      let cursor = Infinity;
      for (const s of known) {
        if (s.replayLeft > 0 && s.epoch !== this.epoch) cursor = 0;
        else cursor = Math.min(cursor, s.replayLeft > 0 ? s.lastSeq : this.maxSeq);
        s.replayLeft = 0;
        s.backfill = [];
        s.state = 'subscribing';
      }
      /** @type {import('@langchain/protocol').ReconnectParams} */
      const params = { run_id: this.runId, subscriptions: known.map((s) => s.id) };
      if (this.epoch !== null && cursor > 0) params.last_event_id = `${this.epoch}:${cursor}`;
      this._send({
        method: 'subscription.reconnect', params, internal: true,
        resolve: (/** @type {ReconnectAnswer} */ r) => {
          for (const s of known) if (s.state === 'subscribing') s.state = 'active';
          this.attempt = 0;
          if (!r.restored) this._emit('resync', r);
        },
        reject: (err) => {
          if (err.code === 'connection_lost') return;
          // The server refused the ids (another deployment?): subscribe afresh.
          for (const s of known) { s.id = null; if (this.subs.has(s)) this._sendSubscribe(s); }
          this._emit('resync', { restored: false, error: err });
        },
      });
    }
    for (const s of this.subs) if (s.id === null && s.state !== 'subscribing') this._sendSubscribe(s);
    this.replaying = [];
    this._setStatus('open');
    for (const job of this.queue.splice(0)) this._send(job);
  }

  _sendSubscribe(sub) {
    sub.state = 'subscribing';
    const params = { channels: sub.filter.channels };
    if (sub.filter.namespaces !== undefined) params.namespaces = sub.filter.namespaces;
    if (sub.filter.depth !== undefined) params.depth = sub.filter.depth;
    this._send({
      method: 'subscription.subscribe', params, internal: true,
      resolve: (/** @type {SubscribeAnswer} */ r) => {
        if (!this.subs.has(sub)) { // unsubscribed while the answer was on its way
          this._send({ method: 'subscription.unsubscribe', params: { subscription_id: r.subscription_id },
            internal: true, resolve() {}, reject() {} });
          return;
        }
        sub.id = r.subscription_id;
        sub.state = 'active';
        this.attempt = 0;
        // What the connection already had for it is not in its replay.
        sub.backfill = this.history.filter((h) => matches(sub.filter, h.event));
        sub.replayLeft = r.replayed_events ?? 0;
        if (sub.replayLeft > 0) this.replaying.push(sub);
        else sub._flushBackfill();
        sub._ready.resolve(r);
      },
      reject: (err) => {
        if (err.code === 'connection_lost') { sub.state = 'new'; return; }
        sub.state = 'closed';
        this.subs.delete(sub);
        sub._ready.reject(err);
      },
    });
  }

  _unsubscribe(sub) {
    if (!this.subs.delete(sub)) return Promise.resolve();
    const wasActive = sub.state === 'active';
    sub.state = 'closed';
    sub._ready.reject(new ProtocolError('closed', 'unsubscribed before the server confirmed')); // no-op once confirmed
    this.replaying = this.replaying.filter((s) => s !== sub);
    if (!wasActive || this.status !== 'open' || sub.id === null) return Promise.resolve();
    return new Promise((resolve, reject) => this._send({
      method: 'subscription.unsubscribe', params: { subscription_id: sub.id }, internal: true,
      resolve: () => resolve(undefined),
      reject: (e) => (e.code === 'connection_lost' ? resolve(undefined) : reject(e)),
    }));
  }

  _send(job) {
    const id = this.nextId++;
    this.pending.set(id, job);
    this.ws.send(JSON.stringify({ id, method: job.method, params: job.params }));
  }

  _onMessage(text) {
    let msg;
    try { msg = JSON.parse(text); } catch { return; }
    if (msg.type === 'event') { this._onEvent(msg); return; }
    const job = this.pending.get(msg.id);
    if (!job) return;
    this.pending.delete(msg.id);
    if (msg.type === 'success') job.resolve(msg.result);
    else job.reject(new ProtocolError(msg.error, msg.message));
  }

  /** @param {EventFrame} event */
  _onEvent(event) {
    const id = parseEventId(event.event_id);
    if (!id) return;
    if (id.epoch !== this.epoch) { this.epoch = id.epoch; this.maxSeq = 0; this.history = []; }
    const fresh = id.seq > this.maxSeq;
    if (fresh) this.maxSeq = id.seq;
    // The current run's events, for subscriptions added later.
    if (event.method === 'lifecycle' && event.params?.namespace?.length === 0 &&
        event.params.data?.event === 'started') this.history = [];
    if (fresh) {
      this.history.push({ event, id });
      if (this.history.length > (this.options.historyLimit ?? 10000)) this.history.shift();
    }
    const head = this.replaying[0];
    if (head) head._flushBackfill(id.seq);
    for (const sub of this.subs) if (matches(sub.filter, event)) sub._deliver(event, id);
    if (head && --head.replayLeft <= 0) {
      this.replaying.shift();
      head._flushBackfill();
    }
    this._emit('event', event);
  }

  _failPending(code, message) {
    const jobs = [...this.pending.values()];
    this.pending.clear();
    for (const job of jobs) job.reject(new ProtocolError(code, message));
  }

  _onClose() {
    this.ws = null;
    if (this.status === 'closed') return;
    this._failPending('connection_lost', 'the connection dropped before the answer came');
    const min = this.options.backoffMinMs ?? 250;
    const max = this.options.backoffMaxMs ?? 10000;
    const base = Math.min(max, min * 2 ** this.attempt);
    const delayMs = Math.round(base / 2 + (base / 2) * this.random());
    this.attempt++;
    this.reconnects++;
    this._setStatus('reconnecting', { delayMs });
    this.timer = setTimeout(() => { if (this.status !== 'closed') this._open(); }, delayMs);
  }
}
