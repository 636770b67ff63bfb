// The token graph of scripts/bench's tokens scenario, loaded unchanged by both
// servers: threadcast's LangGraph worker (`threadcast-worker --graphs` this
// file) and LangGraph's own Agent Server (server.mjs beside it). One node,
// "model", whose fake chat model streams `tokens` tokens, `pace_ms` apart
// (the run's config.configurable; 200 and 20 when absent). pace_ms 0 is full
// speed: the next token follows after one turn of the event loop
// (setImmediate), so the process still does its I/O between tokens, as it
// would between a real model's network chunks.
//
// Each token says when it was emitted: its text is `tok<i>@<t> `, where i
// counts from 0 and t is the emitting process's CLOCK_MONOTONIC in
// microseconds (process.hrtime), read as the chunk is made, right before the
// model yields it to LangGraph. Every process on the machine reads the same
// clock, so a client's receipt time minus t is the token's latency through
// the whole server side; no clock sync, no side channel.
//
// The LangGraph packages are taken from the node_modules of the process that
// loads this file (its main script's), so the graph and the server use one
// instance of each (both pin the same versions): the worker's
// src/worker/node_modules, the Agent Server's tests/bench/agent-server/node_modules.
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { load as loadFrom } from './resolve.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const host = [process.argv[1] && path.dirname(realpathSync(process.argv[1])), here].filter(Boolean);
const load = (spec) => loadFrom(spec, host);

const { StateGraph, MessagesAnnotation, START, END } = await load('@langchain/langgraph');
const { FakeListChatModel } = await load('@langchain/core/utils/testing');
const { AIMessage, AIMessageChunk } = await load('@langchain/core/messages');
const { ChatGenerationChunk } = await load('@langchain/core/outputs');

/** CLOCK_MONOTONIC in microseconds: the stamp's clock (clients read it the same way). */
export const nowUs = () => Number(process.hrtime.bigint() / 1000n);

/** The tokens of a stamped text, [{i, t}] (t: emission, µs). */
export function stamps(text) {
  const out = [];
  for (const m of String(text).matchAll(/tok(\d+)@(\d+)/g)) out.push({ i: Number(m[1]), t: Number(m[2]) });
  return out;
}

/** A fake chat model that streams `tokens` stamped tokens, `pace` ms apart. */
class StampedModel extends FakeListChatModel {
  constructor({ tokens, pace }) {
    super({ responses: [''] });
    this.tokens = tokens;
    this.pace = pace;
  }

  async _generate(messages, options, runManager) {
    let all;
    for await (const c of this._streamResponseChunks(messages, options, runManager)) all = all ? all.concat(c) : c;
    return { generations: [{ text: all.text, message: new AIMessage({ content: all.text }) }] };
  }

  async *_streamResponseChunks(_messages, options, runManager) {
    for (let i = 0; i < this.tokens; i++) {
      await new Promise((r) => (this.pace > 0 ? setTimeout(r, this.pace) : setImmediate(r)));
      if (options.signal?.aborted) return;
      const text = `tok${i}@${nowUs()} `;
      const chunk = new ChatGenerationChunk({ message: new AIMessageChunk({ content: text }), text });
      yield chunk;
      await runManager?.handleLLMNewToken(text, undefined, undefined, undefined, undefined, { chunk });
    }
  }
}

async function model(state, config) {
  const c = config?.configurable ?? {};
  const llm = new StampedModel({ tokens: Number(c.tokens ?? 200), pace: Number(c.pace_ms ?? 20) });
  return { messages: [await llm.invoke(state.messages, config)] };
}

/** The graph (not compiled: each server compiles it with its own checkpointer). */
export const graph = new StateGraph(MessagesAnnotation)
  .addNode('model', model)
  .addEdge(START, 'model')
  .addEdge('model', END);

/** threadcast-worker --graphs reads `graphs`: the same graph as assistant "tokens". */
export const graphs = { tokens: graph };
