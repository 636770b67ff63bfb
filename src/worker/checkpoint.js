// RedisSaver: a LangGraph checkpoint saver on plain Redis — strings, hashes and
// sorted sets, no RedisJSON or RediSearch — so it runs on the redis-server
// threadcast already uses. WorkerSaver (at the end) is the worker's own: a
// RedisSaver that also marks and journals what a REST run writes, so that a
// `rollback` cancel can take it back.
//
// Key layout (P = keyPrefix, default "tc:"; T = thread id). Everything of one
// thread lives in five keys that share the hash tag {T}, so a thread is one
// Redis Cluster slot, the same slot as threadcast's own tc:{T}:events:
//
//   P{T}:lg:idx    sorted set, every score 0: "<ns> <checkpoint id>" for each
//                  checkpoint. Equal scores sort members bytewise, so a
//                  namespace's checkpoints are one contiguous range ordered by
//                  id, and checkpoint ids (UUIDv6: the timestamp leads) sort in
//                  time order — the newest is the last. `list` and "latest" are
//                  ZREVRANGEBYLEX on that range.
//   P{T}:lg:cp     hash: the same member → the checkpoint record (checkpoint
//                  without channel_values, metadata, parent checkpoint id).
//   P{T}:lg:blobs  hash: "<ns> <channel> <version>" → one channel value. A
//                  checkpoint stores only the channels of `newVersions`; a read
//                  fetches the blob of every entry of its channel_versions, so
//                  values carried over from ancestors are stored once.
//   P{T}:lg:widx   sorted set, every score 0: "<ns> <checkpoint id> <task id> <idx>"
//                  for each pending write; one checkpoint's writes are one range.
//   P{T}:lg:w      hash: the same member → the write (task id, channel, value,
//                  task path).
//
// Inside members and fields every component but a trailing checkpoint id is
// escaped ("%" → "%25", " " → "%20"), so " " separates components and
// "<ns> " is a prefix no other namespace's members share; "<ns>!" bounds the
// range ("!" is the byte after " "). Thread ids may not contain braces (nor be
// empty): the hash tag must be exactly the thread id, as threadcast requires.
//
// Values are serialized with this.serde (dumpsTyped/loadsTyped) and stored
// as bytes: each record is a binary frame (a format byte, then length-prefixed
// parts), written and read with ioredis' Buffer APIs, so binary payloads
// (serde type "bytes") survive unchanged.
//
// Atomicity: put is one MULTI/EXEC (its blobs, the record, the index entry and
// the TTL refresh) and so is putWrites (all writes of the call). A reader sees
// a checkpoint either with all its blobs or not at all. deleteThread is one
// UNLINK of the five keys. Reads need no transaction: blobs and records are
// written once per (channel, version) and per checkpoint id, and writes are
// only added (regular writes keep the first value stored for their
// (task, idx), like the other savers; special writes — errors, interrupts,
// scheduled, resume — are replaced).
//
// Channel versions are strings "<32-digit counter>.<16 random digits>"
// (getNextVersion), not LangGraph's default integers: a fork from an older
// checkpoint (updateState, state.fork) bumps a channel to a counter a later
// checkpoint of the other branch already used, and with integers both
// branches would share one blob "<ns> <channel> <version>". The random part
// keeps branches apart; the counter keeps versions ordered. LangGraph orders
// string versions with localeCompare (compareChannelVersions), whose first
// call in a process builds ICU's collator (~10 ms here, on Node 20): a saver
// makes that call when it is made, not the first run's first step boundary.
//
// TTL: with `ttlSeconds`, every put and putWrites sets all five keys of the
// thread to expire after ttlSeconds, as threadcast's append does for its
// keys: a thread's checkpoints vanish together once it has been idle that
// long (reads do not refresh it). Without it nothing expires. Either way the
// saver keeps only what LangGraph stores — every checkpoint, its pending
// writes and the channel values they reference — until deleteThread(T) or the
// TTL; there are no global keys (list() without a thread id SCANs for the
// threads' index keys; meant for tooling, it walks the keyspace).
import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
} from '@langchain/langgraph-checkpoint';
import { randomInt } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { CHECKPOINT_PREFIX, checkpointIndexScan, checkpointKeys, keys as workerKeys } from './keys.js';
import { checkpointMetadata } from './config.js';
import { isFenced } from './relay.js';

