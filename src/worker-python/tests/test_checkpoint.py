"""RedisSaver and WorkerSaver on a private Redis: real graphs, the key layout, TTLs,
binary payloads, forget/undo, fencing, several savers at once, the sync methods."""

from __future__ import annotations

import asyncio
import operator
import pickle
import re
import uuid
from typing import Annotated, Any, TypedDict

import pytest
import redis.asyncio as aredis
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import ERROR, INTERRUPT
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from threadcast_worker import keys
from threadcast_worker.checkpoint import FencedError, RedisSaver, WorkerSaver

WAIT = 5.0  # s: the bound of every wait on something that should happen


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def _node(name: str):
    def run(_s: State) -> dict[str, Any]:
        return {"items": [name]}

    run.__name__ = name
    return run


def linear():
    """START → a → b → END."""
    g = StateGraph(State)
    g.add_node("a", _node("a"))
    g.add_node("b", _node("b"))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


def ask(_s: State) -> dict[str, Any]:
    return {"items": [interrupt("q?")]}


def ask_twice(_s: State) -> dict[str, Any]:
    first = interrupt("first")
    second = interrupt("second")
    return {"items": [first, second]}


def single(node) -> StateGraph:
    g = StateGraph(State)
    g.add_node(node.__name__, node)
    g.add_edge(START, node.__name__)
    g.add_edge(node.__name__, END)
    return g


def with_subgraph():
    """START → a → sub (sub_step → ask) → b → END: an interrupt inside a subgraph."""
    sub = StateGraph(State)
    sub.add_node("sub_step", _node("sub_step"))
    sub.add_node("ask", ask)
    sub.add_edge(START, "sub_step")
    sub.add_edge("sub_step", "ask")
    g = StateGraph(State)
    g.add_node("a", _node("a"))
    g.add_node("sub", sub.compile())
    g.add_node("b", _node("b"))
    g.add_edge(START, "a")
    g.add_edge("a", "sub")
    g.add_edge("sub", "b")
    g.add_edge("b", END)
    return g


def cfg(thread: str, **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **configurable}}


def snapshot_view(s) -> tuple:
    """What a state snapshot says, without ids and times."""
    return (
        s.values,
        s.next,
        {k: v for k, v in s.metadata.items() if k != "parents"} if s.metadata else None,
        [(t.name, [i.value for i in t.interrupts]) for t in s.tasks],
        [i.value for i in s.interrupts],
    )


async def history(graph, config) -> list:
    return [s async for s in graph.aget_state_history(config)]


async def dump_thread(redis: aredis.Redis, thread: str) -> dict[str, Any]:
    """Everything of a thread's five keys, as Redis has it."""
    tk = keys.checkpoint_keys(keys.CHECKPOINT_PREFIX, thread)
    return {
        "idx": await redis.zrange(tk.idx, 0, -1, withscores=True),
        "cp": await redis.hgetall(tk.cp),
        "blobs": await redis.hgetall(tk.blobs),
        "widx": await redis.zrange(tk.widx, 0, -1, withscores=True),
        "w": await redis.hgetall(tk.w),
    }


def checkpoint(cid: str | None = None, values: dict | None = None, versions: dict | None = None):
    from langgraph.checkpoint.base import empty_checkpoint

    c = empty_checkpoint()
    if cid:
        c["id"] = cid
    c["channel_values"] = values or {}
    c["channel_versions"] = versions or {}
    return c


# ---- graphs -----------------------------------------------------------------------------------


async def test_a_graph_runs_as_on_langgraphs_own_saver(redis: aredis.Redis) -> None:
    """invoke, interrupt inside a subgraph, get_state (with subgraphs), resume with
    Command, history: the same as InMemorySaver gives."""
    results = {}
    for name, saver in (("memory", InMemorySaver()), ("redis", RedisSaver(redis))):
        g = with_subgraph().compile(checkpointer=saver)
        c = cfg("t-sub")
        first = await g.ainvoke({"items": ["x"]}, c)
        state = await g.aget_state(c, subgraphs=True)
        sub_state = state.tasks[0].state
        resumed = await g.ainvoke(Command(resume="yes"), c)
        hist = await history(g, c)
        results[name] = (
            first["items"],
            [i.value for i in first["__interrupt__"]],
            snapshot_view(state),
            snapshot_view(sub_state),
            resumed,
            [snapshot_view(s) for s in hist],
        )
    assert results["redis"] == results["memory"]
    first_items, interrupts, state, sub_state, resumed, hist = results["redis"]
    assert first_items == ["x", "a"] and interrupts == ["q?"]
    assert state[1] == ("sub",) and sub_state[0] == {"items": ["x", "a", "sub_step"]}
    assert sub_state[1] == ("ask",)
    # The subgraph hands back its whole state, which the parent's reducer adds again.
    assert resumed == {"items": ["x", "a", "x", "a", "sub_step", "yes", "b"]}
    assert len(hist) >= 5


