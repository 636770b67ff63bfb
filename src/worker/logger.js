// The worker's log lines, and the logger graphs get from
// `@langchain/langgraph-sdk/logging`'s getLogger().
//
// The reference server (@langchain/langgraph-api) registers its logger on
// globalThis under Symbol.for("langgraph.api.sdk-logger") before it imports
// any graph, and getLogger() throws ("Logger not available in current
// environment") without it — so a graph that calls getLogger() at import
// time cannot even load elsewhere. registerSdkLogger() puts one there: the
// leveled methods of the winston logger the reference registers (error, warn,
// help, data, info, debug, prompt, http, verbose, input, silly), plus log()
// and child(), each writing one JSON line like the worker's own.

const SDK_LOGGER = Symbol.for('langgraph.api.sdk-logger');
const LEVELS = ['error', 'warn', 'help', 'data', 'info', 'debug', 'prompt', 'http', 'verbose', 'input', 'silly'];

/** The worker's log: one JSON line per call on stderr, {ts, level, msg, …fields}. */
export function jsonLog(level, msg, fields = {}) {
  process.stderr.write(`${JSON.stringify({ ts: new Date().toISOString(), level, msg, ...fields })}\n`);
}

/** Fields of a log call's extra arguments: objects are merged, other values listed under `meta`. */
function fieldsOf(meta) {
  const out = {};
  const rest = [];
  for (const m of meta) {
    if (m instanceof Error) out.error = String(m.stack ?? m);
    else if (m && typeof m === 'object' && !Array.isArray(m)) Object.assign(out, m);
    else if (m !== undefined) rest.push(m);
  }
  if (rest.length) out.meta = rest;
  return out;
}

/** A winston-shaped logger writing through log(level, msg, fields); base: fields every line gets. */
function sdkLogger(log, base = {}) {
  const logger = {};
  const write = (level, message, meta) => {
    // winston's forms: (message, ...meta) and (infoObject) with a `message` member.
    let msg = message;
    let fields = fieldsOf(meta);
    if (message && typeof message === 'object' && !(message instanceof Error)) {
      const { message: m, level: _l, ...restOf } = message;
      msg = m ?? '';
      fields = { ...restOf, ...fields };
    } else if (message instanceof Error) {
      msg = message.message;
      fields = { error: String(message.stack ?? message), ...fields };
    }
    try {
      log(level, typeof msg === 'string' ? msg : JSON.stringify(msg), { source: 'graph', ...base, ...fields });
    } catch {
      log(level, String(msg), { source: 'graph', ...base });
    }
    return logger;
  };
  for (const level of LEVELS) logger[level] = (message, ...meta) => write(level, message, meta);
  logger.log = (level, message, ...meta) => (typeof level === 'object' && level
    ? write(level.level ?? 'info', level, meta)
    : write(LEVELS.includes(level) ? level : 'info', message, meta));
  logger.child = (fields = {}) => sdkLogger(log, { ...base, ...fields });
  return logger;
}

/**
 * Registers the logger getLogger() returns, unless one is registered
 * already (an embedding application's own). Call it before importing the
 * graphs: bin/threadcast-worker.js does, and so does serve().
 */
export function registerSdkLogger(log = jsonLog) {
  if (SDK_LOGGER in globalThis) return globalThis[SDK_LOGGER];
  const logger = sdkLogger(log);
  Object.defineProperty(globalThis, SDK_LOGGER, { value: logger, configurable: true, writable: true });
  return logger;
}
