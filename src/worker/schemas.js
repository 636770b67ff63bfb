// A graph's JSON schemas (input, output, state, config/context) and those of
// its subgraphs, as LangGraph's Agent Server answers /assistants/:id/schemas
// and /subgraphs — through the Agent Server's own extraction, which
// @langchain/langgraph-api exports (`/schema`), rather than a copy of it:
// 1. the schemas a graph carries at run time (a zod state, a StateSchema,
//    zod registries with their `langgraph_type` extras):
//    getRuntimeGraphSchema;
// 2. else, for a graph loaded from a file (langgraph.json's
//    "./file.mts:export"), its TypeScript types read from the source by the
//    TypeScript compiler (getStaticGraphSchema, in a worker thread): an
//    `Annotation` state keeps no types at run time;
// 3. else what the worker can tell by itself (rest.js graphSchemas: the
//    channels' names).
// The static reading takes seconds (one TypeScript program of the sources
// and their imports); the worker does it before it registers (loops.js),
// only for graphs loaded from files that need it.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { plain } from './relay.js';
import { graphSchemas, isStateSchemaLike } from './rest.js';

let api;
const schemaApi = async () => (api ??= await import('@langchain/langgraph-api/schema'));

/** The Agent Server's {graph_id, input_schema, …} of one schema set ({state, input, output, config}). */
const answered = (graphId, s) => plain({ graph_id: graphId, input_schema: s.input ?? null, output_schema: s.output ?? null,
  state_schema: s.state ?? null, config_schema: s.config ?? null, context_schema: s.config ?? null });

/** {state, input, output, config} of our own reading (3), for subgraphs. */
const own = (s) => ({ state: s.state_schema, input: s.input_schema, output: s.output_schema, config: s.config_schema });

/**
 * The ES module file of LangGraph's `zod/schema` as code at `from` imports
 * it (the package's "import" export: require.resolve would give its CommonJS
 * twin, another registry).
 */
function zodSchemaModule(from) {
  const pkg = createRequire(from).resolve('@langchain/langgraph/package.json');
  const entry = JSON.parse(readFileSync(pkg, 'utf8')).exports?.['./zod/schema']?.import;
  const file = typeof entry === 'string' ? entry : entry?.default;
  return file ? path.resolve(path.dirname(pkg), file) : null;
}

/** The worker's own copy of it (the one @langchain/langgraph-api reads), once known. */
let workersZodSchema;

/**
 * The zod registry's schemas of a graph whose source has its own copy of
 * LangGraph (a langgraph.json project's node_modules): withLangGraph()
 * wrote its `langgraph_type` extras into that copy's registry, which the
 * worker's copy (the one @langchain/langgraph-api reads) does not see.
 * null when the copy is the worker's, the graph has a StateSchema (read
 * first, by the API) or the registry knows nothing of it.
 */
async function sourceRegistry(compiled, sourceFile) {
  const b = compiled.builder;
  if (!sourceFile || !b) return null;
  if ([b._schemaRuntimeDefinition, b._inputRuntimeDefinition, b._outputRuntimeDefinition].some(isStateSchemaLike)) return null;
  try {
    const at = zodSchemaModule(sourceFile);
    workersZodSchema ??= zodSchemaModule(fileURLToPath(import.meta.url));
    if (!at || at === workersZodSchema) return null;
    const z = await import(pathToFileURL(at).href);
    const s = { state: z.getUpdateTypeSchema(compiled), input: z.getInputTypeSchema(compiled), output: z.getOutputTypeSchema(compiled),
      config: z.getConfigTypeSchema(compiled) };
    return Object.values(s).every((v) => v == null) ? null : s;
  } catch {
    return null;
  }
}

/**
 * The runtime schemas of a compiled graph (1), else null. A graph the
 * extraction cannot read is not an error: the next source is taken.
 */
async function runtime(compiled, sourceFile) {
  try {
    return (await sourceRegistry(compiled, sourceFile)) ?? (await (await schemaApi()).getRuntimeGraphSchema(compiled)) ?? null;
  } catch {
    return null;
  }
}

/**
 * What the worker can say of a graph now (1, else 3; sourceFile: where it
 * was loaded from, if from a file): `schemas` (the
 * /schemas answer), `subgraphs` ({"<namespace>": {state, input, output,
 * config}}, parents first), `runtime` (the root's came from 1) and
 * `runtimeNs` (the namespaces whose did); `pending`: whether the static
 * reading (2) may do better somewhere.
 */
export async function describe(graphId, compiled, sourceFile) {
  const root = await runtime(compiled, sourceFile);
  const subgraphs = {};
  const runtimeNs = new Set();
  for await (const [ns, sub] of compiled.getSubgraphsAsync(undefined, true)) {
    const s = await runtime(sub, sourceFile);
    if (s) runtimeNs.add(ns);
    subgraphs[ns] = plain(s ?? own(await graphSchemas(ns, sub)));
  }
  return { schemas: root ? answered(graphId, root) : await graphSchemas(graphId, compiled), subgraphs, runtime: !!root, runtimeNs,
    pending: !root || runtimeNs.size < Object.keys(subgraphs).length };
}

/**
 * The static reading (2) of the graphs in `specs` ({graphId: {sourceFile,
 * exportSymbol}}) over what `describe` gave (`described`: graphId → its
 * answer): {graphId: {schemas, subgraphs}}. The reference keys what it
 * reads by the export's name ("graph", "graph|<namespace>"); a subgraph it
 * has no entry for gets the root's, as the reference answers it.
 */
export async function fromSources(specs, described, { timeoutMs = 30000 } = {}) {
  const read = await (await schemaApi()).getStaticGraphSchema(specs, { timeoutMs });
  const out = {};
  for (const [graphId, byName] of Object.entries(read ?? {})) {
    const had = described[graphId];
    const rootName = Object.keys(byName ?? {}).find((k) => !k.includes('|'));
    if (!had || !rootName) continue;
    const subgraphs = {};
    for (const [ns, s] of Object.entries(had.subgraphs)) {
      subgraphs[ns] = had.runtimeNs.has(ns) ? s : plain(byName[`${rootName}|${ns}`] ?? byName[rootName]);
    }
    out[graphId] = { schemas: had.runtime ? had.schemas : answered(graphId, byName[rootName]), subgraphs };
  }
  return out;
}
