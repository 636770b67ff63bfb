// The commands (protocol/README.md, "Worker contract", "The LangGraph
// worker", "REST runs and state"): handle() turns one stream entry into a
// command — or a run to take over, for an entry claimed from a dead worker
// — and runs its method's handler; the handler table has one function per
// method. A handler answers through answers.js (or throws a ProtocolError,
// answered here) and returns KEEP to leave its entry pending; loops.js
// acknowledges the entry once handle() is done.
//
// Every function here takes the worker's shared state `w` (worker.js) first.
import { Command, isUnknownInterruptError } from '@langchain/langgraph';
import { KEEP, ProtocolError, answer, success } from './answers.js';
import { keys } from './keys.js';
import { claimThread, forward, markCancel, release } from './lock.js';
import { plain } from './relay.js';
import { HISTORY_MAX, emptyState, threadState, toCommand, truthy } from './rest.js';
import { startRestRun } from './rest-runs.js';
import { cancelRun, inject, pendingInterrupts, runGraph, startRun, threadGraph, withIds } from './runs.js';
import { runLeftBy, takeOver } from './takeover.js';

/** The checkpoint a REST state command names ({checkpoint_id}, {checkpoint: {…}}), as configurable. */
function checkpointParams(thread, p) {
  const c = { thread_id: thread, checkpoint_ns: '' };
  if (p.checkpoint != null) {
    if (typeof p.checkpoint !== 'object' || Array.isArray(p.checkpoint)) throw new ProtocolError('invalid_argument', 'checkpoint must be an object');
    for (const k of ['checkpoint_id', 'checkpoint_ns']) {
      const v = p.checkpoint[k];
      if (v == null) continue;
      if (typeof v !== 'string') throw new ProtocolError('invalid_argument', `checkpoint.${k} must be a string`);
      c[k] = v;
    }
    if (p.checkpoint.checkpoint_map != null) c.checkpoint_map = p.checkpoint.checkpoint_map;
  }
  if (p.checkpoint_id != null) {
    if (typeof p.checkpoint_id !== 'string') throw new ProtocolError('invalid_argument', 'checkpoint_id must be a string');
    c.checkpoint_id = p.checkpoint_id;
  }
  if (c.checkpoint_id === '') delete c.checkpoint_id;
  return c;
}

/**
 * Takes the thread for a state update, refused while a REST run waits here
 * to start on it (its after_seconds) or any run holds it: the reference
 * refuses updates while a run is pending or running.
 */
async function claimForUpdate(w, thread) {
  for (const wait of w.waiting.values()) {
    if (wait.thread === thread) throw new ProtocolError('invalid_argument', `run "${wait.runId}" is pending on thread "${thread}"; wait for it to end`);
  }
  await claimThread(w, thread);
}

const noCheckpoint = (c) => new ProtocolError('no_such_checkpoint',
  `thread "${c.thread_id}" has no checkpoint "${c.checkpoint_id}"${c.checkpoint_ns ? ` at namespace "${c.checkpoint_ns}"` : ''}`);

/* ---- the REST API's commands (issue 17) ------------------------------------------------------- */

/** rest.run: a REST run (rest-runs.js), run to its end; acknowledged then. */
async function restRun(w, entry, p) {
  const ctl = await startRestRun(w, entry, p);
  if (ctl === KEEP || !ctl) return ctl;
  return runGraph(w, ctl); // KEEP when the thread was lost to a worker that took the run over
}

/** rest.cancel: no answer; the run waiting here, running here, or (through its record and its lock's owner) elsewhere. */
async function restCancel(w, entry, p) {
  const thread = entry.thread;
  const action = p.action ?? 'interrupt';
  if (typeof p.run_id !== 'string' || (action !== 'interrupt' && action !== 'rollback')) {
    w.log('warn', 'rest.cancel needs a run_id and an action interrupt or rollback', { thread, params: JSON.stringify(p).slice(0, 200) });
    return;
  }
  const waiting = w.waiting.get(p.run_id);
  if (waiting) {
    waiting.cancelAction = action;
    return;
  }
  const local = w.running.get(thread);
  if (local?.runId === p.run_id) {
    cancelRun(local, action);
    return;
  }
  // Kept in the run's record, for a worker that takes the run over; then told to the lock's owner.
  const marked = await markCancel(w, thread, p.run_id, action);
  if (await forward(w, thread, { op: 'cancel', run_id: p.run_id, action })) return;
  if (marked < 0) w.log('info', 'rest.cancel for a run that is not running', { thread, run_id: p.run_id });
}

