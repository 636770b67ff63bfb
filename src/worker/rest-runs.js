// REST runs (issue 17; protocol/README.md, "REST runs and state"): a
// `rest.run` command, handed over by threadcast_rest, becomes a graph run
// here — how its params become LangGraph's input and options (restPlan),
// how it waits for its thread and starts (startRestRun; runs.js runs it),
// and what the worker reports of it to the REST records' function
// (restCall: run.started, run.finished with the run's outcome, after a
// `rollback` cancel has taken back what it wrote). The shapes the REST API
// answers with are rest.js's; the REST commands (rest.cancel, rest.state.*,
// …) are commands.js's.
//
// Every function here takes the worker's shared state `w` (worker.js) first.
import { KEEP } from './answers.js';
import { keys } from './keys.js';
import { acquire, fencedRelay, recordDone, recordRun, release } from './lock.js';
import { Relay, plain } from './relay.js';
import { InputError, toCommand, truthy } from './rest.js';
import { assistantLayer, mergeRun, streamMetadata } from './config.js';

/** FCALL threadcast_rest <op>: the REST records' function. Answers {status, body}; never throws. */
export async function restCall(w, op, args) {
  try {
    const r = await w.cmd.call('FCALL', 'threadcast_rest', 1, keys.rest, op, JSON.stringify(args));
    const status = Number(Array.isArray(r) ? r[0] : NaN);
    if (!(status < 400)) w.log('warn', `threadcast_rest ${op} refused`, { run_id: args.run_id, status, body: String(Array.isArray(r) ? r[1] : r).slice(0, 300) });
    return { status, body: Array.isArray(r) ? r[1] : null };
  } catch (e) {
    w.log('warn', `threadcast_rest ${op} failed`, { run_id: args.run_id, error: e.message });
    return { status: 0, body: null };
  }
}

/**
 * run.finished's arguments for a REST run that is over: its status
 * (success, error, interrupted), the error, the thread's values and
 * pending interrupts. A `rollback` cancel first takes back every
 * checkpoint and write the run made (its undo journal). head: the thread's
 * state runGraph read after the run, reported as it is unless a rollback
 * changed it (read here when absent: the run failed).
 */
async function restOutcome(w, ctl, status, error, head) {
  const out = { run_id: ctl.runId };
  try {
    await w.saver.settle(ctl.thread);
    if (ctl.cancelled && ctl.cancelAction === 'rollback') {
      head = undefined; // read again once taken back (or half taken back, if the undo fails)
      const n = await w.saver.undo(ctl.thread);
      out.rollback = true;
      w.log('info', 'run rolled back', { thread: ctl.thread, run_id: ctl.runId, checkpoints: n });
    } else {
      await w.cmd.del(keys.undo(ctl.thread));
    }
  } catch (e) {
    w.log('warn', 'rollback failed', { thread: ctl.thread, run_id: ctl.runId, error: String(e.message ?? e) });
  }
  if (ctl.cancelled) out.status = 'interrupted';
  // A graph that stops at an interrupt (or interrupt_before/after) has run
  // successfully: its thread is "interrupted" (interrupts, next), not the run.
  else out.status = status === 'failed' ? 'error' : 'success';
  if (error) out.error = { error: error.name && error.name !== 'Error' ? error.name : 'Error', message: String(error.message ?? error) };
  if (!ctl.graph) return out; // its graph could not be built: nothing ran
  try {
    const st = head ?? await ctl.graph.getState({ configurable: { thread_id: ctl.thread } });
    out.values = plain(st.values) ?? {};
    const interrupts = {};
    for (const t of st.tasks ?? []) {
      if (t.result === undefined && t.interrupts?.length) interrupts[t.id] = t.interrupts.map((i) => plain({ id: i.id, value: i.value }));
    }
    out.interrupts = interrupts;
    // A failed run's nodes still to run are not a stop (interrupt_before/after): its thread is "error".
    if (status !== 'failed') out.next = [...(st.next ?? [])];
  } catch (e) {
    w.log('warn', 'cannot read the state after a run', { thread: ctl.thread, run_id: ctl.runId, error: String(e.message ?? e) });
  }
  return out;
}

/** Reports run.finished for a REST run that is over (status, error and head as runGraph saw them). */
export const finishRestRun = async (w, ctl, status, error, head) => restCall(w, 'run.finished', await restOutcome(w, ctl, status, error, head));

/**
 * How a REST run's params become LangGraph's input and options: config,
 * context and metadata merged with the assistant's and the thread's
 * (config.js), the start checkpoint, interrupts, recursion limit, tags.
 * Returns { input, config (what a graph factory is called with),
 * configurable, options, metadata (the stream's) }.
 */
