// The store graphs get (config.store, runtime.store): a LangGraph BaseStore
// over threadcast's own store, the function `threadcast_store`
// (protocol/README.md, "The store: records in Redis") — the very records
// `GET/PUT /store/items` serve, so what a graph puts is what
// `client.store.*` reads, and the other way round.
//
// Each operation is one FCALL, in the REST API's words (store.get,
// store.put, store.delete, store.search, store.namespaces), so the limits
// and errors are the REST API's: a namespace of 1 to 32 labels without
// periods, a key of at most 1024 bytes, a value (a JSON object) of at most
// 1 MiB, a search `limit` of at most 1000, … A call the function refuses
// (its 422) throws a StoreError carrying its words ("value is 1048590
// bytes of JSON; the limit is 1048576"); a missing item is null.
//
// A batch is one round trip. As LangGraph's InMemoryStore does, its reads
// see the store as it was before the batch, and its writes apply after
// them, the last write of a key winning. There is no vector index: a
// search's `query` is ignored (the REST API's rule) and items carry no
// score.
import { BaseStore, InvalidNamespaceError } from '@langchain/langgraph-checkpoint';
import { keys } from './keys.js';

/** A store operation threadcast_store refused: message is its `detail`, status its HTTP status. */
export class StoreError extends Error {
  constructor(status, detail) {
    super(detail);
    this.name = 'StoreError';
    this.status = status;
  }
}

/** threadcast_store joins a get's namespace with periods: a label with one would name another item. */
function checkLabels(ns) {
  if (!Array.isArray(ns)) throw new InvalidNamespaceError(`a namespace must be an array of strings, got ${JSON.stringify(ns)}`);
  for (const label of ns) {
    if (typeof label !== 'string') throw new InvalidNamespaceError(`namespace labels must be strings, got ${JSON.stringify(label)}`);
    if (label.includes('.')) throw new InvalidNamespaceError(`namespace label "${label}" contains a period: namespace labels cannot contain periods`);
  }
  return ns;
}

/** An item of threadcast_store's JSON as LangGraph's Item (search: a SearchItem, score undefined). */
function itemOf(j, search) {
  const item = { value: j.value, key: j.key, namespace: j.namespace, createdAt: new Date(j.created_at), updatedAt: new Date(j.updated_at) };
  if (search) item.score = undefined;
  return item;
}

const kindOf = (op) => {
  if ('namespacePrefix' in op) return 'search';
  if ('matchConditions' in op || ('limit' in op && !('namespace' in op))) return 'namespaces';
  if ('value' in op) return 'put';
  if ('key' in op && 'namespace' in op) return 'get';
  throw new Error(`not a store operation: ${JSON.stringify(Object.keys(op))}`);
};

export class ThreadcastStore extends BaseStore {
  /** client: an ioredis client (never closed here). */
  constructor({ client }) {
    super();
    this.client = client;
  }

  /** The FCALL of one operation: [op, args]. */
  static request(kind, op) {
    switch (kind) {
      case 'get':
        return ['store.get', { query: { namespace: checkLabels(op.namespace).join('.'), key: op.key,
          ...(op.refreshTtl === false ? { refresh_ttl: 'false' } : {}) } }];
      case 'search':
        return ['store.search', { body: { namespace_prefix: checkLabels(op.namespacePrefix), filter: op.filter ?? null,
          limit: op.limit ?? 10, offset: op.offset ?? 0, query: op.query ?? null, ...(op.refreshTtl === false ? { refresh_ttl: false } : {}) } }];
      case 'namespaces': {
        const body = { limit: op.limit ?? 100, offset: op.offset ?? 0 };
        for (const c of op.matchConditions ?? []) body[c.matchType === 'suffix' ? 'suffix' : 'prefix'] = checkLabels(c.path);
        if (op.maxDepth != null) body.max_depth = op.maxDepth;
        return ['store.namespaces', { body }];
      }
      case 'put':
        if (op.value === null) return ['store.delete', { body: { namespace: checkLabels(op.namespace), key: op.key } }];
        return ['store.put', { body: { namespace: checkLabels(op.namespace), key: op.key, value: op.value,
          ...(op.index !== undefined ? { index: op.index } : {}), ...(op.ttl != null ? { ttl: op.ttl } : {}) } }];
      default:
        throw new Error(`unknown store operation ${kind}`);
    }
  }

  /** LangGraph's batch: every operation's result, in order (null for writes). */
  async batch(operations) {
    const ops = operations.map((op, i) => ({ i, kind: kindOf(op), op }));
    const reads = ops.filter((o) => o.kind !== 'put');
    const last = new Map(); // namespace + key → the batch's last write of it
    for (const o of ops) if (o.kind === 'put') last.set(JSON.stringify([o.op.namespace, o.op.key]), o);
    const calls = [...reads, ...last.values()].map((o) => ({ ...o, req: ThreadcastStore.request(o.kind, o.op) }));
    const results = operations.map(() => null);
    if (!calls.length) return results;
    const pipe = this.client.pipeline();
    for (const c of calls) pipe.call('FCALL', 'threadcast_store', 1, keys.store, c.req[0], JSON.stringify(c.req[1]));
    const replies = await pipe.exec();
    let failure = null;
    calls.forEach((c, k) => {
      const [err, reply] = replies[k];
      if (err) {
        failure ??= err;
        return;
      }
      const status = Number(reply[0]);
      const body = reply[1] ? JSON.parse(reply[1]) : null;
      if (c.kind === 'get' && (status === 404 || (status === 200 && body === null))) results[c.i] = null; // a missing item: 200 null
      else if (status >= 300) failure ??= new StoreError(status, body?.detail ?? `threadcast_store ${c.req[0]} answered ${status}`);
      else if (c.kind === 'get') results[c.i] = itemOf(body, false);
      else if (c.kind === 'search') results[c.i] = body.items.map((j) => itemOf(j, true));
      else if (c.kind === 'namespaces') results[c.i] = body.namespaces;
    });
    if (failure) throw failure;
    return results;
  }

  toJSON() {
    return '[ThreadcastStore]';
  }
}
