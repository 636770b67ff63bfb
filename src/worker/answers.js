// What the sender of a command gets back (protocol/README.md, "Worker
// contract", steps 3 and 4): an answer on its gateway's reply channel — a
// success with the method's result, or an error (ProtocolError: the
// protocol's error code and a message) — or, for an entry handled with the
// result KEEP, nothing yet: the entry stays pending, unacknowledged, for
// another worker or a later try.
//
// Every function here takes the worker's shared state `w` (worker.js) first.

/** An error a command is answered with: code is the protocol's ErrorCode. */
export class ProtocolError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** handle()'s answer for an entry to leave pending (another worker, or a later try, takes it). */
export const KEEP = Symbol('keep');

/** SPUBLISHes {corr, …msg} on the entry's reply channel (none: no answer); never throws. */
export async function answer(w, entry, msg) {
  if (!entry.reply) return;
  try {
    await w.cmd.call('SPUBLISH', entry.reply, JSON.stringify({ corr: entry.corr, ...msg }));
  } catch (e) {
    w.log('warn', 'answer not sent', { corr: entry.corr, error: e.message });
  }
}

export const success = (w, entry, result) => answer(w, entry, { type: 'success', result });
