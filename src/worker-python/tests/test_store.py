"""ThreadcastStore through real graphs: every op a node can make, on a private Redis with
threadcast_store loaded, checked against the records the REST API serves (FCALL store.get, what
the gateway answers GET /store/items with) and against LangGraph's InMemoryStore."""

from __future__ import annotations

import asyncio
import operator
import threading
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypedDict

import orjson
import pytest
import redis.asyncio as aredis
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from threadcast_worker.store import StoreError, ThreadcastStore


class S(TypedDict, total=False):
    log: Annotated[list[Any], operator.add]


def one_node(fn: Any, store: BaseStore) -> Any:
    """A compiled graph whose one node is fn, with the store."""
    g = StateGraph(S)
    g.add_node("n", fn)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile(store=store)


async def gateway_get(client: aredis.Redis, namespace: str, key: str) -> tuple[int, Any]:
    """What the gateway answers GET /store/items?namespace=…&key=… with (one FCALL)."""
    status, body = await client.fcall(
        "threadcast_store",
        1,
        "{tc:store}",
        "store.get",
        orjson.dumps({"query": {"namespace": namespace, "key": key, "refresh_ttl": "false"}}),
    )
    return int(status), orjson.loads(body)


async def fcall_count(client: aredis.Redis) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_fcall", {}).get("calls", 0))


async def test_graph_node_puts_gets_searches_lists_deletes(aredis_client: aredis.Redis) -> None:
    store = ThreadcastStore(aredis_client)

    async def write(state: S, runtime: Runtime) -> S:
        s = runtime.store
        await s.aput(("users", "u1", "memories"), "m1", {"text": "likes tea", "n": 1})
        await s.aput(("users", "u1", "memories"), "m2", {"text": "lives in Lyon", "n": 2})
        await s.aput(("users", "u2", "memories"), "m1", {"text": "likes coffee", "n": 3})
        await s.aput(("users", "u1", "prefs"), "p", {"lang": "fr", "tags": []})
        return {"log": ["written"]}

    async def read(state: S) -> S:
        s = get_store()
        got = await s.aget(("users", "u1", "memories"), "m2")
        missing = await s.aget(("users", "u1", "memories"), "nope")
        found = await s.asearch(("users", "u1"), filter={"n": {"$gte": 2}})
        every = await s.asearch(("users",), limit=2, offset=1)
        spaces = await s.alist_namespaces(prefix=("users",), max_depth=2)
        tails = await s.alist_namespaces(suffix=("memories",))
        await s.adelete(("users", "u2", "memories"), "m1")
        gone = await s.aget(("users", "u2", "memories"), "m1")
        after = await s.alist_namespaces()
        return {"log": [got, missing, found, every, spaces, tails, gone, after]}

    g = StateGraph(S)
    g.add_node("write", write)
    g.add_node("read", read)
    g.add_edge(START, "write")
    g.add_edge("write", "read")
    g.add_edge("read", END)
    out = await g.compile(store=store).ainvoke({"log": []})
    _, got, missing, found, every, spaces, tails, gone, after = out["log"]

    assert got.namespace == ("users", "u1", "memories") and got.key == "m2"
    assert got.value == {"text": "lives in Lyon", "n": 2}
    assert isinstance(got.created_at, datetime) and got.created_at.tzinfo is not None
    assert abs(got.updated_at - datetime.now(UTC)) < timedelta(seconds=30)
    assert missing is None
    assert [(i.namespace, i.key) for i in found] == [(("users", "u1", "memories"), "m2")]
    assert found[0].score is None
    # Byte order of "<encoded namespace>\n<key>": u1/memories m1, m2, u1/prefs p, u2/memories m1.
    assert [(i.namespace[1:], i.key) for i in every] == [
        (("u1", "memories"), "m2"),
        (("u1", "prefs"), "p"),
    ]
    assert spaces == [("users", "u1"), ("users", "u2")]
    assert tails == [("users", "u1", "memories"), ("users", "u2", "memories")]
    assert gone is None
    assert after == [("users", "u1", "memories"), ("users", "u1", "prefs")]

    # The record a graph wrote is the one the REST API serves.
    status, item = await gateway_get(aredis_client, "users.u1.prefs", "p")
    assert status == 200
    assert item["namespace"] == ["users", "u1", "prefs"] and item["key"] == "p"
    assert item["value"] == {"lang": "fr", "tags": []}
    p = await store.aget(("users", "u1", "prefs"), "p")
    assert datetime.fromisoformat(item["created_at"]) == p.created_at
    assert datetime.fromisoformat(item["updated_at"]) == p.updated_at