async function restPlan(w, thread, assistant, runId, p) {
  const input = p.command != null ? toCommand(p.command) : (p.input ?? null);
  const config = p.config ?? {};
  if (typeof config !== 'object' || Array.isArray(config)) throw new InputError('config must be an object');
  if (config.configurable != null && (typeof config.configurable !== 'object' || Array.isArray(config.configurable))) {
    throw new InputError('config.configurable must be an object');
  }
  if (p.context != null && typeof p.context !== 'object') throw new InputError('context must be an object');
  const checkpointId = p.checkpoint_id ?? config.configurable?.checkpoint_id;
  const layer = await assistantLayer(p, assistant, w.graphs.get(assistant).defaults);
  const threadLayer = p.thread && typeof p.thread === 'object' ? p.thread : {};
  const merged = mergeRun(layer, threadLayer, { config, context: p.context, metadata: p.metadata },
    { run_id: runId, thread_id: thread, graph_id: assistant, assistant_id: typeof p.assistant_id === 'string' ? p.assistant_id : assistant });
  const { configurable } = merged.config;
  delete configurable.checkpoint_id;
  if (checkpointId != null) {
    if (typeof checkpointId !== 'string' || !checkpointId) throw new InputError('checkpoint_id must be a non-empty string');
    const found = await w.saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '', checkpoint_id: checkpointId } });
    if (!found) throw new InputError(`thread "${thread}" has no checkpoint "${checkpointId}"`);
    configurable.checkpoint_id = checkpointId;
  }
  const options = { context: merged.context };
  for (const [k, opt] of [['interrupt_before', 'interruptBefore'], ['interrupt_after', 'interruptAfter']]) {
    const v = p[k];
    if (v == null) continue;
    if (v !== '*' && !(Array.isArray(v) && v.every((n) => typeof n === 'string'))) throw new InputError(`${k} must be "*" or a list of node names`);
    options[opt] = v;
  }
  const limit = merged.config.recursion_limit;
  if (limit != null) {
    if (!Number.isInteger(limit) || limit < 1) throw new InputError('config.recursion_limit must be a positive integer');
    options.recursionLimit = limit;
  }
  if (Array.isArray(merged.config.tags)) options.tags = merged.config.tags.filter((t) => typeof t === 'string');
  return { input, config: merged.config, configurable, options, metadata: streamMetadata(merged.config.metadata) };
}

/**
 * How a REST run is observed (observe.js): the side events its stream modes
 * need — LangChain's callback events for "events", LangGraph's debug chunks
 * for "debug" and "checkpoints"; only runs that ask pay for them — and its
 * id as the graph's root run id (the callback events' run_id), as the Agent
 * Server gives it.
 */
function restObserve(p, runId) {
  const modes = Array.isArray(p.stream_mode) ? p.stream_mode : [p.stream_mode];
  return { events: modes.includes('events'), debug: modes.includes('debug') || modes.includes('checkpoints'), runId };
}

/**
 * A run asked to start `after_seconds` after it was created (params
 * after_seconds): waits until then, as the reference's queue does, unless
 * it is cancelled meanwhile (wait.cancelAction) or the worker closes.
 * Returns true to go on. The moment is the run record's created_at plus the
 * delay, on Redis' clock.
 */
async function waitAfterSeconds(w, thread, runId, p, wait) {
  const delay = Number(p.after_seconds);
  if (!(delay > 0)) return true;
  const got = await restCall(w, 'runs.get', { path: { thread_id: thread, run_id: runId } });
  const created = got.status === 200 ? Date.parse(JSON.parse(got.body).created_at) : NaN;
  const [sec, usec] = await w.cmd.time();
  const redisNow = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
  const until = Date.now() + ((Number.isFinite(created) ? created : redisNow) + delay * 1000 - redisNow);
  while (Date.now() < until) {
    if (w.closing || await cancelled(w, wait)) return false;
    await new Promise((r) => setTimeout(r, Math.min(250, until - Date.now())));
  }
  return true;
}

/**
 * A run cancelled before it started: reported interrupted (a rollback
 * deletes it; threadcast_rest may have finished it already), nothing of the
 * graph run. Its start and end are still appended — a root `started` of its
 * id, then `interrupted` {cancelled, action} — so run streams and waits that
 * joined it end as they do for any run; under the thread's lock (locked:
 * held already), so they never fall inside another run's events.
 */
async function cancelledBeforeStart(w, wait, assistant, locked = false) {
  await restCall(w, 'run.finished', { run_id: wait.runId, status: 'interrupted', ...(wait.cancelAction === 'rollback' ? { rollback: true } : {}) });
  if (!locked && !(await acquire(w, wait.thread, UNSTARTED_LOCK_WAIT_MS))) {
    w.log('warn', 'a run cancelled before it started: its end is not appended, the thread stays locked', { thread: wait.thread, run_id: wait.runId });
    return;
  }
  try {
    const relay = new Relay({ redis: w.cmd, thread: wait.thread, assistant, runId: wait.runId, log: w.log, appendOpts: ['ASSISTANT', assistant] });
    relay.started({ runId: wait.runId });
    await relay.end('interrupted', { cancelled: true, action: wait.cancelAction ?? 'interrupt' });
  } finally {
    if (!locked) await release(w, wait.thread);
  }
}