/** Checkpoints fetched per round trip while listing. */
const LIST_PAGE = 64;
/** First byte of every stored record: the frame format. */
const FORMAT = 1;

/* ---- names ---------------------------------------------------------------------------- */

const esc = (s) => String(s).replace(/[% ]/g, (c) => (c === '%' ? '%25' : '%20'));
const unesc = (s) => s.replace(/%(20|25)/g, (_, h) => (h === '20' ? ' ' : '%'));

/** idx member and cp field of a checkpoint: "<ns> <checkpoint id>". */
const checkpointMember = (ns, id) => `${esc(ns)} ${id}`;
/** widx members of one checkpoint's writes start with this. */
const writesPrefix = (ns, id) => `${esc(ns)} ${esc(id)} `;
const writeMember = (ns, id, taskId, idx) => `${writesPrefix(ns, id)}${esc(taskId)} ${idx}`;
const blobField = (ns, channel, version) => `${esc(ns)} ${esc(channel)} ${esc(version)}`;

function parseCheckpointMember(member) {
  const sp = member.indexOf(' ');
  return { ns: unesc(member.slice(0, sp)), id: member.slice(sp + 1) };
}

/** ZRANGEBYLEX bounds of every member that starts with `prefix` (which ends in " "). */
const prefixRange = (prefix) => ({ min: `[${prefix}`, max: `(${prefix.slice(0, -1)}!` });

function checkThreadId(threadId) {
  if (typeof threadId !== 'string' || threadId === '' || /[{}]/.test(threadId)) {
    throw new Error(`RedisSaver: thread_id must be a non-empty string without braces (got ${JSON.stringify(threadId)}); ` +
      'it is the Redis Cluster hash tag of the thread\'s keys');
  }
  return threadId;
}

function checkCheckpointId(id, what) {
  if (typeof id !== 'string' || id === '') {
    throw new Error(`RedisSaver: ${what} must be a non-empty string (got ${JSON.stringify(id)})`);
  }
  return id;
}

/* ---- records: a format byte, then parts, each a 4-byte big-endian length and bytes ------- */

function pack(parts) {
  const bufs = parts.map((p) => (typeof p === 'string'
    ? Buffer.from(p, 'utf8') : Buffer.from(p.buffer, p.byteOffset, p.byteLength)));
  const out = Buffer.allocUnsafe(1 + bufs.reduce((n, b) => n + 4 + b.length, 0));
  out[0] = FORMAT;
  let o = 1;
  for (const b of bufs) {
    out.writeUInt32BE(b.length, o);
    b.copy(out, o + 4);
    o += 4 + b.length;
  }
  return out;
}

function unpack(buf, count) {
  if (buf[0] !== FORMAT) throw new Error(`RedisSaver: unknown record format ${buf[0]}`);
  const parts = [];
  let o = 1;
  while (o < buf.length) {
    const n = buf.readUInt32BE(o);
    if (o + 4 + n > buf.length) throw new Error('RedisSaver: truncated record');
    parts.push(buf.subarray(o + 4, o + 4 + n));
    o += 4 + n;
  }
  if (parts.length !== count) throw new Error(`RedisSaver: record has ${parts.length} parts, expected ${count}`);
  return parts;
}

/** A part as the serde gets it: a plain Uint8Array of its own (never a Buffer view). */
const bytes = (part) => new Uint8Array(part);
const text = (part) => part.toString('utf8');

async function exec(tx) {
  const results = await tx.exec();
  if (results === null) throw new Error('RedisSaver: transaction aborted');
  for (const [err] of results) if (err) throw err;
  return results.map(([, r]) => r);
}

/* ---- the saver ------------------------------------------------------------------------ */

