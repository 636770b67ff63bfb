// How a graph run is observed (protocol/README.md, "The LangGraph worker"):
// observe() runs the graph and yields, in the order the graph produced them,
// the protocol events threadcast stores, and the few extra ones the REST
// API's stream modes need (side events, below).
//
// The run is observed as the Agent Server observes its REST runs: through
// graph.streamEvents(…, { version: "v2" }) with stream modes and subgraphs —
// or, when the run did not ask for LangChain's callback events, through
// graph.stream() with the same options, which is what streamEvents v2 runs
// under its event handler (that handler makes an event of every callback,
// each token's too, which such a run would throw away).
// Under streamEvents v3 a chat model's output in the graph's own state
// becomes content blocks ([{type: "text", text: "end"}] where the graph would
// see "end" anywhere else: @langchain/core takes its ChatModelStream path as
// soon as a callback handler prefers chat model stream events, which v3's
// messages handler does). Under v2 models stream their chunks the classic
// way, and the graph's state is what graph.invoke() would leave.
//
// The protocol events are still v3's: the raw stream chunks ([namespace,
// mode, payload]) go through LangGraph's own createGraphRunStream (the
// lifecycle, subgraph and user transformers of streamEvents v3). Only the
// messages channel is made here: LangGraph's v2 messages handler (which
// would give whole message chunks) is swapped, where LangGraph adds it, for
// ProtocolMessages, which turns the same chunks into the protocol's
// message-start / content-block-* / message-finish events with
// @langchain/core's own converter, and pushes them into the run's stream at
// once, so they keep their place among the other chunks.
//
// Side events carry what only the worker knows, for the REST API's stream
// modes: {method: SIDE, params: {namespace, timestamp, data: {mode, data}}}
// with mode "events" (LangChain callback events, when the run asked for
// them) or "debug" (LangGraph's debug chunks in the Agent Server's shape,
// when it asked for debug or checkpoints). They travel through the same
// pipeline (as custom chunks only observe() knows), so they keep their place
// too. relay.js adds the others (interrupts, the error's class).
import { randomUUID } from 'node:crypto';
import { BaseCallbackHandler } from '@langchain/core/callbacks/base';
import { CallbackManager } from '@langchain/core/callbacks/manager';
import { convertChunksToEvents } from '@langchain/core/language_models/compat';
import { AIMessageChunk, BaseMessage, ToolMessage } from '@langchain/core/messages';
import { ChatGenerationChunk } from '@langchain/core/outputs';
import { STREAM_EVENTS_V3_MODES, createGraphRunStream } from '@langchain/langgraph';

/** The method of side events (a named custom channel: nobody subscribed to "custom" gets them). */
export const SIDE = 'custom:threadcast.modes';

/** A side event at namespace ns. */
export const sideEvent = (ns, mode, data) => ({ method: SIDE, params: { namespace: ns, timestamp: Date.now(), data: { mode, data } } });

/**
 * Drives @langchain/core's chunk → message event converter one chunk at a
 * time: push() resolves once every event that chunk makes has been emitted,
 * close() once the message's last events (its blocks' finish, the
 * message's finish) have been.
 */
class ChunkFeed {
  constructor(emit) {
    this.chunks = [];
    this.closed = false;
    this.wake = null;    // resolves the converter's pending read
    this.waiters = [];   // push() callers, told when the converter waits for more
    const feed = this;
    const source = { [Symbol.asyncIterator]: () => ({ next: () => feed.read() }) };
    this.done = (async () => {
      for await (const ev of convertChunksToEvents(source)) emit(ev);
    })();
    this.done.catch(() => {});
  }

  read() {
    if (this.chunks.length) return Promise.resolve({ value: this.chunks.shift(), done: false });
    if (this.closed) return Promise.resolve({ value: undefined, done: true });
    for (const told of this.waiters.splice(0)) told();
    return new Promise((resolve) => { this.wake = resolve; });
  }

  /** Resolves once the converter has emitted what chunk makes. */
  push(chunk) {
    const settled = new Promise((resolve) => this.waiters.push(resolve));
    this.chunks.push(chunk);
    this.next();
    return settled;
  }

  /** Resolves once the converter has emitted everything (its message's finish last). */
  close() {
    this.closed = true;
    this.next();
    return this.done;
  }

  next() {
    if (!this.wake) return;
    const wake = this.wake;
    this.wake = null;
    wake(this.chunks.length ? { value: this.chunks.shift(), done: false } : { value: undefined, done: true });
  }
}

