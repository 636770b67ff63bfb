"""Runs: runs.wait and runs.join answers and the run records; a failing node, a graph that raises
at build and a value JSON cannot hold; cancel (interrupt, rollback); each multitask strategy.
"""

from __future__ import annotations

from typing import Any

import pytest

import expected
from sbs import (
    API_VERSION,
    SSE_IDS,
    Exempt,
    Server,
    attempt,
    both,
    parts,
    question,
    transcript,
    wait_for,
)


async def test_wait_join_and_the_run_records(servers: list[Server]) -> None:
    q = "what is redis"

    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        waited = await client.runs.wait(tid, "agent", input=question(q), metadata={"n": 1})
        created = await client.runs.create(
            tid, "agent", input=question("and valkey?"), metadata={"n": 2}
        )
        joined = await client.runs.join(tid, created["run_id"])
        return {
            "waited": waited,
            "created": created,
            "joined": joined,
            "run": await client.runs.get(tid, created["run_id"]),
            "runs": await client.runs.list(tid),
            "thread": await client.threads.get(tid),
        }

    r = await both(
        servers,
        scenario,
        [
            API_VERSION,
            SSE_IDS,
            Exempt(
                "created.status", "pending or already running: when the worker takes the run up"
            ),
        ],
    )
    assert transcript(r["waited"]) == expected.transcript(q)
    assert transcript(r["joined"]) == [*expected.transcript(q), *expected.transcript("and valkey?")]
    assert r["run"]["status"] == "success"
    assert r["run"]["metadata"]["n"] == 2
    # The Python server's default multitask strategy (the JavaScript one's is "reject").
    assert r["created"]["multitask_strategy"] == "enqueue"
    assert [(x["run_id"], x["status"], x["metadata"]["n"]) for x in r["runs"]] == [
        (r["created"]["run_id"], "success", 2),
        (r["runs"][1]["run_id"], "success", 1),
    ]
    assert r["thread"]["status"] == "idle"
    assert r["thread"]["values"] == r["joined"]


async def test_a_failing_node(servers: list[Server]) -> None:
    """A node raises ToolFailure: the error event names the class; run and thread are 'error'."""

    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        streamed = await parts(
            client.runs.stream(
                tid, "failing", input={"steps": []}, stream_mode=["values", "updates"]
            )
        )
        after_stream = await client.threads.get(tid)
        waited = await client.runs.wait(tid, "failing", input={"steps": []}, raise_error=False)
        created = await client.runs.create(tid, "failing", input={"steps": [], "fail": False})
        joined = await client.runs.join(tid, created["run_id"])
        return {
            "streamed": streamed,
            "after_stream": after_stream,
            "waited": waited,
            "joined": joined,
            "runs": await client.runs.list(tid),
            "thread": await client.threads.get(tid),
            "state": await client.threads.get_state(tid),
        }

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    failure = {"error": "ToolFailure", "message": "An internal error occurred"}
    assert [(p["event"], p["data"]) for p in r["streamed"][1:]] == [
        ("values", {"steps": []}),
        ("updates", {"prepare": {"steps": ["prepared"]}}),
        ("values", {"steps": ["prepared"]}),
        ("error", failure),
    ]
    assert r["after_stream"]["status"] == "error"
    assert r["waited"] == {"__error__": failure}
    # A run that does not fail, after the failed ones, runs on: the thread is idle again.
    assert r["joined"]["steps"][-2:] == ["prepared", "exploded safely"]
    assert [x["status"] for x in r["runs"]] == ["success", "error", "error"]
    assert r["thread"]["status"] == "idle"
    assert r["state"]["next"] == []


async def test_a_failing_node_leaves_its_task_error_in_the_state(servers: list[Server]) -> None:
    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "failing", input={"steps": []}, raise_error=False)
        return {
            "state": await client.threads.get_state(tid),
            "thread": await client.threads.get(tid),
        }

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    assert r["thread"]["status"] == "error"
    assert r["state"]["next"] == ["explode"]
    assert [(t["name"], t["error"]) for t in r["state"]["tasks"]] == [
        ("explode", "ToolFailure('the search backend is down')")
    ]
    assert r["state"]["values"] == {"steps": ["prepared"]}


