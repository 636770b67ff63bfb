// Building event mixes and computing which seqs a filter must receive.

const KINDS = ['messages', 'tools', 'lifecycle', 'values', 'custom:progress', 'updates'];

/** n events: a root run start, then a mix of channels and namespaces. */
export function mix(n, { start = true } = {}) {
  const out = [];
  if (start) out.push({ method: 'lifecycle', params: { namespace: [], data: { event: 'started', graphName: 'agent' } } });
  for (let i = out.length; i < n; i++) {
    const method = KINDS[i % KINDS.length];
    const namespace = i % 3 === 0 ? ['researcher'] : i % 7 === 0 ? ['researcher', 'deep'] : [];
    let data = { i };
    if (method === 'messages') data = { event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: `t${i} ` } };
    if (method === 'lifecycle') data = { event: 'running' };
    if (method === 'custom:progress') data = { name: 'progress', payload: { i } };
    out.push({ method, params: { namespace, data } });
  }
  return out;
}

/** The channel an event's method belongs to (protocol/README.md, "Subscriptions"). */
function channelOf(method) {
  return method === 'input.requested' || method === 'input.answered' ? 'input' : method;
}

/** Whether an event passes a SubscribeParams-like filter (the protocol's reading). */
export function matches(filter, ev) {
  if (!filter.channels.includes(channelOf(ev.method))) return false;
  const ns = ev.params.namespace;
  const prefixes = filter.namespaces && filter.namespaces.length ? filter.namespaces : null;
  if (!prefixes) return filter.depth === undefined || ns.length <= filter.depth;
  return prefixes.some((p) => p.length <= ns.length && p.every((s, k) => s === ns[k]) &&
    (filter.depth === undefined || ns.length - p.length <= filter.depth));
}

/** The seqs (1-based, seqOffset added) of events that pass filter. */
export function expectedSeqs(filter, events, seqOffset = 0) {
  const out = [];
  events.forEach((ev, i) => { if (matches(filter, ev)) out.push(i + 1 + seqOffset); });
  return out;
}
