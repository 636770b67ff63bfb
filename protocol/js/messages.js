// Assembles `messages` channel events into transcript messages and their
// content blocks, by the protocol's rules:
//   message-start opens a message (per namespace and node; blocks never interleave);
//   content-block-start sets block[index] to the initial content;
//   text-delta appends to `text`, reasoning-delta to `reasoning`, data-delta to `base64`,
//   block-delta shallow-merges its fields (all but `type`), tool-call-delta appends to `args`,
//   a delta of an unknown type is ignored;
//   content-block-finish replaces the block with the finalized one (a tool_call_chunk
//   becomes a tool_call with parsed args);
//   message-finish records usage; `error` marks the message failed.
//
//   const transcript = new MessageAssembler();
//   conn.subscribe({ channels: ['messages'] }, (e) => render(transcript.push(e)));

/** @typedef {import('@langchain/protocol').MessagesEvent} MessagesEvent */
/** @typedef {import('@langchain/protocol').MessageRole} MessageRole */

/**
 * @typedef {object} AssembledMessage
 * @property {string} id
 * @property {MessageRole} role
 * @property {string[]} namespace
 * @property {string} [node]
 * @property {Record<string, any>} [metadata]
 * @property {Record<string, any>[]} blocks  by index
 * @property {'streaming' | 'finished' | 'error'} status
 * @property {Record<string, any>} [usage]
 * @property {{message: string, code?: string}} [error]
 */

const appendTo = (block, key, text) => { block[key] = (typeof block[key] === 'string' ? block[key] : '') + text; };

export class MessageAssembler {
  constructor() {
    /** @type {AssembledMessage[]} in the order they started */
    this.messages = [];
    /** @type {Map<string, AssembledMessage>} the open message of each namespace + node */
    this.open = new Map();
  }

  /**
   * Applies one event; returns the message it changed, or null when the event
   * is not a messages event or belongs to no open message.
   * @param {{method: string, params?: any}} event
   * @returns {AssembledMessage | null}
   */
  push(event) {
    if (event.method !== 'messages' || !event.params?.data) return null;
    const { namespace = [], node, data } = event.params;
    const key = JSON.stringify([namespace, node ?? null]);
    if (data.event === 'message-start') {
      /** @type {AssembledMessage} */
      const m = { id: data.id, role: data.role, namespace, blocks: [], status: 'streaming' };
      if (node !== undefined) m.node = node;
      if (data.metadata) m.metadata = data.metadata;
      const again = this.messages.findIndex((x) => x.id === data.id);
      if (again >= 0) this.messages[again] = m; // a replayed message starts over
      else this.messages.push(m);
      this.open.set(key, m);
      return m;
    }
    const m = this.open.get(key);
    if (!m) return null;
    switch (data.event) {
      case 'content-block-start':
        m.blocks[data.index] = { ...data.content };
        break;
      case 'content-block-delta': {
        const block = m.blocks[data.index] ?? (m.blocks[data.index] = {});
        const d = data.delta ?? {};
        if (d.type === 'text-delta') appendTo(block, 'text', d.text ?? '');
        else if (d.type === 'reasoning-delta') appendTo(block, 'reasoning', d.reasoning ?? '');
        else if (d.type === 'data-delta') appendTo(block, 'base64', d.data ?? '');
        else if (d.type === 'tool-call-delta') appendTo(block, 'args', d.args ?? '');
        else if (d.type === 'block-delta' && d.fields) {
          for (const [k, v] of Object.entries(d.fields)) if (k !== 'type') block[k] = v;
          if (block.type === undefined) block.type = d.fields.type;
        }
        break;
      }
      case 'content-block-finish':
        m.blocks[data.index] = { ...data.content };
        break;
      case 'message-finish':
        m.status = 'finished';
        if (data.usage) m.usage = data.usage;
        this.open.delete(key);
        break;
      case 'error':
        m.status = 'error';
        m.error = data.code === undefined ? { message: data.message } : { message: data.message, code: data.code };
        this.open.delete(key);
        break;
      default:
        return null;
    }
    return m;
  }
}

/** The text of a message: its text blocks, concatenated. */
export function messageText(m) {
  return m.blocks.filter((b) => b && b.type === 'text').map((b) => b.text ?? '').join('');
}

/** Assembles a whole list of events at once. */
export function assemble(events) {
  const a = new MessageAssembler();
  for (const e of events) a.push(e);
  return a.messages;
}