export class RedisSaver extends BaseCheckpointSaver {
  /**
   * @param {object} options
   * @param {import('ioredis').Redis | import('ioredis').Cluster} options.client connected ioredis client (not closed by the saver)
   * @param {number} [options.ttlSeconds] expire a thread's checkpoints after this many idle seconds (refreshed by every write)
   * @param {string} [options.keyPrefix] prefix of every key, default "tc:" (no braces)
   * @param {import('@langchain/langgraph-checkpoint').SerializerProtocol} [options.serde]
   */
  constructor({ client, ttlSeconds, keyPrefix = CHECKPOINT_PREFIX, serde } = {}) {
    super(serde);
    if (!client) throw new TypeError('RedisSaver: options.client (an ioredis client) is required');
    if (ttlSeconds !== undefined && !(Number.isInteger(ttlSeconds) && ttlSeconds > 0)) {
      throw new TypeError(`RedisSaver: ttlSeconds must be a positive integer (got ${ttlSeconds})`);
    }
    if (typeof keyPrefix !== 'string' || /[{}]/.test(keyPrefix)) {
      throw new TypeError('RedisSaver: keyPrefix must be a string without braces');
    }
    this.client = client;
    this.ttlSeconds = ttlSeconds;
    this.keyPrefix = keyPrefix;
    this.getNextVersion(undefined).localeCompare(this.getNextVersion(undefined)); // ICU's collator, built now (above)
  }

  /** The five keys of a thread (see the layout above). */
  threadKeys(threadId) {
    return checkpointKeys(this.keyPrefix, checkThreadId(threadId));
  }

  /**
   * Channel versions: "<32-digit counter>.<16 random digits>", ordered by the
   * counter and unique across the branches of a forked thread (see above).
   */
  getNextVersion(current) {
    let n = 0;
    if (typeof current === 'number') n = current;
    else if (typeof current === 'string') n = Number.parseInt(current.split('.')[0], 10) || 0;
    return `${String(Math.trunc(n) + 1).padStart(32, '0')}.${String(randomInt(0, 2 ** 48 - 1)).padStart(16, '0')}`;
  }

  async getTuple(config) {
    const threadId = config?.configurable?.thread_id;
    if (threadId === undefined) return undefined;
    const keys = this.threadKeys(threadId);
    const ns = config.configurable.checkpoint_ns ?? '';
    let id = getCheckpointId(config);
    if (!id) {
      const { min, max } = prefixRange(`${esc(ns)} `);
      const [latest] = await this.client.zrevrangebylex(keys.idx, max, min, 'LIMIT', 0, 1);
      if (latest === undefined) return undefined;
      id = parseCheckpointMember(latest).id;
    }
    const record = await this.client.hgetBuffer(keys.cp, checkpointMember(ns, id));
    if (record === null) return undefined;
    const [tuple] = await this.#tuples(threadId, [await this.#decodeRecord(ns, id, record)]);
    return tuple;
  }

