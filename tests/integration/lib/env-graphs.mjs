// Graphs for graph-env.test.mjs and graph-large-events.test.mjs (threadcast-worker
// --graphs this file): what the worker gives a graph — the store, its config
// and context, the SDK logger — and the forms a graph may be exported in.
// @langchain/* are imported from the worker's own node_modules (the very
// files the worker loads), so graph and worker share one module instance.
//
// - "memory" (a StateGraph): config.store and runtime.store — put, get,
//   search, listNamespaces, delete — driven by the input `ops`.
// - "settings" (a Promise of a compiled graph, context schema {model}):
//   returns what it was run with: configurable, context, metadata; the
//   question "fail" makes it throw a CustomError.
// - "dynamic" (a graph factory, (config) => graph): one node, named after
//   configurable.nodeName ("default" without it).
// - "chat" (a compiled graph): a fake chat model answering "begin" then
//   "end"; loops until the state's last AI message's content === "end".
// - "big": writes `bytes` bytes of text into its state (`blob`).
// - "logs": calls the SDK's getLogger() as it is imported and from its node.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const worker = (p) => pathToFileURL(path.join(here, '../../../src/worker/node_modules', p)).href;
const { StateGraph, Annotation, MessagesAnnotation, START, END } = await import(worker('@langchain/langgraph/dist/index.js'));
const { FakeListChatModel } = await import(worker('@langchain/core/dist/utils/testing/index.js'));
const { getLogger } = await import(worker('@langchain/langgraph-sdk/dist/logging/index.js'));

const logger = getLogger(); // throws without the logger the worker registers
logger.info('env-graphs loaded', { graphs: 6 });

const last = (a, b) => (b === undefined ? a : b);

/* ---- memory: the store ----------------------------------------------------------------------- */

const Memory = Annotation.Root({
  ops: Annotation({ reducer: last }),
  results: Annotation({ reducer: last, default: () => [] }),
  error: Annotation({ reducer: last }),
});

/**
 * Runs each of state.ops on the store, in order: {op: "put"|"get"|"search"|
 * "namespaces"|"delete", namespace, key, value (or repeat: {s: "x" × repeat}),
 * filter, limit, offset, prefix, suffix, maxDepth}. results: what
 * each answered (items with ISO dates); error: the first store error, as
 * {name, message}.
 */
async function useStore(state, config) {
  const results = [];
  try {
    for (const o of state.ops ?? []) {
      const { store } = config;
      if (!store) throw new Error('the graph has no store');
      const item = (i) => i && { namespace: i.namespace, key: i.key, value: i.value,
        createdAt: i.createdAt.toISOString(), updatedAt: i.updatedAt.toISOString() };
      if (o.op === 'put') results.push(await store.put(o.namespace, o.key, o.repeat ? { s: 'x'.repeat(o.repeat) } : o.value) ?? null);
      else if (o.op === 'get') results.push(item(await store.get(o.namespace, o.key)));
      else if (o.op === 'delete') results.push(await store.delete(o.namespace, o.key) ?? null);
      else if (o.op === 'search') results.push((await store.search(o.namespace, { filter: o.filter, limit: o.limit, offset: o.offset })).map(item));
      else if (o.op === 'namespaces') results.push(await store.listNamespaces({ prefix: o.prefix, suffix: o.suffix, maxDepth: o.maxDepth, limit: o.limit }));
      else throw new Error(`unknown op ${o.op}`);
    }
  } catch (e) {
    return { results, error: { name: e.name, message: e.message } };
  }
  return { results, error: null };
}

function memory() {
  return new StateGraph(Memory).addNode('use_store', useStore).addEdge(START, 'use_store').addEdge('use_store', END);
}

/** The same through the runtime API: (state, runtime) → runtime.store. */
function memoryRuntime() {
  return new StateGraph(Memory)
    .addNode('use_store', (state, runtime) => useStore(state, { store: runtime.store }))
    .addEdge(START, 'use_store').addEdge('use_store', END);
}

/* ---- settings: config, context, metadata ------------------------------------------------------ */

const Settings = Annotation.Root({
  question: Annotation({ reducer: last }),
  seen: Annotation({ reducer: last }),
});
const Context = Annotation.Root({ model: Annotation() });

/** What a graph throws, by its own class name. */
class CustomError extends Error {
  constructor(message) {
    super(message);
    this.name = 'CustomError';
  }
}

const settings = Promise.resolve(new StateGraph(Settings, Context)
  .addNode('look', (s, config) => {
    if (s.question === 'fail') throw new CustomError('the graph failed on purpose');
    const configurable = Object.fromEntries(Object.entries(config.configurable ?? {}).filter(([k]) => !k.startsWith('__')));
    return { seen: { configurable, context: config.context ?? null, metadata: config.metadata ?? null } };
  })
  .addEdge(START, 'look').addEdge('look', END)
  .compile());

/* ---- dynamic: a graph factory ----------------------------------------------------------------- */

const Dynamic = Annotation.Root({
  node: Annotation({ reducer: last }),
  visited: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/** Built per run from the run's config: the node is configurable.nodeName. */
export function dynamic(config) {
  const node = config?.configurable?.nodeName ?? 'default';
  return new StateGraph(Dynamic)
    .addNode(node, () => ({ node, visited: [node] }))
    .addEdge(START, node).addEdge(node, END)
    .compile();
}

/* ---- chat: a model's answer in the state as the model gave it ---------------------------------- */

const models = new Map(); // thread → its model (the answers go on across runs)

function chat() {
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state, config) => {
      const thread = config.configurable?.thread_id ?? '-';
      if (!models.has(thread)) models.set(thread, new FakeListChatModel({ responses: ['begin', 'end'] }));
      return { messages: [await models.get(thread).invoke(state.messages)] };
    })
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', (state) => (state.messages.at(-1)?.content === 'end' ? END : 'agent'))
    .compile();
}

/* ---- big: a large state ------------------------------------------------------------------------ */

const Big = Annotation.Root({
  bytes: Annotation({ reducer: last }),
  blob: Annotation({ reducer: last }),
});

function big() {
  return new StateGraph(Big)
    .addNode('grow', (s) => ({ blob: 'x'.repeat(s.bytes) }))
    .addEdge(START, 'grow').addEdge('grow', END);
}

/* ---- logs: the SDK logger ---------------------------------------------------------------------- */

function logs() {
  return new StateGraph(Settings)
    .addNode('say', (s) => {
      getLogger().warn('a graph speaks', { question: s.question });
      getLogger().child({ part: 'child' }).info({ message: 'from a child', n: 2 });
      return { seen: 'logged' };
    })
    .addEdge(START, 'say').addEdge('say', END);
}

export const graphs = {
  memory: memory(),
  memory_runtime: memoryRuntime().compile(),
  settings,
  dynamic,
  chat: chat(),
  big: big(),
  logs: logs(),
};
