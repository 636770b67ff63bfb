// The graphs a worker serves: where they come from, in which forms they are
// taken, and how a run gets its graph — as the reference server
// (@langchain/langgraph-api, graph/load) takes them, so a project that runs
// there runs here unchanged.
//
// - An export may be a StateGraph (compiled here), a compiled graph, a
//   Promise of either, or a graph factory: a function of a config that
//   returns (a Promise of) either. A factory is called again for every run,
//   with the run's config, and for every state command, with the config of
//   the thread's last run (the reference passes the thread's config; a
//   thread that never ran here gets `{configurable: {}}`). A wrapper with the
//   real compiled graph under `.graph` (langchain's createAgent) is unwrapped.
// - Sources: a module's `graphs` ({ <graph id>: export }), or a langgraph.json
//   (loadConfig): `graphs: { <id>: "./file.mts:export" | {path} }` resolved
//   from the file's directory, and `env` (an object, or a .env file's path)
//   put into process.env before any graph is imported, where the
//   environment does not set the name already.
// - Per-graph defaults: LANGGRAPH_CONFIG (JSON, `{ <graph id>: {configurable,
//   context, …} }`), the config and context of the graph's system assistant
//   (graphDefaults; config.js merges them into runs).
//
// Every graph gets the worker's checkpointer and store (config.store,
// runtime.store) — set on each compiled graph, as the reference sets its own.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseEnv } from 'node:util';

const isObject = (v) => v != null && typeof v === 'object' && !Array.isArray(v);
const isCompiled = (g) => isObject(g) && isObject(g.builder);

/** A StateGraph compiled (with name), a compiled graph as is; createAgent's wrapper unwrapped. */
function compiledOf(g, name) {
  if (!isObject(g)) throw new Error(`graph "${name}" is ${g === null ? 'null' : typeof g}, not a graph`);
  const compiled = typeof g.compile === 'function' && !isCompiled(g) ? g.compile({ name }) : g;
  if (isCompiled(compiled.graph)) return compiled.graph;
  if (typeof compiled.streamEvents !== 'function' || typeof compiled.getState !== 'function') {
    throw new Error(`graph "${name}" is neither a StateGraph nor a compiled graph`);
  }
  return compiled;
}

/** One graph the worker serves: built once (a graph) or per call (a factory). */
export class ServedGraph {
  /**
   * id: the graph id (its assistant's); given: the export, awaited (a
   * graph, or a factory function); defaults: LANGGRAPH_CONFIG's entry;
   * env: { saver, store } every compiled graph gets.
   */
  constructor(id, given, defaults, env) {
    this.id = id;
    this.defaults = defaults ?? {};
    this.env = env;
    this.paths = new WeakMap(); // compiled graph → its subgraph paths
    if (typeof given === 'function') this.factory = given;
    else this.compiled = this.#equip(compiledOf(given, id));
  }

  get isFactory() {
    return !!this.factory;
  }

  #equip(compiled) {
    compiled.checkpointer = this.env.saver;
    compiled.store = this.env.store;
    return compiled;
  }

  /**
   * The compiled graph to run (with config, for a factory: the run's config,
   * `configurable` at least), with its checkpointer and store, and
   * `subgraphPaths`: "researcher", "researcher|inner", … (the relay keeps
   * those namespaces' lifecycle events).
   */
  async build(config = {}) {
    let compiled = this.compiled;
    if (this.factory) {
      const cfg = { ...config, configurable: { ...(config.configurable ?? {}) } };
      compiled = this.#equip(compiledOf(await this.factory(cfg), this.id));
    }
    if (!compiled.subgraphPaths) {
      let paths = this.paths.get(compiled);
      if (!paths) {
        paths = new Set();
        for await (const [p] of compiled.getSubgraphsAsync(undefined, true)) paths.add(p);
        this.paths.set(compiled, paths);
      }
      compiled.subgraphPaths = paths;
    }
    return compiled;
  }
}

/** LANGGRAPH_CONFIG as the reference reads it: an object of objects, one per graph id (or none). */
export function graphDefaults(text = process.env.LANGGRAPH_CONFIG) {
  if (text == null || text === '') return {};
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new Error(`LANGGRAPH_CONFIG is not JSON: ${e.message}`);
  }
  if (!isObject(parsed) || !Object.values(parsed).every(isObject)) {
    throw new Error('LANGGRAPH_CONFIG must be a JSON object of objects: { "<graph id>": { "configurable": {…}, "context": {…} } }');
  }
  return parsed;
}