/** How long a run cancelled before it started waits for its thread to append its end. */
const UNSTARTED_LOCK_WAIT_MS = 30000;

/**
 * Whether a run that waits here (for its after_seconds, for its thread) is
 * cancelled: a rest.cancel this worker read, or one another worker read —
 * it finds no run to stop, but threadcast_rest marked the run's record
 * (`cancel`), which is read here.
 */
async function cancelled(w, wait) {
  wait.cancelAction ??= await w.cmd.hget(keys.restRun(wait.runId), 'cancel');
  return !!wait.cancelAction;
}

/**
 * The start of a REST run (rest.run): waits for its after_seconds, then for
 * the thread (runs never overlap; a rest.cancel meanwhile reports the run
 * interrupted; a closing worker leaves it to another), builds its graph
 * (a graph factory is called with the run's config), records
 * the run as run.start does (a worker that takes over after a crash goes on
 * with it), reports run.started, and appends the root `started` event with
 * runId = the REST run id. Returns the run's ctl for runGraph (which
 * reports run.finished), null when there is no run to run, or KEEP when
 * the worker is closing before the thread was free. Input that cannot run
 * (a bad command, an unknown checkpoint) or a graph that cannot be built
 * makes a run that fails at once.
 */
export async function startRestRun(w, entry, p) {
  const thread = entry.thread;
  const runId = typeof p.run_id === 'string' && p.run_id ? p.run_id : entry.corr;
  if (!runId) {
    w.log('warn', 'rest.run without a run_id, dropped', { thread });
    return null;
  }
  const assistant = entry.assistant;
  const wait = { runId, thread, cancelAction: null };
  w.waiting.set(runId, wait);
  try {
    const due = await waitAfterSeconds(w, thread, runId, p, wait);
    for (;;) {
      if (w.closing) return KEEP;
      if (await cancelled(w, wait)) {
        await cancelledBeforeStart(w, wait, assistant);
        return null;
      }
      if (due && !w.running.has(thread) && await acquire(w, thread)) break;
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    w.waiting.delete(runId);
  }
  let ctl;
  try {
    let plan;
    let startError = null;
    try {
      plan = await restPlan(w, thread, assistant, runId, p);
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      startError = e;
      plan = { input: null, config: {}, configurable: {}, options: {}, metadata: {} };
    }
    let graph = null;
    try {
      graph = await w.graphs.get(assistant).build(plan.config);
    } catch (e) { // a graph factory that throws: the run fails, visibly
      startError ??= e;
    }
    const dispose = truthy(p.temporary) && p.on_completion !== 'keep';
    const observe = restObserve(p, runId);
    await recordRun(w, { thread, entry, runId, assistant, input: plan.input, configurable: plan.configurable,
      rest: { options: plan.options, metadata: plan.metadata, config: { ...plan.config, configurable: undefined }, dispose, observe } });
    await w.cmd.hdel(keys.run(thread), 'cancel');
    await w.cmd.del(keys.undo(thread));
    const relay = fencedRelay(w, { thread, assistant, runId, graph });
    ctl = { thread, graph, assistant, runId, relay, input: plan.input, configurable: { ...plan.configurable }, metadata: plan.metadata,
      options: plan.options, observe, rest: true, dispose, startError, injects: [], abort: new AbortController() };
    w.running.set(thread, ctl);
    // A rest.cancel read between the lock and here found no run to stop (its mark in the record
    // stays): the run ends before it starts, as one cancelled while it waits.
    if (await cancelled(w, wait)) {
      w.running.delete(thread);
      await recordDone(w, thread);
      await cancelledBeforeStart(w, wait, assistant, true);
      await release(w, thread);
      return null;
    }
    const afterSeq = Number(await w.cmd.hget(keys.meta(thread), 'seq')) || 0;
    const started = await restCall(w, 'run.started', { run_id: runId, after_seq: afterSeq });
    if (started.status >= 400 && started.status < 500) { // deleted or cancelled before it could start
      w.log('info', 'REST run dropped: threadcast_rest refused run.started', { thread, run_id: runId, status: started.status });
      w.running.delete(thread);
      await recordDone(w, thread);
      // Cancelled meanwhile (threadcast_rest finished it): its end, as for any run cancelled before it started.
      if (started.status === 409) await cancelledBeforeStart(w, { ...wait, cancelAction: wait.cancelAction ?? 'interrupt' }, assistant, true);
      await release(w, thread);
      return null;
    }
    relay.started({ runId });
    await relay.drain();
  } catch (e) {
    w.running.delete(thread);
    await release(w, thread);
    throw e;
  }
  return ctl;
}
