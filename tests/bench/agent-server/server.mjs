// LangGraph's own Agent Server (@langchain/langgraph-api, pinned in
// package-lock.json beside this file) as its in-memory dev server, in this one
// process: what `langgraphjs dev` runs in its child process, started the way
// the reference's own tests start it (startServer from "/server"), serving
// graph.mjs's graph as "tokens". Its ops and checkpoints live in memory (flushed
// to files in --cwd, a scratch directory, on exit).
//
//   node server.mjs --port PORT [--jobs N] --cwd DIR
// --jobs: how many runs it executes at once (its nWorkers; the CLI's default
// is 10). Prints {"ready": PORT} once it listens. SIGTERM ends it.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

process.env.LOG_LEVEL ??= 'warn'; // its default, debug, logs every request
const { startServer } = await import('@langchain/langgraph-api/server');

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const port = Number(opt('--port', 2024));
const { cleanup } = await startServer({
  port, host: '127.0.0.1', nWorkers: Number(opt('--jobs', 10)), cwd: opt('--cwd', process.cwd()),
  graphs: { tokens: `${path.join(here, 'graph.mjs')}:graph` },
});
process.stdout.write(`${JSON.stringify({ ready: port })}\n`);
process.once('SIGTERM', async () => {
  await cleanup().catch(() => {});
  process.exit(0);
});
