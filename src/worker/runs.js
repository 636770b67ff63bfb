// Graph runs (protocol/README.md, "The LangGraph worker"): how a run starts
// (startRun, the common start of run.start, input.respond and state.fork),
// how it runs to its end (runGraph: the graph's events through a Relay,
// injected messages applied at step boundaries, cancel, the run's last root
// lifecycle event, its record, the thread released), and what reaches a
// running run (inject, cancelRun).
//
// A run is its `ctl`, kept in w.running under its thread while this worker
// runs it: { thread, graph, assistant, runId, relay, input, configurable,
// metadata, injects (messages to apply), abort (an AbortController), and
// for a REST run rest: true, options, observe (observe.js' side events),
// dispose, startError }; runGraph adds
// control (LangGraph's RunControl), cancelled and cancelAction, and, once
// the run is over, over and settled (resolved when it is gone).
//
// Every function here takes the worker's shared state `w` (worker.js) first.
import { randomUUID } from 'node:crypto';
import { RunControl, isGraphDrained } from '@langchain/langgraph';
import { KEEP, success } from './answers.js';
import { keys } from './keys.js';
import { fencedRelay, keepLock, moveRun, recordDone, recordRun, release, renewLock } from './lock.js';
import { observe } from './observe.js';
import { isFenced } from './relay.js';
import { systemAssistantId } from './config.js';
import { finishRestRun, restCall } from './rest-runs.js';

/** Interrupts waiting for an answer at the thread's head: [{ id, value }]. */
export function pendingInterrupts(state) {
  const out = [];
  for (const t of state.tasks ?? []) {
    if (t.result !== undefined) continue;
    for (const i of t.interrupts ?? []) if (i.id && !out.some((o) => o.id === i.id)) out.push({ id: i.id, value: i.value });
  }
  return out;
}

/** Human messages of a run's input, each with an id (so the echo and the state agree). */
export function withIds(input) {
  if (!input || typeof input !== 'object' || !Array.isArray(input.messages)) return { input, humans: [] };
  const messages = input.messages.map((m) => (m && typeof m === 'object' && !m.id && !m.lc ? { ...m, id: `msg-${randomUUID()}` } : m));
  const humans = messages.filter((m) => m && (m.role === 'user' || m.role === 'human' || m.type === 'human') && typeof m.content === 'string');
  return { input: { ...input, messages }, humans };
}

/** A whole message as `messages` events: how input and injected messages are shown. */
function wholeMessage(ns, node, role, id, text) {
  const ev = (data) => ({ method: 'messages', params: { namespace: ns, ...(node ? { node } : {}), data } });
  return [
    ev({ event: 'message-start', role, id }),
    ev({ event: 'content-block-start', index: 0, content: { type: 'text', text: '' } }),
    ev({ event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text } }),
    ev({ event: 'content-block-finish', index: 0, content: { type: 'text', text } }),
    ev({ event: 'message-finish', reason: 'stop' }),
  ];
}

/**
 * Runs the graph on the thread until the run is over: appends its events,
 * then its last root lifecycle event, then releases the thread. `input` may
 * be new input, a Command (resume) or null (continue from the checkpoint).
 */