async def test_a_graph_that_raises_at_build(servers: list[Server]) -> None:
    """The factory raises GraphBuildError: each run fails with it; other graphs run on."""

    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        streamed = await parts(client.runs.stream(tid, "broken_build", input={}))
        # Kept difference: threadcast writes a run stream's head, its metadata event, as soon as
        # the stream opens (protocol/README.md, "Run streams": the client knows its run at
        # once, on any gateway); the reference builds the graph first, and a graph it cannot
        # build sends its error alone. What follows the metadata is compared.
        if server.name == "threadcast":
            assert streamed[0]["event"] == "metadata", streamed
            streamed = streamed[1:]
        waited = await client.runs.wait(tid, "broken_build", input={}, raise_error=False)
        return {
            "streamed": streamed,
            "waited": waited,
            "runs": await client.runs.list(tid),
            "thread": await client.threads.get(tid),
            "other": await client.runs.wait(None, "reporter", input={"topic": "otters"}),
            # Last: the reference closes the connection after this answer (a client's next call
            # on it would fail to read).
            "state": await attempt(client.threads.get_state(tid)),
        }

    # langgraph dev keeps its run records in memory, and its worker writes into the config a
    # record holds: a run that streams leaves there the metadata it streamed with (threadcast's
    # records show that of every run that started: protocol/README.md, "Two servers"), a factory
    # that raises leaves what LangGraph's ensure_config copied from configurable instead.
    in_memory = (
        "what langgraph dev's worker wrote into the in-memory record of a run whose graph "
        "failed to build"
    )
    r = await both(
        servers,
        scenario,
        [
            API_VERSION,
            SSE_IDS,
            Exempt("runs.*.kwargs.config.metadata", in_memory),
            Exempt("runs.*.kwargs.config.configurable.__pregel_node_finished", in_memory),
        ],
    )
    failure = {"error": "GraphBuildError", "message": "An internal error occurred"}
    # The graph is built before the run's stream begins: no metadata event, the error alone.
    assert r["streamed"] == [{"event": "error", "data": failure}]
    assert r["waited"] == {"__error__": failure}
    assert [x["status"] for x in r["runs"]] == ["error", "error"]
    assert r["thread"]["status"] == "error"
    # Reading the state builds the graph too.
    assert r["state"] == {
        "status": 500,
        "error": "InternalServerError",
        "body": "Internal Server Error",
    }
    assert r["other"]["report"] == "gathered otters, published"


# Why threadcast differs from the reference on a value JSON cannot hold.
UNWRITABLE = (
    "a value JSON cannot hold: the reference writes it as null and the run succeeds (the state "
    "then holds null where the graph put an object); threadcast fails the run with a TypeError "
    "naming the type, as issue 37 asks ('a non-JSON-serialisable value in the state: a clear "
    "error on the run'), so its stream ends with that error, the thread is in error and the "
    "state is the one before the node that made the value (its update was never written)"
)