async function restStateGet(w, entry, p) {
  const graph = await threadGraph(w, entry.assistant, entry.thread);
  const configurable = checkpointParams(entry.thread, p);
  if (!(await w.saver.getTuple({ configurable }))) {
    if (configurable.checkpoint_id) throw noCheckpoint(configurable);
    return success(w, entry, emptyState());
  }
  const snap = await graph.getState({ configurable }, { subgraphs: truthy(p.subgraphs) });
  return success(w, entry, threadState(snap));
}

async function restStateUpdate(w, entry, p) {
  const thread = entry.thread;
  const graph = await threadGraph(w, entry.assistant, entry.thread);
  if (p.values != null && typeof p.values !== 'object') throw new ProtocolError('invalid_argument', 'values must be an object, a list of objects or null');
  if (p.as_node != null && typeof p.as_node !== 'string') throw new ProtocolError('invalid_argument', 'as_node must be a string');
  const configurable = checkpointParams(thread, p);
  await claimForUpdate(w, thread);
  try {
    if (configurable.checkpoint_id && !(await w.saver.getTuple({ configurable }))) throw noCheckpoint(configurable);
    let next;
    try {
      next = await graph.updateState({ configurable }, p.values ?? null, p.as_node ?? undefined);
    } catch (e) {
      if (/InvalidUpdate|Value|Empty/.test(e.name ?? '')) throw new ProtocolError('invalid_argument', `cannot update the state: ${e.message}`);
      throw e;
    }
    const c = next.configurable ?? {};
    return success(w, entry, { checkpoint: { thread_id: thread, checkpoint_ns: c.checkpoint_ns ?? '', checkpoint_id: c.checkpoint_id,
      ...(c.checkpoint_map ? { checkpoint_map: plain(c.checkpoint_map) } : {}) } });
  } finally {
    await release(w, thread);
  }
}

/**
 * rest.state.bulk: a thread's state written as consecutive supersteps
 * (`supersteps: [{updates: [{values, command, as_node}, …]}, …]`, what
 * threads.create's `supersteps` asks), one checkpoint per superstep, as
 * LangGraph's bulkUpdateState writes them. Answers the last checkpoint.
 */
async function restStateBulk(w, entry, p) {
  const thread = entry.thread;
  const steps = p.supersteps;
  if (!Array.isArray(steps) || !steps.length) throw new ProtocolError('invalid_argument', 'supersteps must be a non-empty list');
  const supersteps = steps.map((s, i) => {
    if (!s || !Array.isArray(s.updates) || !s.updates.length) {
      throw new ProtocolError('invalid_argument', `supersteps[${i}].updates must be a non-empty list`);
    }
    return { updates: s.updates.map((u, j) => {
      const where = `supersteps[${i}].updates[${j}]`;
      if (!u || typeof u !== 'object') throw new ProtocolError('invalid_argument', `${where} must be an object`);
      const asNode = u.as_node ?? u.asNode;
      if (asNode != null && typeof asNode !== 'string') throw new ProtocolError('invalid_argument', `${where}.as_node must be a string`);
      let values = u.values;
      if (u.command != null) {
        try {
          values = toCommand(u.command);
        } catch (e) {
          throw new ProtocolError('invalid_argument', `${where}: ${e.message}`);
        }
      }
      return { values, asNode: asNode ?? undefined };
    }) };
  });
  const graph = await threadGraph(w, entry.assistant, thread);
  await claimForUpdate(w, thread);
  try {
    let next;
    try {
      next = await graph.bulkUpdateState({ configurable: { thread_id: thread, checkpoint_ns: '' } }, supersteps);
    } catch (e) {
      if (/InvalidUpdate|Value|Empty/.test(e.name ?? '')) throw new ProtocolError('invalid_argument', `cannot update the state: ${e.message}`);
      throw e;
    }
    const c = next.configurable ?? {};
    return success(w, entry, { checkpoint: { thread_id: thread, checkpoint_ns: c.checkpoint_ns ?? '', checkpoint_id: c.checkpoint_id } });
  } finally {
    await release(w, thread);
  }
}

