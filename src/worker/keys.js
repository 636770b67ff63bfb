// Every Redis name the worker uses: keys, streams, their consumer group,
// channels, and the keys FCALL is given. They are part of the contract
// between the worker, the gateway and the Redis functions — see
// protocol/README.md ("Redis contract", "Worker contract (the command
// bridge)", "The LangGraph worker", "REST runs and state") — so each is
// spelled here and nowhere else, exactly as the contract writes it.
//
// Hash tags: the command bridge's names share {tc:commands} (one Cluster
// slot, the one tc:commands hashes to); everything of thread T shares {T};
// the store is {tc:store}.
// The reply channel is not built here: a command entry names it (`reply`).

/** The consumer group on every command stream. */
export const GROUP = 'workers';

export const keys = {
  commands: 'tc:commands',                          // wildcard workers (threadcast-agent)
  stream: (a) => `{tc:commands}:a:${a}`,            // commands for assistant a
  workers: (a) => `{tc:commands}:w:${a}`,           // its live workers: consumer → expiry (ms)
  assistants: '{tc:commands}:assistants',           // every assistant ever registered
  lock: (t) => `tc:{${t}}:lg:lock`,                 // the worker running the thread's run
  run: (t) => `tc:{${t}}:lg:run`,                   // that run: entry, id, status, input
  events: (t) => `tc:{${t}}:events`,
  meta: (t) => `tc:{${t}}:meta`,
  control: (consumer) => `tc:worker:${consumer}`,   // inject/cancel for runs this worker holds
  ainfo: (a) => `{tc:commands}:ainfo:${a}`,         // what the REST API shows of assistant a
  undo: (t) => `tc:{${t}}:lg:undo`,                 // what the thread's REST run wrote (rollback)
  rest: '{tc:commands}',                            // FCALL threadcast_rest 1 {tc:commands} <op> <json>
  restRun: (id) => `{tc:commands}:r:${id}`,         // a REST run's record (read: its `cancel`)
  store: '{tc:store}',                              // FCALL threadcast_store 1 {tc:store} <op> <json>
  append: (t) => t,                                 // FCALL threadcast_append_batch's key: the thread id itself
};

/* ---- the checkpoint saver's keys (checkpoint.js has their layout) ------------------------------ */

/** RedisSaver's default keyPrefix: its keys sit beside threadcast's tc:{T}:… */
export const CHECKPOINT_PREFIX = 'tc:';

/** The five checkpoint keys of thread t under prefix p (t already checked: non-empty, brace-free). */
export function checkpointKeys(p, t) {
  const base = `${p}{${t}}:lg:`;
  return { idx: `${base}idx`, cp: `${base}cp`, blobs: `${base}blobs`, widx: `${base}widx`, w: `${base}w` };
}

const globEscape = (s) => s.replace(/[*?[\]\\]/g, '\\$&');

/**
 * How to find prefix p's threads by SCAN: `match`, the glob of their index
 * keys, and threadOf(key), the thread id in one of them.
 */
export function checkpointIndexScan(p) {
  const head = `${p}{`;
  const tail = '}:lg:idx';
  return { match: `${globEscape(p)}{*${tail}`, threadOf: (key) => key.slice(head.length, key.length - tail.length) };
}
