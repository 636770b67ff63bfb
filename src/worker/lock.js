// The thread lock and the run record (protocol/README.md, "The LangGraph
// worker"): runs of one thread never overlap, on any number of workers.
//
// - tc:{T}:lg:lock holds the name of the worker running the thread's run,
//   with a PX lease (lockMs) that worker renews while the run goes on; a
//   dead worker's lock lapses, and a worker taking its run over
//   (takeover.js) waits for that. Only the owner renews or releases it (the
//   scripts below), so a late release never frees another worker's lock.
// - tc:{T}:lg:run records the run holding the lock (its command's entry,
//   id, input, the checkpoint it started from, a REST run's options), so
//   that a worker taking it over can go on with it, and a REST cancel that
//   finds no worker running it (the cancel mark) is applied by the one that
//   takes it over.
// - Inject and cancel for a run another worker holds go to the lock's
//   owner on its control channel (tc:worker:<name>; loops.js listens).
//
// Every function here takes the worker's shared state `w` (worker.js) first.
import { Command } from '@langchain/langgraph';
import { ProtocolError } from './answers.js';
import { keys } from './keys.js';

/**
 * The scripts, defined on the command connection (ioredis defineCommand,
 * one key each) by defineScripts: w.cmd.lockRenew(…) and so on.
 */
const SCRIPTS = {
  /** KEYS[1] a lock, ARGV[1] a worker, ARGV[2] ms: extends the lease if the worker holds the lock (1), else 0. */
  lockRenew: "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
  /**
   * KEYS[1] a run record, ARGV[1] a run id, ARGV[2] a cancel action: marks
   * the record's run cancelled if it is that run and still running (the
   * HSET's answer), else -1.
   */
  markCancel: "if redis.call('HGET', KEYS[1], 'run_id') == ARGV[1] and redis.call('HGET', KEYS[1], 'status') == 'running' then return redis.call('HSET', KEYS[1], 'cancel', ARGV[2]) end return -1",
  /** KEYS[1] a lock, ARGV[1] a worker: deletes the lock if the worker holds it (1), else 0. */
  lockRelease: "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
};

/** Defines the scripts above on an ioredis client. */
export function defineScripts(client) {
  for (const [name, lua] of Object.entries(SCRIPTS)) client.defineCommand(name, { numberOfKeys: 1, lua });
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

/** Renews the thread's lease every quarter of it while a run goes on; returns what stops it. */
export function keepLock(w, thread, onLost = () => {}) {
  const renew = setInterval(() => w.cmd.lockRenew(keys.lock(thread), w.name, w.lockMs)
    .then((held) => { if (!held) onLost(); }).catch(() => {}), w.lockMs / 4);
  return () => clearInterval(renew);
}

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
  await w.cmd.hset(keys.run(thread), { entry: entry.key, run_id: runId, status: 'running', recorded: '0', assistant, base, input: saveInput(input),
    configurable: JSON.stringify(configurable), ...(rest ? { rest: JSON.stringify(rest) } : {}) });
}

/** The thread's recorded run is over. */
export const recordDone = (w, thread) => w.cmd.hset(keys.run(thread), 'status', 'done');

/** Keeps a REST cancel in the record of the thread's run runId if it is running (for a worker taking it over); < 0 if not. */
export const markCancel = (w, thread, runId, action) => w.cmd.markCancel(keys.run(thread), runId, action);