async function restHistory(w, entry, p) {
  const graph = await threadGraph(w, entry.assistant, entry.thread);
  const limit = p.limit == null ? 10 : Number(p.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > HISTORY_MAX) {
    throw new ProtocolError('invalid_argument', `limit must be an integer from 1 to ${HISTORY_MAX} (got ${JSON.stringify(p.limit)})`);
  }
  let before;
  if (typeof p.before === 'string' && p.before) before = { configurable: { checkpoint_id: p.before } };
  else if (p.before != null && typeof p.before === 'object') {
    const id = p.before.configurable?.checkpoint_id ?? p.before.checkpoint_id;
    if (typeof id !== 'string') throw new ProtocolError('invalid_argument', 'before must be a checkpoint id or a config naming configurable.checkpoint_id');
    before = { configurable: { checkpoint_id: id } };
  } else if (p.before != null) throw new ProtocolError('invalid_argument', 'before must be a checkpoint id or a config');
  if (p.metadata != null && (typeof p.metadata !== 'object' || Array.isArray(p.metadata))) throw new ProtocolError('invalid_argument', 'metadata must be an object');
  const configurable = checkpointParams(entry.thread, p);
  const states = [];
  for await (const s of graph.getStateHistory({ configurable }, { limit, ...(before ? { before } : {}), ...(p.metadata ? { filter: p.metadata } : {}) })) {
    states.push(threadState(s));
  }
  return success(w, entry, states);
}

async function restCopy(w, entry, p) {
  const to = p.new_thread_id;
  if (typeof to !== 'string' || !/^[A-Za-z0-9._:-]{1,128}$/.test(to)) {
    throw new ProtocolError('invalid_argument', 'new_thread_id must be a thread id ([A-Za-z0-9._:-]{1,128})');
  }
  if (to === entry.thread) throw new ProtocolError('invalid_argument', 'new_thread_id is the thread itself');
  const from = w.saver.threadKeys(entry.thread);
  const into = w.saver.threadKeys(to);
  const names = Object.keys(from);
  // One consistent read of the five keys (one slot), one write of the copies (the other's).
  const read = w.cmd.multi();
  for (const k of names) read.dumpBuffer(from[k]).pttl(from[k]);
  const got = (await read.exec()).map(([err, v]) => {
    if (err) throw err;
    return v;
  });
  const write = w.cmd.multi();
  names.forEach((k, i) => {
    const [dump, ttl] = [got[2 * i], got[2 * i + 1]];
    if (dump === null) write.del(into[k]);
    else write.restore(into[k], ttl > 0 ? ttl : 0, dump, 'REPLACE');
  });
  for (const [err] of await write.exec()) if (err) throw err;
  return success(w, entry, {});
}

/* ---- the runtime commands ---------------------------------------------------------------------- */

async function runStart(w, entry, p) {
  const thread = entry.thread;
  const message = typeof p.input === 'string' ? { role: 'user', content: p.input } : p.input?.messages?.at?.(-1) ?? p.input;
  let local = w.running.get(thread);
  if (local?.over) { // its end is out: a new run, once this one is gone
    await local.settled;
    local = w.running.get(thread);
  }
  if (local) { // CDDL 4a: input for an active run is injected into it
    inject(local, message ?? {});
    return success(w, entry, { run_id: local.runId });
  }
  if (await forward(w, thread, { op: 'inject', message })) {
    return success(w, entry, { run_id: await w.cmd.hget(keys.run(thread), 'run_id') });
  }
  await claimThread(w, thread);
  try {
    const graph = await threadGraph(w, entry.assistant, entry.thread);
    const configurable = { ...(p.config?.configurable ?? {}) };
    delete configurable.thread_id;
    const cfg = { configurable: { thread_id: thread } };
    if (configurable.checkpoint_id) {
      const found = await w.saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '', checkpoint_id: configurable.checkpoint_id } });
      if (!found) throw new ProtocolError('no_such_checkpoint', `thread "${thread}" has no checkpoint "${configurable.checkpoint_id}"`);
      const { input, humans } = withIds(p.input ?? null);
      return await startRun(w, entry, { thread, assistant: entry.assistant, input, configurable, metadata: p.metadata, humans });
    }
    const pending = pendingInterrupts(await graph.getState(cfg));
    if (pending.length) { // an interrupted run: the input answers it
      const resume = Object.fromEntries(pending.map((i) => [i.id, p.input]));
      return await startRun(w, entry, { thread, assistant: entry.assistant, input: new Command({ resume }), configurable, metadata: p.metadata, answered: pending.map((i) => i.id) });
    }
    const { input, humans } = withIds(p.input);
    return await startRun(w, entry, { thread, assistant: entry.assistant, input, configurable, metadata: p.metadata, humans });
  } catch (e) {
    if (!w.running.has(thread)) await release(w, thread);
    throw e;
  }
}

