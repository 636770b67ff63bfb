// The side-by-side suite's JavaScript half (test_js_sdk.py runs it once per server):
// @langchain/langgraph-sdk 1.15.0, as tests/integration pins it, streams a run of the example
// agent with messages-tuple + values + updates, then joins a background run's stream from its
// start (joinStream with Last-Event-ID -1 on a resumable run), and prints what it received as
// JSON on stdout: the caller normalises and compares it.
//   node tests/side-by-side/js/sdk-stream.mjs http://127.0.0.1:PORT
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
// The SDK from tests/integration's node_modules (its package-lock.json pins it).
const require = createRequire(path.join(here, '../../integration/package.json'));
const { Client } = require('@langchain/langgraph-sdk');

const apiUrl = process.argv[2];
if (!apiUrl) {
  console.error('usage: sdk-stream.mjs <api url>');
  process.exit(2);
}
const client = new Client({ apiUrl, apiKey: null });
const streamMode = ['messages-tuple', 'values', 'updates'];
const input = (q) => ({ messages: [{ role: 'user', content: q }] });

async function collect(iterable) {
  const out = [];
  for await (const chunk of iterable) out.push(chunk);
  return out;
}

const thread = await client.threads.create();
const streamed = await collect(client.runs.stream(thread.thread_id, 'agent', { input: input('what is redis'), streamMode }));
const run = await client.runs.create(thread.thread_id, 'agent',
  { input: input('and valkey?'), streamMode, streamResumable: true });
const joined = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: '-1' }));
const state = await client.threads.getState(thread.thread_id);
const after = await client.threads.get(thread.thread_id);
process.stdout.write(JSON.stringify({ streamed, joined, state, thread: after }));