export async function runGraph(w, ctl) {
  const { thread, graph, relay } = ctl;
  // The lease lapsed (this worker or Redis stalled past --lock-ms) and another worker may have the run:
  // the graph stops, and nothing more is appended (the relay's appends are fenced by the lock).
  const lose = () => {
    ctl.lost = true;
    if (!ctl.abort.signal.aborted) ctl.abort.abort(new Error('this worker lost the thread'));
  };
  const stopRenewing = keepLock(w, thread, ctl.runId, lose);
  // Its checkpoints, as its events, only while the lock is this worker's, and each after the events before it.
  w.saver.fence(thread, { regain: () => renewLock(w, thread, ctl.runId), settle: () => relay.settle() });
  let status = 'completed';
  let extra = {};
  let error = null;
  let head; // the thread's state after the run (none if it failed): its status, and run.finished's
  try {
    if (ctl.startError) throw ctl.startError;
    for (let input = ctl.input; ;) {
      ctl.control = new RunControl();
      try {
        const run = observe(graph, input, {
          ...(ctl.options ?? {}),
          configurable: { ...ctl.configurable, thread_id: thread },
          signal: ctl.abort.signal,
          control: ctl.control,
          durability: 'sync',
          ...(ctl.metadata ? { metadata: ctl.metadata } : {}),
        }, ctl.observe);
        for await (const ev of run) await relay.push(ev);
      } catch (e) {
        if (!isGraphDrained(e) || !ctl.injects.length) throw e;
      }
      delete ctl.configurable.checkpoint_id; // a fork starts there once; it continues from its own head
      if (!ctl.injects.length) break;
      input = await applyInjects(ctl);
    }
    // Read once the run's writes are all over (a REST run's are tracked by the saver).
    await w.saver.settle(thread);
    head = await graph.getState({ configurable: { thread_id: thread } });
    // A REST run stopped by interrupt_before/after has no interrupt but more to do: interrupted too.
    status = pendingInterrupts(head).length || (ctl.rest && head.next?.length) ? 'interrupted' : 'completed';
  } catch (e) {
    status = 'failed';
    // The relay may have stopped the run (an event too large to carry): the graph stops too.
    if (!ctl.abort.signal.aborted) ctl.abort.abort(e);
    if (ctl.lost || isFenced(e)) {
      lose();
    } else if (ctl.cancelled && ctl.rest) {
      relay.closeOpen('the run was cancelled', 'cancelled');
      status = 'interrupted';
      extra = { cancelled: true, action: ctl.cancelAction ?? 'interrupt' };
    } else if (ctl.cancelled) {
      relay.closeOpen('the run was cancelled', 'cancelled');
      extra = { error: 'cancelled', cancelled: true };
    } else {
      relay.closeOpen(e.message, 'run_failed');
      relay.failure(e);
      extra = { error: String(e.message ?? e) };
      error = e;
      w.log('warn', 'run failed', { thread, run_id: ctl.runId, error: String(e.message ?? e) });
    }
  } finally {
    stopRenewing();
  }
  if (ctl.lost) return lostRun(w, ctl);
  // Over from here: what a client sends once it has seen the run's end must
  // find no run (run.cancel, input.inject: no_such_run) or wait for it to be
  // gone (run.start), not reach a run that is only tidying up.
  ctl.over = true;
  ctl.settled = new Promise((resolve) => { ctl.settle = resolve; });
  try {
    // A REST run's record is over before its stream says so: a client whose
    // stream just ended finds the run finished (else the SDK reconnects, to
    // a stateless run's records deleted meanwhile).
    if (ctl.rest || ctl.recorded) await finishRestRun(w, ctl, status, error, head);
    try {
      await relay.end(status, extra);
    } catch (e) {
      if (!isFenced(e)) throw e;
      ctl.lost = true; // its end is the taker's to append
    }
    // A stateless run's thread (temporary, on_completion "delete"): its checkpoints go with it.
    // A run whose end was fenced: its record is the taker's now.
    if (ctl.lost) {
      w.log('warn', 'lost the thread\'s lock at the run\'s end: the end is the taker\'s', { thread, run_id: ctl.runId });
    } else if (ctl.dispose) {
      await Promise.all([w.saver.deleteThread(thread), w.cmd.del(keys.run(thread), keys.undo(thread))]);
    } else {
      await recordDone(w, thread);
    }
  } finally {
    w.running.delete(thread);
    await release(w, thread);
    w.saver.unfence(thread, { lost: ctl.lost });
    ctl.settle();
  }
  w.log('info', 'run over', { thread, run_id: ctl.runId, status });
  return ctl.lost ? KEEP : undefined;
}

/**
 * A run whose thread this worker lost (runGraph): it stops here, leaving the
 * run, its record and its command's entry (not acknowledged: KEEP) to the
 * worker that took it over — or, if nobody has yet, to the first that
 * claims the entry: the record says nobody runs it any more.
 */
async function lostRun(w, ctl) {
  ctl.over = true;
  ctl.settled = Promise.resolve();
  ctl.settle = () => {};
  w.running.delete(ctl.thread);
  w.saver.unfence(ctl.thread, { lost: true });
  await moveRun(w, ctl.thread, ctl.runId, w.name, '').catch(() => {});
  w.log('warn', 'lost the thread\'s lock (a stall longer than --lock-ms): the run is left to the worker that takes it over',
    { thread: ctl.thread, run_id: ctl.runId });
  return KEEP;
}

/**
 * Messages injected into a running run, applied at a step boundary: the
 * run was drained; they join the state as if written by the node that
 * wrote the head, so what comes next is unchanged. Returns the input to
 * go on with.
 */