  /**
   * Newest first. Without configurable.thread_id every thread of this
   * keyPrefix is listed (SCAN; threads in name order); without checkpoint_ns,
   * every namespace of a thread (checkpoints newest first across them).
   * filter: every key must deep-equal the metadata's; before: checkpoint ids
   * below before's; limit: at most that many tuples in all.
   */
  async *list(config, options = {}) {
    const { before, limit, filter } = options ?? {};
    const configurable = config?.configurable ?? {};
    const ns = configurable.checkpoint_ns ?? undefined;
    const onlyId = configurable.checkpoint_id || undefined;
    const beforeId = before?.configurable?.checkpoint_id || undefined;
    let remaining = limit ?? Infinity;
    if (remaining <= 0) return;
    const threads = configurable.thread_id ? [checkThreadId(configurable.thread_id)] : await this.#threadIds();
    for (const threadId of threads) {
      const keys = this.threadKeys(threadId);
      for await (const page of this.#candidates(keys, ns, onlyId, beforeId)) {
        const records = await this.client.hmgetBuffer(keys.cp, ...page.map((c) => checkpointMember(c.ns, c.id)));
        const items = [];
        for (let i = 0; i < page.length && items.length < remaining; i++) {
          if (records[i] === null) continue; // deleted since the index was read
          const item = await this.#decodeRecord(page[i].ns, page[i].id, records[i]);
          if (filter && !Object.entries(filter).every(([k, v]) => isDeepStrictEqual(item.metadata[k], v))) continue;
          items.push(item);
        }
        for (const tuple of await this.#tuples(threadId, items)) yield tuple;
        remaining -= items.length;
        if (remaining <= 0) return;
      }
    }
  }

  async put(config, checkpoint, metadata, newVersions) {
    if (config?.configurable === undefined) throw new Error('RedisSaver.put: config.configurable is missing');
    const threadId = config.configurable.thread_id;
    if (threadId === undefined) throw new Error('RedisSaver.put: config.configurable.thread_id is missing');
    const keys = this.threadKeys(threadId);
    const ns = config.configurable.checkpoint_ns ?? '';
    const id = checkCheckpointId(checkpoint?.id, 'checkpoint.id');
    const parentId = getCheckpointId(config);
    const { channel_values: channelValues, ...stored } = checkpoint;
    const values = channelValues ?? {};
    // Only the channels LangGraph says changed are written; without
    // newVersions (no caller of LangGraph's omits it), all of them.
    const changed = Object.entries(newVersions ?? checkpoint.channel_versions ?? {})
      .filter(([channel]) => Object.hasOwn(values, channel) && values[channel] !== undefined);
    const [[cpType, cpBytes], [metaType, metaBytes], blobs] = await Promise.all([
      this.serde.dumpsTyped(stored),
      this.serde.dumpsTyped(metadata),
      Promise.all(changed.map(async ([channel, version]) =>
        [blobField(ns, channel, version), pack(await this.serde.dumpsTyped(values[channel]))])),
    ]);
    const member = checkpointMember(ns, id);
    const tx = this.writeTx(threadId);
    for (const [field, blob] of blobs) tx.hsetnx(keys.blobs, field, blob);
    tx.hset(keys.cp, member, pack([cpType, cpBytes, metaType, metaBytes, parentId]));
    tx.zadd(keys.idx, 0, member);
    this.#refreshTtl(tx, keys);
    await exec(tx);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } };
  }

  async putWrites(config, writes, taskId, taskPath = '') {
    const threadId = config?.configurable?.thread_id;
    if (threadId === undefined) throw new Error('RedisSaver.putWrites: config.configurable.thread_id is missing');
    const keys = this.threadKeys(threadId);
    const id = checkCheckpointId(config.configurable.checkpoint_id, 'config.configurable.checkpoint_id');
    const ns = config.configurable.checkpoint_ns ?? '';
    checkCheckpointId(taskId, 'taskId');
    if (writes.length === 0) return;
    const rows = await Promise.all(writes.map(async ([channel, value], i) => {
      const idx = WRITES_IDX_MAP[channel] ?? i;
      const [type, data] = await this.serde.dumpsTyped(value);
      return { idx, member: writeMember(ns, id, taskId, idx), record: pack([taskId, channel, type, data, taskPath]) };
    }));
    const tx = this.writeTx(threadId);
    for (const { idx, member, record } of rows) {
      // Special writes (negative idx) replace; a regular write keeps the first.
      if (idx < 0) tx.hset(keys.w, member, record);
      else tx.hsetnx(keys.w, member, record);
      tx.zadd(keys.widx, 0, member);
    }
    this.#refreshTtl(tx, keys);
    await exec(tx);
  }

  async deleteThread(threadId) {
    await this.client.unlink(...Object.values(this.threadKeys(threadId)));
  }

  /**
   * Removes parts of a thread (what a rolled back run wrote): checkpoints
   * [{ns, id}] with all their pending writes, the writes of single tasks on
   * other checkpoints [{ns, id, taskId}], and channel values [{ns, channel,
   * version}]. The caller names only what nothing else refers to. One
   * MULTI/EXEC after one read of the write indexes.
   */
  async forget(threadId, { checkpoints = [], writes = [], blobs = [] } = {}) {
    const keys = this.threadKeys(threadId);
    const ranges = [
      ...checkpoints.map((c) => prefixRange(writesPrefix(c.ns, c.id))),
      ...writes.map((w) => prefixRange(`${writesPrefix(w.ns, w.id)}${esc(w.taskId)} `)),
    ];
    const found = [];
    if (ranges.length) {
      const p = this.client.pipeline();
      for (const r of ranges) p.zrangebylex(keys.widx, r.min, r.max);
      for (const members of await exec(p)) found.push(...members);
    }
    if (!checkpoints.length && !found.length && !blobs.length) return;
    const tx = this.client.multi();
    if (checkpoints.length) {
      const members = checkpoints.map((c) => checkpointMember(c.ns, c.id));
      tx.zrem(keys.idx, ...members);
      tx.hdel(keys.cp, ...members);
    }
    if (found.length) {
      tx.zrem(keys.widx, ...found);
      tx.hdel(keys.w, ...found);
    }
    if (blobs.length) tx.hdel(keys.blobs, ...blobs.map((b) => blobField(b.ns, b.channel, b.version)));
    await exec(tx);
  }

  /**
   * The transaction put and putWrites write a thread's checkpoint or writes
   * in (they use hset, hsetnx, zadd and expire, then exec): a MULTI here.
   */
  writeTx(threadId) {
    return this.client.multi();
  }

  /* ---- internals ---------------------------------------------------------------------- */

  #refreshTtl(tx, keys) {
    if (this.ttlSeconds === undefined) return;
    for (const key of Object.values(keys)) tx.expire(key, this.ttlSeconds);
  }

  async #decodeRecord(ns, id, record) {
    const [cpType, cpBytes, metaType, metaBytes, parent] = unpack(record, 5);
    const [checkpoint, metadata] = await Promise.all([
      this.serde.loadsTyped(text(cpType), bytes(cpBytes)),
      this.serde.loadsTyped(text(metaType), bytes(metaBytes)),
    ]);
    return { ns, id, checkpoint, metadata, parentId: text(parent) };
  }

  /**
   * Completes decoded records into tuples: their channel values (blobs) and
   * pending writes, in two pipelined round trips for all of them.
   */
  async #tuples(threadId, items) {
    if (items.length === 0) return [];
    const keys = this.threadKeys(threadId);
    // Checkpoints older than v4 kept pending sends in their parent's writes.
    const migrate = (item) => item.checkpoint.v < 4 && item.parentId !== '';
    const p1 = this.client.pipeline();
    for (const item of items) {
      const versions = Object.entries(item.checkpoint.channel_versions ?? {});
      item.channels = versions.map(([channel]) => channel);
      if (versions.length > 0) p1.hmgetBuffer(keys.blobs, ...versions.map(([c, v]) => blobField(item.ns, c, v)));
      const own = prefixRange(writesPrefix(item.ns, item.id));
      p1.zrangebylex(keys.widx, own.min, own.max);
      if (migrate(item)) {
        const parent = prefixRange(writesPrefix(item.ns, item.parentId));
        p1.zrangebylex(keys.widx, parent.min, parent.max);
      }
    }
    const r1 = await exec(p1);
    const p2 = this.client.pipeline();
    let at = 0;
    for (const item of items) {
      item.blobs = item.channels.length > 0 ? r1[at++] : [];
      item.writeMembers = r1[at++];
      item.parentWriteMembers = migrate(item) ? r1[at++] : [];
      for (const members of [item.writeMembers, item.parentWriteMembers]) {
        if (members.length > 0) p2.hmgetBuffer(keys.w, ...members);
      }
    }
    const r2 = p2.length > 0 ? await exec(p2) : [];
    at = 0;
    const tuples = [];
    for (const item of items) {
      const writes = item.writeMembers.length > 0 ? this.#orderWrites(item.writeMembers, r2[at++]) : [];
      const parentWrites = item.parentWriteMembers.length > 0 ? this.#orderWrites(item.parentWriteMembers, r2[at++]) : [];
      const channelValues = {};
      for (let i = 0; i < item.channels.length; i++) {
        if (item.blobs[i] === null) continue; // no value at this version
        const [type, data] = unpack(item.blobs[i], 2);
        channelValues[item.channels[i]] = await this.serde.loadsTyped(text(type), bytes(data));
      }
      const checkpoint = { ...item.checkpoint, channel_values: channelValues };
      const sends = parentWrites.filter((w) => w.channel === TASKS);
      if (migrate(item) && sends.length > 0) {
        checkpoint.channel_values[TASKS] = await Promise.all(sends.map((w) => this.#loadWriteValue(w)));
        const versions = Object.values(checkpoint.channel_versions ?? {});
        checkpoint.channel_versions = {
          ...checkpoint.channel_versions,
          [TASKS]: versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined),
        };
      }
      const tuple = {
        config: { configurable: { thread_id: threadId, checkpoint_ns: item.ns, checkpoint_id: item.id } },
        checkpoint,
        metadata: item.metadata,
        pendingWrites: await Promise.all(writes.map(async (w) => [w.taskId, w.channel, await this.#loadWriteValue(w)])),
      };
      if (item.parentId !== '') {
        tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: item.ns, checkpoint_id: item.parentId } };
      }
      tuples.push(tuple);
    }
    return tuples;
  }

  /** Decodes one checkpoint's write records, in LangGraph's order (task path, task id, idx). */
  #orderWrites(members, records) {
    const writes = [];
    members.forEach((member, i) => {
      if (records[i] === null) return;
      const [taskId, channel, type, data, taskPath] = unpack(records[i], 5).map((p, j) => (j === 3 ? p : text(p)));
      const idx = Number(member.slice(member.lastIndexOf(' ') + 1));
      writes.push({ taskId, channel, type, data, key: writesSortKey(taskPath, taskId, idx) });
    });
    return writes.sort((a, b) => compareWritesSortKeys(a.key, b.key));
  }

  #loadWriteValue(w) {
    return this.serde.loadsTyped(w.type, bytes(w.data));
  }

  /**
   * Pages ({ns, id}[]) of the thread's checkpoints that may be listed, newest
   * first. With a namespace: ZREVRANGEBYLEX pages of its range. Without: the
   * whole index, sorted by checkpoint id.
   */
  async *#candidates(keys, ns, onlyId, beforeId) {
    if (ns !== undefined && onlyId !== undefined) {
      if (beforeId === undefined || onlyId < beforeId) yield [{ ns, id: onlyId }];
      return;
    }
    if (ns !== undefined) {
      const { min, max: end } = prefixRange(`${esc(ns)} `);
      let max = beforeId !== undefined ? `(${checkpointMember(ns, beforeId)}` : end;
      for (;;) {
        const members = await this.client.zrevrangebylex(keys.idx, max, min, 'LIMIT', 0, LIST_PAGE);
        if (members.length > 0) yield members.map(parseCheckpointMember);
        if (members.length < LIST_PAGE) return;
        max = `(${members[members.length - 1]}`;
      }
    }
    const all = (await this.client.zrange(keys.idx, 0, -1)).map(parseCheckpointMember)
      .filter((c) => (onlyId === undefined || c.id === onlyId) && (beforeId === undefined || c.id < beforeId))
      .sort((a, b) => (a.id === b.id ? (a.ns < b.ns ? 1 : -1) : (a.id < b.id ? 1 : -1)));
    for (let i = 0; i < all.length; i += LIST_PAGE) yield all.slice(i, i + LIST_PAGE);
  }

  /** Thread ids with checkpoints under this keyPrefix (SCAN every master). */
  async #threadIds() {
    const { match, threadOf } = checkpointIndexScan(this.keyPrefix);
    const nodes = this.client.isCluster ? this.client.nodes('master') : [this.client];
    const ids = new Set();
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000, 'TYPE', 'zset');
        for (const key of keys) ids.add(threadOf(key));
        cursor = next;
      } while (cursor !== '0');
    }
    return [...ids].sort();
  }
}