async def test_what_the_rest_api_puts_a_graph_reads(aredis_client: aredis.Redis) -> None:
    # A value as a client sent it through PUT /store/items (the gateway's FCALL).
    status, _ = await aredis_client.fcall(
        "threadcast_store",
        1,
        "{tc:store}",
        "store.put",
        b'{"query":{},"body":{"namespace":["docs"],"key":"k","value":{"a":[],"b":{"c":1.5}}}}',
    )
    assert int(status) == 204
    store = ThreadcastStore(aredis_client)

    async def node(state: S, *, store: BaseStore) -> S:
        item = await store.aget(("docs",), "k")
        return {"log": [item.value]}

    out = await one_node(node, store).ainvoke({"log": []})
    assert out["log"] == [{"a": [], "b": {"c": 1.5}}]


async def test_an_update_keeps_created_at(aredis_client: aredis.Redis) -> None:
    store = ThreadcastStore(aredis_client)
    await store.aput(("a",), "k", {"v": 1})
    first = await store.aget(("a",), "k")
    await asyncio.sleep(0.01)
    await store.aput(("a",), "k", {"v": 2})
    second = await store.aget(("a",), "k")
    assert second.value == {"v": 2}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at


async def test_search_filters(aredis_client: aredis.Redis) -> None:
    store = ThreadcastStore(aredis_client)
    for i, (color, size) in enumerate([("red", 1), ("blue", 5), ("red", 10), ("green", None)]):
        value: dict[str, Any] = {"color": color, "i": i}
        if size is not None:
            value["size"] = size
        await store.aput(("shop", "items"), f"k{i}", value)
    await store.aput(("shopping",), "other", {"color": "red", "size": 1})

    async def keys_of(**kw: Any) -> list[str]:
        return [i.key for i in await store.asearch(("shop",), **kw)]

    assert await keys_of(filter={"color": "red"}) == ["k0", "k2"]
    assert await keys_of(filter={"color": {"$ne": "red"}}) == ["k1", "k3"]
    assert await keys_of(filter={"size": {"$gt": 1}}) == ["k1", "k2"]
    assert await keys_of(filter={"size": {"$gte": 5, "$lt": 10}}) == ["k1"]
    assert await keys_of(filter={"size": {"$lte": 5}}) == ["k0", "k1"]
    assert await keys_of(filter={"color": {"$in": ["blue", "green"]}}) == ["k1", "k3"]
    assert await keys_of(filter={"color": {"$nin": ["blue", "green"]}}) == ["k0", "k2"]
    assert await keys_of(filter={"size": None}) == []  # an absent field is not null
    assert await keys_of(filter={"color": "red"}, limit=1, offset=1) == ["k2"]
    # A prefix matches whole labels: ("shop",) is not a prefix of ("shopping",).
    assert "other" not in await keys_of(limit=100)
    assert [i.key for i in await store.asearch((), filter={"size": 1})] == ["k0", "other"]