async function applyInjects(ctl) {
  const cfg = { configurable: { thread_id: ctl.thread } };
  const messages = ctl.injects.splice(0);
  const head = await ctl.graph.getState(cfg);
  if (!head.next?.length) return { messages }; // the run had finished: the messages start the next turn
  let asNode;
  for await (const s of ctl.graph.getStateHistory(cfg, { limit: 2 })) if (s !== undefined && s.config.configurable.checkpoint_id !== head.config.configurable.checkpoint_id) asNode = s.next?.[0];
  const next = await ctl.graph.updateState(head.config, { messages }, asNode);
  ctl.configurable = { ...ctl.configurable, ...next.configurable };
  delete ctl.configurable.thread_id;
  return null;
}

/**
 * The common start of every run: the thread is claimed (claimThread);
 * records the run (so a worker that takes over after a crash can go on
 * with it), appends its first events, answers, then runs it.
 */
export async function startRun(w, entry, { thread, assistant, input, configurable = {}, metadata, answered = [], humans = [], result = (r) => r }) {
  // The graph's system assistant's config and context (graph defaults) under the command's own.
  const served = w.graphs.get(assistant);
  const { context, ...defaults } = served.defaults;
  configurable = { ...(defaults.configurable ?? {}), ...configurable };
  const graph = await served.build({ ...defaults, configurable, ...(metadata ? { metadata } : {}) });
  const runId = randomUUID();
  await recordRun(w, { thread, entry, runId, assistant, input, configurable });
  const recorded = await adopt(w, entry, { thread, runId, assistant, configurable, metadata });
  const relay = fencedRelay(w, { thread, assistant, runId, graph });
  relay.started(recorded ? { runId } : {}); // a recorded run is found by its id, as a REST run
  if (answered.length) relay.raw({ method: 'input.answered', params: { namespace: [], data: { interrupt_ids: answered } } });
  for (const h of humans) for (const ev of wholeMessage([], undefined, 'human', h.id, h.content)) relay.raw(ev);
  const ctl = { thread, graph, assistant, runId, relay, input, configurable: { ...configurable }, metadata, recorded, injects: [], abort: new AbortController(),
    ...(context !== undefined ? { options: { context } } : {}) };
  w.running.set(thread, ctl);
  try {
    await relay.drain();
  } catch (e) {
    w.running.delete(thread);
    await release(w, thread);
    throw e;
  }
  await success(w, entry, result({ run_id: runId }));
  return runGraph(w, ctl);
}

/**
 * A run started over the protocol on a thread the REST API knows is one of
 * its runs there too (run.adopted: runs.get, runs.join and runs.list see
 * it, as the reference server's runs.create makes every run). Its id is the
 * assistant the command named (the graph's system assistant for a graph
 * id). Returns whether it was recorded; the thread's run record says so for
 * a worker that takes the run over.
 */
async function adopt(w, entry, { thread, runId, assistant, configurable, metadata }) {
  const named = entry.assistantId;
  const assistantId = typeof named === 'string' && named !== assistant ? named : await systemAssistantId(assistant);
  const afterSeq = Number(await w.cmd.hget(keys.meta(thread), 'seq')) || 0;
  const got = await restCall(w, 'run.adopted', { run_id: runId, thread_id: thread, assistant_id: assistantId, graph_id: assistant,
    after_seq: afterSeq, kwargs: { config: { configurable }, ...(metadata ? { metadata } : {}) } });
  if (got.status !== 200 || got.body === 'null') return false;
  await w.cmd.hset(keys.run(thread), 'recorded', '1');
  return true;
}

/**
 * The graph a command on a thread reads or updates: a graph factory is
 * built with the configurable of the thread's last run here (its record's),
 * as the reference builds it with the thread's config.
 */
export async function threadGraph(w, assistant, thread) {
  const served = w.graphs.get(assistant);
  if (!served.isFactory) return served.build();
  let configurable = {};
  try {
    configurable = JSON.parse(await w.cmd.hget(keys.run(thread), 'configurable')) ?? {};
  } catch { /* no run yet: the factory's default */ }
  return served.build({ configurable });
}

/** An injected message: shown whole at once, applied at the next step boundary. */
export function inject(ctl, message) {
  const m = { role: message.role === 'system' ? 'system' : 'user', content: String(message.content ?? ''), id: `msg-${randomUUID()}` };
  if (message.name) m.name = message.name;
  for (const ev of wholeMessage([], 'input', m.role === 'user' ? 'human' : 'system', m.id, m.content)) ctl.relay.raw(ev);
  ctl.injects.push(m);
  ctl.control?.requestDrain('inject');
}

/** Cancels a run this worker runs (action: a REST cancel's interrupt or rollback). */
export function cancelRun(ctl, action) {
  ctl.cancelled = true;
  if (action) ctl.cancelAction = action;
  ctl.abort.abort(new Error('cancelled'));
}
