// The demo page: one thread, streamed from threadcast with the client library.
// Everything on screen is derived from the thread's events (so a reload, a
// reconnect or a second tab shows the same page); nothing is rendered from
// what was typed until the agent streams it back.
import { connect } from './threadcast.js';
import { MessageAssembler, messageText } from './messages.js';

/** @type {import('@langchain/protocol').Channel[]} */
const CHANNELS = ['messages', 'tools', 'lifecycle', 'input', 'checkpoints', 'custom:progress'];
/** @type {(id: string) => any} */
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const token = params.get('token') ?? undefined; // when the gateway runs with --auth jwt

/** Everything the page shows, rebuilt from events. Exposed for tests and curious people. */
const demo = {
  thread: '', conn: null, events: [], resyncs: 0, statuses: [],
  transcript: () => state.messages.messages,
};
globalThis.threadcastDemo = demo;

let state;
function freshState() {
  return {
    messages: new MessageAssembler(),
    tools: new Map(), // tool_call_id → {name, output, deltas, status}
    agents: new Map(), // namespace key → {namespace, status, graph_name}
    checkpoints: [],
    progress: 0,
    interrupt: null, // {interrupt_id, namespace, question, approval}
  };
}

/**
 * The payload as a request of LangChain's human-in-the-loop middleware
 * ({action_requests: [{name, args, description}], review_configs:
 * [{action_name, allowed_decisions}]}, what agent-chat-ui shows with Approve and
 * Reject), or null when it is another kind of question.
 */
function approvalRequest(payload) {
  const ok = payload && Array.isArray(payload.action_requests) && Array.isArray(payload.review_configs)
    && payload.action_requests.every((a) => a && typeof a.name === 'string');
  return ok ? payload : null;
}

/** The decisions the page offers: each its button's id. */
const DECISIONS = ['approve', 'reject'];

/** The decisions every action of the request allows. */
function allowedDecisions(request) {
  const allowed = (name) => request.review_configs.find((c) => c?.action_name === name)?.allowed_decisions ?? [];
  return DECISIONS.filter((d) => request.action_requests.every((a) => allowed(a.name).includes(d)));
}

/** A tool's output as text: a tool message (LangGraph's ToolNode) by its content, else as JSON. */
function toolOutput(output) {
  return output?.type === 'tool' || output?.tool_call_id ? messageContent(output.content) : JSON.stringify(output);
}

/** A message's content as text: a string as it is, content blocks by their text. */
function messageContent(content) {
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? content.map((b) => (typeof b === 'string' ? b : b?.text ?? '')).join('') : JSON.stringify(content);
}

function apply(e) {
  const d = e.params?.data ?? {};
  const ns = e.params?.namespace ?? [];
  state.messages.push(e);
  if (e.method === 'tools') {
    const t = state.tools.get(d.tool_call_id) ?? { name: d.tool_name, output: '', deltas: '', status: 'running' };
    if (d.event === 'tool-started') t.name = d.tool_name;
    else if (d.event === 'tool-output-delta') t.deltas += d.delta;
    else if (d.event === 'tool-finished') { t.status = 'done'; t.output = toolOutput(d.output); }
    else if (d.event === 'tool-error') { t.status = 'error'; t.output = d.message; }
    state.tools.set(d.tool_call_id, t);
  } else if (e.method === 'lifecycle') {
    const key = JSON.stringify(ns);
    const a = state.agents.get(key) ?? { namespace: ns, status: '', graph_name: '' };
    a.status = d.event;
    if (d.graph_name) a.graph_name = d.graph_name;
    state.agents.set(key, a);
    if (ns.length === 0 && d.event === 'started') state.progress = 0;
    if (ns.length === 0 && d.event !== 'interrupted') state.interrupt = null;
  } else if (e.method === 'input.requested') {
    const approval = approvalRequest(d.payload);
    const question = approval ? approval.action_requests.map((a) => a.description ?? `${a.name}?`).join(' ')
      : d.payload?.question ?? JSON.stringify(d.payload);
    state.interrupt = { interrupt_id: d.interrupt_id, namespace: ns, question, approval };
  } else if (e.method === 'checkpoints') {
    state.checkpoints.push(d);
  } else if (e.method === 'custom:progress') {
    state.progress = d.payload?.pct ?? state.progress;
  }
}

// ---- rendering (textContent only: event data is never parsed as HTML) -------------------

