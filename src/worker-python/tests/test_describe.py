"""loops.describe: what the worker writes of each graph for the REST API (its ainfo hash) —
among it that the graph is Python's, so threadcast_rest answers its routes as LangGraph's
Python server does (protocol/README.md, "Two servers")."""

from typing import TypedDict

import orjson
from langgraph.graph import END, START, StateGraph

from threadcast_worker import config as run_configs
from threadcast_worker import keys, loops
from threadcast_worker.graphs import ServedGraph
from threadcast_worker.worker import Worker


class State(TypedDict):
    n: int


def _graph() -> StateGraph:
    g = StateGraph(State)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    return g


def _worker(redis) -> Worker:
    served = ServedGraph("counted", _graph(), defaults=None, checkpointer=None, store=None)
    return Worker(
        log=lambda *a, **f: None,
        name="describe-test",
        heartbeat_ms=1000,
        live_ms=60000,
        claim_idle_ms=3000,
        lock_ms=3000,
        cmd=redis,
        block=redis,
        graphs={"counted": served},
    )


async def _rest(redis, op: str, args: dict) -> tuple[int, dict, dict | None]:
    r = await redis.execute_command(
        "FCALL", "threadcast_rest", 1, keys.REST, op, orjson.dumps(args)
    )
    extra = orjson.loads(r[2]) if len(r) > 2 else None
    return int(r[0]), orjson.loads(r[1]), extra


async def test_describe_marks_each_graph_python_and_the_rest_records_follow(redis) -> None:
    await loops.describe(_worker(redis))
    info = await redis.hgetall(keys.ainfo("counted"))
    assert info[b"language"] == b"python"
    assert orjson.loads(info[b"run_metadata"]) == run_configs.stream_metadata({})
    assert orjson.loads(info[b"graph"])["nodes"]  # (what it wrote before, still there)

    # threadcast_rest reads it: a run of the graph is recorded as the Python server records it.
    await redis.execute_command(
        "FCALL",
        "threadcast_register",
        2,
        keys.workers("counted"),
        keys.ASSISTANTS,
        "counted",
        "describe-test",
        60000,
    )
    status, thread, _ = await _rest(
        redis, "threads.create", {"body": {}, "ids": {"thread_id": "t-1"}}
    )
    assert status == 200
    status, run, extra = await _rest(
        redis,
        "runs.create",
        {
            "path": {"thread_id": "t-1"},
            "query": {},
            "body": {"assistant_id": "counted", "input": {"n": 0}},
            "ids": {"run_id": "r-1", "thread_id": "x", "request_id": "q-1"},
        },
    )
    assert (status, extra) == (200, {"flavor": "python"})
    assert run["multitask_strategy"] == "enqueue"
    assert run["langsmith_session_name"] is None
    assert run["kwargs"]["config"]["configurable"]["langgraph_request_id"] == "q-1"
    status, started, _ = await _rest(redis, "run.started", {"body": {"run_id": "r-1"}})
    assert status == 200
    assert started["kwargs"]["config"]["metadata"] == {
        **run["metadata"],
        **run_configs.stream_metadata({}),
    }
