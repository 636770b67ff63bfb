// Fixtures for the RedisSaver tests in tests/integration/checkpoint.test.mjs.
// They live here so that their imports resolve from this package's
// node_modules: ioredis and a small real LangGraph graph.
import { Annotation, Command, END, START, StateGraph, interrupt } from '@langchain/langgraph';

export { Redis } from 'ioredis';
export { Command };
export { ERROR, JsonPlusSerializer, MemorySaver, emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
export { RedisSaver, WorkerSaver } from '../checkpoint.js';

const append = (a, b) => a.concat(b);

const State = Annotation.Root({
  log: Annotation({ reducer: append, default: () => [] }),
  data: Annotation(),
});

/**
 * START → agent → research → END. agent logs what it saw; when the input says
 * "interrupt" it asks (interrupt()) and logs the answer; with `bytes` it
 * also stores `data`, a Uint8Array of every byte value (a pending write of
 * serde type "bytes" — which MemorySaver 1.2.2 cannot read back: it loads
 * every write as "json"). research runs a subgraph (plan → read, its own
 * state) whose checkpoints go to a child namespace.
 */
export function buildGraph(checkpointer, { bytes = true } = {}) {
  const Research = Annotation.Root({
    topic: Annotation(),
    notes: Annotation({ reducer: append, default: () => [] }),
  });
  const researcher = new StateGraph(Research)
    .addNode('plan', (s) => ({ notes: [`plan ${s.topic}`] }))
    .addNode('read', () => ({ notes: ['read'] }))
    .addEdge(START, 'plan')
    .addEdge('plan', 'read')
    .addEdge('read', END)
    .compile();
  return new StateGraph(State)
    .addNode('agent', (state) => {
      const input = state.log[state.log.length - 1] ?? '';
      const out = [`agent saw ${input}`];
      if (input.includes('interrupt')) out.push(`answer ${interrupt({ question: 'go on?' })}`);
      return bytes ? { log: out, data: Uint8Array.from({ length: 256 }, (_, i) => i) } : { log: out };
    })
    .addNode('research', async (state, config) => {
      const { notes } = await researcher.invoke({ topic: state.log[0] }, config);
      return { log: notes };
    })
    .addEdge(START, 'agent')
    .addEdge('agent', 'research')
    .addEdge('research', END)
    .compile({ checkpointer });
}

/** START → a → b → END; each node sets x (a LastValue channel) to its name. */
export function buildLineGraph(checkpointer) {
  const Line = Annotation.Root({ x: Annotation() });
  return new StateGraph(Line)
    .addNode('a', () => ({ x: 'a' }))
    .addNode('b', () => ({ x: 'b' }))
    .addEdge(START, 'a')
    .addEdge('a', 'b')
    .addEdge('b', END)
    .compile({ checkpointer });
}
