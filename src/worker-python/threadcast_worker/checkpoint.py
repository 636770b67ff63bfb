"""LangGraph checkpoint savers on plain Redis: strings, hashes, sorted sets and
sets, no RedisJSON or RediSearch, so they run on the redis-server (or Valkey)
threadcast already uses.

``RedisSaver`` is a ``BaseCheckpointSaver`` any LangGraph graph can use;
``WorkerSaver`` is the worker's: a RedisSaver that writes checkpoint metadata as
LangGraph's Python server does, fences a thread's writes by its lock, and keeps
an undo journal of what a REST run writes, so a ``rollback`` cancel can take it
back (protocol/README.md, "The LangGraph worker", "REST runs and state", "When a
worker dies").

Key layout — the JavaScript worker's (src/worker/checkpoint.js), so the
gateway's tooling and both workers read one format. P is the key prefix
(``keys.CHECKPOINT_PREFIX``, "tc:"), T the thread id; the five keys share the
hash tag {T}, one Redis Cluster slot, the one threadcast's tc:{T}:events is in:

    P{T}:lg:idx    sorted set, every score 0: "<ns> <checkpoint id>" per
                   checkpoint. Equal scores sort bytewise, so a namespace's
                   checkpoints are one contiguous range ordered by id, and ids
                   (uuid6: the time leads) sort in time order.
    P{T}:lg:cp     hash: that member -> the checkpoint record (the checkpoint
                   without channel_values, its metadata, the parent's id).
    P{T}:lg:blobs  hash: "<ns> <channel> <version>" -> one channel value. A
                   checkpoint stores only the channels of new_versions; a read
                   fetches one blob per entry of its channel_versions.
    P{T}:lg:widx   sorted set, every score 0: "<ns> <checkpoint id> <task id>
                   <idx>" per pending write; one checkpoint's writes are a range.
    P{T}:lg:w      hash: that member -> the write (task id, channel, value, task
                   path).

Every member component but a trailing checkpoint id is escaped ("%" -> "%25",
" " -> "%20"), so " " separates components and "<ns> " is a prefix no other
namespace shares; "<ns>!" bounds its range ("!" is the byte after " ").

Records are binary frames: a format byte (1), then parts, each a 4-byte
big-endian length and its bytes; values are the serde's ``dumps_typed`` (type,
bytes), so any payload survives as it was.

Atomicity: a put or a put_writes is one MULTI/EXEC (WorkerSaver: one script
call) with the TTL refresh; delete_thread is one UNLINK. Reads need no
transaction: blobs and records are written once per (channel, version) and per
checkpoint id; regular writes keep the first value stored for their (task, idx),
special writes (error, interrupt, scheduled, resume) are replaced, as in
LangGraph's own savers.

Channel versions are "<32-digit counter>.<16 random digits>": a fork from an
older checkpoint bumps a channel to a counter a later checkpoint of the other
branch already used, and with integers both branches would share one blob. The
random part keeps branches apart, the counter keeps versions ordered.
"""

from __future__ import annotations

import asyncio
import random
import re
import struct
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ERROR,
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    SerializerProtocol,
    get_checkpoint_metadata,
    writes_sort_key,
)
from redis.asyncio import Redis
from redis.exceptions import ResponseError, WatchError

from . import keys

__all__ = ["FencedError", "RedisSaver", "WorkerSaver", "checkpoint_metadata"]

_LIST_PAGE = 64
"""Checkpoints fetched per round trip while listing."""

_FORMAT = 1
"""First byte of every stored record: the frame format."""

_WATCH_TRIES = 8
"""How often prune and delete_for_runs retry a thread that kept changing under them."""

_LEN = struct.Struct(">I")

# ---- names ----------------------------------------------------------------------------------

_UNESC = re.compile(r"%(20|25)")


def _esc(s: str) -> str:
    return s.replace("%", "%25").replace(" ", "%20")


def _unesc(s: str) -> str:
    return _UNESC.sub(lambda m: " " if m.group(1) == "20" else "%", s)


def _cp_member(ns: str, checkpoint_id: str) -> str:
    return f"{_esc(ns)} {checkpoint_id}"


def _writes_prefix(ns: str, checkpoint_id: str) -> str:
    return f"{_esc(ns)} {_esc(checkpoint_id)} "


