// What a run is run with, merged as the reference server merges it
// (@langchain/langgraph-api: storage/ops runs.put, stream.mts, and its
// checkpointer's put), and what every checkpoint's metadata then holds. No
// I/O.
//
// Three layers, later ones winning member by member:
// 1. the assistant's config, context and metadata — the `assistant` member
//    of a rest.run's params when the gateway sends it, else, for the
//    graph's own (system) assistant, the graph's defaults
//    (LANGGRAPH_CONFIG: `context` is its context, the rest its config) and
//    metadata {created_by: "system"};
// 2. the thread's config and metadata (`thread` in the params);
// 3. the run's own `config`, `context` and `metadata`.
// configurable = assistant's ∪ thread's ∪ run's ∪ {run_id, thread_id,
// graph_id, assistant_id}; metadata = assistant's ∪ thread's ∪ run's (the
// run's `config.metadata` is replaced by it, as the reference does);
// context = assistant's ∪ run's. The run's stream metadata adds
// run_attempt, langgraph_version, langgraph_plan, langgraph_host and
// langgraph_api_url; LangGraph then copies thread_id, run_id, graph_id,
// assistant_id, … from configurable into it.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const isObject = (v) => v != null && typeof v === 'object' && !Array.isArray(v);
const obj = (v) => (isObject(v) ? v : {});

/** The reference's id for a graph's system assistant: uuid5(graph id, 6ba7b821-9dad-11d1-80b4-00c04fd430c8). */
let uuid5;
export async function systemAssistantId(graphId) {
  uuid5 ??= (await import('@langchain/langgraph-checkpoint')).uuid5;
  return uuid5(graphId, '6ba7b821-9dad-11d1-80b4-00c04fd430c8');
}

/**
 * The assistant layer of a run: params.assistant ({config, context,
 * metadata}) when given; else the graph's defaults when the run names the
 * graph's own assistant (its id is the graph id, or the reference's
 * uuid5 of it); else nothing.
 */
export async function assistantLayer(p, graphId, defaults = {}) {
  if (isObject(p.assistant)) {
    return { config: obj(p.assistant.config), context: p.assistant.context, metadata: obj(p.assistant.metadata) };
  }
  const id = p.assistant_id;
  if (id == null || id === graphId || id === await systemAssistantId(graphId)) {
    const { context, ...config } = obj(defaults);
    return { config, context, metadata: { created_by: 'system' } };
  }
  return { config: {}, context: undefined, metadata: {} };
}

/**
 * The merged { config, context } of a run (config: every member of the
 * three layers' configs, its configurable and metadata merged). ids:
 * {run_id, thread_id, graph_id, assistant_id}.
 */
export function mergeRun(assistant, thread, run, ids) {
  const configurable = {
    ...obj(assistant.config.configurable), ...obj(thread.config?.configurable), ...obj(run.config?.configurable),
    ...ids,
  };
  const metadata = { ...assistant.metadata, ...obj(thread.metadata), ...obj(run.metadata) };
  const config = { ...assistant.config, ...obj(run.config), configurable, metadata };
  const a = assistant.context;
  const context = !isObject(a) && a != null ? a : { ...obj(a), ...obj(run.context) };
  return { config, context };
}

let version;
/** The version of @langchain/langgraph the graphs run on (the worker's copy). */
export function langgraphVersion() {
  if (version === undefined) {
    try {
      const entry = createRequire(import.meta.url).resolve('@langchain/langgraph');
      let dir = path.dirname(entry);
      for (let i = 0; i < 5 && version === undefined; i++, dir = path.dirname(dir)) {
        try {
          const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
          if (pkg.name === '@langchain/langgraph') version = pkg.version;
        } catch { /* not here */ }
      }
    } catch { /* unresolvable */ }
    version ??= '0.0.0';
  }
  return version;
}

/** The metadata a run is streamed with (the reference's, for a self-hosted developer server). */
export function streamMetadata(metadata, attempt = 1) {
  const out = { ...metadata, run_attempt: attempt, langgraph_version: langgraphVersion(), langgraph_plan: 'developer',
    langgraph_host: 'self-hosted' };
  if (process.env.LANGGRAPH_API_URL) out.langgraph_api_url = process.env.LANGGRAPH_API_URL;
  return out;
}

/** configurable members a checkpoint's metadata never takes from it (the reference's list). */
const NOT_METADATA = new Set(['checkpoint_ns', 'checkpoint_id', 'run_id', 'thread_id']);

/**
 * A checkpoint's metadata as the reference's checkpointer writes it: the
 * configurable members (but internal `__…` ones and those above), then the
 * run's metadata, then LangGraph's own (source, step, parents).
 */
export function checkpointMetadata(config, metadata) {
  const out = {};
  for (const [k, v] of Object.entries(obj(config?.configurable))) {
    if (!k.startsWith('__') && !NOT_METADATA.has(k) && v !== undefined && typeof v !== 'function') out[k] = v;
  }
  return { ...out, ...obj(config?.metadata), ...metadata };
}
