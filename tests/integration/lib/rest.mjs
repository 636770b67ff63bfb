// Helpers for the Agent Protocol REST API tests (issue 17): the stack they run
// against (Redis, two gateways behind HAProxy, two LangGraph workers serving
// lib/rest-graphs.mjs), a raw SSE reader that keeps the framing, and small
// assertions. Everything started here is tracked by the harness and stopped
// by PID (done(), stopAll()).
import assert from 'node:assert/strict';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { startRedis, startThreadcast, startWorker, startHaproxy, redisClient, waitUntil, sleep } from './harness.mjs';
import { graphs } from './rest-graphs.mjs';
import { lines } from '../../../src/worker/graphs/agent.js';
import { plain } from '../../../src/worker/relay.js';
import { Redis, RedisSaver } from '../../../src/worker/test/fixtures.js';

export { lines, plain, randomUUID };

const here = path.dirname(fileURLToPath(import.meta.url));
export const graphsModule = path.join(here, 'rest-graphs.mjs');

/**
 * Redis, two gateways, two LangGraph workers (assistants "agent" and
 * "reporter"), HAProxy in front of the gateways. tokenMs paces the fake
 * model (THREADCAST_FAKE_TOKEN_MS): a run of "agent" streams about 100
 * tokens. s.graph is the agent graph on the workers' checkpoints (the truth
 * the API's state must agree with). gatewayArgs: more of the gateways' options;
 * graphs: another module for the workers to serve (it must have "agent" too).
 */
export async function restStack({ tokenMs = 5, workerArgs = [], gatewayArgs = [], graphs: served = graphsModule } = {}) {
  const redis = await startRedis();
  const gw = () => startThreadcast({ redisUrl: redis.url, args: gatewayArgs });
  const gws = await Promise.all([gw(), gw()]);
  await Promise.all(gws.map((g) => g.ready()));
  const workers = await Promise.all(['rest1', 'rest2'].map((name) => startWorker(redis.url,
    { name, args: ['--graphs', served, ...workerArgs], env: { THREADCAST_FAKE_TOKEN_MS: String(tokenMs) } })));
  const lbPort = await startHaproxy(gws.map((g) => g.port));
  const rc = redisClient(redis.port);
  const ioredis = new Redis(redis.url);
  const saver = new RedisSaver({ client: ioredis });
  const graph = graphs.agent.compile({ checkpointer: saver, name: 'agent' });
  const apiUrl = `http://127.0.0.1:${lbPort}`;
  return {
    redis, gws, workers, rc, graph, apiUrl, lbPort,
    /** A new SDK client on HAProxy (apiKey null: no key from the environment). */
    client: (opts = {}) => new Client({ apiUrl, apiKey: null, ...opts }),
    /** fetch on HAProxy; json bodies are sent with Content-Type: application/json. */
    http: (p, { json, ...init } = {}) => fetch(`${apiUrl}${p}`, json === undefined ? init
      : { ...init, body: JSON.stringify(json), headers: { 'content-type': 'application/json', ...init.headers } }),
    /** The agent graph's own state of a thread, as plain data. */
    async head(threadId) {
      return plain((await graph.getState({ configurable: { thread_id: threadId } })).values);
    },
    /** The agent graph's checkpoint ids of a thread, newest first. */
    async checkpointIds(threadId, limit = 100) {
      const ids = [];
      for await (const s of graph.getStateHistory({ configurable: { thread_id: threadId } }, { limit })) ids.push(s.config.configurable.checkpoint_id);
      return ids;
    },
    async done() {
      const reports = gws.flatMap((g) => g.sanitizerReports());
      rc.close();
      ioredis.disconnect();
      for (const w of workers) if (w.proc.exitCode === null && w.proc.signalCode === null) await w.kill('SIGTERM');
      for (const g of gws) if (g.exitCode === null && g.signal === null) await g.stop();
      await redis.cleanup();
      assert.deepEqual(reports, [], `no sanitizer report:\n${gws.map((g) => g.stderr.split('\n').filter((l) => /runtime error|ERROR: AddressSanitizer|^\s+#\d/.test(l)).join('\n')).join('\n')}`);
      for (const w of workers) assert.doesNotMatch(w.stderr, /"level":"error"/, w.stderr);
    },
  };
}

/* ---- inputs and expected outputs ------------------------------------------------------- */

export const question = (q) => ({ messages: [{ role: 'user', content: q }] });