/* ---- the worker's saver -------------------------------------------------------------------- */

/**
 * KEYS[1] a thread's lock, KEYS[2…] the keys written; ARGV[1] the lock's
 * owner, then each write as <command> <index in KEYS> <argument count>
 * <arguments…>: applies them all if the lock holds the owner, else refuses
 * (FENCED) and applies none.
 */
const FENCED_WRITE = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("FENCED the thread's lock is another worker's: the checkpoint is not written")
end
local allowed = { HSET = true, HSETNX = true, ZADD = true, EXPIRE = true }
local i = 2
while i <= #ARGV do
  if not allowed[ARGV[i]] or not KEYS[tonumber(ARGV[i + 1])] then return redis.error_reply('ERR fenced write: bad command ' .. ARGV[i]) end
  i = i + 3 + tonumber(ARGV[i + 2])
end
i = 2
while i <= #ARGV do
  local n = tonumber(ARGV[i + 2])
  redis.call(ARGV[i], KEYS[tonumber(ARGV[i + 1])], unpack(ARGV, i + 3, i + 2 + n))
  i = i + 3 + n
end
return 1`;

/**
 * What put and putWrites write, gathered as a MULTI would gather it and
 * sent as one FENCED_WRITE: applied only while `owner` holds the thread's
 * lock, and only once settle() says the run's events so far are appended.
 * exec() answers as a MULTI's exec; a refused write is sent again once
 * regain() says the lock is the owner's again (its lease lapsed while Redis
 * stalled, nobody took it), else it throws.
 */
class FencedTx {
  constructor(client, lock, owner, { regain, settle }) {
    this.client = client;
    this.regain = regain;
    this.settle = settle;
    this.keys = [lock];
    this.slots = new Map(); // key → its index in KEYS (1-based)
    this.args = [owner];
    this.count = 0;
  }

  #write(command, key, ...args) {
    let at = this.slots.get(key);
    if (at === undefined) {
      this.keys.push(key);
      at = this.keys.length;
      this.slots.set(key, at);
    }
    this.args.push(command, String(at), String(args.length), ...args);
    this.count++;
    return this;
  }

  hset(key, field, value) { return this.#write('HSET', key, field, value); }
  hsetnx(key, field, value) { return this.#write('HSETNX', key, field, value); }
  zadd(key, score, member) { return this.#write('ZADD', key, String(score), member); }
  expire(key, seconds) { return this.#write('EXPIRE', key, String(seconds)); }

  async exec() {
    await this.settle?.(); // the run's events before this write are appended first
    for (let regained = 0; ; regained++) {
      try {
        await this.client.tcFencedWrite(this.keys.length, ...this.keys, ...this.args);
        return Array.from({ length: this.count }, () => [null, 1]);
      } catch (e) {
        if (!isFenced(e) || regained >= 2 || !(await this.regain())) throw e;
      }
    }
  }
}

/** At most this many threads stay fenced after their run was lost (the oldest are let go). */
const LOST_FENCES_MAX = 4096;

/** How long a REST run's undo journal outlives its last write (s). */
const UNDO_TTL = 86400;

/**
 * The worker's checkpointer: RedisSaver, plus every checkpoint's metadata
 * as the reference server's checkpointer writes it (config.js'
 * checkpointMetadata: the config's configurable and the run's metadata
 * with LangGraph's own, so history can be searched by a run's metadata),
 * and, for the checkpoints a REST run writes, an undo journal
 * (tc:{T}:lg:undo, a set of JSON items, written before the write it names)
 * so that a `rollback` cancel can take back everything the run wrote.
 * restRunOf(thread) is the REST run this worker is running on the thread,
 * if any.
 *
 * The checkpoints and writes of a thread whose run this worker runs are
 * fenced by the thread's lock, as the run's events are (FENCE, relay.js):
 * a worker that lost the thread (stalled past its lease, the run taken
 * over) cannot save a step whose events it could not append, which the
 * taker would go on from, its events lost. fence(thread) when a run takes
 * the lock; unfence(thread) when it released it. A lost run's thread stays
 * fenced (its graph may still be winding down) until a run of this worker
 * takes it again.
 */
export class WorkerSaver extends RedisSaver {
  constructor(opts, restRunOf, owner) {
    super(opts);
    this.restRunOf = restRunOf;
    this.owner = owner;
    this.fenced = new Map();   // thread → { regain, settle } of its run
    this.lost = new Set();     // threads whose run was lost, oldest first
    this.inflight = new Map(); // thread → Set of write promises
    this.client.defineCommand('tcFencedWrite', { lua: FENCED_WRITE });
  }

  /**
   * Fences the thread's writes. run: { regain() — whether the lock is this
   * worker's again after a refusal; settle() — resolves once the run's
   * events so far are appended (optional) }.
   */
  fence(thread, run) {
    this.lost.delete(thread);
    this.fenced.set(thread, run);
  }

  unfence(thread, { lost = false } = {}) {
    if (!lost) return void this.fenced.delete(thread);
    this.fenced.set(thread, { regain: async () => false }); // nothing to regain: the run is over here
    this.lost.add(thread);
    if (this.lost.size > LOST_FENCES_MAX) {
      const oldest = this.lost.values().next().value;
      this.lost.delete(oldest);
      this.fenced.delete(oldest);
    }
  }

  writeTx(threadId) {
    const run = this.fenced.get(threadId);
    return run ? new FencedTx(this.client, workerKeys.lock(threadId), this.owner, run) : super.writeTx(threadId);
  }

  #track(thread, p) {
    let set = this.inflight.get(thread);
    if (!set) this.inflight.set(thread, (set = new Set()));
    set.add(p);
    const done = () => {
      set.delete(p);
      if (!set.size && this.inflight.get(thread) === set) this.inflight.delete(thread);
    };
    p.then(done, done);
    return p;
  }

  /** Resolves once every write to the thread already under way is over. */
  async settle(thread) {
    while (this.inflight.get(thread)?.size) await Promise.allSettled([...this.inflight.get(thread)]);
  }

  async #journal(thread, items) {
    const key = workerKeys.undo(thread);
    await this.client.multi().sadd(key, ...items.map((i) => JSON.stringify(i))).expire(key, UNDO_TTL).exec();
  }

  put(config, checkpoint, metadata, newVersions) {
    const c = config?.configurable ?? {};
    const md = checkpointMetadata(config, metadata);
    const run = c.thread_id !== undefined ? this.restRunOf(c.thread_id) : null;
    if (!run) return super.put(config, checkpoint, md, newVersions);
    const ns = c.checkpoint_ns ?? '';
    const items = [['cp', ns, checkpoint.id], ...Object.entries(newVersions ?? {}).map(([ch, v]) => ['b', ns, ch, String(v)])];
    return this.#track(c.thread_id, this.#journal(c.thread_id, items).then(() => super.put(config, checkpoint, md, newVersions)));
  }

  putWrites(config, writes, taskId, taskPath) {
    const c = config?.configurable ?? {};
    const run = c.thread_id !== undefined ? this.restRunOf(c.thread_id) : null;
    if (!run || !writes.length) return super.putWrites(config, writes, taskId, taskPath);
    const item = ['w', c.checkpoint_ns ?? '', c.checkpoint_id, taskId];
    return this.#track(c.thread_id, this.#journal(c.thread_id, [item]).then(() => super.putWrites(config, writes, taskId, taskPath)));
  }

  /** Takes back what the thread's journal names (a rolled back run), then forgets the journal. */
  async undo(thread) {
    await this.settle(thread);
    const items = (await this.client.smembers(workerKeys.undo(thread))).map((j) => JSON.parse(j));
    await this.forget(thread, {
      checkpoints: items.filter((i) => i[0] === 'cp').map(([, ns, id]) => ({ ns, id })),
      writes: items.filter((i) => i[0] === 'w').map(([, ns, id, taskId]) => ({ ns, id, taskId })),
      blobs: items.filter((i) => i[0] === 'b').map(([, ns, channel, version]) => ({ ns, channel, version })),
    });
    await this.client.del(workerKeys.undo(thread));
    return items.filter((i) => i[0] === 'cp').length;
  }
}
