// The thread lock and the run record (protocol/README.md, "The LangGraph
// worker"): runs of one thread never overlap, on any number of workers.
//
// - tc:{T}:lg:lock holds the name of the worker running the thread's run,
//   with a PX lease (lockMs) that worker renews while the run goes on; a
//   dead worker's lock lapses, and a worker taking its run over
//   (takeover.js) waits for that. Only the owner renews or releases it (the
//   scripts below), so a late release never frees another worker's lock.
//   A lease that lapsed while nobody could renew it (Redis itself stalled
//   past it) is taken again by its worker on its next renewal, as long as
//   the run's record still names that worker: nobody has taken the run over.
// - tc:{T}:lg:run records the run holding the lock (its command's entry,
//   id, input, the checkpoint it started from, a REST run's options, the
//   worker running it), so that a worker taking it over can go on with it,
//   and a REST cancel that finds no worker running it (the cancel mark) is
//   applied by the one that takes it over. `worker` is emptied by a worker
//   that gave the run up (it lost the lock), and set by the one taking over.
// - Inject and cancel for a run another worker holds go to the lock's
//   owner on its control channel (tc:worker:<name>; loops.js listens).
//
// Every function here takes the worker's shared state `w` (worker.js) first.
import { Command } from '@langchain/langgraph';
import { ProtocolError } from './answers.js';
import { keys } from './keys.js';
import { Relay } from './relay.js';

/**
 * The scripts, defined on the command connection (ioredis defineCommand)
 * by defineScripts: w.cmd.lockRenew(…) and so on. Keys of one script share
 * the thread's hash tag.
 */
const SCRIPTS = {
  /**
   * KEYS[1] a lock, KEYS[2] its run record, ARGV[1] a worker, ARGV[2] ms,
   * ARGV[3] the worker's run: extends the lease if the worker holds the
   * lock (1); takes a lapsed lock again if the record still says the
   * worker runs that run (1); else 0.
   */
  lockRenew: [2, `local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if held then return 0 end
local r = redis.call('HMGET', KEYS[2], 'worker', 'run_id', 'status')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[3] or r[3] ~= 'running' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`],
  /**
   * KEYS[1] a run record, ARGV[1] a run id, ARGV[2] a cancel action: marks
   * the record's run cancelled if it is that run and still running (the
   * HSET's answer), else -1.
   */
  markCancel: [1, "if redis.call('HGET', KEYS[1], 'run_id') == ARGV[1] and redis.call('HGET', KEYS[1], 'status') == 'running' then return redis.call('HSET', KEYS[1], 'cancel', ARGV[2]) end return -1"],
  /**
   * KEYS[1] a run record, ARGV[1] a run id, ARGV[2] the worker it was,
   * ARGV[3] the worker it is now: sets `worker` if the record is that run,
   * still running, run by ARGV[2] or by nobody (1), else 0.
   */
  recordWorker: [1, `local r = redis.call('HMGET', KEYS[1], 'run_id', 'status', 'worker')
local was = r[3] or ''
if r[1] ~= ARGV[1] or r[2] ~= 'running' or (was ~= ARGV[2] and was ~= '') then return 0 end
redis.call('HSET', KEYS[1], 'worker', ARGV[3])
return 1`],
  /** KEYS[1] a lock, ARGV[1] a worker: deletes the lock if the worker holds it (1), else 0. */
  lockRelease: [1, "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"],
  /** KEYS[1] a live-workers set, ARGV[1] a worker: 1 if it counts as live now (Redis' clock), else 0. */
  workerLive: [1, `local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s then return 0 end
local t = redis.call('TIME')
return tonumber(s) > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) and 1 or 0`],
};

/** Defines the scripts above on an ioredis client. */
export function defineScripts(client) {
  for (const [name, [numberOfKeys, lua]] of Object.entries(SCRIPTS)) client.defineCommand(name, { numberOfKeys, lua });
}

/* ---- the lock -------------------------------------------------------------------------------- */