const isMessage = (m) => BaseMessage.isInstance(m);
const roleOf = (m) => ({ human: 'human', system: 'system', tool: 'tool' })[m.type] ?? 'ai';

/** The protocol events of a whole message (one not streamed), given to emit one by one. */
function wholeMessage(message, id, emit) {
  const role = roleOf(message);
  emit({ event: 'message-start', ...(id != null ? { id } : {}), ...(role !== 'ai' ? { role } : {}),
    ...(role === 'tool' && typeof message.tool_call_id === 'string' ? { tool_call_id: message.tool_call_id } : {}) });
  const blocks = Array.isArray(message.content) ? message.content
    : typeof message.content === 'string' && message.content ? [{ type: 'text', text: message.content }] : [];
  blocks.forEach((block, at) => {
    const index = typeof block.index === 'number' ? block.index : at;
    let start = block;
    let delta;
    if (block.type === 'text') {
      start = { type: 'text', text: '' };
      if (typeof block.text === 'string' && block.text) delta = { type: 'text-delta', text: block.text };
    } else if (block.type === 'reasoning') {
      start = { type: 'reasoning', reasoning: '' };
      if (typeof block.reasoning === 'string' && block.reasoning) delta = { type: 'reasoning-delta', reasoning: block.reasoning };
    } else if (block.type === 'tool_call' || block.type === 'tool_call_chunk') {
      start = { type: 'tool_call_chunk', ...(block.id != null ? { id: block.id } : {}), ...(block.name != null ? { name: block.name } : {}), args: '' };
      delta = { type: 'block-delta', fields: { ...block, index, type: 'tool_call_chunk' } };
    }
    emit({ event: 'content-block-start', index, content: start });
    if (delta) emit({ event: 'content-block-delta', index, delta });
    emit({ event: 'content-block-finish', index, content: block });
  });
  const usage = message.usage_metadata;
  const meta = message.response_metadata;
  emit({ event: 'message-finish', ...(usage && typeof usage === 'object' ? { usage } : {}),
    ...(meta && typeof meta === 'object' ? { responseMetadata: meta } : {}) });
}

/**
 * The messages channel of a run, as the protocol has it: a model's streamed
 * chunks as message events (ids: the model's, else `run-<model run id>`);
 * a model's output it did not stream, and the messages a node returns that
 * were not shown yet (tool messages left to the tools channel), as whole
 * messages. Events go to push as LangGraph's messages chunks
 * ([namespace, "messages", [data, metadata]]).
 */
export class ProtocolMessages extends BaseCallbackHandler {
  name = 'ThreadcastProtocolMessages';
  lc_prefer_streaming = true; // models stream their chunks the classic way (their output stays as it is)
  awaitHandlers = true;       // in order, before the model or node goes on

  constructor(push) {
    super();
    this.push = push;
    this.origin = new Map();   // run id → [namespace, metadata] of a model or node run shown here
    this.feeds = new Map();    // model run id → its ChunkFeed, once it streamed
    this.idOf = new Map();     // run id → the id its message got
    this.seen = new Set();     // message ids already shown (or in a node's input)
  }

  emit(origin, data, runId) {
    this.push([origin[0], 'messages', [data, { ...origin[1], run_id: runId }]]);
  }

  static originOf(tags, metadata, name) {
    const ns = metadata?.langgraph_checkpoint_ns;
    if (typeof ns !== 'string') return undefined;
    return [ns.split('|'), { tags, name, ...metadata }];
  }

  /** A whole message, unless shown already; one without an id gets the run's. */
  showWhole(origin, message, runId) {
    const id = message.id ?? this.idOf.get(runId) ?? `run-${runId}`;
    if (this.seen.has(id)) return;
    if (message.id == null) {
      message.id = id;
      if (message.lc_kwargs) message.lc_kwargs.id = id;
    }
    this.idOf.set(runId, id);
    this.seen.add(id);
    wholeMessage(message, id, (data) => this.emit(origin, data, runId));
  }

  handleChatModelStart(_llm, _messages, runId, _parent, _extra, tags, metadata, name) {
    if (tags?.includes('nostream') || tags?.includes('langsmith:nostream')) return;
    const origin = ProtocolMessages.originOf(tags, metadata, name);
    if (origin) this.origin.set(runId, origin);
  }