/** The text of a message or message chunk (content: a string or content blocks). */
export const textOf = (m) => (typeof m.content === 'string' ? m.content
  : (m.content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join(''));

const isAi = (m) => m.type === 'ai' || m.type === 'AIMessageChunk' || m.type === 'AIMessage' || m.role === 'ai' || m.role === 'assistant';
const isHuman = (m) => m.type === 'human' || m.role === 'user' || m.role === 'human';

/** Texts of a state's human and AI messages, in order (tool messages left out). */
export const transcript = (values) => (values?.messages ?? []).filter((m) => isAi(m) || isHuman(m)).map(textOf);

/** What the example graph's state holds after one run on question q (no interrupt). */
export const expectedTranscript = (q) => [q, lines.searching, lines.answer(q), lines.summary];

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

/* ---- errors ---------------------------------------------------------------------------- */

/**
 * Asserts the SDK call rejects with an HTTP error of status whose body is
 * {"detail": <string matching re>} (the SDK throws "HTTP <status>: <body>",
 * with .status and .text).
 */
export async function rejectsWith(promise, status, re = /./) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected HTTP ${status}, the call succeeded`);
  assert.equal(err.status, status, `status of: ${err.message}`);
  let body;
  try { body = JSON.parse(err.text); } catch { assert.fail(`the error body is not JSON: ${err.text}`); }
  assert.equal(typeof body.detail, 'string', `{"detail": "..."}: ${err.text}`);
  assert.match(body.detail, re);
  return body;
}

/** Asserts a fetch Response is status with a JSON {"detail": <matching re>} body. */
export async function errorResponse(res, status, re = /./) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  let body;
  try { body = JSON.parse(text); } catch { assert.fail(`the error body is not JSON: ${text}`); }
  assert.equal(typeof body.detail, 'string', text);
  assert.match(body.detail, re);
  return body;
}

/** Asserts a JSON response of status and returns its body. */
export async function jsonResponse(res, status = 200) {
  const text = await res.text();
  assert.equal(res.status, status, `${res.url}: ${text}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, `${res.url}: content-type`);
  return JSON.parse(text);
}

/* ---- runs ------------------------------------------------------------------------------ */

/** Waits until the run has status (one of statuses). */
export function runReaches(client, threadId, runId, statuses, ms = 30000) {
  const want = [].concat(statuses);
  return waitUntil(async () => {
    const run = await client.runs.get(threadId, runId);
    return want.includes(run.status) ? run : null;
  }, ms, `run ${runId} to be ${want.join('|')}`);
}

/** Collects an SDK stream ({id, event, data}) into an array; resolves when it ends. */
export function collect(gen, onPart) {
  const parts = [];
  parts.done = (async () => {
    for await (const p of gen) {
      parts.push(p);
      onPart?.(p, parts);
    }
    return parts;
  })();
  return parts;
}

/** Asserts every event has an id and the ids are integers, strictly increasing. */
export function assertIds(parts, what = 'the stream') {
  const ids = parts.map((p) => p.id);
  for (const [i, id] of ids.entries()) assert.match(String(id), /^\d+$/, `${what}: event ${i} (${parts[i].event}) has an integer id, got ${id}`);
  for (let i = 1; i < ids.length; i++) {
    assert.ok(Number(ids[i]) > Number(ids[i - 1]), `${what}: ids strictly increase: ${ids[i - 1]} then ${ids[i]} at ${i}`);
  }
}

/** The messages-tuple events of a stream: [{event, chunk, meta}]. */
export function tuples(parts, name = 'messages') {
  return parts.filter((p) => p.event === name || (name instanceof RegExp && name.test(p.event))).map((p) => {
    assert.ok(Array.isArray(p.data) && p.data.length === 2, `${p.event}: [chunk, metadata], got ${JSON.stringify(p.data)}`);
    const [chunk, meta] = p.data;
    assert.equal(typeof chunk, 'object');
    assert.equal(typeof meta, 'object');
    return { event: p.event, chunk, meta };
  });
}

/** Concatenated text per message id, in order of first appearance: [{id, text, nodes}]. */
export function assembleTuples(ts) {
  const byId = new Map();
  for (const { chunk, meta } of ts) {
    assert.equal(typeof chunk.id, 'string', `a tuple's chunk has an id: ${JSON.stringify(chunk)}`);
    const m = byId.get(chunk.id) ?? { id: chunk.id, text: '', nodes: new Set(), types: new Set() };
    m.text += textOf(chunk);
    m.nodes.add(meta.langgraph_node);
    m.types.add(chunk.type);
    byId.set(chunk.id, m);
  }
  return [...byId.values()];
}

/* ---- which gateway holds a stream --------------------------------------------------------- */

/**
 * The gateway holding the one long-lived client stream: the one whose
 * /readyz says it has an SSE connection or, if neither counts it as SSE, more
 * open connections than the other (the probe itself is one on each).
 * Sampled until three samples agree.
 */
export async function holder(gws) {
  let last = null;
  let agree = 0;
  return waitUntil(async () => {
    const r = await Promise.all(gws.map(async (g) => (await g.http('/readyz')).json()));
    let i = -1;
    const sse = r.map((x) => x.sse ?? 0);
    if (sse.filter((n) => n > 0).length === 1) i = sse.findIndex((n) => n > 0);
    else if (r[0].connections !== r[1].connections) i = r[0].connections > r[1].connections ? 0 : 1;
    if (i < 0) { agree = 0; return null; }
    agree = i === last ? agree + 1 : 1;
    last = i;
    return agree >= 3 ? gws[i] : null;
  }, 10000, 'one gateway to hold the stream');
}