async function inputRespond(w, entry, p) {
  const thread = entry.thread;
  const responses = p.responses ?? [{ namespace: p.namespace, interrupt_id: p.interrupt_id, response: p.response }];
  await claimThread(w, thread);
  try {
    const assistant = entry.assistant;
    const graph = await threadGraph(w, assistant, thread);
    const pending = pendingInterrupts(await graph.getState({ configurable: { thread_id: thread } }));
    for (const r of responses) {
      if (!pending.some((i) => i.id === r.interrupt_id)) {
        throw new ProtocolError('no_such_interrupt', `no interrupt "${r.interrupt_id}" is waiting for an answer on thread "${thread}"`);
      }
    }
    const resume = Object.fromEntries(responses.map((r) => [r.interrupt_id, r.response]));
    const input = new Command({ resume, ...(p.update ? { update: p.update } : {}), ...(p.goto ? { goto: p.goto } : {}) });
    return await startRun(w, entry, { thread, assistant, input, configurable: { ...(p.config?.configurable ?? {}) }, metadata: p.metadata,
      answered: responses.map((r) => r.interrupt_id), result: () => ({}) });
  } catch (e) {
    if (!w.running.has(thread)) await release(w, thread);
    if (isUnknownInterruptError(e)) throw new ProtocolError('no_such_interrupt', e.message);
    throw e;
  }
}

async function inputInject(w, entry, p) {
  const local = w.running.get(entry.thread);
  if (local && !local.over) inject(local, p.message ?? {});
  else if (!(await forward(w, entry.thread, { op: 'inject', message: p.message }))) {
    throw new ProtocolError('no_such_run', `no run is active on thread "${entry.thread}" to inject into`);
  }
  return success(w, entry, {});
}

async function runCancel(w, entry) {
  const local = w.running.get(entry.thread);
  if (local && !local.over) {
    cancelRun(local);
  } else if (!(await forward(w, entry.thread, { op: 'cancel' }))) {
    throw new ProtocolError('no_such_run', `no run is active on thread "${entry.thread}"`);
  }
  return success(w, entry, {});
}

async function stateGet(w, entry, p) {
  const ns = (p.namespace ?? []).join('|');
  const graph = await threadGraph(w, entry.assistant, entry.thread);
  const cfg = { configurable: { thread_id: entry.thread, checkpoint_ns: ns } };
  if (!(await w.saver.getTuple(cfg))) {
    if (ns) throw new ProtocolError('no_such_namespace', `thread "${entry.thread}" has no state at namespace ${JSON.stringify(p.namespace)}`);
    return success(w, entry, { values: {} });
  }
  const st = await graph.getState(cfg);
  let values = plain(st.values) ?? {};
  if (Array.isArray(p.keys)) values = Object.fromEntries(p.keys.filter((k) => k in values).map((k) => [k, values[k]]));
  return success(w, entry, { values, checkpoint: { id: st.config.configurable.checkpoint_id, ns } });
}

async function stateListCheckpoints(w, entry, p) {
  const graph = await threadGraph(w, entry.assistant, entry.thread);
  const limit = Math.min(Math.max(Number.isInteger(p.limit) ? p.limit : 20, 1), 200);
  const cfg = { configurable: { thread_id: entry.thread, checkpoint_ns: (p.namespace ?? []).join('|') } };
  const page = [];
  // One more than asked: a checkpoint's node is what its parent had next.
  for await (const s of graph.getStateHistory(cfg, { limit: limit + 1, ...(p.before ? { before: { configurable: { checkpoint_id: p.before } } } : {}) })) page.push(s);
  const checkpoints = page.slice(0, limit).map((s, i) => {
    const c = { id: s.config.configurable.checkpoint_id, timestamp: s.createdAt, step: Math.max(0, s.metadata?.step ?? 0), metadata: plain(s.metadata) };
    const parent = page[i + 1];
    if (parent?.next?.length) c.node_name = parent.next.join(',');
    else if (s.metadata?.source === 'input') c.node_name = '__input__';
    return c;
  });
  return success(w, entry, { checkpoints });
}

