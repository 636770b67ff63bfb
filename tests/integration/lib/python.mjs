// What the Python worker's integration files (python-worker.test.mjs,
// python-worker-faults.test.mjs) share: the stack (redis-server, the gateway, Python workers on
// tests/integration/python/langgraph.json, every process stopped by PID), what the example
// graph says, and reading protocol events (commands, runs' ends, messages assembled).
import assert from 'node:assert/strict';
import path from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { startRedis, startThreadcast, startPythonWorker, connect, waitUntil, redisClient, repoRoot } from './harness.mjs';

export const project = path.join(repoRoot, 'tests/integration/python/langgraph.json');

/** What the example graph's fake model says (src/worker-python/example/agent.py, Lines). */
export const lines = {
  searching: 'Let me search for that. ',
  answer: (q) => `Here is what I found about "${q}".`,
  summary: 'Summary: the search found three sources.',
};
/** The texts of the example graph's state after one run on question q (tool messages left out). */
export const transcriptOf = (q) => [q, lines.searching, lines.answer(q), lines.summary];
export const question = (q) => ({ messages: [{ role: 'user', content: q }] });

/** The graphs langgraph.json names that cannot be served, and why the worker says so at start. */
export const unservable = {
  not_a_graph: /graph "not_a_graph" is a int, not a graph, a StateGraph or a graph factory/,
  broken_import: /graph "broken_import": .*broken_import\.py does not import: ModuleNotFoundError: No module named 'threadcast_test_graphs_nowhere'/,
};

/**
 * Redis (appendonly: it keeps its data across a restart), one gateway, Python workers named
 * names on the test project; tokenMs paces the example graph's model (THREADCAST_FAKE_TOKEN_MS).
 * done() stops everything and fails on a sanitizer report or on a worker error line other than
 * the graphs that cannot be served (and those errorsAllowed matches).
 */
export async function stack({ tokenMs = 20, names = ['py1', 'py2'], workerArgs = [], appendonly = false } = {}) {
  const redis = await startRedis({ appendonly });
  const gw = await startThreadcast({ redisUrl: redis.url, args: ['--redis-backoff-max', '200'] });
  await gw.ready();
  const env = { THREADCAST_FAKE_TOKEN_MS: String(tokenMs) };
  const workers = await Promise.all(names.map((name) => startPythonWorker(redis.url, { config: project, name, args: workerArgs, env })));
  const rc = redisClient(redis.port);
  const apiUrl = `http://127.0.0.1:${gw.port}`;
  const s = {
    redis, gw, workers, rc, apiUrl,
    errorsAllowed: [],
    client: () => new Client({ apiUrl, apiKey: null }),
    ws: (thread) => connect(`ws://127.0.0.1:${gw.port}/threads/${thread}/stream/events`),
    /** One more worker on the same project. */
    async addWorker(name) {
      const w = await startPythonWorker(redis.url, { config: project, name, args: workerArgs, env });
      workers.push(w);
      return w;
    },
    async done() {
      const reports = gw.sanitizerReports();
      s.rc.close();
      for (const w of workers) await w.kill('SIGTERM');
      await gw.stop();
      await s.redis.cleanup();
      assert.deepEqual(reports, [], gw.stderr);
      for (const w of workers) {
        const errors = w.logs.filter((l) => l.level === 'error' && !unservable[l.graph] &&
          !s.errorsAllowed.some((re) => re.test(JSON.stringify(l))));
        assert.deepEqual(errors, [], `${w.name}'s error lines`);
        assert.deepEqual(w.logs.filter((l) => l.msg === 'graph not served').map((l) => l.graph).sort(), Object.keys(unservable).sort());
      }
    },
  };
  return s;
}

let corr = 100;
/** Sends a command on client c; resolves with its reply. */
export const command = (c, method, params = {}) => c.request({ id: ++corr, method, params });

/** A command that must succeed: its result. */
export async function ok(c, method, params) {
  const r = await command(c, method, params);
  assert.equal(r.type, 'success', `${method}: ${JSON.stringify(r)}`);
  return r.result;
}

export const ALL = ['values', 'updates', 'messages', 'tools', 'lifecycle', 'input', 'checkpoints', 'tasks', 'custom'];
export const isRoot = (e) => e.method === 'lifecycle' && e.params.namespace.length === 0;
export const rootEvents = (events) => events.filter(isRoot).map((e) => e.params.data.event);

/** Waits until c has seen the end of n runs (root lifecycle events other than started). */
export function ended(c, n = 1, ms = 30000) {
  return waitUntil(() => {
    const ends = c.events.filter((e) => isRoot(e) && e.params.data.event !== 'started');
    return ends.length >= n && ends[n - 1];
  }, ms, `the end of run ${n}`);
}

/**
 * The messages of a stream of protocol events, assembled as a client assembles them: per
 * namespace and node, message-start opens one (its id), text deltas add to it, message-finish
 * closes it, an error event cuts it (its code kept). [{id, role, ns, node, text, done, error}]
 */
export function assemble(events) {
  const out = [];
  const open = new Map();
  for (const e of events) {
    if (e.method !== 'messages') continue;
    const key = `${e.params.namespace.join('|')} ${e.params.node ?? ''}`;
    const d = e.params.data;
    if (d.event === 'message-start') {
      const m = { id: d.id, role: d.role, ns: e.params.namespace, node: e.params.node, text: '', done: false, error: null };
      out.push(m);
      open.set(key, m);
    } else if (d.event === 'content-block-delta' && d.delta.type === 'text-delta') {
      assert.ok(open.get(key), `a delta of an open message: ${JSON.stringify(e.params)}`);
      open.get(key).text += d.delta.text;
    } else if (d.event === 'message-finish') {
      assert.ok(open.get(key), `the finish of an open message: ${JSON.stringify(e.params)}`);
      open.get(key).done = true;
      open.delete(key);
    } else if (d.event === 'error') {
      const m = open.get(key);
      assert.ok(m, `an error event closes an open message: ${JSON.stringify(e.params)}`);
      m.error = d.code;
      open.delete(key);
    }
  }
  return out;
}

/** The text of a message of the state (content: a string or blocks). */
export const textOf = (m) => (typeof m.content === 'string' ? m.content
  : m.content.filter((b) => b.type === 'text').map((b) => b.text).join(''));