async def test_list_namespaces_conditions(aredis_client: aredis.Redis) -> None:
    store = ThreadcastStore(aredis_client)
    spaces = [("a", "x", "v1"), ("a", "y", "v1"), ("a", "y", "v2"), ("b", "x", "v1"), ("c",)]
    for ns in spaces:
        await store.aput(ns, "k", {})

    async def listed(*conditions: MatchCondition, **kw: Any) -> list[tuple[str, ...]]:
        (out,) = await store.abatch([ListNamespacesOp(tuple(conditions), **kw)])
        return out

    prefix = lambda *p: MatchCondition("prefix", p)  # noqa: E731
    suffix = lambda *p: MatchCondition("suffix", p)  # noqa: E731
    assert await listed(prefix("a")) == spaces[:3]
    assert await listed(prefix("*", "x")) == [("a", "x", "v1"), ("b", "x", "v1")]
    assert await listed(suffix("v1")) == [("a", "x", "v1"), ("a", "y", "v1"), ("b", "x", "v1")]
    assert await listed(prefix("a"), suffix("y", "*")) == [("a", "y", "v1"), ("a", "y", "v2")]
    # Two prefixes must both hold: ("a", "*") and ("*", "y") mean ("a", "y").
    assert await listed(prefix("a", "*"), prefix("*", "y")) == [("a", "y", "v1"), ("a", "y", "v2")]
    calls = await fcall_count(aredis_client)
    assert await listed(prefix("a"), prefix("b")) == []  # nothing can match: no call
    assert await fcall_count(aredis_client) == calls
    assert await listed(max_depth=1) == [("a",), ("b",), ("c",)]
    assert await listed(max_depth=2, limit=2, offset=1) == [("a", "y"), ("b", "x")]
    assert await store.alist_namespaces(prefix=("a",), suffix=("v2",)) == [("a", "y", "v2")]


async def test_behaves_as_langgraphs_in_memory_store(aredis_client: aredis.Redis) -> None:
    """The same ops on InMemoryStore (the Python server's store) and on ThreadcastStore give the
    same results, timestamps aside. Kept out: ["a-b"] sorts before ["a", "b"] here
    (protocol/README.md); InMemoryStore fails a comparison on an item without the field, and
    keeps listing a namespace whose items were all deleted (LangGraph's Postgres store does not,
    nor does threadcast_store)."""
    ours, theirs = ThreadcastStore(aredis_client), InMemoryStore()
    writes = [
        PutOp(("p", "1"), "a", {"score": 3, "kind": "x"}),
        PutOp(("p", "1"), "b", {"score": 7, "kind": "y"}),
        PutOp(("p", "2"), "a", {"score": 5, "kind": "x", "nested": {"k": [1, 2]}}),
        PutOp(("q",), "z", {"score": 1}),
        PutOp(("q",), "y", {"score": 2}),
        PutOp(("p", "2", "deep"), "c", {"kind": "x", "score": 0}),
        PutOp(("p", "1"), "b", {"score": 8, "kind": "y"}),
        PutOp(("q",), "z", None),
    ]
    reads = [
        GetOp(("p", "1"), "b"),
        GetOp(("p", "1"), "missing"),
        GetOp(("q",), "z"),
        SearchOp(("p",), filter={"kind": "x"}),
        SearchOp(("p",), filter={"score": {"$gt": 4}}),
        SearchOp(("p",), filter={"nested": {"k": [1, 2]}}),
        SearchOp(("p", "1"), limit=1, offset=1),
        SearchOp((), filter={"score": {"$lte": 3}}),
        ListNamespacesOp(),
        ListNamespacesOp((MatchCondition("prefix", ("p",)),), max_depth=2),
        ListNamespacesOp((MatchCondition("suffix", ("deep",)),)),
    ]

    def plain(r: Any) -> Any:
        # Items compared as (namespace, key, value), a search's in (namespace, key) order:
        # InMemoryStore lists namespaces in the order they were made, threadcast by bytes.
        if isinstance(r, list) and r and hasattr(r[0], "value"):
            return sorted((i.namespace, i.key, i.value) for i in r)
        if hasattr(r, "value"):
            return (r.namespace, r.key, r.value)
        return r

    for w in writes:  # one at a time: a batch keeps only a key's last write
        assert await ours.abatch([w]) == await theirs.abatch([w]) == [None]
    assert [plain(r) for r in await ours.abatch(reads)] == [
        plain(r) for r in await theirs.abatch(reads)
    ]


