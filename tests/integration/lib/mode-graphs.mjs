// The graphs rest-modes.test.mjs has the LangGraph worker serve (besides the
// example graph as "agent"), each there for what a stream mode must carry:
// - "loop": a chat model that answers "begin", then "end", streamed token by
//   token; the graph goes on while the model's last answer is not the string
//   "end" (so a model whose output became content blocks would loop until
//   the recursion limit), through "tool", a node that returns a tool message
//   it never streams;
// - "failing": a node that throws an exception of its own class (CustomError).
// @langchain/* are the worker's own copies (the very files it loads).
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { builder } from '../../../src/worker/graphs/agent.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = (p) => import(pathToFileURL(path.join(here, '../../../src/worker/node_modules/@langchain', p)).href);
const { StateGraph, MessagesAnnotation, START, END } = await pkg('langgraph/dist/index.js');
const { FakeListChatModel } = await pkg('core/dist/utils/testing/index.js');
const { ToolMessage } = await pkg('core/dist/messages/index.js');

const tokenMs = () => Number(process.env.THREADCAST_FAKE_TOKEN_MS ?? 5);

function loop() {
  return new StateGraph(MessagesAnnotation)
    .addNode('model', async (state, config) => {
      const said = state.messages.filter((m) => m.getType?.() === 'ai').length;
      const model = new FakeListChatModel({ responses: [said ? 'end' : 'begin'], sleep: tokenMs() });
      return { messages: [await model.invoke(state.messages, config)] };
    })
    .addNode('tool', (state) => ({
      messages: [new ToolMessage({ content: `tool_call__${state.messages.at(-1).content}`, tool_call_id: 'call_1' })],
    }))
    .addEdge(START, 'model')
    .addConditionalEdges('model', (state) => (state.messages.at(-1).content === 'end' ? END : 'tool'), ['tool', END])
    .addEdge('tool', 'model');
}

class CustomError extends Error {
  constructor(message) {
    super(message);
    this.name = 'CustomError';
  }
}

function failing() {
  return new StateGraph(MessagesAnnotation)
    .addNode('boom', async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      throw new CustomError('it went boom');
    })
    .addEdge(START, 'boom');
}

export const graphs = { agent: builder(), loop: loop(), failing: failing() };
