// Takeover (protocol/README.md, "When a worker dies"): claiming what a dead
// worker left, and going on with the runs it was running.
//
// A worker acknowledges a run-starting command only when its run is over,
// so a worker killed mid-run leaves the entry pending in the group. Every
// heartbeat, claim() keeps the entries this worker has in hand from looking
// idle (XCLAIM of its own) and claims those idle for claimIdleMs (XAUTOCLAIM),
// which are handled again (commands.js' handle, `claimed`). A claimed entry
// that started the run its thread's record names, still `running`, is taken
// over (takeOver): once the dead worker's lock has lapsed, the run goes on
// with the same run id, from the last checkpoint — or from the start with
// the same input when no step had finished — after the messages the dead
// worker left open are closed with `worker_lost` errors.
//
// Idle entries and lapsed leases are measured on Redis' clock, which runs on
// while Redis itself is stalled (SIGSTOP, a slow fork, a long script) and
// nobody can beat or renew: when it wakes up, every worker's entries look
// idle at once. So the worker the record names is asked first: if it still
// counts as live — now, or a moment later, once what it sent during the
// stall has been read — it is running the run; it claims its entry back at
// its next heartbeat and takes its lapsed lease again (lock.js).
//
// Every function here takes the worker's shared state `w` (worker.js) first.
import { KEEP } from './answers.js';
import { GROUP, keys } from './keys.js';
import { acquire, fencedRelay, headOf, loadInput, moveRun, recordDone, release, workerLive } from './lock.js';
import { restCall } from './rest-runs.js';
import { closeMessage, openMessages } from './relay.js';
import { cancelRun, runGraph } from './runs.js';

/** Methods that start (or continue) a run: acknowledged when the run is over. */
const RUNS = new Set(['run.start', 'input.respond', 'state.fork', 'rest.run']);

/**
 * Claims entries for this worker: those in hand again (so they never look
 * idle, however long their runs), and those idle for claimIdleMs, each
 * handed to dispatch(stream, id, fields, true); deleted ones are
 * acknowledged.
 */
export async function claim(w, dispatch) {
  const mine = new Map();
  for (const { stream, id } of w.inflight.values()) mine.set(stream, [...(mine.get(stream) ?? []), id]);
  for (const [stream, ids] of mine) await w.cmd.xclaim(stream, GROUP, w.name, 0, ...ids, 'JUSTID');
  for (const stream of w.streams) {
    const [, entries] = await w.cmd.xautoclaim(stream, GROUP, w.name, w.claimIdleMs, '0-0', 'COUNT', 16);
    for (const [id, fields] of entries ?? []) {
      if (!fields) await w.cmd.xack(stream, GROUP, id);
      else dispatch(stream, id, fields, true);
    }
  }
}

/** How long after a first look a worker that did not count as live is looked at again. */
const LIVE_RECHECK_MS = 250;

/**
 * Whether worker `name` counts as live for the assistant's commands, now or
 * LIVE_RECHECK_MS later: right after a Redis stall, its heartbeat sent
 * during the stall may not have been read yet.
 */
async function stillLive(w, assistant, name) {
  if (await workerLive(w, assistant, name)) return true;
  await new Promise((r) => setTimeout(r, LIVE_RECHECK_MS));
  return workerLive(w, assistant, name);
}

/** The record of the run a claimed entry started (its thread's, if it names that entry), else null. */
export async function runLeftBy(w, entry) {
  if (!RUNS.has(entry.method)) return null;
  const record = await w.cmd.hgetall(keys.run(entry.thread));
  return record.entry === entry.key ? record : null;
}

/**
 * A run-starting command claimed from a worker that died: its run goes on
 * from the last checkpoint (or from the start, when none was written).
 * What the client sees is in protocol/README.md ("When a worker dies").
 */
export async function takeOver(w, entry, record) {
  const thread = entry.thread;
  const holder = record.worker ?? '';
  if (holder && holder !== w.name && await stillLive(w, record.assistant, holder)) {
    w.log('info', 'a run claimed from a live worker is left to it', { thread, run_id: record.run_id, worker: holder });
    return KEEP;
  }
  if (!(await acquire(w, thread, w.lockMs + 5000))) {
    w.log('warn', 'cannot take over a run yet: the thread stays locked', { thread, run_id: record.run_id });
    return KEEP;
  }
  if (!(await moveRun(w, thread, record.run_id, holder, w.name))) { // over, or taken over by another meanwhile
    await release(w, thread);
    return undefined;
  }
  const assistant = record.assistant;
  const recorded = JSON.parse(record.configurable || '{}');
  const rest = record.rest ? JSON.parse(record.rest) : null;
  let graph;
  let startError = null;
  try {
    graph = await w.graphs.get(assistant).build({ ...(rest?.config ?? {}), configurable: recorded });
  } catch (e) { // a graph factory that fails now: the run fails, visibly
    startError = e;
  }
  const relay = fencedRelay(w, { thread, assistant, runId: record.run_id, graph });
  const [metaRun, runSeqText, seqText] = await w.cmd.hmget(keys.meta(thread), 'run_id', 'run_seq', 'seq');
  if (metaRun !== record.run_id) {
    // The dead worker recorded the run but died before its root `started` was appended (the thread's
    // events still end with the run before): the taker starts it, as the dead worker would have, so
    // its streams find it (they follow a run from its `started`).
    if (rest) {
      const started = await restCall(w, 'run.started', { run_id: record.run_id, after_seq: Number(seqText) || 0 });
      if (started.status >= 400 && started.status < 500) { // deleted or cancelled meanwhile: nothing to go on with
        await recordDone(w, thread);
        await release(w, thread);
        return undefined;
      }
    }
    relay.started(rest || record.recorded === '1' ? { runId: record.run_id } : {});
  } else {
    // Messages the dead worker left open are closed: their step runs again, under new ids.
    const rows = await w.cmd.xrange(keys.events(thread), `${Number(runSeqText) || 1}-0`, '+');
    const events = rows.map(([, f]) => JSON.parse(f[f.indexOf('e') + 1]));
    for (const m of openMessages(events)) relay.raw(closeMessage(m, 'the worker running this step stopped; the step runs again', 'worker_lost'));
  }
  const head = await headOf(w, thread);
  const fromStart = head === record.base;
  const input = fromStart ? loadInput(record.input) : null;
  // Going on from the last checkpoint: the run's configurable, but not the checkpoint it started from.
  const { checkpoint_id: _from, ...configurable } = recorded;
  w.log('info', 'taking over a run', { thread, run_id: record.run_id, from: fromStart ? 'the start' : 'the last checkpoint' });
  const ctl = { thread, graph, assistant, runId: record.run_id, relay, input, configurable: fromStart ? recorded : configurable,
    recorded: record.recorded === '1', injects: [], abort: new AbortController(), ...(startError ? { startError } : {}) };
  if (rest) { // a REST run: its id and options go on; a cancel that came while nobody ran it applies now
    const { options, metadata, dispose, observe } = rest;
    Object.assign(ctl, { rest: true, options, metadata, dispose, observe });
    if (record.cancel) cancelRun(ctl, record.cancel);
  }
  w.running.set(thread, ctl);
  return runGraph(w, ctl);
}