  async handleLLMNewToken(token, _idx, runId, _parent, _tags, fields) {
    const origin = this.origin.get(runId);
    if (!origin) return;
    let feed = this.feeds.get(runId);
    if (!feed) {
      feed = new ChunkFeed((ev) => {
        let data = ev;
        if (ev.event === 'message-start') {
          const id = ev.id ?? `run-${runId}`;
          this.idOf.set(runId, id);
          this.seen.add(id);
          data = { ...ev, id };
        }
        this.emit(origin, data, runId);
      });
      this.feeds.set(runId, feed);
    }
    // (a model may give only the token's text; the graph's own @langchain/core may be another copy)
    const chunk = isMessage(fields?.chunk?.message) ? fields.chunk
      : new ChatGenerationChunk({ message: new AIMessageChunk({ content: token ?? '' }), text: token ?? '' });
    await feed.push(chunk);
  }

  async handleLLMEnd(output, runId) {
    const origin = this.origin.get(runId);
    this.origin.delete(runId);
    const feed = this.feeds.get(runId);
    this.feeds.delete(runId);
    if (feed) {
      await feed.close();
    } else if (origin) {
      const message = output?.generations?.[0]?.[0]?.message;
      if (isMessage(message)) this.showWhole(origin, message, runId);
    }
    this.idOf.delete(runId);
  }

  handleLLMError(_err, runId) {
    this.origin.delete(runId);
    this.feeds.delete(runId);
    this.idOf.delete(runId);
  }

  handleChainStart(_chain, inputs, runId, _parent, tags, metadata, _type, name) {
    if (!metadata || name !== metadata.langgraph_node || tags?.includes('langsmith:hidden')) return;
    const origin = ProtocolMessages.originOf(tags, metadata, name);
    if (!origin) return;
    this.origin.set(runId, origin);
    if (inputs && typeof inputs === 'object') {
      for (const v of Object.values(inputs)) {
        for (const m of Array.isArray(v) ? v : [v]) if (isMessage(m) && m.id != null) this.seen.add(m.id);
      }
    }
  }

  handleChainEnd(outputs, runId) {
    const origin = this.origin.get(runId);
    this.origin.delete(runId);
    if (!origin) return;
    const show = (m) => {
      if (isMessage(m) && !ToolMessage.isInstance(m)) this.showWhole(origin, m, runId);
    };
    if (isMessage(outputs)) show(outputs);
    else if (Array.isArray(outputs)) outputs.forEach(show);
    else if (outputs && typeof outputs === 'object') {
      for (const v of Object.values(outputs)) (Array.isArray(v) ? v : [v]).forEach(show);
    }
    this.idOf.delete(runId);
  }

  handleChainError(_err, runId) {
    this.origin.delete(runId);
    this.idOf.delete(runId);
  }
}

/**
 * Callbacks that put ProtocolMessages where LangGraph adds its own messages
 * handler to a run's callbacks (it copies them, then adds the handler; the
 * handler it would add is known by its name and its stream function), and
 * have its tools handler name namespaces as under v3.
 */
class Callbacks extends CallbackManager {
  static of(given) {
    const m = new Callbacks();
    if (Array.isArray(given)) for (const h of given) m.addHandler(h, true);
    else if (given) for (const h of given.handlers) m.addHandler(h, given.inheritableHandlers.includes(h));
    return m;
  }

  copy(additional = [], inherit = true) {
    return Object.setPrototypeOf(super.copy(additional, inherit), Callbacks.prototype);
  }

  addHandler(handler, inherit = true) {
    if (handler?.name === 'StreamMessagesHandler' && typeof handler.streamFn === 'function') handler = new ProtocolMessages(handler.streamFn);
    // Tools events at the namespace of the node that ran the tool, as v3 gives them (v2 drops the node's segment).
    if (handler?.name === 'StreamToolsHandler') handler.namespaceOptions = undefined;
    return super.addHandler(handler, inherit);
  }
}

// ---- the Agent Server's shapes of debug chunks ----------------------------------------------------

const isConfig = (c) => c && typeof c === 'object' && c.configurable && typeof c.configurable === 'object';

/**
 * The checkpoint a config names ({thread_id, checkpoint_id, checkpoint_ns, checkpoint_map}), or
 * null; a task's (task) may have no checkpoint id yet.
 */
function checkpointRef(config, task = false) {
  const c = isConfig(config) ? config.configurable : null;
  if (!c || typeof c.thread_id !== 'string' || (!task && typeof c.checkpoint_id !== 'string')) return null;
  return { thread_id: c.thread_id, checkpoint_id: c.checkpoint_id || null, checkpoint_ns: c.checkpoint_ns || '',
    checkpoint_map: c.checkpoint_map || null };
}