async def test_subgraph_checkpoints_live_in_their_namespace(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    g = with_subgraph().compile(checkpointer=saver)
    c = cfg("t-ns")
    await g.ainvoke({"items": []}, c)
    state = await g.aget_state(c, subgraphs=True)
    sub_config = state.tasks[0].state.config
    ns = sub_config["configurable"]["checkpoint_ns"]
    assert ns.startswith("sub:")
    sub_hist = [t async for t in saver.alist(cfg("t-ns", checkpoint_ns=ns))]
    assert sub_hist[0].checkpoint["channel_values"]["items"] == ["a", "sub_step"]
    assert all(t.config["configurable"]["checkpoint_ns"] == ns for t in sub_hist)
    root = [t async for t in saver.alist(cfg("t-ns", checkpoint_ns=""))]
    every = [t async for t in saver.alist(cfg("t-ns"))]
    assert len(every) == len(root) + len(sub_hist)
    ids = [t.checkpoint["id"] for t in every]
    assert ids == sorted(ids, reverse=True), "all namespaces, newest first"
    tk = saver.thread_keys("t-ns")
    members = [m.decode() for m in await redis.zrange(tk.idx, 0, -1)]
    assert sum(m.startswith(f"{ns} ") for m in members) == len(sub_hist)


async def test_fork_from_an_older_checkpoint_keeps_the_branches_apart(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    g = linear().compile(checkpointer=saver)
    c = cfg("t-fork")
    assert (await g.ainvoke({"items": ["x"]}, c))["items"] == ["x", "a", "b"]
    hist = await history(g, c)
    after_a = next(s for s in hist if s.next == ("b",))
    original_head = hist[0]
    fork_config = await g.aupdate_state(after_a.config, {"items": ["forked"]})
    fork = await g.aget_state(fork_config)
    assert fork.values == {"items": ["x", "a", "forked"]}
    assert fork.next == ("b",)
    assert (
        fork.parent_config["configurable"]["checkpoint_id"]
        == after_a.config["configurable"]["checkpoint_id"]
    )
    assert (await g.aget_state(original_head.config)).values == {"items": ["x", "a", "b"]}
    # Both branches bumped `items` from the same version: same counter, different blobs.
    v_orig = (await saver.aget_tuple(original_head.config)).checkpoint["channel_versions"]["items"]
    v_fork = (await saver.aget_tuple(fork_config)).checkpoint["channel_versions"]["items"]
    assert v_orig.split(".")[0] == v_fork.split(".")[0] and v_orig != v_fork
    assert re.fullmatch(r"\d{32}\.\d{16}", v_fork)
    assert (await g.ainvoke(None, fork_config))["items"] == ["x", "a", "forked", "b"]
    assert (await g.aget_state(original_head.config)).values == {"items": ["x", "a", "b"]}
    assert (await g.aget_state(c)).values == {"items": ["x", "a", "forked", "b"]}


async def test_interrupt_and_resume_with_command(redis: aredis.Redis) -> None:
    g = single(ask).compile(checkpointer=RedisSaver(redis))
    c = cfg("t-ask")
    out = await g.ainvoke({"items": ["x"]}, c)
    assert [i.value for i in out["__interrupt__"]] == ["q?"]
    state = await g.aget_state(c)
    assert state.next == ("ask",) and [i.value for i in state.interrupts] == ["q?"]
    assert (await g.ainvoke(Command(resume="yes"), c)) == {"items": ["x", "yes"]}
    state = await g.aget_state(c)
    assert state.next == () and state.interrupts == ()


async def test_sync_methods_run_on_the_savers_loop_from_another_thread(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    g = linear().compile(checkpointer=saver)
    c = cfg("t-sync")
    assert (await asyncio.to_thread(g.invoke, {"items": ["x"]}, c))["items"] == ["x", "a", "b"]
    assert (await asyncio.to_thread(g.get_state, c)).values == {"items": ["x", "a", "b"]}
    hist = await asyncio.to_thread(lambda: list(g.get_state_history(c)))
    assert [s.values["items"] for s in hist] == [["x", "a", "b"], ["x", "a"], ["x"], []]
    assert (await g.aget_state(c)).values == {"items": ["x", "a", "b"]}
    with pytest.raises(asyncio.InvalidStateError, match="only allowed from a thread other"):
        saver.get_tuple(c)
    with pytest.raises(asyncio.InvalidStateError):
        next(saver.list(c))


# ---- layout -----------------------------------------------------------------------------------


async def test_a_thread_is_five_keys_with_its_hash_tag_ordered_by_namespace_then_id(
    redis: aredis.Redis,
) -> None:
    saver = RedisSaver(redis)
    g = with_subgraph().compile(checkpointer=saver)
    await g.ainvoke({"items": []}, cfg("t-keys"))
    assert sorted(await redis.keys("*")) == sorted(k.encode() for k in saver.thread_keys("t-keys"))
    assert list(saver.thread_keys("t-keys")) == [
        "tc:{t-keys}:lg:idx",
        "tc:{t-keys}:lg:cp",
        "tc:{t-keys}:lg:blobs",
        "tc:{t-keys}:lg:widx",
        "tc:{t-keys}:lg:w",
    ]
    tk = saver.thread_keys("t-keys")
    idx = await redis.zrange(tk.idx, 0, -1, withscores=True)
    assert {score for _, score in idx} == {0.0}
    members = [m.decode() for m, _ in idx]
    parsed = [m.split(" ") for m in members]
    assert parsed == sorted(parsed, key=lambda p: (p[0].encode(), p[1].encode()))
    assert parsed[0][0] == "" and parsed[-1][0].startswith("sub:")
    root_ids = [p[1] for p in parsed if p[0] == ""]
    hist = await history(g, cfg("t-keys"))
    assert root_ids == [s.config["configurable"]["checkpoint_id"] for s in reversed(hist)]
    assert set(await redis.hkeys(tk.cp)) == {m for m, _ in idx}
    widx = await redis.zrange(tk.widx, 0, -1)
    assert widx and set(widx) == set(await redis.hkeys(tk.w))
    assert all(len(m.split(b" ")) == 4 for m in widx)


async def test_namespaces_task_ids_and_ids_with_spaces_and_percent_stay_apart(
    redis: aredis.Redis,
) -> None:
    saver = RedisSaver(redis)
    namespaces = ["", "a", "a b", "a%20b", "a!", "a b c", "%"]
    stored = {}
    for ns in namespaces:
        c = checkpoint(values={"ch": f"value of {ns!r}"}, versions={"ch": 1})
        conf = await saver.aput(cfg("t-esc", checkpoint_ns=ns), c, {"ns": ns}, {"ch": 1})
        await saver.aput_writes(conf, [("ch", f"write of {ns!r}")], task_id=f"task {ns}%")
        stored[ns] = conf
    for ns in namespaces:
        [tup] = [t async for t in saver.alist(cfg("t-esc", checkpoint_ns=ns))]
        assert tup.metadata["ns"] == ns
        assert tup.checkpoint["channel_values"] == {"ch": f"value of {ns!r}"}
        assert tup.pending_writes == [(f"task {ns}%", "ch", f"write of {ns!r}")]
        assert (await saver.aget_tuple(cfg("t-esc", checkpoint_ns=ns))).config == stored[ns]
    with pytest.raises(ValueError, match="hash tag"):
        await saver.aput(cfg("t{x}"), checkpoint(), {}, {})
    with pytest.raises(ValueError, match="hash tag"):
        await saver.aput(cfg(""), checkpoint(), {}, {})
    assert await redis.keys("*{t{x}*") == []


async def test_pending_writes_come_back_in_langgraphs_order(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    conf = await saver.aput(cfg("t-order"), checkpoint(), {}, {})
    await saver.aput_writes(conf, [(f"c{i}", i) for i in range(12)], "task-z", "path-b")
    await saver.aput_writes(conf, [("x", "first"), (ERROR, "boom")], "task-a", "path-b")
    await saver.aput_writes(conf, [("y", "y")], "task-q", "path-a")
    writes = (await saver.aget_tuple(conf)).pending_writes
    assert writes == [
        ("task-q", "y", "y"),
        ("task-a", ERROR, "boom"),
        ("task-a", "x", "first"),
        *[("task-z", f"c{i}", i) for i in range(12)],
    ]


async def test_a_cancelled_task_leaves_no_error_write(redis: aredis.Redis) -> None:
    """A task stopped by its run's cancel did not fail: the worker's saver keeps no
    CancelledError for it (the Python server's cancelled runs leave none); a real error stays."""
    saver = WorkerSaver(redis, worker_name="w1", rest_run_of=lambda _t: False)
    conf = await saver.aput(cfg("t-cancelled"), checkpoint(), {}, {})
    await saver.aput_writes(conf, [(ERROR, asyncio.CancelledError())], "task-c")
    await saver.aput_writes(conf, [(ERROR, ValueError("boom"))], "task-e")
    writes = (await saver.aget_tuple(conf)).pending_writes
    assert [(t, c) for t, c, _ in writes] == [("task-e", ERROR)]


async def test_regular_writes_keep_the_first_value_special_writes_are_replaced(
    redis: aredis.Redis,
) -> None:
    saver = RedisSaver(redis)
    conf = await saver.aput(cfg("t-replace"), checkpoint(), {}, {})
    await saver.aput_writes(conf, [("ch", "first"), (INTERRUPT, "i1")], "t1")
    await saver.aput_writes(conf, [("ch", "second"), (INTERRUPT, "i2")], "t1")
    assert (await saver.aget_tuple(conf)).pending_writes == [
        ("t1", INTERRUPT, "i2"),
        ("t1", "ch", "first"),
    ]


async def test_a_checkpoint_stores_only_the_channels_of_new_versions(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    c1 = checkpoint(values={"a": "A", "b": "B"}, versions={"a": 1, "b": 1})
    conf1 = await saver.aput(cfg("t-inc"), c1, {}, {"a": 1, "b": 1})
    c2 = checkpoint(values={"a": "A2", "b": "B"}, versions={"a": 2, "b": 1})
    conf2 = await saver.aput(conf1, c2, {}, {"a": 2})
    tk = saver.thread_keys("t-inc")
    assert sorted(await redis.hkeys(tk.blobs)) == [b" a 1", b" a 2", b" b 1"]
    assert (await saver.aget_tuple(conf2)).checkpoint["channel_values"] == {"a": "A2", "b": "B"}
    assert (await saver.aget_tuple(conf2)).parent_config == {
        "configurable": {"thread_id": "t-inc", "checkpoint_ns": "", "checkpoint_id": c1["id"]}
    }


def test_channel_versions_are_counter_dot_random() -> None:
    saver = RedisSaver(aredis.Redis())
    v1 = saver.get_next_version(None, None)
    assert re.fullmatch(r"0{31}1\.\d{16}", v1)
    v2 = saver.get_next_version(v1, None)
    assert v2.startswith("0" * 31 + "2.") and v2 > v1
    assert saver.get_next_version(7, None).startswith("0" * 31 + "8.")
    assert len({saver.get_next_version(v1, None) for _ in range(50)}) == 50


# ---- TTL, binary payloads -----------------------------------------------------------------------


async def test_ttl_refreshed_on_all_five_keys_by_every_write_not_by_reads(
    redis: aredis.Redis,
) -> None:
    saver = RedisSaver(redis, ttl_seconds=300)
    g = single(ask).compile(checkpointer=saver)
    c = cfg("t-ttl")
    await g.ainvoke({"items": ["x"]}, c)
    tk = saver.thread_keys("t-ttl")
    for key in tk:
        assert 290 <= await redis.ttl(key) <= 300, key
        await redis.expire(key, 100)
    await g.aget_state(c)
    _ = [s async for s in g.aget_state_history(c)]
    for key in tk:
        assert await redis.ttl(key) <= 100, f"a read refreshed {key}"
    conf = (await saver.aget_tuple(c)).config
    await saver.aput_writes(conf, [("items", ["more"])], "another-task")
    for key in tk:
        assert await redis.ttl(key) > 200, f"a write did not refresh {key}"
    plain = RedisSaver(redis)
    await single(ask).compile(checkpointer=plain).ainvoke({"items": []}, cfg("t-nottl"))
    for key in plain.thread_keys("t-nottl"):
        assert await redis.ttl(key) == -1


class PickleSerde:
    """A serde whose bytes are anything but UTF-8 (pickle protocol 5)."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return "pickle", pickle.dumps(obj, protocol=5)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        assert data[0] == "pickle"
        return pickle.loads(data[1])


@pytest.mark.parametrize("serde", [None, PickleSerde()], ids=["jsonplus", "pickle"])
async def test_binary_payloads_survive(redis: aredis.Redis, serde: Any) -> None:
    saver = RedisSaver(redis, serde=serde)
    raw = bytes(range(256)) * 3
    c = checkpoint(values={"raw": raw, "text": "é\x00\n"}, versions={"raw": 1, "text": 1})
    conf = await saver.aput(cfg("t-bin"), c, {"note": b"\xff\x00"}, {"raw": 1, "text": 1})
    await saver.aput_writes(conf, [("raw", raw[::-1]), ("nul", b"\x00")], "task\x00id")
    tup = await saver.aget_tuple(conf)
    assert tup.checkpoint["channel_values"] == {"raw": raw, "text": "é\x00\n"}
    assert tup.metadata["note"] == b"\xff\x00"
    assert tup.pending_writes == [("task\x00id", "raw", raw[::-1]), ("task\x00id", "nul", b"\x00")]
    stored = await redis.hget(saver.thread_keys("t-bin").blobs, " raw 1")
    assert stored[0] == 1 and raw in stored, "the frame holds the serde's bytes as they are"


# ---- deletes, forget, copy, prune, delete_for_runs -----------------------------------------------


async def test_forget_removes_checkpoints_writes_and_values(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    c1 = checkpoint(values={"a": 1}, versions={"a": 1})
    conf1 = await saver.aput(cfg("t-forget"), c1, {}, {"a": 1})
    await saver.aput_writes(conf1, [("a", 10), ("b", 11)], "t-old")
    await saver.aput_writes(conf1, [("a", 20)], "t-new")
    c2 = checkpoint(values={"a": 2}, versions={"a": 2})
    conf2 = await saver.aput(conf1, c2, {}, {"a": 2})
    await saver.aput_writes(conf2, [("a", 30)], "t-2")
    await saver.forget(
        "t-forget",
        checkpoints=[("", c2["id"])],
        writes=[("", c1["id"], "t-new"), ("", c1["id"], "t-old", 1)],
        blobs=[("", "a", 2)],
    )
    assert await saver.aget_tuple(conf2) is None
    tup = await saver.aget_tuple(cfg("t-forget"))
    assert tup.checkpoint["id"] == c1["id"]
    assert tup.pending_writes == [("t-old", "a", 10)]
    tk = saver.thread_keys("t-forget")
    assert await redis.hkeys(tk.blobs) == [b" a 1"]
    assert await redis.zcard(tk.widx) == await redis.hlen(tk.w) == 1


async def test_delete_thread_is_one_unlink_of_the_thread_only(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    for t in ("t-del", "t-keep"):
        await single(ask).compile(checkpointer=saver).ainvoke({"items": []}, cfg(t))
    await saver.adelete_thread("t-del")
    assert sorted(await redis.keys("*")) == sorted(k.encode() for k in saver.thread_keys("t-keep"))


async def test_copy_thread_keeps_ids_and_ttls_and_names_the_target_in_metadata(
    redis: aredis.Redis,
) -> None:
    saver = WorkerSaver(redis, worker_name="w1", rest_run_of=lambda _t: False)
    g = single(ask).compile(checkpointer=saver)
    await g.ainvoke({"items": ["x"]}, cfg("t-src"))
    for key in saver.thread_keys("t-src"):
        await redis.expire(key, 1000)
    await saver.acopy_thread("t-src", "t-dst")
    src = [t async for t in saver.alist(cfg("t-src"))]
    dst = [t async for t in saver.alist(cfg("t-dst"))]
    assert [t.checkpoint for t in dst] == [t.checkpoint for t in src]
    assert [t.pending_writes for t in dst] == [t.pending_writes for t in src]
    assert {t.metadata["thread_id"] for t in src} == {"t-src"}
    assert {t.metadata["thread_id"] for t in dst} == {"t-dst"}
    assert [{**t.metadata, "thread_id": "t-src"} for t in dst] == [t.metadata for t in src]
    for key in saver.thread_keys("t-dst"):
        assert 990 <= await redis.ttl(key) <= 1000, key
    resumed = await g.ainvoke(Command(resume="yes"), cfg("t-dst"))
    assert resumed == {"items": ["x", "yes"]}
    assert (await g.aget_state(cfg("t-src"))).next == ("ask",)


async def test_prune_keeps_the_latest_and_only_the_values_it_uses(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    g = linear().compile(checkpointer=saver)
    await g.ainvoke({"items": ["x"]}, cfg("t-prune"))
    await saver.aprune(["t-prune"])
    [only] = [t async for t in saver.alist(cfg("t-prune"))]
    assert only.checkpoint["channel_values"]["items"] == ["x", "a", "b"]
    tk = saver.thread_keys("t-prune")
    versions = only.checkpoint["channel_versions"]
    used = {f" {c} {versions[c]}".encode() for c in only.checkpoint["channel_values"]}
    assert set(await redis.hkeys(tk.blobs)) == used
    assert await redis.hlen(tk.w) == await redis.zcard(tk.widx)
    assert (await g.aget_state(cfg("t-prune"))).values == {"items": ["x", "a", "b"]}


async def test_prune_keeps_the_parent_chain_of_a_delta_channel_head(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    conf = await saver.aput(cfg("t-delta"), checkpoint(), {"step": 0}, {})
    side = await saver.aput(conf, checkpoint(), {"step": 1}, {})  # another branch
    chain = [conf]
    for step in range(1, 4):
        chain.append(await saver.aput(chain[-1], checkpoint(), {"step": step}, {}))
    head = checkpoint()
    await saver.aput(chain[-1], head, {"counters_since_delta_snapshot": {"d": (3, 3)}}, {})
    await saver.aprune(["t-delta"])
    left = [t.checkpoint["id"] async for t in saver.alist(cfg("t-delta"))]
    expected = [head["id"], *[c["configurable"]["checkpoint_id"] for c in reversed(chain)]]
    assert left == expected
    assert side["configurable"]["checkpoint_id"] not in left


async def test_delete_for_runs_drops_the_runs_checkpoints_and_their_values(
    redis: aredis.Redis,
) -> None:
    saver = RedisSaver(redis)
    g = linear().compile(checkpointer=saver)
    c = cfg("t-runs")
    await g.ainvoke({"items": ["x"]}, {**c, "metadata": {"run_id": "run-1"}})
    await g.ainvoke({"items": ["y"]}, {**c, "metadata": {"run_id": "run-2"}})
    await g.ainvoke({"items": ["z"]}, {**cfg("t-other"), "metadata": {"run_id": "run-1"}})
    before = await history(g, c)
    await saver.adelete_for_runs(["run-1"])
    after = await history(g, c)
    assert {s.metadata["run_id"] for s in after} == {"run-2"}
    assert len(after) == len([s for s in before if s.metadata["run_id"] == "run-2"])
    assert await history(g, cfg("t-other")) == []
    assert (await g.aget_state(c)).values["items"] == ["x", "a", "b", "y", "a", "b"]
    tk = saver.thread_keys("t-runs")
    used = {
        f" {ch} {t.checkpoint['channel_versions'][ch]}".encode()
        async for t in saver.alist(c)
        for ch in t.checkpoint["channel_values"]
    }
    assert set(await redis.hkeys(tk.blobs)) == used


# ---- several savers ------------------------------------------------------------------------------


async def test_two_savers_on_one_redis(redis_url: str, redis: aredis.Redis) -> None:
    other = aredis.Redis.from_url(redis_url)
    try:
        s1, s2 = RedisSaver(redis), RedisSaver(other)
        g1, g2 = linear().compile(checkpointer=s1), linear().compile(checkpointer=s2)
        runs = [g.ainvoke({"items": [f"t{i}"]}, cfg(f"t-two-{i}")) for i in range(8) for g in [g1]]
        runs += [g2.ainvoke({"items": [f"u{i}"]}, cfg(f"u-two-{i}")) for i in range(8)]
        await asyncio.wait_for(asyncio.gather(*runs), WAIT)
        for i in range(8):
            assert (await g2.aget_state(cfg(f"t-two-{i}"))).values["items"] == [f"t{i}", "a", "b"]
            assert (await g1.aget_state(cfg(f"u-two-{i}"))).values["items"] == [f"u{i}", "a", "b"]
        # Racing writes to one checkpoint: the first regular write stays, one special wins.
        conf = await s1.aput(cfg("t-race"), checkpoint(), {}, {})
        await asyncio.gather(
            *[
                s.aput_writes(conf, [("ch", n), (ERROR, n)], "task")
                for n, s in enumerate([s1, s2] * 5)
            ]
        )
        writes = (await s2.aget_tuple(conf)).pending_writes
        assert [w[:2] for w in writes] == [("task", ERROR), ("task", "ch")]
        # Another prefix is another saver's world.
        s3 = RedisSaver(other, key_prefix="other:")
        assert await s3.aget_tuple(cfg("t-two-0")) is None
        await linear().compile(checkpointer=s3).ainvoke({"items": ["o"]}, cfg("t-two-0"))
        assert (await g1.aget_state(cfg("t-two-0"))).values["items"] == ["t0", "a", "b"]
        assert [k async for k in other.scan_iter(match="other:*")]
        assert await s3.aget_tuple({"configurable": {"thread_id": "t-two-0"}}) is not None
        listed = {t.config["configurable"]["thread_id"] async for t in s3.alist(None)}
        assert listed == {"t-two-0"}
    finally:
        await other.aclose()


async def test_list_without_a_thread_walks_every_thread(redis: aredis.Redis) -> None:
    saver = RedisSaver(redis)
    for t in ("t-l2", "t-l1"):
        await linear().compile(checkpointer=saver).ainvoke({"items": [t]}, cfg(t))
    listed = [t async for t in saver.alist(None, filter={"step": 2})]
    assert [t.config["configurable"]["thread_id"] for t in listed] == ["t-l1", "t-l2"]
    assert [t async for t in saver.alist(None, limit=3)].__len__() == 3


# ---- the worker's saver: metadata ----------------------------------------------------------------


def _normalize(values: list[Any]) -> list[Any]:
    """Replaces every uuid-shaped string (checkpoint and task ids) by its order of appearance."""
    seen: dict[str, str] = {}
    pattern = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return pattern.sub(lambda m: seen.setdefault(m.group(0), f"<id{len(seen)}>"), v)
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [walk(x) for x in v]
        return v

    return walk(values)


async def test_metadata_is_the_python_servers(
    redis: aredis.Redis, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same graph, config and metadata on WorkerSaver and on the saver LangGraph's
    Python server runs (langgraph_runtime_inmem, the peer) give the same metadata in
    every checkpoint, subgraphs' included; and history filters by the run's metadata."""
    monkeypatch.chdir(tmp_path)  # the peer keeps its files under ./.langgraph_api
    # What `langgraph dev` sets for its in-memory runtime, which the peer's reads import.
    monkeypatch.setenv("REDIS_URI", "fake")
    monkeypatch.setenv("DATABASE_URI", ":memory:")
    monkeypatch.setenv("MIGRATIONS_PATH", "__inmem")
    from langgraph_runtime_inmem.checkpoint import InMemorySaver as ServerSaver

    thread, run = str(uuid.uuid4()), str(uuid.uuid4())
    config = {
        "configurable": {
            "thread_id": thread,
            "run_id": run,
            "graph_id": "agent",
            "assistant_id": "fe096781-5601-53d2-b2f6-0d3403f7e9ca",
            "user_id": "",
            "langgraph_request_id": "req-1",
            "langgraph_auth_user_id": "",
            "user_conf": "uc",
            "num": 5,
            "obj": {"a": 1},
            "__hidden": 1,
        },
        "metadata": {"rm": "run-md", "n": 3, "created_by": "system", "run_attempt": 1},
    }
    peer = ServerSaver(serde=JsonPlusSerializer())
    ours = WorkerSaver(redis, worker_name="w1", rest_run_of=lambda _t: False)
    seen = {}
    for name, saver in (("server", peer), ("worker", ours)):
        g = with_subgraph().compile(checkpointer=saver)
        await g.ainvoke({"items": ["x"]}, config)
        resume = {**config, "metadata": {"rm": "second"}}
        resume["configurable"] = {**config["configurable"], "run_id": "run-2"}
        await g.ainvoke(Command(resume="yes"), resume)
        # A state update, configured as the server configures its own.
        await g.aupdate_state(
            {"configurable": {"thread_id": thread, "graph_id": "agent"}}, {"items": ["u"]}
        )
        tuples = [t async for t in saver.alist({"configurable": {"thread_id": thread}})]
        tuples.sort(
            key=lambda t: (t.config["configurable"]["checkpoint_ns"] != "", t.checkpoint["id"])
        )
        seen[name] = _normalize([t.metadata for t in tuples])
        raw = [t.metadata for t in tuples]
        filtered = [
            s
            async for s in g.aget_state_history(
                {"configurable": {"thread_id": thread}}, filter={"rm": "run-md"}
            )
        ]
        root_first_run = [
            t
            for t in tuples
            if t.config["configurable"]["checkpoint_ns"] == "" and t.metadata.get("rm") == "run-md"
        ]
        assert len(filtered) == len(root_first_run) >= 3
    assert seen["worker"] == seen["server"]
    root = raw[0]
    assert root["rm"] == "run-md" and root["user_conf"] == "uc" and root["obj"] == {"a": 1}
    assert root["thread_id"] == thread and root["run_id"] == run
    assert "__hidden" not in root
    assert any(m.get("rm") == "second" and m.get("run_id") == "run-2" for m in raw)
    update = next(m for m in raw if m["source"] == "update")
    assert {"graph_id": "agent", "thread_id": thread}.items() <= update.items()


# ---- the worker's saver: fencing -----------------------------------------------------------------


class Run:
    """A run's side of the fence: counts regain() and settle() calls."""

    def __init__(
        self, redis: aredis.Redis, thread: str, *, retake: bool = False, answer: bool = False
    ):
        self.redis, self.thread, self.retake, self.answer = redis, thread, retake, answer
        self.regains = 0
        self.settles = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def regain(self) -> bool:
        self.regains += 1
        if self.retake:
            await self.redis.set(keys.lock(self.thread), "w1")
            return True
        return self.answer

    async def settle(self) -> None:
        self.settles += 1
        await self.gate.wait()


def worker_saver(redis: aredis.Redis, rest: set[str] | None = None, **kw: Any) -> WorkerSaver:
    rest = rest if rest is not None else set()
    return WorkerSaver(redis, worker_name="w1", rest_run_of=lambda t: t in rest, **kw)


async def test_a_fenced_write_waits_for_settle_and_needs_the_lock(redis: aredis.Redis) -> None:
    saver = worker_saver(redis)
    run = Run(redis, "t-f")
    saver.fence("t-f", run.regain, run.settle)
    await redis.set(keys.lock("t-f"), "w1")
    run.gate.clear()
    put = asyncio.create_task(saver.aput(cfg("t-f"), checkpoint(), {}, {}))
    settled = asyncio.create_task(saver.settle("t-f"))
    await asyncio.sleep(0.1)
    assert run.settles == 1
    assert not put.done() and not settled.done()
    assert await redis.exists(saver.thread_keys("t-f").cp) == 0, "written before settle() returned"
    run.gate.set()
    conf = await asyncio.wait_for(put, WAIT)
    await asyncio.wait_for(settled, WAIT)
    assert await saver.aget_tuple(conf) is not None
    assert run.regains == 0

    # Another worker took the thread: refused, regain() asked once, nothing written.
    await redis.set(keys.lock("t-f"), "w2")
    before = await dump_thread(redis, "t-f")
    with pytest.raises(FencedError, match="^FENCED"):
        await saver.aput(conf, checkpoint(), {}, {})
    with pytest.raises(FencedError, match="FENCED"):
        await saver.aput_writes(conf, [("ch", 1)], "task")
    assert run.regains == 2 and run.settles == 3
    assert await dump_thread(redis, "t-f") == before
    # regain() says yes but the lock is still another's: refused after one more try.
    run.answer = True
    with pytest.raises(FencedError):
        await saver.aput_writes(conf, [("ch", 1)], "task")
    assert run.regains == 3
    assert await dump_thread(redis, "t-f") == before
    # regain() takes the lock back: the write is sent again and lands.
    run.retake = True
    await saver.aput_writes(conf, [("ch", 1)], "task")
    assert run.regains == 4
    assert (await saver.aget_tuple(conf)).pending_writes == [("task", "ch", 1)]


async def test_after_a_lost_run_the_threads_writes_fail_until_fenced_again(
    redis: aredis.Redis,
) -> None:
    saver = worker_saver(redis)
    run = Run(redis, "t-lost", retake=True)
    saver.fence("t-lost", run.regain, run.settle)
    saver.unfence("t-lost", lost=True)
    await redis.set(keys.lock("t-lost"), "w1")
    with pytest.raises(FencedError, match="FENCED"):
        await saver.aput(cfg("t-lost"), checkpoint(), {}, {})
    assert (run.settles, run.regains) == (0, 0)
    assert await redis.exists(saver.thread_keys("t-lost").cp) == 0
    saver.fence("t-lost", run.regain, run.settle)
    await saver.aput(cfg("t-lost"), checkpoint(), {}, {})
    saver.unfence("t-lost", lost=False)
    await redis.set(keys.lock("t-lost"), "w2")
    await saver.aput(cfg("t-lost"), checkpoint(), {}, {})  # not fenced: the lock is not asked
    assert len([t async for t in saver.alist(cfg("t-lost"))]) == 2


async def test_a_graph_run_stops_saving_once_another_worker_holds_the_thread(
    redis: aredis.Redis,
) -> None:
    saver = worker_saver(redis)
    run = Run(redis, "t-taken")
    saver.fence("t-taken", run.regain, run.settle)
    await redis.set(keys.lock("t-taken"), "w1")

    def take(_s: State) -> dict[str, Any]:
        return {"items": ["taken"]}

    async def steal(_s: State) -> dict[str, Any]:
        await redis.set(keys.lock("t-taken"), "w2")
        return {"items": ["stolen"]}

    g = StateGraph(State)
    g.add_node("take", take)
    g.add_node("steal", steal)
    g.add_edge(START, "take")
    g.add_edge("take", "steal")
    g.add_edge("steal", END)
    graph = g.compile(checkpointer=saver)
    with pytest.raises(FencedError, match="FENCED"):
        await graph.ainvoke({"items": []}, cfg("t-taken"), durability="sync")
    saved = [t.checkpoint["channel_values"].get("items") async for t in saver.alist(cfg("t-taken"))]
    assert ["taken"] in saved and all("stolen" not in (v or []) for v in saved)
    assert run.regains >= 1


# ---- the worker's saver: the undo journal ------------------------------------------------------


async def test_undo_takes_a_rest_run_back_to_the_byte(redis: aredis.Redis) -> None:
    rest: set[str] = set()
    saver = worker_saver(redis, rest)
    run = Run(redis, "t-undo")
    saver.fence("t-undo", run.regain, run.settle)
    await redis.set(keys.lock("t-undo"), "w1")
    g = single(ask_twice).compile(checkpointer=saver)
    c = cfg("t-undo")
    await g.ainvoke({"items": ["x"]}, c)  # a runtime-command run: not journaled
    assert await redis.exists(keys.undo("t-undo")) == 0
    before = await dump_thread(redis, "t-undo")
    state_before = snapshot_view(await g.aget_state(c))
    assert state_before[4] == ["first"]

    # A REST run resumes: the task runs again and replaces its interrupt write (no checkpoint).
    rest.add("t-undo")
    await saver.clear_undo("t-undo")
    out = await g.ainvoke(Command(resume="A"), c)
    assert [i.value for i in out["__interrupt__"]] == ["second"]
    assert await dump_thread(redis, "t-undo") != before
    assert 86300 < await redis.ttl(keys.undo("t-undo")) <= 86400
    assert await saver.undo("t-undo") == 0
    assert await dump_thread(redis, "t-undo") == before
    assert await redis.exists(keys.undo("t-undo")) == 0
    assert snapshot_view(await g.aget_state(c)) == state_before

    # A REST run that goes to the end (new checkpoints, values, writes), then taken back.
    await g.ainvoke(Command(resume="A"), c)
    assert (await g.ainvoke(Command(resume="B"), c)) == {"items": ["x", "A", "B"]}
    made = len(await history(g, c)) - len([m for m, _ in before["idx"]])
    assert made >= 1
    assert await saver.undo("t-undo") == made
    assert await dump_thread(redis, "t-undo") == before
    assert snapshot_view(await g.aget_state(c)) == state_before
    # And the thread goes on from there as if nothing happened.
    rest.clear()
    await g.ainvoke(Command(resume="C"), c)
    assert (await g.ainvoke(Command(resume="D"), c)) == {"items": ["x", "C", "D"]}


async def test_undo_of_an_update_state_on_an_older_checkpoint(redis: aredis.Redis) -> None:
    rest = {"t-undo2"}
    saver = worker_saver(redis, rest)
    g = linear().compile(checkpointer=saver)
    c = cfg("t-undo2")
    rest.clear()
    await g.ainvoke({"items": ["x"]}, c)
    before = await dump_thread(redis, "t-undo2")
    rest.add("t-undo2")
    old = (await history(g, c))[-2]
    await g.aupdate_state(old.config, {"items": ["forked"]})
    await g.ainvoke(None, c)
    assert await dump_thread(redis, "t-undo2") != before
    assert await saver.undo("t-undo2") >= 2
    assert await dump_thread(redis, "t-undo2") == before


# ---- DeltaChannel: values rebuilt from the ancestors' writes -----------------------------


def _concat(state: list[str], writes: list[list[str]]) -> list[str]:
    return state + [x for w in writes for x in w]


class DeltaState(TypedDict):
    log: Annotated[list[str], DeltaChannel(_concat, snapshot_frequency=5)]


def delta_graph() -> StateGraph:
    g = StateGraph(DeltaState)
    for name in ("a", "b", "c"):
        g.add_node(name, lambda _s, name=name: {"log": [name]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g


async def test_delta_channels_rebuild_as_on_langgraphs_own_saver(redis: aredis.Redis) -> None:
    seen = {}
    for name, saver in (("memory", InMemorySaver()), ("redis", RedisSaver(redis))):
        g = delta_graph().compile(checkpointer=saver)
        c = cfg("t-delta-graph")
        for i in range(3):
            await g.ainvoke({"log": [f"in{i}"]}, c)
        hist = await history(g, c)
        seen[name] = ((await g.aget_state(c)).values, [s.values for s in hist])
    assert seen["redis"] == seen["memory"]
    assert seen["redis"][0]["log"] == [
        "in0",
        "a",
        "b",
        "c",
        "in1",
        "a",
        "b",
        "c",
        "in2",
        "a",
        "b",
        "c",
    ]
    saver = RedisSaver(redis)
    head = await saver.aget_tuple(cfg("t-delta-graph"))
    assert head.metadata.get("counters_since_delta_snapshot"), "the head is no snapshot"
    await saver.aprune(["t-delta-graph"])
    g = delta_graph().compile(checkpointer=saver)
    assert (await g.aget_state(cfg("t-delta-graph"))).values == seen["memory"][0]
    assert len(await history(g, cfg("t-delta-graph"))) < len(seen["memory"][1])