async def test_a_value_json_cannot_hold(servers: list[Server]) -> None:
    """An object with no JSON form in the state: the reference sends null and the run succeeds;
    threadcast fails the run with a TypeError naming the type (UNWRITABLE)."""
    raw: dict[str, dict] = {}

    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        streamed = await parts(
            client.runs.stream(
                tid, "unserializable", input={"label": "x"}, stream_mode=["updates", "values"]
            )
        )
        state, thread = await client.threads.get_state(tid), await client.threads.get(tid)
        runs = [x["status"] for x in await client.runs.list(tid)]
        raw[server.name] = {"streamed": streamed, "state": state, "thread": thread, "runs": runs}
        # The input's values, then how the run ended (where the two differ).
        return {"streamed": streamed[:2], "ending": streamed[2:], "state": state, "thread": thread}

    exempt = [
        Exempt(path, UNWRITABLE)
        for path in (
            "ending",
            "state.values",
            "state.next",
            "state.tasks",
            "state.metadata.step",
            "thread.status",
            "thread.error",
            "thread.values",
        )
    ]
    r = await both(servers, scenario, [API_VERSION, SSE_IDS, *exempt])
    assert [(p["event"], p["data"]) for p in r["streamed"][1:]] == [("values", {"label": "x"})]
    assert [(p["event"], p["data"]) for p in r["ending"]] == [
        ("updates", {"make_thing": {"thing": None, "label": "made"}}),
        ("values", {"label": "made", "thing": None}),
    ]
    assert r["state"]["values"] == {"label": "made", "thing": None}
    assert r["thread"]["status"] == "idle"
    assert raw["reference"]["runs"] == ["success"]
    if "threadcast" in raw:
        tc = raw["threadcast"]
        error = {"error": "TypeError", "message": "Type is not JSON serializable: Opaque"}
        assert [(p["event"], p["data"]) for p in tc["streamed"][1:]] == [
            ("values", {"label": "x"}),
            ("error", error),
        ]
        assert (tc["state"]["values"], tc["state"]["next"]) == ({"label": "x"}, ["make_thing"])
        assert (tc["thread"]["status"], tc["thread"]["error"]) == ("error", error)
        assert tc["runs"] == ["error"]


# ---- cancel and multitask ------------------------------------------------------------------

SLOW = {"until": 20, "delay_ms": 100}  # 20 steps of 100 ms: about 2 s


async def running(client, tid: str, run_id: str, count: int = 0) -> None:
    """Waits until the run is running and the thread's state counts at least count."""

    async def reached() -> bool:
        if (await client.runs.get(tid, run_id))["status"] != "running":
            return False
        return (
            count == 0 or (await client.threads.get_state(tid))["values"].get("count", 0) >= count
        )

    await wait_for(f"run {run_id} to run", reached)


async def test_cancel_interrupt(servers: list[Server]) -> None:
    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        run = await client.runs.create(tid, "counter", input=SLOW)
        await running(client, tid, run["run_id"], count=2)
        cancelled = await client.runs.cancel(tid, run["run_id"], wait=True, action="interrupt")
        state = await client.threads.get_state(tid)
        values, trail = state["values"], state["values"]["trail"]
        return {
            "cancelled": cancelled,
            "run": await client.runs.get(tid, run["run_id"]),
            "state": state,
            "thread": await client.threads.get(tid),
            # What holds at any timing: the steps done are kept, in order, and no more.
            "holds": {
                "count_is_steps": values["count"] == len(trail),
                "stopped_early": 2 <= values["count"] < SLOW["until"],
                "alternates": trail == [("tick", "tock")[i % 2] for i in range(len(trail))],
                "next_is_the_step_after": state["next"] == [("tick", "tock")[len(trail) % 2]],
            },
        }

    progress = "how far the run got before the cancel landed depends on timing"
    r = await both(
        servers,
        scenario,
        [
            API_VERSION,
            SSE_IDS,
            Exempt("state.values.count", progress),
            Exempt("state.values.trail", progress),
            Exempt("thread.values.count", progress),
            Exempt("thread.values.trail", progress),
            Exempt("state.next", progress),
            Exempt("state.tasks.*.name", progress),
            Exempt("state.tasks.*.path", progress),
            Exempt("state.metadata.step", progress),
        ],
    )
    assert r["cancelled"] == {}
    assert r["run"]["status"] == "interrupted"
    assert r["thread"]["status"] == "interrupted"
    assert r["holds"] == {
        "count_is_steps": True,
        "stopped_early": True,
        "alternates": True,
        "next_is_the_step_after": True,
    }


