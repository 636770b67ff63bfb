// The example graph threadcast's LangGraph worker serves by default: a real
// @langchain/langgraph StateGraph whose chat model is a fake streaming model
// from @langchain/core/utils/testing (no network, no keys).
//
//   START → model ─(tool call)→ tools → model → researcher (a subgraph) → approve → END
//                 └─(no tool call)──────────↗
//
// - model streams its text token by token. On a fresh human turn it first
//   calls the `search` tool (streamed as tool_call_chunks), then, after the
//   tool's result, streams an answer that quotes the question.
// - tools is LangGraph's prebuilt ToolNode with the one tool.
// - researcher is a compiled subgraph (namespace ["researcher:<task id>"])
//   with its own model node, summarize; when the question contains "deep
//   interrupt" its review node calls interrupt().
// - approve calls interrupt() when the question contains "interrupt" (and
//   not "deep interrupt"), or, when it contains "approval", with a request
//   LangChain's chat UI answers with its Approve button (approvalRequest);
//   the answer is kept in the state's `approved`.
//
// To put a real chat model in its place, make model() call it (src/worker/README.md,
// "A real chat model"): any LangChain chat model that streams works, e.g.
//   import { ChatOpenAI } from '@langchain/openai';
//   const llm = new ChatOpenAI({ model: 'gpt-4o-mini' }).bindTools([search]);
import { StateGraph, MessagesAnnotation, Annotation, START, END, interrupt } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { FakeListChatModel, FakeStreamingChatModel } from '@langchain/core/utils/testing';
import { AIMessage, AIMessageChunk, HumanMessage } from '@langchain/core/messages';
import { ChatGenerationChunk } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';

/** Milliseconds between the fake models' tokens (THREADCAST_FAKE_TOKEN_MS). */
export const tokenMs = () => Number(process.env.THREADCAST_FAKE_TOKEN_MS ?? 20);

export const search = tool(
  async ({ query }) => `3 results for "${query}": threadcast, redis streams, langgraph`,
  { name: 'search', description: 'Search the knowledge base', schema: z.object({ query: z.string() }) },
);

/**
 * FakeStreamingChatModel that streams its tool calls as tool_call_chunks.
 * The stock one puts tool_calls on an AIMessageChunk, which carries no
 * tool_call_chunks, and LangGraph's protocol stream (streamEvents v3) reads
 * only those: the call would be lost and the graph would never reach tools.
 */
export class FakeToolCallingModel extends FakeStreamingChatModel {
  async _generate(messages, options, runManager) {
    let all;
    for await (const c of this._streamResponseChunks(messages, options, runManager)) all = all ? all.concat(c) : c;
    const m = all.message;
    return { generations: [{ text: all.text, message: new AIMessage({ content: m.content, tool_calls: m.tool_calls, id: m.id }) }] };
  }

  async *_streamResponseChunks(_messages, options, runManager) {
    let block = 0;
    for (const c of this.chunks) {
      await new Promise((r) => setTimeout(r, this.sleep));
      if (options.signal?.aborted) return;
      const pieces = [];
      if (c.content) pieces.push(new AIMessageChunk({ content: c.content }));
      for (const call of c.tool_calls ?? []) {
        const args = JSON.stringify(call.args);
        const cut = Math.ceil(args.length / 3);
        const index = ++block; // the text is block 0
        pieces.push(new AIMessageChunk({ content: '', tool_call_chunks: [{ index, id: call.id, name: call.name, args: args.slice(0, cut), type: 'tool_call_chunk' }] }));
        pieces.push(new AIMessageChunk({ content: '', tool_call_chunks: [{ index, args: args.slice(cut, 2 * cut), type: 'tool_call_chunk' }] }));
        pieces.push(new AIMessageChunk({ content: '', tool_call_chunks: [{ index, args: args.slice(2 * cut), type: 'tool_call_chunk' }] }));
      }
      for (const message of pieces) {
        const chunk = new ChatGenerationChunk({ message, text: typeof message.content === 'string' ? message.content : '' });
        yield chunk;
        await runManager?.handleLLMNewToken(chunk.text, undefined, undefined, undefined, undefined, { chunk });
      }
    }
  }
}

