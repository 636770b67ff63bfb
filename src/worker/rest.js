// The worker's side of the Agent Protocol REST API (issue 17): the shapes
// @langchain/langgraph-sdk's Client expects for a thread's state, history and
// an assistant's graph and schemas, made from LangGraph's own objects, and
// how its params read; no I/O. The commands themselves are handled in
// commands.js (rest.cancel, rest.state.get, …) and rest-runs.js (rest.run);
// protocol/README.md ("The LangGraph worker: REST runs and state") is the
// contract.
import { Command, Send } from '@langchain/langgraph';
import { plain } from './relay.js';

/** Most states rest.history answers with (the SDK's default is 10). */
export const HISTORY_MAX = 1000;

/**
 * The SDK's Checkpoint of a config ({thread_id, checkpoint_ns,
 * checkpoint_id, checkpoint_map}), or null when the config names no
 * checkpoint (a thread that never ran, a snapshot's missing parent).
 */
export function checkpointOf(config) {
  const c = config?.configurable;
  if (!c || typeof c.thread_id !== 'string' || typeof c.checkpoint_id !== 'string' || !c.checkpoint_id) return null;
  return {
    thread_id: c.thread_id,
    checkpoint_ns: c.checkpoint_ns || '',
    checkpoint_id: c.checkpoint_id,
    checkpoint_map: c.checkpoint_map ? plain(c.checkpoint_map) : null,
  };
}

/** What a task's state field names: a snapshot (subgraphs: true) or a config. */
const isSnapshot = (s) => s != null && typeof s === 'object' && 'values' in s && 'next' in s;

const errorMessage = (e) => (e instanceof Error ? e.message : (typeof e === 'string' ? e : JSON.stringify(e)));

/** The interrupts a task waits on, as the SDK's Interrupt ({id, value}). */
const interruptsOf = (task) => (task.interrupts ?? []).map((i) => plain({ id: i.id, value: i.value }));

/**
 * A LangGraph StateSnapshot as the SDK's ThreadState: values (plain dicts,
 * not LangChain's constructor form), next, tasks (error as its message,
 * interrupts, the subgraph's checkpoint or nested state), checkpoint and
 * parent_checkpoint, metadata (without the root's empty checkpoint_ns),
 * created_at, and interrupts: every interrupt still waiting for an answer
 * (not in a subgraph's nested state, which the Agent Server gives without).
 */
export function threadState(snap, nested = false) {
  const tasks = (snap.tasks ?? []).map((t) => ({
    id: t.id,
    name: t.name,
    path: t.path ? plain(t.path) : undefined,
    error: t.error != null ? errorMessage(t.error) : null,
    interrupts: interruptsOf(t),
    checkpoint: t.state && !isSnapshot(t.state) ? partialCheckpoint(t.state) : null,
    state: isSnapshot(t.state) ? threadState(t.state, true) : null,
    result: t.result !== undefined ? plain(t.result) : null,
  }));
  const metadata = snap.metadata ? plain(snap.metadata) : undefined;
  if (metadata && metadata.checkpoint_ns === '') delete metadata.checkpoint_ns;
  const waiting = [];
  for (const t of snap.tasks ?? []) {
    if (t.result !== undefined) continue;
    for (const i of interruptsOf(t)) if (!waiting.some((w) => w.id === i.id)) waiting.push(i);
  }
  return {
    values: plain(snap.values) ?? {},
    next: [...(snap.next ?? [])],
    tasks,
    checkpoint: checkpointOf(snap.config),
    metadata,
    created_at: snap.createdAt ?? null,
    parent_checkpoint: checkpointOf(snap.parentConfig),
    ...(nested ? {} : { interrupts: waiting }),
  };
}

/**
 * A subgraph task's checkpoint: its config's configurable as LangGraph
 * gives it ({thread_id, checkpoint_ns}, no checkpoint id), as the reference
 * answers it.
 */
function partialCheckpoint(config) {
  const c = config?.configurable;
  if (!c || typeof c.thread_id !== 'string') return null;
  return plain(c);
}

/** The state of a thread that never ran, as the reference server answers it. */
export const emptyState = () => ({ values: {}, next: [], tasks: [], checkpoint: null, metadata: undefined, created_at: null,
  parent_checkpoint: null, interrupts: [] });

/** A boolean param as the REST API takes it: true, "true", "1" or 1. */
export const truthy = (v) => v === true || v === 'true' || v === '1' || v === 1;

/** Raised for input a command cannot be run with; its message says which field and why. */
export class InputError extends Error {
  constructor(message) {
    super(message);
    this.name = 'InputError';
  }
}