function el(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

function renderTool(block) {
  const t = state.tools.get(block.id);
  const box = el('div', 'tool');
  box.dataset.toolCallId = block.id ?? '';
  box.append(el('span', 'status', t ? t.status : block.type === 'tool_call' ? 'called' : 'streaming'));
  const args = typeof block.args === 'string' ? block.args : JSON.stringify(block.args);
  box.append(el('div', 'call', `${block.name ?? 'tool'}(${args ?? ''})`));
  if (t && (t.deltas || t.output)) box.append(el('div', 'output', t.output || t.deltas));
  return box;
}

function render() {
  scheduled = false;
  const tr = $('transcript');
  tr.replaceChildren();
  const msgs = state.messages.messages;
  if (!msgs.length) tr.append(el('p', 'empty', 'No messages on this thread yet: send one below.'));
  for (const m of msgs) {
    // A namespace is a path of "<node>:<task id>" (LangGraph) or "<node>"
    // segments; a message is a subgraph's when its path holds a subgraph.
    // The node that wrote it ends the path when the namespace does not name it
    // (Python's LangGraph puts a node's messages at its graph's namespace).
    const path = m.namespace.map((s) => s.split(':')[0]);
    if (m.node && path.at(-1) !== m.node) path.push(m.node);
    const sub = m.namespace.some((_, i) => state.agents.has(JSON.stringify(m.namespace.slice(0, i + 1))));
    const box = el('div', `msg ${m.role}${sub ? ' sub' : ''} ${m.status}`);
    box.dataset.messageId = m.id;
    box.append(el('div', 'who', path.length ? `${m.role} · ${path.join(' › ')}` : m.role));
    box.append(el('div', 'text', messageText(m)));
    for (const b of m.blocks) if (b && /tool_call/.test(b.type ?? '')) box.append(renderTool(b));
    tr.append(box);
  }
  const agents = $('agents');
  agents.replaceChildren();
  for (const a of [...state.agents.values()].sort((x, y) => x.namespace.join('/').localeCompare(y.namespace.join('/')))) {
    const li = el('li', '', `${'  '.repeat(a.namespace.length)}${a.namespace.length ? a.namespace.at(-1).split(':')[0] : 'root'}`);
    li.style.paddingLeft = `${a.namespace.length}rem`;
    if (a.graph_name) li.title = a.graph_name;
    li.append(el('span', `badge ${a.status}`, a.status));
    agents.append(li);
  }
  const cks = $('checkpoints');
  cks.replaceChildren(...state.checkpoints.map((c) => el('li', '', `step ${c.step} · ${c.source ?? ''} · ${c.id}`)));
  $('progress').value = state.progress;
  const form = $('interrupt');
  const it = state.interrupt;
  form.hidden = !it;
  if (it) $('interrupt-question').textContent = it.question;
  // A human-in-the-loop request is answered with its buttons, another question in words.
  $('approval').hidden = !it?.approval;
  $('interrupt-answer').hidden = $('interrupt-send').hidden = Boolean(it?.approval);
  $('interrupt-answer').required = !it?.approval;
  if (it?.approval) {
    $('approval-actions').replaceChildren(...it.approval.action_requests.map((a) =>
      el('li', '', `${a.name}(${JSON.stringify(a.args ?? {})})`)));
    const allowed = allowedDecisions(it.approval);
    for (const d of DECISIONS) $(d).hidden = !allowed.includes(d);
  }
  $('stats').textContent = `${demo.events.length} events · ${demo.conn?.reconnects ?? 0} reconnects · ${demo.resyncs} resyncs`;
}

let scheduled = false;
function schedule() {
  if (!scheduled) { scheduled = true; requestAnimationFrame(render); }
}

function showStatus({ status, attempt, delayMs, reconnects }) {
  demo.statuses.push(status);
  const box = $('conn');
  box.dataset.status = status;
  box.dataset.reconnects = String(reconnects);
  $('conn-text').textContent =
    status === 'open' ? (reconnects ? `live (reconnected ${reconnects}×)` : 'live')
      : status === 'reconnecting' ? `reconnecting in ${(delayMs / 1000).toFixed(1)} s (attempt ${attempt})`
        : status;
}

function error(text) {
  $('error').textContent = text;
}

// ---- wiring -------------------------------------------------------------------------------

function open(thread) {
  demo.conn?.close();
  demo.thread = thread;
  demo.events = [];
  demo.resyncs = 0;
  state = freshState();
  $('thread-id').value = thread;
  if (location.hash !== `#${thread}`) history.replaceState(null, '', `#${encodeURIComponent(thread)}`);
  const conn = connect(location.origin, thread, { token });
  demo.conn = conn;
  conn.on('status', showStatus);
  conn.on('resync', () => {
    // History was lost: start the picture over from what the server replays.
    demo.resyncs++;
    state = freshState();
    schedule();
  });
  conn.subscribe({ channels: CHANNELS }, (e) => {
    demo.events.push(e);
    apply(e);
    schedule();
  });
  error('');
  schedule();
}

function newThreadId() {
  const rnd = crypto.getRandomValues(new Uint8Array(6));
  return `demo-${[...rnd].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

$('thread-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  open($('thread-id').value.trim());
});
$('new-thread').addEventListener('click', () => open(newThreadId()));

$('composer').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const text = $('message').value.trim();
  if (!text) return;
  $('send').disabled = true;
  try {
    await demo.conn.command('run.start', {
      assistant_id: 'agent', input: { messages: [{ role: 'user', content: text }] },
    });
    $('message').value = '';
    error('');
  } catch (e) {
    error(`run.start: ${e.code}: ${e.message}`);
  } finally {
    $('send').disabled = false;
  }
});

async function respond(response) {
  const it = state.interrupt;
  if (!it) return false;
  try {
    await demo.conn.command('input.respond', { namespace: it.namespace, interrupt_id: it.interrupt_id, response });
    error('');
    return true;
  } catch (e) {
    error(`input.respond: ${e.code}: ${e.message}`);
    return false;
  }
}

$('interrupt').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  if (state.interrupt?.approval) return;
  if (await respond($('interrupt-answer').value)) $('interrupt-answer').value = '';
});

// The middleware's answer: one decision per action requested, in order.
for (const d of DECISIONS) {
  $(d).addEventListener('click', () => {
    const request = state.interrupt?.approval;
    if (request) respond({ decisions: request.action_requests.map(() => ({ type: d })) });
  });
}

$('message').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); $('composer').requestSubmit(); }
});

open(decodeURIComponent(location.hash.slice(1)) || newThreadId());