/* ---- raw SSE ------------------------------------------------------------------------------ */

/**
 * Reads a streamed Response unit by unit as it comes (units end with sep):
 * unit(text, s) for each; s.text is all of it, s.rest what came after the
 * last unit; done resolves when the body ends (or errors: error is kept).
 */
function readUnits(res, sep, unit, { controller, normalize = (t) => t } = {}) {
  const s = { text: '', rest: '', error: null };
  const decoder = new TextDecoder();
  s.done = (async () => {
    try {
      for await (const chunk of res.body) {
        const t = decoder.decode(chunk, { stream: true });
        s.text += t;
        s.rest += normalize(t);
        let end;
        while ((end = s.rest.indexOf(sep)) >= 0) {
          const u = s.rest.slice(0, end);
          s.rest = s.rest.slice(end + sep.length);
          unit(u, s);
        }
      }
    } catch (e) {
      s.error = e;
    }
    return s;
  })();
  s.close = () => controller?.abort();
  return s;
}

/**
 * Reads a text/event-stream Response as it comes: events [{id, event, data,
 * lines}] (data parsed as JSON; lines: the block's raw lines), comments (count),
 * text (all of it). done resolves when the body ends (or errors: error is
 * kept). onEvent(ev) is called for each event.
 */
export function readSse(res, { onEvent, controller } = {}) {
  const events = [];
  const s = readUnits(res, '\n\n', (block, st) => {
    const ls = block.split('\n');
    if (ls.every((l) => l.startsWith(':'))) { st.comments++; return; }
    const ev = { lines: ls, data: [] };
    for (const l of ls) {
      if (l.startsWith(':')) continue;
      const c = l.indexOf(':');
      const field = c < 0 ? l : l.slice(0, c);
      let value = c < 0 ? '' : l.slice(c + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') ev.data.push(value);
      else if (field === 'event') ev.event = value;
      else if (field === 'id') ev.id = value;
    }
    const text = ev.data.join('\n');
    ev.rawData = text;
    try { ev.data = JSON.parse(text); } catch { ev.data = text; }
    events.push(ev);
    onEvent?.(ev, st);
  }, { controller, normalize: (t) => t.replace(/\r\n?/g, '\n') });
  s.events = events;
  s.comments = 0;
  return s;
}

/**
 * Reads an NDJSON Response as it comes: lines (each parsed: a line that is
 * not JSON is the stream's error), raw (their text), text; done resolves when
 * the body ends, with an error when it ends inside a line.
 */
export function readNdjson(res, { controller } = {}) {
  const lines = [], raw = [];
  const s = readUnits(res, '\n', (line) => {
    raw.push(line);
    lines.push(JSON.parse(line));
  }, { controller });
  Object.assign(s, { lines, raw });
  const done = s.done;
  s.done = done.then((st) => {
    if (!st.error && st.rest) st.error = new Error(`the stream ends inside a line: ${st.rest.slice(0, 80)}`);
    return st;
  });
  return s;
}

/** Opens an NDJSON stream with fetch; resolves {res, nd} (nd: readNdjson of the body). */
export async function openNdjson(url) {
  const controller = new AbortController();
  const res = await fetch(url, { signal: controller.signal });
  return { res, nd: readNdjson(res, { controller }) };
}

/** Opens an SSE request with fetch; resolves {res, sse} (sse: readSse of the body). */
export async function openSse(url, init = {}, opts = {}) {
  const controller = new AbortController();
  const { json, ...rest } = init;
  const res = await fetch(url, { ...rest, signal: controller.signal,
    ...(json === undefined ? {} : { body: JSON.stringify(json), headers: { 'content-type': 'application/json', ...rest.headers } }) });
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const body = await res.text();
    return { res, body, sse: null };
  }
  return { res, sse: readSse(res, { ...opts, controller }) };
}

/**
 * Asserts the SSE framing of every event: an `event:` line, exactly one
 * `data:` line holding JSON, an `id:` line, nothing else.
 */
export function assertFraming(events) {
  assert.ok(events.length > 0, 'some events');
  for (const ev of events) {
    const fields = ev.lines.filter((l) => !l.startsWith(':')).map((l) => l.slice(0, l.indexOf(':')));
    assert.deepEqual(fields.slice().sort(), ['data', 'event', 'id'], `one event, one data, one id line: ${ev.lines.join(' / ')}`);
    assert.doesNotThrow(() => JSON.parse(ev.rawData), `data is JSON: ${ev.rawData}`);
  }
}

export { sleep, waitUntil };