async def test_cancel_rollback(servers: list[Server]) -> None:
    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "counter", input={"until": 2, "delay_ms": 1})
        before = await client.threads.get_state(tid)
        run = await client.runs.create(tid, "counter", input=SLOW)
        await running(client, tid, run["run_id"], count=4)
        cancelled = await client.runs.cancel(tid, run["run_id"], wait=True, action="rollback")
        return {
            "before": before,
            "cancelled": cancelled,
            "run": await attempt(client.runs.get(tid, run["run_id"])),
            "runs": await client.runs.list(tid),
            "state": await client.threads.get_state(tid),
            "thread": await client.threads.get(tid),
        }

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    # Rolled back: the run is gone and the thread is as it was before it.
    assert r["run"]["status"] == 404
    assert [x["status"] for x in r["runs"]] == ["success"]
    assert r["state"] == r["before"]
    assert r["state"]["values"] == {
        "count": 2,
        "until": 2,
        "delay_ms": 1,
        "trail": ["tick", "tock"],
    }
    assert r["thread"]["status"] == "idle"


FIRST = {"until": 6, "delay_ms": 100}
SECOND = {"until": 3, "delay_ms": 1, "count": 100}  # one tick and done: count 101


async def multitask(client, strategy: str) -> dict[str, Any]:
    """A run, then while it runs a second with the strategy; both joined, the thread after."""
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "counter", input=FIRST)
    await running(client, tid, first["run_id"], count=1)
    second = await attempt(
        client.runs.create(tid, "counter", input=SECOND, multitask_strategy=strategy)
    )
    out: dict[str, Any] = {"second": second}
    if "ok" in second:
        out["second_joined"] = await client.runs.join(tid, second["ok"]["run_id"])
    # attempt(): joining a run that is gone may be answered with an error.
    out["first_joined"] = await attempt(client.runs.join(tid, first["run_id"]))
    out["runs"] = [[x["status"], x["multitask_strategy"]] for x in await client.runs.list(tid)]
    out["state"] = await client.threads.get_state(tid)
    out["thread"] = await client.threads.get(tid)
    return out


@pytest.mark.parametrize("strategy", ["reject", "enqueue", "interrupt", "rollback"])
async def test_multitask(servers: list[Server], strategy: str) -> None:
    exempt = [
        API_VERSION,
        SSE_IDS,
        Exempt("second.ok.status", "pending or already running: when it is taken up"),
    ]
    if strategy == "interrupt":
        # The first run's steps before the second interrupted it stay in the thread.
        progress = "how far the first run got before the second interrupted it depends on timing"
        exempt += [
            Exempt("**.trail", progress),
            Exempt("state.metadata.step", progress),
        ]
    r = await both(servers, lambda c, s: multitask(c, strategy), exempt)
    first_alone = {
        "count": 6,
        "until": 6,
        "delay_ms": 100,
        "trail": ["tick", "tock", "tick", "tock", "tick", "tock"],
    }
    if strategy == "reject":
        assert r["second"] == {
            "status": 409,
            "error": "ConflictError",
            "body": '{"detail":"Thread is already running a task. Wait for it to finish or '
            'choose a different multitask strategy."}',
        }
        assert r["first_joined"] == {"ok": first_alone}
        assert r["runs"] == [["success", "enqueue"]]
    elif strategy == "enqueue":
        # The second runs after the first, on its state.
        after = {"count": 101, "until": 3, "delay_ms": 1, "trail": [*first_alone["trail"], "tick"]}
        assert r["second_joined"] == after
        assert r["first_joined"] == {"ok": after}
        assert r["runs"] == [["success", "enqueue"], ["success", "enqueue"]]
    elif strategy == "interrupt":
        assert r["second_joined"]["count"] == 101
        # Joined after the second ended, the interrupted first run answers the thread's values.
        assert r["first_joined"]["ok"]["count"] == 101
        assert r["runs"] == [["success", "interrupt"], ["interrupted", "enqueue"]]
    else:
        # Rolled back: the first run and what it wrote are gone.
        assert r["second_joined"] == {"count": 101, "until": 3, "delay_ms": 1, "trail": ["tick"]}
        assert r["first_joined"] == {
            "ok": {"__error__": {"error": "HTTPException", "message": "404: Run not found"}}
        }
        assert r["runs"] == [["success", "rollback"]]
    assert r["thread"]["status"] == "idle"
    if "second_joined" in r:
        assert r["state"]["values"] == r["second_joined"]