/**
 * A message's content as text: a string as it is; a list of content blocks
 * (what LangChain's chat UI sends: [{type: 'text', text}, …]) as its text
 * blocks joined, other blocks (images, files) left out.
 */
export function textOf(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b) => (typeof b === 'string' ? b : b?.type === 'text' && typeof b.text === 'string' ? b.text : ''))
    .filter(Boolean).join(' ');
}

function lastHuman(messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (HumanMessage.isInstance(messages[i])) return textOf(messages[i].content);
  }
  return '';
}

const words = (s) => s.match(/\S+\s*/g) ?? [];

/** What the model says; the test suite compares transcripts with these. */
export const lines = {
  searching: 'Let me search for that. ',
  answer: (q) => `Here is what I found about "${q}".`,
  summary: 'Summary: the search found three sources.',
};

async function model(state, config) {
  const question = lastHuman(state.messages);
  const last = state.messages.at(-1);
  const llm = HumanMessage.isInstance(last) && !/no tools/.test(question)
    ? new FakeToolCallingModel({
      sleep: tokenMs(),
      chunks: [
        ...words(lines.searching).map((content) => ({ content })),
        { content: '', tool_calls: [{ id: `call_${state.messages.length}`, name: 'search', args: { query: question }, type: 'tool_call' }] },
      ],
    })
    : new FakeListChatModel({ sleep: tokenMs(), responses: [lines.answer(question)] });
  return { messages: [await llm.invoke(state.messages, config)] };
}

const afterModel = (state) => (state.messages.at(-1)?.tool_calls?.length ? 'tools' : 'researcher');

const Research = Annotation.Root({
  ...MessagesAnnotation.spec,
  notes: Annotation({ reducer: (_a, b) => b, default: () => '' }),
});

async function summarize(state, config) {
  const llm = new FakeListChatModel({ sleep: tokenMs(), responses: [lines.summary] });
  return { messages: [await llm.invoke(state.messages, config)], notes: 'summarized' };
}

function review(state) {
  if (/deep interrupt/.test(lastHuman(state.messages))) {
    const answer = interrupt({ question: 'Keep the summary?', from: 'researcher' });
    return { notes: `reviewed: ${JSON.stringify(answer)}` };
  }
  return { notes: 'reviewed' };
}

const researcher = () => new StateGraph(Research)
  .addNode('summarize', summarize)
  .addNode('review', review)
  .addEdge(START, 'summarize')
  .addEdge('summarize', 'review')
  .addEdge('review', END)
  .compile();

const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  approved: Annotation({ reducer: (_a, b) => b, default: () => null }),
});

/**
 * What approve asks when the question contains "approval": a request in the
 * shape of LangChain's human-in-the-loop middleware (action_requests and
 * review_configs), which LangChain's chat UI (agent-chat-ui) and Agent Inbox
 * show with Approve and Reject buttons; they resume with {decisions: [...]}.
 * A plain interrupt() value ("interrupt") they can only show, not answer.
 */
export const approvalRequest = (question) => ({
  action_requests: [{ name: 'send_answer', args: { question }, description: 'Send this answer?' }],
  review_configs: [{ action_name: 'send_answer', allowed_decisions: ['approve', 'reject'] }],
});

function approve(state) {
  const q = lastHuman(state.messages);
  if (/approval/.test(q)) return { approved: interrupt(approvalRequest(q)) };
  if (/interrupt/.test(q) && !/deep interrupt/.test(q)) {
    return { approved: interrupt({ question: 'Approve the answer?', options: ['yes', 'no'] }) };
  }
  return {};
}

/** The graph, not yet compiled: the worker compiles it with its checkpointer. */
export function builder() {
  return new StateGraph(State)
    .addNode('model', model)
    .addNode('tools', new ToolNode([search]))
    .addNode('researcher', researcher())
    .addNode('approve', approve)
    .addEdge(START, 'model')
    .addConditionalEdges('model', afterModel, ['tools', 'researcher'])
    .addEdge('tools', 'model')
    .addEdge('researcher', 'approve')
    .addEdge('approve', END);
}