/** Takes the thread's lock, trying every 250 ms for up to waitMs; false when another worker keeps it. */
export async function acquire(w, thread, waitMs = 0) {
  const until = Date.now() + waitMs;
  for (;;) {
    if (await w.cmd.set(keys.lock(thread), w.name, 'PX', w.lockMs, 'NX')) return true;
    if (Date.now() >= until) return false;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Renews the thread's lease for run runId (takes it again if it lapsed while
 * the record still names this worker's run): true while this worker holds it.
 */
export const renewLock = async (w, thread, runId) =>
  (await w.cmd.lockRenew(keys.lock(thread), keys.run(thread), w.name, w.lockMs, runId)) === 1;

/** Renews the thread's lease every quarter of it while run runId goes on; returns what stops it. */
export function keepLock(w, thread, runId, onLost = () => {}) {
  const renew = setInterval(() => renewLock(w, thread, runId).then((held) => { if (!held) onLost(); }).catch(() => {}), w.lockMs / 4);
  return () => clearInterval(renew);
}

/**
 * The relay of run runId on the thread, whose lock this worker holds: its
 * appends are fenced by the lock (FENCE), and one refused because the lease
 * lapsed while Redis stalled is sent again once renewLock took it back.
 * graph: the run's graph, if built (its subgraph paths).
 */
export const fencedRelay = (w, { thread, assistant, runId, graph }) => new Relay({ redis: w.cmd, thread, assistant, runId, log: w.log,
  appendOpts: ['ASSISTANT', assistant, 'FENCE', w.name], subgraphs: graph?.subgraphPaths, regain: () => renewLock(w, thread, runId) });

/** Releases the thread's lock if this worker holds it; never throws. */
export const release = (w, thread) => w.cmd.lockRelease(keys.lock(thread), w.name).catch(() => {});

/**
 * How long a claim waits for another worker's lock: a client that answers
 * a run's end at once (input.respond on "interrupted", state.fork) can
 * reach the thread while the worker that appended the end has not released
 * the lock yet.
 */
const CLAIM_WAIT_MS = 2000;

/**
 * Takes the thread for a new run, or explains why it cannot. A run of this
 * worker whose end is out is waited for (it is only tidying up); another
 * worker's lock, for up to CLAIM_WAIT_MS.
 */
export async function claimThread(w, thread) {
  const local = w.running.get(thread);
  if (local?.over) await local.settled;
  if (w.running.has(thread) || !(await acquire(w, thread, CLAIM_WAIT_MS))) {
    throw new ProtocolError('invalid_argument', `a run is active on thread "${thread}"; wait for it to end`);
  }
}

/** Sends inject/cancel to the worker running the thread; false when none is. */
export async function forward(w, thread, op) {
  const owner = await w.cmd.get(keys.lock(thread));
  if (!owner || owner === w.name) return false;
  return (await w.cmd.publish(keys.control(owner), JSON.stringify({ thread, ...op }))) > 0;
}

/* ---- the run record ---------------------------------------------------------------------------- */

/** How a run's input is kept in its record, to run it again after a crash. */
const saveInput = (input) => (input instanceof Command
  ? JSON.stringify({ command: { resume: input.resume, update: input.update, goto: input.goto } })
  : JSON.stringify({ input: input ?? null }));
export const loadInput = (s) => {
  const o = JSON.parse(s);
  return o.command ? new Command(o.command) : o.input;
};

/** The id of the thread's newest root checkpoint ('' when it has none): where a run starts from. */
export const headOf = async (w, thread) => (await w.saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '' } }))
  ?.config.configurable.checkpoint_id ?? '';

/**
 * Records the run starting on the thread, whose lock this worker holds:
 * its command's entry, id, assistant, input and configurable, the head it
 * starts from (`base`), and a REST run's options (`rest`).
 */
export async function recordRun(w, { thread, entry, runId, assistant, input, configurable, rest }) {
  const base = await headOf(w, thread);
  await w.cmd.hset(keys.run(thread), { entry: entry.key, run_id: runId, status: 'running', worker: w.name, recorded: '0', assistant, base, input: saveInput(input),
    configurable: JSON.stringify(configurable), ...(rest ? { rest: JSON.stringify(rest) } : {}) });
}

/**
 * Moves the thread's running run runId from worker `from` (or from nobody)
 * to worker `to` ('' to give it up); false when the record is another run,
 * over, or run by a third worker.
 */
export const moveRun = async (w, thread, runId, from, to) => (await w.cmd.recordWorker(keys.run(thread), runId, from, to)) === 1;

/** Whether worker `name` counts as live for assistant's commands (its heartbeat, on Redis' clock). */
export const workerLive = async (w, assistant, name) => (await w.cmd.workerLive(keys.workers(assistant), name)) === 1;

/** The thread's recorded run is over. */
export const recordDone = (w, thread) => w.cmd.hset(keys.run(thread), 'status', 'done');

/** Keeps a REST cancel in the record of the thread's run runId if it is running (for a worker taking it over); < 0 if not. */
export const markCancel = (w, thread, runId, action) => w.cmd.markCancel(keys.run(thread), runId, action);
