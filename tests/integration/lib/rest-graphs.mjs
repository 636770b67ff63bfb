// The graphs the REST API tests (rest-sdk.test.mjs, rest-http.test.mjs) have
// the LangGraph worker serve (threadcast-worker --graphs this file):
// - "agent": the example graph, src/worker/graphs/agent.js, unchanged (model
//   with a tool call, the tools node, the "researcher" subgraph, interrupt()).
// - "reporter": a small graph that writes to LangGraph's custom stream
//   (config.writer), at the root and inside its subgraph "inner", which the
//   example graph never does: what `stream_mode: ["custom"]` must carry.
// @langchain/langgraph is imported from the worker's own node_modules (the
// very file the worker loads), so graph and worker share one module instance.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { builder } from '../../../src/worker/graphs/agent.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const lg = await import(pathToFileURL(path.join(here, '../../../src/worker/node_modules/@langchain/langgraph/dist/index.js')).href);
const { StateGraph, Annotation, START, END } = lg;

/** What the reporter graph writes to the custom stream, in order. */
export const reports = {
  root: [{ step: 1, note: 'starting' }, { step: 2, note: 'halfway' }],
  inner: [{ step: 3, note: 'inside the subgraph' }],
};

const Report = Annotation.Root({
  topic: Annotation({ reducer: (_a, b) => b, default: () => '' }),
  steps: Annotation({ reducer: (a, b) => a + b, default: () => 0 }),
});

function reporter() {
  const inner = new StateGraph(Report)
    .addNode('deep', (_state, config) => {
      for (const r of reports.inner) config.writer?.(r);
      return { steps: reports.inner.length };
    })
    .addEdge(START, 'deep')
    .addEdge('deep', END)
    .compile();
  return new StateGraph(Report)
    .addNode('work', async (_state, config) => {
      for (const r of reports.root) {
        config.writer?.(r);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return { steps: reports.root.length };
    })
    .addNode('inner', inner)
    .addEdge(START, 'work')
    .addEdge('work', 'inner')
    .addEdge('inner', END);
}

export const graphs = { agent: builder(), reporter: reporter() };