/** A `goto` of the API (a node name, a {node, input} Send, or a list of them) for LangGraph. */
function gotoOf(g) {
  if (g == null) return undefined;
  const one = (x, where) => {
    if (typeof x === 'string') return x;
    if (x && typeof x === 'object' && typeof x.node === 'string') return new Send(x.node, x.input);
    throw new InputError(`command.goto${where} must be a node name or {node, input}`);
  };
  return Array.isArray(g) ? g.map((x, i) => one(x, `[${i}]`)) : one(g, '');
}

/** The API's `command` ({resume, update, goto}) as a LangGraph Command. */
export function toCommand(c) {
  if (!c || typeof c !== 'object' || Array.isArray(c)) throw new InputError('command must be an object with resume, update or goto');
  const args = {};
  if (c.resume !== undefined && c.resume !== null) args.resume = c.resume;
  if (c.update !== undefined && c.update !== null) args.update = c.update;
  const goto = gotoOf(c.goto);
  if (goto !== undefined) args.goto = goto;
  if (!Object.keys(args).length) throw new InputError('command has none of resume, update, goto');
  return new Command(args);
}

/* ---- what an assistant looks like (stored at registration) -------------------------------- */

export const isStateSchemaLike = (v) => v && typeof v === 'object' && typeof v.getJsonSchema === 'function' && typeof v.getInputJsonSchema === 'function';

/** A zod schema (v3 or v4) as JSON Schema, or null. */
async function zodJson(schema) {
  if (!schema || typeof schema !== 'object') return null;
  try {
    const { isZodSchemaV3, isZodSchemaV4 } = await import('@langchain/core/utils/types');
    if (!isZodSchemaV3(schema) && !isZodSchemaV4(schema)) return null;
    const { toJsonSchema } = await import('@langchain/core/utils/json_schema');
    return toJsonSchema(schema);
  } catch {
    return null;
  }
}

/**
 * The channels of an Annotation state, as a JSON Schema that names them and
 * says nothing of their types (LangGraph.js keeps no types at run time).
 */
function channelsSchema(definition, title) {
  if (!definition || typeof definition !== 'object' || isStateSchemaLike(definition)) return null;
  const names = Object.keys(definition).filter((k) => !k.startsWith('__'));
  if (!names.length) return null;
  return { title, type: 'object', properties: Object.fromEntries(names.map((k) => [k, {}])) };
}

/**
 * {graph_id, input_schema, output_schema, state_schema, config_schema,
 * context_schema} of a compiled graph: from a StateSchema's JSON Schema, a
 * zod state's, else the Annotation channels' names; null where LangGraph.js
 * cannot tell.
 */
export async function graphSchemas(assistant, compiled) {
  const b = compiled.builder ?? {};
  let state = null;
  let input = null;
  let output = null;
  let config = null;
  if (isStateSchemaLike(b._schemaRuntimeDefinition)) {
    state = b._schemaRuntimeDefinition.getJsonSchema();
    input = isStateSchemaLike(b._inputRuntimeDefinition) ? b._inputRuntimeDefinition.getInputJsonSchema() : b._schemaRuntimeDefinition.getInputJsonSchema();
    output = isStateSchemaLike(b._outputRuntimeDefinition) ? b._outputRuntimeDefinition.getJsonSchema() : state;
  } else {
    state = await zodJson(b._schemaRuntimeDefinition);
    input = (await zodJson(b._inputRuntimeDefinition)) ?? (state ? { ...state, required: undefined } : null);
    output = (await zodJson(b._outputRuntimeDefinition)) ?? state;
    config = await zodJson(b._configRuntimeSchema);
  }
  if (!state) {
    state = channelsSchema(b._schemaDefinition, assistant);
    const inputDef = b._inputDefinition && b._inputDefinition !== b._schemaDefinition ? channelsSchema(b._inputDefinition, `${assistant} input`) : null;
    const outputDef = b._outputDefinition && b._outputDefinition !== b._schemaDefinition ? channelsSchema(b._outputDefinition, `${assistant} output`) : null;
    input = inputDef ?? state;
    output = outputDef ?? state;
  }
  return plain({ graph_id: assistant, input_schema: input, output_schema: output, state_schema: state, config_schema: config,
    context_schema: config });
}

/** The drawable graph the SDK's assistants.getGraph returns ({nodes, edges}); xray: the subgraphs' insides too. */
export async function graphJson(compiled, xray = false) {
  const drawable = await compiled.getGraphAsync(xray ? { xray } : undefined);
  return plain(drawable.toJSON());
}