async def test_batch_reads_see_the_store_before_its_writes(aredis_client: aredis.Redis) -> None:
    store = ThreadcastStore(aredis_client)
    await store.aput(("b",), "k", {"v": "before"})
    execs = int((await aredis_client.info("commandstats")).get("cmdstat_exec", {}).get("calls", 0))
    res = await store.abatch(
        [
            PutOp(("b",), "k", {"v": "first"}),
            GetOp(("b",), "k"),
            SearchOp(("b",)),
            PutOp(("b",), "k", {"v": "last"}),
            PutOp(("b",), "new", {"v": 1}),
            ListNamespacesOp(),
            PutOp(("b",), "new", None),
        ]
    )
    assert res[0] is None and res[3] is None
    assert res[1].value == {"v": "before"}
    assert [i.value for i in res[2]] == [{"v": "before"}]
    assert res[5] == [("b",)]
    stats = await aredis_client.info("commandstats")
    assert int(stats["cmdstat_exec"]["calls"]) == execs + 1  # one MULTI/EXEC: one round trip
    assert (await store.aget(("b",), "k")).value == {"v": "last"}  # the last write won
    assert await store.aget(("b",), "new") is None

    # A graph's calls made in one tick are one batch, as under LangGraph's Python server.
    async def node(state: S, runtime: Runtime) -> S:
        s = runtime.store
        _, seen = await asyncio.gather(s.aput(("b",), "k", {"v": "graph"}), s.aget(("b",), "k"))
        return {"log": [seen.value, (await s.aget(("b",), "k")).value]}

    out = await one_node(node, store).ainvoke({"log": []})
    assert out["log"] == [{"v": "last"}, {"v": "graph"}]


async def test_ttl_in_minutes_and_refresh(aredis_client: aredis.Redis) -> None:
    store = ThreadcastStore(aredis_client)
    item_key = "{tc:store}:i:/t\nk"

    async def expires_at() -> int:
        return int(await aredis_client.hget(item_key, "expires_at"))

    async def node(state: S, runtime: Runtime) -> S:
        await runtime.store.aput(("t",), "k", {"v": 1}, ttl=1)
        return {"log": []}

    await one_node(node, store).ainvoke({"log": []})
    pttl = await aredis_client.pttl(item_key)
    assert 55_000 < pttl <= 60_000  # one minute
    first = await expires_at()
    await asyncio.sleep(0.02)
    assert (await store.aget(("t",), "k", refresh_ttl=False)).value == {"v": 1}
    assert await store.asearch(("t",), refresh_ttl=False)
    assert await expires_at() == first
    await store.aget(("t",), "k")  # refresh_ttl defaults to true
    second = await expires_at()
    assert second > first
    await asyncio.sleep(0.02)
    await store.asearch(("t",))
    assert await expires_at() > second
    await store.aput(("t",), "k", {"v": 2})  # a put without ttl makes it permanent
    assert await aredis_client.pttl(item_key) == -1

    # 0.002 minutes is 120 ms: then it is gone for get, search and the namespaces list.
    await store.aput(("short",), "k", {"v": 1}, ttl=0.002)
    assert (await store.aget(("short",), "k", refresh_ttl=False)) is not None
    await asyncio.sleep(0.3)
    assert await store.aget(("short",), "k") is None
    assert await store.asearch(("short",)) == []
    assert ("short",) not in await store.alist_namespaces()

    # langgraph.json's store.ttl: default_ttl for puts without one, refresh_on_read.
    configured = ThreadcastStore(
        aredis_client, ttl_config={"default_ttl": 2, "refresh_on_read": False}
    )
    await configured.aput(("c",), "k", {"v": 1})
    ckey = "{tc:store}:i:/c\nk"
    assert 115_000 < await aredis_client.pttl(ckey) <= 120_000
    before = int(await aredis_client.hget(ckey, "expires_at"))
    await asyncio.sleep(0.02)
    await configured.aget(("c",), "k")
    assert int(await aredis_client.hget(ckey, "expires_at")) == before
    await configured.aput(("c",), "k", {"v": 1}, ttl=None)
    assert await aredis_client.pttl(ckey) == -1