async function stateFork(w, entry, p) {
  const thread = entry.thread;
  await claimThread(w, thread);
  try {
    const found = await w.saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '', checkpoint_id: p.checkpoint_id } });
    if (!found) throw new ProtocolError('no_such_checkpoint', `thread "${thread}" has no checkpoint "${p.checkpoint_id}"`);
    const configurable = { ...(p.config?.configurable ?? {}), checkpoint_id: p.checkpoint_id };
    delete configurable.thread_id;
    const { input, humans } = withIds(p.input ?? null);
    // LangGraph forks on the same thread: the fork becomes the thread's head.
    return await startRun(w, entry, { thread, assistant: entry.assistant, input, configurable, humans, result: (r) => ({ ...r, thread_id: thread }) });
  } catch (e) {
    if (!w.running.has(thread)) await release(w, thread);
    throw e;
  }
}

/** method → handler(w, entry, params). */
const handlers = {
  'rest.run': restRun,
  'rest.cancel': restCancel,
  'rest.state.get': restStateGet,
  'rest.state.update': restStateUpdate,
  'rest.state.bulk': restStateBulk,
  'rest.history': restHistory,
  'rest.copy': restCopy,
  'run.start': runStart,
  'input.respond': inputRespond,
  'input.inject': inputInject,
  'run.cancel': runCancel,
  'state.get': stateGet,
  'state.listCheckpoints': stateListCheckpoints,
  'state.fork': stateFork,
};

/**
 * Handles one entry of a command stream (fields: [name, value, …]);
 * claimed: taken from a dead worker. Returns KEEP to leave it pending.
 */
export async function handle(w, stream, id, fields, claimed) {
  const f = {};
  for (let i = 0; i + 1 < (fields?.length ?? 0); i += 2) f[fields[i]] = fields[i + 1];
  const entry = { key: `${stream} ${id}`, thread: f.thread, method: f.method, corr: f.corr, reply: f.reply,
    assistant: w.assistantOf.get(stream) ?? null };
  if (!entry.thread || !entry.method) return; // deleted or malformed: acknowledged below
  if (claimed) {
    const record = await runLeftBy(w, entry);
    if (record) return record.status === 'running' && w.graphs.has(record.assistant) ? takeOver(w, entry, record) : undefined;
  }
  if (Number(f.deadline) && Date.now() > Number(f.deadline)) return; // the gateway gave up
  let params;
  try {
    params = JSON.parse(f.params || '{}');
  } catch {
    return answer(w, entry, { type: 'error', error: 'invalid_argument', message: 'params is not JSON' });
  }
  if (typeof params.assistant_id === 'string') entry.assistantId = params.assistant_id; // the assistant, where entry.assistant is its graph
  if (!entry.assistant) { // a wildcard stream: serve it only with the graph the command names
    entry.assistant = params.assistant_id ?? await w.cmd.hget(keys.meta(entry.thread), 'assistant_id');
  }
  const h = handlers[entry.method];
  if (!h) return answer(w, entry, { type: 'error', error: 'unknown_command', message: `this worker does not handle ${entry.method}` });
  if (!w.graphs.has(entry.assistant)) {
    return answer(w, entry, { type: 'error', error: 'invalid_argument', message: `this worker does not serve assistant "${entry.assistant}"` });
  }
  try {
    return await h(w, entry, params);
  } catch (e) {
    if (e instanceof ProtocolError) return answer(w, entry, { type: 'error', error: e.code, message: e.message });
    w.log('error', 'command failed', { thread: entry.thread, method: entry.method, error: String(e.stack ?? e) });
    return answer(w, entry, { type: 'error', error: 'unknown_error', message: String(e.message ?? e) });
  }
}