def _write_member(ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
    return f"{_writes_prefix(ns, checkpoint_id)}{_esc(task_id)} {idx}"


def _blob_field(ns: str, channel: str, version: str | int | float) -> str:
    return f"{_esc(ns)} {_esc(channel)} {_esc(str(version))}"


def _parse_cp_member(member: str) -> tuple[str, str]:
    ns, _, checkpoint_id = member.partition(" ")
    return _unesc(ns), checkpoint_id


def _parse_write_member(member: str) -> tuple[str, str, str, int]:
    ns, checkpoint_id, task_id, idx = member.split(" ")
    return _unesc(ns), _unesc(checkpoint_id), _unesc(task_id), int(idx)


def _parse_blob_field(field: str) -> tuple[str, str, str]:
    ns, channel, version = field.split(" ")
    return _unesc(ns), _unesc(channel), _unesc(version)


def _prefix_range(prefix: str) -> tuple[str, str]:
    """ZRANGEBYLEX bounds of the members that start with prefix (which ends in " ")."""
    return f"[{prefix}", f"({prefix[:-1]}!"


def _thread_id(value: Any) -> str:
    """The thread id as the keys' hash tag: a non-empty string without braces."""
    if isinstance(value, uuid.UUID | int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value or "{" in value or "}" in value:
        raise ValueError(
            f"RedisSaver: thread_id must be a non-empty string without braces (got {value!r}); "
            "it is the Redis Cluster hash tag of the thread's keys"
        )
    return value


def _checkpoint_id(value: Any, what: str) -> str:
    if isinstance(value, uuid.UUID):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"RedisSaver: {what} must be a non-empty string (got {value!r})")
    return value


def _text(b: bytes | str) -> str:
    return b if isinstance(b, str) else b.decode()


# ---- records: a format byte, then parts, each a 4-byte big-endian length and bytes ------------


def _pack(*parts: bytes | str) -> bytes:
    out = bytearray((_FORMAT,))
    for part in parts:
        b = part.encode() if isinstance(part, str) else part
        out += _LEN.pack(len(b))
        out += b
    return bytes(out)


def _unpack(buf: bytes, count: int) -> list[bytes]:
    if not buf or buf[0] != _FORMAT:
        raise ValueError(f"RedisSaver: unknown record format {buf[:1]!r}")
    parts: list[bytes] = []
    at, end = 1, len(buf)
    while at < end:
        (n,) = _LEN.unpack_from(buf, at)
        if at + 4 + n > end:
            raise ValueError("RedisSaver: truncated record")
        parts.append(buf[at + 4 : at + 4 + n])
        at += 4 + n
    if len(parts) != count:
        raise ValueError(f"RedisSaver: record has {len(parts)} parts, expected {count}")
    return parts


class _Item:
    """One checkpoint on its way from its record to a CheckpointTuple."""

    __slots__ = ("ns", "id", "parts", "_metadata", "checkpoint", "parent", "write_members")

    def __init__(self, ns: str, checkpoint_id: str, record: bytes) -> None:
        self.ns = ns
        self.id = checkpoint_id
        self.parts = _unpack(record, 5)
        self._metadata: Any = None
        self.checkpoint: dict[str, Any] | None = None
        self.parent = _text(self.parts[4])
        self.write_members: list[bytes] = []

    def metadata(self, serde: SerializerProtocol) -> CheckpointMetadata:
        if self._metadata is None:
            self._metadata = serde.loads_typed((_text(self.parts[2]), self.parts[3]))
        return self._metadata

    def load(self, serde: SerializerProtocol) -> dict[str, Any]:
        if self.checkpoint is None:
            self.checkpoint = serde.loads_typed((_text(self.parts[0]), self.parts[1]))
        return self.checkpoint


def _matches(metadata: CheckpointMetadata, filter: dict[str, Any] | None) -> bool:
    return not filter or all(metadata.get(k) == v for k, v in filter.items())


class _Op(NamedTuple):
    """One field a put or put_writes writes.

    kind: "B" a blob (HSETNX), "C" a checkpoint record and its index entry
    (HSET, ZADD), "W" a regular write (HSETNX, ZADD), "S" a special write (HSET,
    ZADD: replaced).
    """

    kind: str
    field: str
    value: bytes


# ---- the saver ------------------------------------------------------------------------------


class RedisSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpoint saver over a ``redis.asyncio.Redis`` client.

    The client must be made with ``decode_responses=False`` (records are
    binary); the saver never closes it. ``ttl_seconds``: every write sets the
    thread's five keys to expire after that many seconds (an idle thread's
    checkpoints vanish together; reads do not refresh it). ``key_prefix``: the
    prefix of every key (no braces).

    The async methods are the saver; the sync ones run them on the event loop
    the saver was made in (or first used in), from another thread, as
    LangGraph's own async savers do.
    """

    def __init__(
        self,
        client: Redis,
        *,
        ttl_seconds: int | None = None,
        key_prefix: str = keys.CHECKPOINT_PREFIX,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if client is None:
            raise TypeError("RedisSaver: client (a redis.asyncio.Redis) is required")
        if ttl_seconds is not None and (
            isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int) or ttl_seconds <= 0
        ):
            raise ValueError(
                f"RedisSaver: ttl_seconds must be a positive integer (got {ttl_seconds!r})"
            )
        if not isinstance(key_prefix, str) or "{" in key_prefix or "}" in key_prefix:
            raise ValueError("RedisSaver: key_prefix must be a string without braces")
        self.client = client
        self.ttl_seconds = ttl_seconds
        self.key_prefix = key_prefix
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    def thread_keys(self, thread_id: str) -> keys.CheckpointKeys:
        """The five keys of a thread (see the layout above)."""
        return keys.checkpoint_keys(self.key_prefix, _thread_id(thread_id))

    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """Versions are "<32-digit counter>.<16 random digits>": ordered by the
        counter, unique across the branches of a forked thread."""
        if current is None:
            n = 0
        elif isinstance(current, int | float):
            n = int(current)
        else:
            n = int(current.split(".", 1)[0])
        return f"{n + 1:032d}.{random.randrange(10**16):016d}"

    # ---- reads --------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._bind()
        configurable = config.get("configurable") or {}
        if configurable.get("thread_id") is None:
            return None
        thread_id = _thread_id(configurable["thread_id"])
        tk = self.thread_keys(thread_id)
        ns = configurable.get("checkpoint_ns") or ""
        checkpoint_id = configurable.get("checkpoint_id")
        if checkpoint_id:
            checkpoint_id = _checkpoint_id(checkpoint_id, "checkpoint_id")
        else:
            low, high = _prefix_range(f"{_esc(ns)} ")
            latest = await self.client.zrevrangebylex(tk.idx, high, low, 0, 1)
            if not latest:
                return None
            checkpoint_id = _parse_cp_member(_text(latest[0]))[1]
        tuples = await self._load(thread_id, tk, [(ns, checkpoint_id)], None, 1)
        return tuples[0] if tuples else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Newest first. Without a thread id every thread of this key prefix is
        listed (SCAN: it walks the keyspace, meant for tooling; threads in name
        order); without checkpoint_ns every namespace of a thread, newest first
        across them. filter: every key equal to the metadata's; before: ids below
        its checkpoint id; limit: at most that many in all."""
        self._bind()
        configurable = (config or {}).get("configurable") or {}
        ns = configurable.get("checkpoint_ns")
        only_id = configurable.get("checkpoint_id") or None
        before_id = ((before or {}).get("configurable") or {}).get("checkpoint_id") or None
        if only_id is not None:
            only_id = str(only_id)
        if before_id is not None:
            before_id = str(before_id)
        remaining = limit if limit is not None else -1
        if remaining == 0 or (limit is not None and limit < 0):
            return
        if configurable.get("thread_id") is not None:
            threads: Iterable[str] = [_thread_id(configurable["thread_id"])]
        else:
            threads = await self._thread_ids()
        for thread_id in threads:
            tk = self.thread_keys(thread_id)
            async for page in self._candidates(tk, ns, only_id, before_id):
                tuples = await self._load(thread_id, tk, page, filter, remaining)
                for tup in tuples:
                    yield tup
                if remaining > 0:
                    remaining -= len(tuples)
                    if remaining <= 0:
                        return

    async def _candidates(
        self,
        tk: keys.CheckpointKeys,
        ns: str | None,
        only_id: str | None,
        before_id: str | None,
    ) -> AsyncIterator[list[tuple[str, str]]]:
        """Pages of (ns, id) that may be listed, newest first: ZREVRANGEBYLEX pages
        of one namespace's range, or the whole index sorted by id."""
        if ns is not None and only_id is not None:
            if before_id is None or only_id < before_id:
                yield [(ns, only_id)]
            return
        if ns is not None:
            low, end = _prefix_range(f"{_esc(ns)} ")
            high = f"({_cp_member(ns, before_id)}" if before_id is not None else end
            while True:
                members = await self.client.zrevrangebylex(tk.idx, high, low, 0, _LIST_PAGE)
                if members:
                    yield [_parse_cp_member(_text(m)) for m in members]
                if len(members) < _LIST_PAGE:
                    return
                high = f"({_text(members[-1])}"
        found = [_parse_cp_member(_text(m)) for m in await self.client.zrange(tk.idx, 0, -1)]
        found = [
            (n, i)
            for n, i in found
            if (only_id is None or i == only_id) and (before_id is None or i < before_id)
        ]
        found.sort(key=lambda c: (c[1], c[0]), reverse=True)
        for at in range(0, len(found), _LIST_PAGE):
            yield found[at : at + _LIST_PAGE]

    async def _thread_ids(self) -> list[str]:
        """Thread ids with checkpoints under this prefix (SCAN for their index keys)."""
        head, tail = f"{self.key_prefix}{{", "}:lg:idx"
        match = re.sub(r"([*?\[\]\\])", r"\\\1", self.key_prefix) + "{*" + tail
        ids = set()
        async for key in self.client.scan_iter(match=match, count=1000, _type="zset"):
            ids.add(_text(key)[len(head) : -len(tail)])
        return sorted(ids)

    async def _load(
        self,
        thread_id: str,
        tk: keys.CheckpointKeys,
        candidates: Sequence[tuple[str, str]],
        filter: dict[str, Any] | None,
        remaining: int,
    ) -> list[CheckpointTuple]:
        """The tuples of the candidates that exist and match filter (at most
        remaining, unless it is negative): two pipelined round trips for all."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(tk.cp, [_cp_member(ns, i) for ns, i in candidates])
        for ns, i in candidates:
            pipe.zrangebylex(tk.widx, *_prefix_range(_writes_prefix(ns, i)))
        records, *write_members = await pipe.execute()
        items: list[_Item] = []
        for (ns, i), record, members in zip(candidates, records, write_members, strict=True):
            if record is None:  # deleted since the index was read
                continue
            item = _Item(ns, i, record)
            if not _matches(item.metadata(self.serde), filter):
                continue
            item.write_members = members
            items.append(item)
            if len(items) == remaining:
                break
        if not items:
            return []
        pipe = self.client.pipeline(transaction=False)
        fields: list[list[tuple[str, str]]] = []
        for item in items:
            versions = item.load(self.serde).get("channel_versions") or {}
            item_fields = list(versions.items())
            fields.append(item_fields)
            if item_fields:
                pipe.hmget(tk.blobs, [_blob_field(item.ns, c, v) for c, v in item_fields])
            if item.write_members:
                pipe.hmget(tk.w, item.write_members)
        replies = iter(await pipe.execute() if len(pipe) else [])
        tuples = []
        for item, item_fields in zip(items, fields, strict=True):
            blobs = next(replies) if item_fields else []
            records = next(replies) if item.write_members else []
            values: dict[str, Any] = {}
            for (channel, _), blob in zip(item_fields, blobs, strict=True):
                if blob is not None:
                    btype, data = _unpack(blob, 2)
                    values[channel] = self.serde.loads_typed((_text(btype), data))
            tuples.append(
                CheckpointTuple(
                    config={
                        "configurable": {
                            "thread_id": thread_id,
                            "checkpoint_ns": item.ns,
                            "checkpoint_id": item.id,
                        }
                    },
                    checkpoint={**item.load(self.serde), "channel_values": values},
                    metadata=item.metadata(self.serde),
                    parent_config=(
                        {
                            "configurable": {
                                "thread_id": thread_id,
                                "checkpoint_ns": item.ns,
                                "checkpoint_id": item.parent,
                            }
                        }
                        if item.parent
                        else None
                    ),
                    pending_writes=self._writes(item.write_members, records),
                )
            )
        return tuples

    def _writes(self, members: list[bytes], records: list[bytes | None]) -> list[PendingWrite]:
        """One checkpoint's writes in LangGraph's order: task path, task id, idx."""
        rows = []
        for member, record in zip(members, records, strict=True):
            if record is None:
                continue
            task_id, channel, wtype, data, task_path = _unpack(record, 5)
            idx = int(member[member.rindex(b" ") + 1 :])
            task = _text(task_id)
            rows.append(
                (writes_sort_key(_text(task_path), task, idx), task, _text(channel), wtype, data)
            )
        rows.sort(key=lambda r: r[0])
        return [(t, c, self.serde.loads_typed((_text(wt), d))) for _, t, c, wt, d in rows]

    # ---- writes -------------------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._bind()
        configurable = config.get("configurable")
        if not configurable or configurable.get("thread_id") is None:
            raise ValueError("RedisSaver.aput: config['configurable']['thread_id'] is missing")
        thread_id = _thread_id(configurable["thread_id"])
        tk = self.thread_keys(thread_id)
        ns = configurable.get("checkpoint_ns") or ""
        checkpoint_id = _checkpoint_id(checkpoint.get("id"), "checkpoint['id']")
        parent = configurable.get("checkpoint_id")
        stored = dict(checkpoint)
        stored["id"] = checkpoint_id
        values = stored.pop("channel_values", None) or {}
        ops = [
            _Op(
                "B",
                _blob_field(ns, channel, version),
                _pack(*self.serde.dumps_typed(values[channel])),
            )
            for channel, version in (new_versions or {}).items()
            if channel in values
        ]
        record = _pack(
            *self.serde.dumps_typed(stored),
            *self.serde.dumps_typed(get_checkpoint_metadata(config, metadata)),
            str(parent) if parent else "",
        )
        ops.append(_Op("C", _cp_member(ns, checkpoint_id), record))
        await self._apply(thread_id, tk, ops)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._bind()
        configurable = config.get("configurable") or {}
        if configurable.get("thread_id") is None:
            raise ValueError(
                "RedisSaver.aput_writes: config['configurable']['thread_id'] is missing"
            )
        thread_id = _thread_id(configurable["thread_id"])
        tk = self.thread_keys(thread_id)
        checkpoint_id = _checkpoint_id(configurable.get("checkpoint_id"), "checkpoint_id")
        ns = configurable.get("checkpoint_ns") or ""
        task_id = _checkpoint_id(task_id, "task_id")
        if not writes:
            return
        ops = []
        for i, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, i)
            record = _pack(task_id, channel, *self.serde.dumps_typed(value), task_path or "")
            # Special writes (negative idx) replace; a regular write keeps the first.
            ops.append(
                _Op("S" if idx < 0 else "W", _write_member(ns, checkpoint_id, task_id, idx), record)
            )
        await self._apply(thread_id, tk, ops)

    async def _apply(self, thread_id: str, tk: keys.CheckpointKeys, ops: list[_Op]) -> None:
        """Writes ops, and the TTL refresh, in one MULTI/EXEC."""
        pipe = self.client.pipeline(transaction=True)
        for op in ops:
            if op.kind == "B":
                pipe.hsetnx(tk.blobs, op.field, op.value)
            elif op.kind == "C":
                pipe.hset(tk.cp, op.field, op.value)
                pipe.zadd(tk.idx, {op.field: 0})
            else:
                if op.kind == "S":
                    pipe.hset(tk.w, op.field, op.value)
                else:
                    pipe.hsetnx(tk.w, op.field, op.value)
                pipe.zadd(tk.widx, {op.field: 0})
        if self.ttl_seconds is not None:
            for key in tk:
                pipe.expire(key, self.ttl_seconds)
        await pipe.execute()

    # ---- deletes, copies ------------------------------------------------------------------------

    async def adelete_thread(self, thread_id: str) -> None:
        self._bind()
        await self.client.unlink(*self.thread_keys(thread_id))

    async def forget(
        self,
        thread_id: str,
        *,
        checkpoints: Iterable[tuple[str, str]] = (),
        writes: Iterable[tuple[str, str, str] | tuple[str, str, str, int]] = (),
        blobs: Iterable[tuple[str, str, str | int | float]] = (),
    ) -> None:
        """Removes parts of a thread (what a rolled back run wrote), in one
        MULTI/EXEC after one read of the write index: checkpoints (ns, id) with
        all their pending writes; writes (ns, checkpoint id, task id) every write
        of that task on that checkpoint, or (ns, checkpoint id, task id, idx) that
        one; blobs (ns, channel, version). The caller names only what nothing else
        refers to."""
        self._bind()
        await self._forget(_thread_id(thread_id), list(checkpoints), list(writes), list(blobs))

    async def _forget(
        self,
        thread_id: str,
        checkpoints: list[tuple[str, str]],
        writes: list[tuple[Any, ...]],
        blobs: list[tuple[str, str, Any]],
        restore: Sequence[tuple[str, str, bytes]] = (),
        also_delete: Sequence[str] = (),
    ) -> None:
        tk = self.thread_keys(thread_id)
        ranges = [_prefix_range(_writes_prefix(ns, i)) for ns, i in checkpoints]
        found: list[bytes | str] = []
        for w in writes:
            if len(w) == 4:
                found.append(_write_member(*w))
            else:
                ns, i, task_id = w
                ranges.append(_prefix_range(f"{_writes_prefix(ns, i)}{_esc(task_id)} "))
        if ranges:
            pipe = self.client.pipeline(transaction=False)
            for low, high in ranges:
                pipe.zrangebylex(tk.widx, low, high)
            for members in await pipe.execute():
                found.extend(members)
        if not (checkpoints or found or blobs or restore or also_delete):
            return
        pipe = self.client.pipeline(transaction=True)
        if checkpoints:
            members = [_cp_member(ns, i) for ns, i in checkpoints]
            pipe.zrem(tk.idx, *members)
            pipe.hdel(tk.cp, *members)
        if found:
            pipe.zrem(tk.widx, *found)
            pipe.hdel(tk.w, *found)
        if blobs:
            pipe.hdel(tk.blobs, *[_blob_field(*b) for b in blobs])
        for kind, field, value in restore:
            if kind == "c":
                pipe.hset(tk.cp, field, value)
                pipe.zadd(tk.idx, {field: 0})
            else:
                pipe.hset(tk.w, field, value)
                pipe.zadd(tk.widx, {field: 0})
        if also_delete:
            pipe.unlink(*also_delete)
        await pipe.execute()

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Deletes every checkpoint whose metadata's run_id is one of run_ids,
        with its pending writes and the channel values no remaining checkpoint
        refers to. This layout has no index by run: it SCANs every thread of the
        prefix and reads all their checkpoints' metadata (tooling; the worker
        rolls back with its undo journal instead)."""
        self._bind()
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return
        for thread_id in await self._thread_ids():
            await self._drop(
                thread_id,
                lambda items, _fields: {
                    (it.ns, it.id)
                    for it in items
                    if str(it.metadata(self.serde).get("run_id")) in wanted
                },
            )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """strategy "keep_latest": each namespace keeps its newest checkpoint, with
        its pending writes and the values it refers to. When that checkpoint's
        metadata has counters_since_delta_snapshot (DeltaChannels whose values
        are rebuilt from the ancestors' writes), its ancestors back to the
        nearest one that stores each such channel's value (a snapshot) are kept
        too, with their writes. "delete" (or "delete_all"): the threads are
        deleted."""
        self._bind()
        if strategy in ("delete", "delete_all"):
            for thread_id in thread_ids:
                await self.adelete_thread(str(thread_id))
            return
        if strategy != "keep_latest":
            raise ValueError(f"RedisSaver.aprune: unknown strategy {strategy!r}")
        for thread_id in thread_ids:
            await self._drop(_thread_id(thread_id), self._all_but_latest)

    def _all_but_latest(self, items: list[_Item], fields: set[str]) -> set[tuple[str, str]]:
        by_ns: dict[str, dict[str, _Item]] = {}
        for it in items:
            by_ns.setdefault(it.ns, {})[it.id] = it
        keep: set[tuple[str, str]] = set()
        for ns, chain in by_ns.items():
            at = chain[max(chain)]
            keep.add((ns, at.id))
            # A delta channel's value is its nearest stored value on the parent chain (the
            # seed) plus the writes after it: keep the chain up to each channel's seed.
            pending = set(at.metadata(self.serde).get("counters_since_delta_snapshot") or ())
            while pending and at.parent in chain:
                at = chain[at.parent]
                keep.add((ns, at.id))
                versions = at.load(self.serde).get("channel_versions") or {}
                pending = {
                    ch
                    for ch in pending
                    if ch not in versions or _blob_field(ns, ch, versions[ch]) not in fields
                }
        return {(it.ns, it.id) for it in items} - keep

    async def _drop(
        self,
        thread_id: str,
        choose: Callable[[list[_Item], set[str]], set[tuple[str, str]]],
    ) -> None:
        """Removes the checkpoints choose() picks among the thread's, with their
        writes and the blobs no remaining checkpoint refers to; under WATCH, so
        a write that lands meanwhile makes it start over."""
        tk = self.thread_keys(thread_id)
        for _ in range(_WATCH_TRIES):
            async with self.client.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(*tk)
                    records = await pipe.hgetall(tk.cp)
                    fields = {_text(f) for f in await pipe.hkeys(tk.blobs)}
                    items = [_Item(*_parse_cp_member(_text(m)), r) for m, r in records.items()]
                    drop = choose(items, fields)
                    if not drop:
                        await pipe.unwatch()
                        return
                    write_members = await pipe.zrange(tk.widx, 0, -1)
                    used = {
                        _blob_field(it.ns, channel, version)
                        for it in items
                        if (it.ns, it.id) not in drop
                        for channel, version in (
                            it.load(self.serde).get("channel_versions") or {}
                        ).items()
                    }
                    gone_writes = [
                        m for m in write_members if _parse_write_member(_text(m))[:2] in drop
                    ]
                    gone_blobs = [f for f in fields if f not in used]
                    members = [_cp_member(ns, i) for ns, i in drop]
                    pipe.multi()
                    pipe.zrem(tk.idx, *members)
                    pipe.hdel(tk.cp, *members)
                    if gone_writes:
                        pipe.zrem(tk.widx, *gone_writes)
                        pipe.hdel(tk.w, *gone_writes)
                    if gone_blobs:
                        pipe.hdel(tk.blobs, *gone_blobs)
                    await pipe.execute()
                    return
                except WatchError:
                    continue
        raise RuntimeError(
            f"RedisSaver: thread {thread_id!r} kept changing; its checkpoints were not pruned"
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copies every checkpoint, write and value of a thread to another (whose
        checkpoints it replaces), ids unchanged; a metadata thread_id naming the
        source names the target, as LangGraph's Python server copies. The
        source's TTLs are kept (ttl_seconds, when set, instead)."""
        self._bind()
        source = _thread_id(source_thread_id)
        target = _thread_id(target_thread_id)
        src, dst = self.thread_keys(source), self.thread_keys(target)
        pipe = self.client.pipeline(transaction=False)
        plain = (src.idx, src.blobs, src.widx, src.w)
        for key in plain:
            pipe.dump(key)
            pipe.pttl(key)
        pipe.hgetall(src.cp)
        pipe.pttl(src.cp)
        *dumps, records, cp_ttl = await pipe.execute()
        if not records:
            return
        for member, record in records.items():
            parts = _unpack(record, 5)
            metadata = self.serde.loads_typed((_text(parts[2]), parts[3]))
            if isinstance(metadata, dict) and metadata.get("thread_id") == source:
                metadata = {**metadata, "thread_id": target}
                parts[2:4] = self.serde.dumps_typed(metadata)
                records[member] = _pack(*parts)
        pipe = self.client.pipeline(transaction=True)
        pipe.unlink(*dst)
        for at, key in enumerate((dst.idx, dst.blobs, dst.widx, dst.w)):
            data, ttl = dumps[2 * at], dumps[2 * at + 1]
            if data is not None:
                pipe.restore(key, max(ttl, 0), data, replace=True)
        pipe.hset(dst.cp, mapping=records)
        if cp_ttl > 0:
            pipe.pexpire(dst.cp, cp_ttl)
        if self.ttl_seconds is not None:
            for key in dst:
                pipe.expire(key, self.ttl_seconds)
        await pipe.execute()

    # ---- sync methods: the async ones, run on the saver's loop from another thread ----------

    def _bind(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()

    def _run(self, coro: Awaitable[Any]) -> Any:
        loop = self._sync_loop(coro)
        return asyncio.run_coroutine_threadsafe(coro, loop).result()  # type: ignore[arg-type]

    def _sync_loop(self, coro: Any = None) -> asyncio.AbstractEventLoop:
        loop = self.loop
        problem = None
        if loop is None:
            problem = (
                f"{type(self).__name__} has no event loop yet: its sync methods run its async "
                "ones on the loop its Redis client uses; make the saver inside that loop"
            )
        else:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                problem = (
                    f"Synchronous calls to {type(self).__name__} are only allowed from a thread "
                    "other than its event loop's. From the loop, use the async interface, for "
                    "example `await checkpointer.aget_tuple(...)` or `await graph.ainvoke(...)`."
                )
        if problem is not None:
            if coro is not None and hasattr(coro, "close"):
                coro.close()
            raise asyncio.InvalidStateError(problem)
        return loop  # type: ignore[return-value]

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        loop = self._sync_loop()
        it = self.alist(config, filter=filter, before=before, limit=limit)
        while True:
            try:
                yield asyncio.run_coroutine_threadsafe(it.__anext__(), loop).result()
            except StopAsyncIteration:
                return

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        return self._run(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        return self._run(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        return self._run(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        return self._run(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        return self._run(self.aprune(thread_ids, strategy=strategy))


# ---- the worker's saver ---------------------------------------------------------------------

# Configurable members LangGraph's Python server leaves out of a checkpoint's metadata
# (langgraph_runtime_inmem's saver), and the request-scoped ones it drops from all three
# layers before LangGraph's own get_checkpoint_metadata adds scalars back.
_NOT_METADATA = frozenset({"checkpoint_ns", "checkpoint_id", "run_id", "thread_id"})
_TRANSIENT = frozenset(
    {
        "langgraph_request_id",
        "langgraph_auth_user",
        "langgraph_auth_user_id",
        "langgraph_auth_permissions",
    }
)


def checkpoint_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict[str, Any]:
    """A checkpoint's metadata before the saver's put, as LangGraph's Python
    server builds it: the config's configurable members (not ``__…`` ones,
    checkpoint_ns, checkpoint_id, run_id, thread_id), then the config's metadata,
    then LangGraph's (source, step, parents, …), later ones winning, the
    request-scoped members left out of all three. RedisSaver.aput then adds what
    LangGraph adds for every saver (get_checkpoint_metadata: the config's scalar
    members not there yet, run_id and the request-scoped ones among them)."""
    configurable = config.get("configurable") or {}
    merged: dict[str, Any] = {
        k: v
        for k, v in configurable.items()
        if not k.startswith("__") and k not in _NOT_METADATA and k not in _TRANSIENT
    }
    merged.update((k, v) for k, v in (config.get("metadata") or {}).items() if k not in _TRANSIENT)
    merged.update((k, v) for k, v in metadata.items() if k not in _TRANSIENT)
    return merged


class FencedError(RuntimeError):
    """A write refused: the thread's lock is not this worker's (the message starts with FENCED)."""


_UNDO_TTL = 86400
"""How long a REST run's undo journal outlives its last write (s)."""

_LOST_MAX = 4096
"""At most this many threads stay refused after their run was lost (the oldest are let go)."""

# KEYS: lock idx cp blobs widx w undo. ARGV: owner ("" = not fenced), ttl ("" = none),
# journal ("1" = the thread's REST run), then kind, field, value per op (_Op).
# The journal (a set) says what the write created — "c <member>", "w <member>",
# "b <field>", to delete — and what it replaced: a marker "r <kind> <field>" and
# "o <kind> <field length> <field><old value>", to restore; a field the run made itself
# or already replaced once is not noted again.
_WRITE_LUA = """
local owner, ttl, journal = ARGV[1], ARGV[2], ARGV[3] == '1'
if owner ~= '' and redis.call('GET', KEYS[1]) ~= owner then
  return redis.error_reply(
    "FENCED the thread's lock is another worker's: the checkpoint is not written")
end
for i = 4, #ARGV, 3 do  -- checked before anything is written: a script's writes stay
  local kind = ARGV[i]
  if kind ~= 'B' and kind ~= 'W' and kind ~= 'S' and kind ~= 'C' then
    return redis.error_reply('ERR threadcast checkpoint write: unknown op ' .. kind)
  end
end
local undo = KEYS[7]
local function replacing(kind, hash, field)
  if redis.call('HEXISTS', hash, field) == 0 then
    redis.call('SADD', undo, kind .. ' ' .. field)
  elseif redis.call('SISMEMBER', undo, kind .. ' ' .. field) == 0
      and redis.call('SADD', undo, 'r ' .. kind .. ' ' .. field) == 1 then
    local old = redis.call('HGET', hash, field)
    redis.call('SADD', undo, 'o ' .. kind .. ' ' .. #field .. ' ' .. field .. old)
  end
end
for i = 4, #ARGV, 3 do
  local kind, field, value = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if kind == 'B' then
    if redis.call('HSETNX', KEYS[4], field, value) == 1 and journal then
      redis.call('SADD', undo, 'b ' .. field)
    end
  elseif kind == 'W' then
    if redis.call('HSETNX', KEYS[6], field, value) == 1 and journal then
      redis.call('SADD', undo, 'w ' .. field)
    end
    redis.call('ZADD', KEYS[5], 0, field)
  else
    local hash, index, note = KEYS[6], KEYS[5], 'w'
    if kind == 'C' then hash, index, note = KEYS[3], KEYS[2], 'c' end
    if journal then replacing(note, hash, field) end
    redis.call('HSET', hash, field, value)
    redis.call('ZADD', index, 0, field)
  end
end
if ttl ~= '' then
  for k = 2, 6 do redis.call('EXPIRE', KEYS[k], ttl) end
end
if journal then redis.call('EXPIRE', undo, UNDO_TTL) end
return 1
""".replace("UNDO_TTL", str(_UNDO_TTL))


class _Fence(NamedTuple):
    regain: Callable[[], Awaitable[bool]]
    settle: Callable[[], Awaitable[None]]


class WorkerSaver(RedisSaver):
    """The worker's checkpointer: a RedisSaver that

    - writes every checkpoint's metadata as LangGraph's Python server does
      (``checkpoint_metadata``): a run's config and metadata are in every
      checkpoint it writes, so history can be searched by them;
    - fences a thread's writes while a run of this worker holds the thread
      (``fence``): each write first awaits the run's ``settle()`` (its events so
      far appended), then is applied only if the thread's lock still names this
      worker, checked in the same script call that writes; a refusal calls
      ``regain()`` once and is sent again if it says the lock is ours again, else
      the write fails with ``FencedError`` (FENCED …). So a worker whose run was
      taken over cannot save a step whose events it could not append;
    - journals, for a thread whose current run is a REST run
      (``rest_run_of(thread_id)``), everything each write creates or replaces, in
      ``keys.undo(thread)`` (a set, 1-day TTL) within the same script call, so
      ``undo(thread)`` can take the run back for a ``rollback`` cancel.
    """

    def __init__(
        self,
        client: Redis,
        *,
        worker_name: str,
        rest_run_of: Callable[[str], bool],
        ttl_seconds: int | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(client, ttl_seconds=ttl_seconds, serde=serde)
        if not worker_name:
            raise ValueError("WorkerSaver: worker_name is required (the lock's owner)")
        self.worker_name = worker_name
        self.rest_run_of = rest_run_of
        # Shared by the copies with_allowlist() makes (copy.copy): never rebound.
        self._fences: dict[str, _Fence] = {}
        self._lost: dict[str, None] = {}  # threads whose run was lost, oldest first
        self._inflight: dict[str, set[asyncio.Future[None]]] = {}
        self._script = client.register_script(_WRITE_LUA)

    def fence(
        self,
        thread_id: str,
        regain: Callable[[], Awaitable[bool]],
        settle: Callable[[], Awaitable[None]],
    ) -> None:
        """Fences the thread's writes by its lock (a run of this worker took it)."""
        self._lost.pop(thread_id, None)
        self._fences[thread_id] = _Fence(regain, settle)

    def unfence(self, thread_id: str, lost: bool) -> None:
        """The run released the thread (lost=False: writes go unfenced again), or
        lost it (lost=True: every write of the thread fails until a run of this
        worker fences it again — the graph may still be winding down)."""
        self._fences.pop(thread_id, None)
        if not lost:
            self._lost.pop(thread_id, None)
            return
        self._lost[thread_id] = None
        if len(self._lost) > _LOST_MAX:
            del self._lost[next(iter(self._lost))]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await super().aput(
            config, checkpoint, checkpoint_metadata(config, metadata), new_versions
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        # A task stopped by its run's cancel (or the worker closing) did not fail: LangGraph
        # records its CancelledError as the task's error, which the Python server never saves
        # (its cancelled run's writes go with it). The task is simply pending again.
        kept = [
            (channel, value)
            for channel, value in writes
            if not (channel == ERROR and isinstance(value, asyncio.CancelledError))
        ]
        if writes and not kept:
            return
        await super().aput_writes(config, kept, task_id, task_path)

    async def _apply(self, thread_id: str, tk: keys.CheckpointKeys, ops: list[_Op]) -> None:
        """Writes ops in one script call: fenced, journaled, tracked for settle()."""
        pending = self._inflight.setdefault(thread_id, set())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending.add(done)
        try:
            await self._fenced_write(thread_id, tk, ops)
        finally:
            done.set_result(None)
            pending.discard(done)
            if not pending and self._inflight.get(thread_id) is pending:
                del self._inflight[thread_id]

    async def _fenced_write(self, thread_id: str, tk: keys.CheckpointKeys, ops: list[_Op]) -> None:
        if thread_id in self._lost:
            raise FencedError(
                f"FENCED thread {thread_id}: its run was lost by this worker; nothing more is saved"
            )
        fence = self._fences.get(thread_id)
        if fence is not None:
            await fence.settle()  # the run's events before this write are appended first
        journal = bool(self.rest_run_of(thread_id))
        script_keys = [keys.lock(thread_id), *tk, keys.undo(thread_id)]
        args: list[str | bytes] = [
            self.worker_name if fence is not None else "",
            str(self.ttl_seconds) if self.ttl_seconds is not None else "",
            "1" if journal else "",
        ]
        for op in ops:
            args += (op.kind, op.field, op.value)
        regained = False
        while True:
            try:
                await self._script(keys=script_keys, args=args)
                return
            except ResponseError as e:
                if fence is None or not str(e).startswith("FENCED"):
                    raise
                if regained or not await fence.regain():
                    raise FencedError(f"{e} (thread {thread_id}, worker {self.worker_name})") from e
                regained = True

    async def settle(self, thread_id: str) -> None:
        """Returns once every write to the thread already under way is over."""
        while pending := self._inflight.get(thread_id):
            await asyncio.wait(list(pending))

    async def clear_undo(self, thread_id: str) -> None:
        """Empties the thread's undo journal (a REST run starts)."""
        await self.client.unlink(keys.undo(_thread_id(thread_id)))

    async def undo(self, thread_id: str) -> int:
        """Takes back everything the thread's journal names — the checkpoints,
        writes and values the run created are forgotten, what it replaced is put
        back — and deletes the journal, in one MULTI/EXEC; returns how many
        checkpoints were taken back."""
        thread_id = _thread_id(thread_id)
        await self.settle(thread_id)
        journal = keys.undo(thread_id)
        checkpoints: list[tuple[str, str]] = []
        writes: list[tuple[str, str, str, int]] = []
        blobs: list[tuple[str, str, str]] = []
        restore: list[tuple[str, str, bytes]] = []
        for item in await self.client.smembers(journal):
            tag, body = item[:2], item[2:]
            if tag == b"c ":
                checkpoints.append(_parse_cp_member(body.decode()))
            elif tag == b"w ":
                writes.append(_parse_write_member(body.decode()))
            elif tag == b"b ":
                blobs.append(_parse_blob_field(body.decode()))
            elif tag == b"o ":
                kind, length, rest = body.split(b" ", 2)
                n = int(length)
                restore.append((kind.decode(), rest[:n].decode(), rest[n:]))
        await self._forget(thread_id, checkpoints, writes, blobs, restore, also_delete=[journal])
        return len(checkpoints)