async def test_refusals_name_the_field(aredis_client: aredis.Redis) -> None:
    store = ThreadcastStore(aredis_client)

    async def refused(coro: Any) -> StoreError:
        with pytest.raises(StoreError) as e:
            await coro
        assert e.value.status == 422
        return e.value

    big = {"blob": "x" * 1_048_576}
    e = await refused(store.aput(("a",), "k", big))
    assert str(e) == "value is 1048587 bytes of JSON; the limit is 1048576"
    e = await refused(store.aput(("a",), "k" * 1025, {}))
    assert str(e) == "key is 1025 bytes; the limit is 1024"
    e = await refused(store.aput(("a",), "", {}))
    assert str(e) == "key must not be empty"
    e = await refused(store.aput(("a",) * 33, "k", {}))
    assert str(e) == "namespace has 33 labels; the limit is 32"
    e = await refused(store.aput(("a", "x" * 257), "k", {}))
    assert str(e) == "namespace[1] is 257 bytes; the limit is 256"
    e = await refused(store.asearch(("a",), limit=1001))
    assert str(e) == "limit must be an integer from 1 to 1000"
    e = await refused(store.asearch(("a",), filter={"n": {"$regex": "x"}}))
    assert str(e).startswith("filter.n: unknown operator $regex")
    e = await refused(store.aput(("a",), "k", {}, ttl=6_000_000))
    assert str(e).startswith("ttl must be a number of minutes greater than 0 and at most 5256000")
    e = await refused(store.alist_namespaces(max_depth=0))
    assert str(e) == "max_depth must be an integer >= 1"

    # A label with a period: LangGraph's InvalidNamespaceError, and nothing is sent.
    calls = await fcall_count(aredis_client)
    with pytest.raises(InvalidNamespaceError, match="periods"):
        await store.aget(("a.b",), "k")
    with pytest.raises(InvalidNamespaceError, match="periods"):
        await store.abatch([PutOp(("ok",), "k", {}), PutOp(("a.b",), "k", {})])
    assert await fcall_count(aredis_client) == calls
    assert await store.aget(("ok",), "k") is None

    # In a graph, the run fails with the refusal.
    async def node(state: S, runtime: Runtime) -> S:
        await runtime.store.aput(("a",), "k", big)
        return {"log": []}

    with pytest.raises(StoreError, match="value is 1048587 bytes of JSON"):
        await one_node(node, store).ainvoke({"log": []})


async def test_sync_calls_from_a_thread(aredis_client: aredis.Redis) -> None:
    store = ThreadcastStore(aredis_client)
    threads: list[str] = []

    def node(state: S, runtime: Runtime) -> S:  # a sync node: LangGraph runs it in a thread
        threads.append(threading.current_thread().name)
        s = runtime.store
        s.put(("sync", "x"), "k", {"v": 1})
        s.put(("sync", "y"), "k", {"v": 2}, ttl=5)
        got = s.get(("sync", "x"), "k")
        found = s.search(("sync",), filter={"v": 2})
        spaces = s.list_namespaces(prefix=("sync",))
        s.delete(("sync", "x"), "k")
        res = s.batch([GetOp(("sync", "x"), "k"), GetOp(("sync", "y"), "k")])
        return {"log": [got.value, [i.key for i in found], spaces, res[0], res[1].value]}

    out = await one_node(node, store).ainvoke({"log": []})
    assert threads and threads[0] != threading.current_thread().name
    assert out["log"] == [{"v": 1}, ["k"], [("sync", "x"), ("sync", "y")], None, {"v": 2}]
    assert 295_000 < await aredis_client.pttl("{tc:store}:i:/sync/y\nk") <= 300_000

    # On the loop's own thread a sync call would block the loop it needs: refused.
    with pytest.raises(asyncio.InvalidStateError, match="aget"):
        store.get(("sync", "y"), "k")
    with pytest.raises(asyncio.InvalidStateError):
        store.batch([GetOp(("sync", "y"), "k")])
