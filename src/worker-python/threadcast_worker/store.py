"""The store graphs get (``config["store"]``, ``runtime.store``, ``get_store()``): a LangGraph
``BaseStore`` over threadcast's own store, the Redis function ``threadcast_store``
(protocol/README.md, "The store: records in Redis") — the very records ``/store/items`` serves,
so what a graph puts is what ``client.store.get_item`` reads, and the other way round.

Each operation is one FCALL in the REST API's words (``store.get``, ``store.put``,
``store.delete``, ``store.search``, ``store.namespaces``), so the limits and errors are the REST
API's: a namespace of 1 to 32 labels, a key of at most 1024 bytes, a value (a JSON object) of at
most 1 MiB, a search ``limit`` of at most 1000, a TTL of at most ten years. A call the function
refuses (its 422) raises ``StoreError`` with its words ("value is 1048590 bytes of JSON; the limit
is 1048576"); a label with a period is LangGraph's ``InvalidNamespaceError``, raised before
anything is sent; a missing item is ``None``.

LangGraph's Python server hands a graph its store wrapped in an ``AsyncBatchedBaseStore``
(langgraph_runtime_inmem's ``BatchedStore``): the async calls a graph makes in one event-loop
tick go to the store as one batch (reads deduplicated, the last write of a key kept), and the
sync calls, made from another thread (a sync node runs in the executor), are run on the loop,
refused on the loop's own thread. ``ThreadcastStore`` is such a store itself, so a graph sees
the same. A batch is one round trip, a MULTI/EXEC of its calls: its reads see the store as it was
before the batch, its writes apply after them, the last write of a key winning — as LangGraph's
``InMemoryStore`` orders a batch. There is no vector index: a search's ``query`` is ignored (the
REST API's rule) and items carry no score.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)
from langgraph.store.base.batch import AsyncBatchedBaseStore

from threadcast_worker import keys, serde

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["StoreError", "ThreadcastStore"]


class StoreError(ValueError):
    """An operation ``threadcast_store`` refused: the message is its ``detail`` (naming the
    field, as the REST API's 422 does), ``status`` its HTTP status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


_NOTHING = object()  # match conditions no namespace can meet


def _merge(paths: Sequence[Sequence[str]], at_end: bool) -> list[str] | object | None:
    """One pattern for several prefix (or suffix) conditions, all of which must hold:
    threadcast_store takes one of each. Labels meet position by position ("*" gives way to a
    label); two different labels at one position match nothing."""
    if not paths:
        return None
    width = max(len(p) for p in paths)
    merged = ["*"] * width
    for path in paths:
        shift = width - len(path) if at_end else 0
        for i, label in enumerate(path):
            j = i + shift
            if label == "*" or merged[j] == label:
                continue
            if merged[j] != "*":
                return _NOTHING
            merged[j] = label
    return merged


def _put_body(op: PutOp) -> dict[str, Any]:
    body: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key}
    if op.value is None:
        return body
    # orjson writes dicts; any other Mapping is copied into one first.
    body["value"] = op.value if isinstance(op.value, dict) else dict(op.value)
    if op.index is not None:
        body["index"] = op.index
    if op.ttl is not None:
        body["ttl"] = op.ttl
    return body