/** A config without LangGraph's internal keys (__pregel_…) and callbacks. */
function publicConfig(config) {
  if (!isConfig(config)) return config;
  const out = { ...config, configurable: Object.fromEntries(Object.entries(config.configurable).filter(([k]) => !k.startsWith('__'))) };
  delete out.callbacks;
  return out;
}

/** A debug task: its state, when a config, as the checkpoint it names. */
function debugTask(task) {
  if (!task || typeof task !== 'object' || !isConfig(task.state)) return task;
  const ref = checkpointRef(task.state, true);
  if (!ref) return task;
  const { state: _state, ...rest } = task;
  return { ...rest, checkpoint: ref };
}

/** A debug chunk ({type, step, timestamp, payload}) as the Agent Server streams it. */
export function debugChunk(chunk) {
  if (chunk?.type === 'task_result') return { ...chunk, payload: debugTask(chunk.payload) };
  if (chunk?.type !== 'checkpoint') return chunk;
  const { parentConfig, ...p } = chunk.payload ?? {};
  return { ...chunk, payload: { ...p, config: publicConfig(p.config), checkpoint: checkpointRef(p.config),
    parent_checkpoint: checkpointRef(parentConfig), tasks: (p.tasks ?? []).map(debugTask), parent_config: publicConfig(parentConfig) } };
}

// ---- the run -------------------------------------------------------------------------------------

/** An async queue of stream chunks, ended or failed by its writer. */
function chunkQueue() {
  const items = [];
  let waiting = null;
  let end = null; // { error } once over
  const wakeUp = () => {
    const w = waiting;
    waiting = null;
    w?.();
  };
  return {
    put(x) { items.push(x); wakeUp(); },
    finish(error) { end = { error }; wakeUp(); },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        if (items.length) yield items.shift();
        else if (end) {
          if (end.error) throw end.error;
          return;
        } else await new Promise((r) => { waiting = r; });
      }
    },
  };
}

/**
 * Runs graph on input with options (LangGraph's: configurable, signal,
 * control, interruptBefore, …) and yields its protocol events and side
 * events in order. want: { events, debug } — the side events to make —
 * and runId, the root run's id (a new one when not given). Throws what the
 * run throws.
 */
export async function* observe(graph, input, options, want = {}) {
  const runId = want.runId ?? randomUUID();
  const modes = [...STREAM_EVENTS_V3_MODES, ...(want.debug ? ['debug'] : [])];
  const sides = new WeakSet();
  const side = (ns, mode, data) => {
    const tag = { mode, data };
    sides.add(tag);
    return [ns, 'custom', tag];
  };
  const stop = new AbortController(); // the caller stopped listening: the run stops too
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  const chunks = chunkQueue();
  const put = ([ns, mode, payload]) => chunks.put(mode === 'debug' ? side(ns, 'debug', debugChunk(payload)) : [ns, mode, payload]);
  // version stays in what graph.stream() is given, as streamEvents leaves it there: LangGraph
  // reads it (a subgraph's checkpoint envelopes come with values under streamEvents only).
  const config = { ...options, signal, version: 'v2', streamMode: modes, subgraphs: true, runId, callbacks: Callbacks.of(options.callbacks) };
  const reading = (async () => {
    try {
      if (want.events) {
        // streamEvents v2 is graph.stream() with one more callback handler, which turns every
        // callback (each token too) into an event: paid only by a run that asked for them.
        for await (const ev of graph.streamEvents(input, config)) {
          if (ev.event === 'on_chain_stream' && ev.run_id === runId) put(ev.data.chunk);
          else if (!ev.tags?.includes('langsmith:hidden')) chunks.put(side([], 'events', ev));
        }
      } else {
        for await (const chunk of await graph.stream(input, config)) put(chunk);
      }
      chunks.finish();
    } catch (e) {
      chunks.finish(e);
    }
  })();
  let over = false;
  try {
    for await (const ev of createGraphRunStream(chunks, graph.streamTransformers ?? [])) {
      const tag = ev.method === 'custom' ? ev.params.data?.payload : undefined;
      if (tag && sides.has(tag)) yield { method: SIDE, params: { namespace: ev.params.namespace, timestamp: ev.params.timestamp, data: tag } };
      else yield ev;
    }
    over = true;
  } finally {
    if (!over) stop.abort(new Error('the run is no longer observed'));
    await reading;
  }
}
