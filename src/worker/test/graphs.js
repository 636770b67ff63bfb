// Graphs for tests/integration/rest-worker.test.mjs (the worker serves this
// module: threadcast-worker --graphs src/worker/test/graphs.js). It lives here
// so that @langchain/langgraph resolves from this package's node_modules, the
// worker's own copy.
//
// "steps": START → first → second → END over {text (the input), log, answer}.
// What second does depends on the text: "fail" throws, "ask" calls
// interrupt() (the answer lands in `answer`), "slow" waits until the run is
// cancelled (at most 30 s), anything else finishes at once.
import { Annotation, END, START, StateGraph, interrupt } from '@langchain/langgraph';
import { builder } from '../graphs/agent.js';

const Steps = Annotation.Root({
  text: Annotation(),
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  answer: Annotation(),
});

/** Resolves after ms, or rejects when signal aborts. */
function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(new Error('aborted'));
    }, { once: true });
  });
}

export function steps() {
  return new StateGraph(Steps)
    .addNode('first', (s) => ({ log: [`first saw ${s.text}`] }))
    .addNode('second', async (s, config) => {
      if (/fail/.test(s.text)) throw new Error('the second step failed on purpose');
      if (/ask/.test(s.text)) return { answer: interrupt({ question: 'go on?' }), log: ['second asked'] };
      if (/slow/.test(s.text)) await pause(30000, config.signal);
      return { log: ['second done'] };
    })
    .addEdge(START, 'first')
    .addEdge('first', 'second')
    .addEdge('second', END);
}

/** TC_TEST_GRAPHS=alias: "steps" served as "steps-b" (a worker that never holds a "steps" run). */
export const graphs = process.env.TC_TEST_GRAPHS === 'alias' ? { 'steps-b': steps() } : { steps: steps(), agent: builder() };