def _request(op: Op) -> tuple[str, dict[str, Any]] | None:
    """The FCALL of one operation, (op, args); None when it can find nothing (no call)."""
    if isinstance(op, GetOp):
        query = {"namespace": ".".join(op.namespace), "key": op.key}
        if not op.refresh_ttl:
            query["refresh_ttl"] = "false"
        return "store.get", {"query": query}
    if isinstance(op, SearchOp):
        return "store.search", {
            "body": {
                "namespace_prefix": list(op.namespace_prefix),
                "filter": op.filter,
                "limit": op.limit,
                "offset": op.offset,
                "query": op.query,
                "refresh_ttl": op.refresh_ttl,
            }
        }
    if isinstance(op, ListNamespacesOp):
        conditions = op.match_conditions or ()
        body: dict[str, Any] = {"limit": op.limit, "offset": op.offset}
        for kind, at_end in (("prefix", False), ("suffix", True)):
            merged = _merge([c.path for c in conditions if c.match_type == kind], at_end)
            if merged is _NOTHING:
                return None
            if merged is not None:
                body[kind] = merged
        if op.max_depth is not None:
            body["max_depth"] = op.max_depth
        return "store.namespaces", {"body": body}
    if isinstance(op, PutOp):
        return ("store.put" if op.value is not None else "store.delete"), {"body": _put_body(op)}
    raise TypeError(f"not a store operation: {type(op).__name__}")


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _item(j: dict[str, Any], search: bool) -> Item:
    # threadcast_store writes ISO-8601 UTC with a "Z", which fromisoformat reads (3.11+).
    created = datetime.fromisoformat(j["created_at"])
    updated = datetime.fromisoformat(j["updated_at"])
    ns = tuple(j["namespace"])
    if search:
        return SearchItem(ns, j["key"], j["value"], created, updated)
    return Item(
        value=j["value"], key=j["key"], namespace=ns, created_at=created, updated_at=updated
    )


class ThreadcastStore(AsyncBatchedBaseStore):
    """LangGraph's ``BaseStore`` on ``FCALL threadcast_store`` (see the module's doc).

    Made on the event loop that will run the graphs (LangGraph's batching runs there), with a
    ``redis.asyncio.Redis`` client, never closed here. ``ttl_config`` is langgraph.json's
    ``store.ttl`` (``default_ttl`` in minutes for puts that give none, ``refresh_on_read``).
    """

    supports_ttl = True

    def __init__(self, redis: Redis, *, ttl_config: TTLConfig | None = None) -> None:
        super().__init__()
        self._redis = redis
        self.ttl_config = ttl_config

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Every operation's result, in order (``None`` for a put or a delete); one round trip."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [[] if isinstance(op, ListNamespacesOp) else None for op in ops]
        reads: list[tuple[int, Op, tuple[str, dict[str, Any]]]] = []
        writes: dict[tuple[tuple[str, ...], str], tuple[int, Op, tuple[str, dict[str, Any]]]] = {}
        for i, op in enumerate(ops):
            req = _request(op)
            if req is None:
                continue
            if isinstance(op, PutOp):  # a key's last write replaces its earlier ones
                writes[(tuple(op.namespace), op.key)] = (i, op, req)
            else:
                reads.append((i, op, req))
        calls = reads + list(writes.values())
        if not calls:
            return results
        args = [
            ("threadcast_store", 1, keys.STORE, name, serde.dumps(a)) for _, _, (name, a) in calls
        ]
        if len(args) == 1:
            replies: list[Any] = [await self._redis.fcall(*args[0])]
        else:
            async with self._redis.pipeline(transaction=True) as pipe:
                for a in args:
                    pipe.fcall(*a)
                replies = await pipe.execute(raise_on_error=False)
        failure: Exception | None = None
        for (i, op, (name, _)), reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                failure = failure or reply
                continue
            status, body = int(reply[0]), _text(reply[1])
            data = orjson.loads(body) if body else None
            if status >= 300:
                detail = data.get("detail") if isinstance(data, dict) else None
                failure = failure or StoreError(
                    status, detail or f"threadcast_store {name} answered {status}"
                )
            elif isinstance(op, GetOp):
                results[i] = _item(data, False) if data is not None else None
            elif isinstance(op, SearchOp):
                results[i] = [_item(j, True) for j in data["items"]]
            elif isinstance(op, ListNamespacesOp):
                results[i] = [tuple(ns) for ns in data["namespaces"]]
        if failure is not None:
            raise failure
        return results

    def __repr__(self) -> str:
        return "ThreadcastStore()"