/**
 * The graphs given to serve(), awaited and checked: Map id → ServedGraph.
 * env: { saver, store }; defaults: graphDefaults().
 */
export async function serveGraphs(given, env, defaults) {
  const graphs = new Map();
  for (const [id, g] of Object.entries(given ?? {})) {
    if (!/^[\x21-\x7e]{1,128}$/.test(id) || id === '*') throw new Error(`bad assistant id "${id}"`);
    graphs.set(id, new ServedGraph(id, await g, defaults[id], env));
  }
  if (!graphs.size) throw new Error('serve() needs at least one graph');
  return graphs;
}

/* ---- where graphs come from --------------------------------------------------------------------- */

/** A module's graphs: its `graphs` export, else its `builder()` served as "agent". */
export async function loadModule(file) {
  const mod = await import(pathToFileURL(path.resolve(file)).href);
  if (mod.graphs != null) return mod.graphs;
  if (typeof mod.builder === 'function') return { agent: mod.builder() };
  throw new Error(`${file} exports neither graphs nor builder()`);
}

/** A .env file's variables (Node's own parser: KEY=value lines, quotes, comments). */
function envFile(file) {
  if (typeof parseEnv !== 'function') throw new Error('reading a .env file named by langgraph.json needs Node 20.12 or later');
  return parseEnv(readFileSync(file, 'utf8'));
}

/**
 * A langgraph.json: { graphs, specs, ignored } (specs: each graph's
 * { sourceFile, exportSymbol }, where its schemas are read from). Its `env` is put into
 * process.env first (names the environment sets already are kept), then
 * each graph's file is imported and its export taken ("./agent.mts:graph";
 * no ":export" means `default`). `ignored`: the keys it has that the worker
 * does not serve (`ui`, `http`, `auth`, …), for the caller to warn about.
 */
export async function loadConfig(file) {
  const at = path.resolve(file);
  const dir = path.dirname(at);
  const config = JSON.parse(readFileSync(at, 'utf8'));
  if (!isObject(config) || !isObject(config.graphs)) throw new Error(`${file}: "graphs" must be an object of graph id → "./file:export"`);
  let env = {};
  if (typeof config.env === 'string') env = envFile(path.resolve(dir, config.env));
  else if (isObject(config.env)) env = config.env;
  else if (config.env != null) throw new Error(`${file}: "env" must be an object or the path of a .env file`);
  for (const [k, v] of Object.entries(env)) if (process.env[k] === undefined) process.env[k] = String(v);
  const graphs = {};
  const specs = {};
  const python = [];
  for (const [id, spec] of Object.entries(config.graphs)) {
    const where = typeof spec === 'string' ? spec : spec?.path;
    if (typeof where !== 'string' || !where) throw new Error(`${file}: graphs.${id} must be "./file:export" or {"path": "./file:export"}`);
    // A Python graph ("./agent.py:graph", or a module path "pkg.agent:graph") is the Python worker's (src/worker-python).
    if (isPythonSource(where)) {
      python.push(id);
      continue;
    }
    const colon = where.lastIndexOf(':');
    // "C:\…" has no export; a spec's export has no slash.
    const [source, name] = colon > 1 && !/[\\/]/.test(where.slice(colon + 1)) ? [where.slice(0, colon), where.slice(colon + 1)] : [where, 'default'];
    const mod = await import(pathToFileURL(path.resolve(dir, source)).href);
    if (!(name in mod)) throw new Error(`${file}: graphs.${id}: ${source} has no export "${name}"`);
    graphs[id] = mod[name];
    specs[id] = { sourceFile: path.resolve(dir, source), exportSymbol: name };
  }
  const served = new Set(['graphs', 'env', 'node_version', 'python_version', 'dependencies', 'dockerfile_lines', '$schema']);
  return { graphs, specs, python, ignored: Object.keys(config).filter((k) => !served.has(k)) };
}

/**
 * Whether a langgraph.json graph source is Python's: a .py file, or a dotted module path
 * without a slash ("my.package.agent:graph"), as LangGraph's Python server reads them.
 */
export function isPythonSource(where) {
  const colon = where.lastIndexOf(':');
  const source = colon > 1 && !/[\\/]/.test(where.slice(colon + 1)) ? where.slice(0, colon) : where;
  if (/\.py$/.test(source)) return true;
  return !/[\\/]/.test(source) && !/\.(m|c)?[jt]sx?$/.test(source);
}
