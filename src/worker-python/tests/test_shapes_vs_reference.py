"""rest.py and schemas.py side by side with LangGraph's Python server.

A module fixture serves tests/graphs_shapes/ with ``langgraph dev``; every test drives runs there
through ``langgraph_sdk`` and the same runs in-process (the same graph, served under its id as
the server serves it, on an in-memory saver, the same inputs and run metadata), then compares
the server's answers with what rest.py and schemas.py make of the in-process graph and state.
Ids (threads, runs, checkpoints, tasks, interrupts) and timestamps differ between the two by
nature: both sides are normalized (each id renamed by its first appearance), so what is compared
is where each id appears. Differences kept on purpose are named where they are made."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel import Pregel
from langgraph_dev import served
from langgraph_sdk import get_client

from threadcast_worker import rest, schemas

PROJECT = Path(__file__).parent / "graphs_shapes"
sys.path.insert(0, str(PROJECT))
import graphs  # noqa: E402 — the project's module, as langgraph dev imports it

# LangGraph's own metadata members: what a run's metadata is not.
_LANGGRAPH_METADATA = ("source", "step", "parents")
# The server's in-memory saver leaves these config members out of a checkpoint's metadata.
_NOT_METADATA = ("checkpoint_ns", "checkpoint_id", "run_id", "thread_id")


class ServerLikeSaver(InMemorySaver):
    """An in-memory saver that writes a checkpoint's metadata as the Python server's does: the
    config's configurable members (but ``__…`` and the checkpoint's own), then the config's
    metadata, then LangGraph's. LangGraph's own saver keeps only some of the config's metadata
    (plain values, not the subgraphs' ``langgraph_*`` and ``checkpoint_ns``); the worker's
    saver writes it as the server does (protocol/README.md, "Checkpoint metadata"), so this
    stands in for it here."""

    def put(self, config, checkpoint, metadata, new_versions):  # noqa: ANN001 — the base's
        merged = {
            k: v
            for k, v in config["configurable"].items()
            if not k.startswith("__") and k not in _NOT_METADATA
        }
        merged.update(config.get("metadata") or {})
        merged.update(metadata)
        return super().put(config, checkpoint, merged, new_versions)


# ---- normalizing -------------------------------------------------------------------------------

_ID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])"
)
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?$")


def normalized(value: Any) -> Any:
    """value with every id renamed ``<idN>`` by its first appearance (dict keys in sorted order)
    and every timestamp ``<time>``."""
    names: dict[str, str] = {}

    def text(s: str) -> str:
        if _TIME.match(s):
            return "<time>"
        return _ID.sub(lambda m: names.setdefault(m.group(0), f"<id{len(names)}>"), s)

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {text(k): walk(v[k]) for k in sorted(v)}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            return text(v)
        return v

    return walk(value)


def same(server: Any, ours: Any) -> None:
    assert normalized(ours) == normalized(server)


# ---- the two sides -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(PROJECT, tmp_path_factory.mktemp("langgraph-dev")) as url:
        yield url


@pytest.fixture
async def client(server: str) -> AsyncIterator[Any]:
    c = get_client(url=server)
    yield c
    await c.http.client.aclose()


@pytest.fixture
async def http(server: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server, timeout=30) as c:
        yield c


def served_graph(graph_id: str) -> Pregel:
    """The project's graph as the server runs it: named after its id, with a saver."""
    graph = getattr(graphs, graph_id)
    return graph.copy(update={"checkpointer": ServerLikeSaver(), "name": graph_id})


class Twin:
    """A thread on the server and the same thread in-process (same thread id)."""

    def __init__(self, client: Any, graph_id: str, thread_id: str) -> None:
        self.client = client
        self.graph_id = graph_id
        self.thread_id = thread_id
        self.graph = served_graph(graph_id)

    @classmethod
    async def create(cls, client: Any, graph: str, **kw: Any) -> Twin:
        thread = await client.threads.create(**kw)
        return cls(client, graph, thread["thread_id"])

    async def run(self, *, fails: bool = False, **kw: Any) -> None:
        """One run on both sides: ``kw`` as the SDK's runs.wait takes it (input, command,
        context, metadata). In-process it runs with the metadata the server's run wrote."""
        await self.client.runs.wait(self.thread_id, self.graph_id, raise_error=not fails, **kw)
        head = (await self.client.threads.get_history(self.thread_id, limit=1))[0]["metadata"]
        metadata = {k: v for k, v in head.items() if k not in _LANGGRAPH_METADATA}
        config = {"configurable": {"thread_id": self.thread_id}, "metadata": metadata}
        given = rest.to_command(kw["command"]) if kw.get("command") else kw.get("input")
        try:
            await self.graph.ainvoke(given, config, context=kw.get("context"))
        except ValueError:
            if not fails:
                raise

    async def state(self, params: dict[str, Any]) -> dict[str, Any]:
        read = rest.read_state_get(self.thread_id, params)
        return rest.thread_state(await self.graph.aget_state(read.config, subgraphs=read.subgraphs))

    async def history(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        read = rest.read_history(self.thread_id, params)
        states = self.graph.aget_state_history(
            read.config, limit=read.limit, before=read.before, filter=read.filter
        )
        return [rest.thread_state(s, history=True) async for s in states]

    async def ids(self) -> tuple[list[str], list[str]]:
        """Every root checkpoint id, newest first: the server's and ours."""
        theirs = await self.client.threads.get_history(self.thread_id, limit=1000)
        ours = await self.history({"limit": 1000})
        return (
            [s["checkpoint"]["checkpoint_id"] for s in theirs],
            [s["checkpoint"]["checkpoint_id"] for s in ours],
        )


# ---- thread state ------------------------------------------------------------------------------


async def test_a_thread_without_checkpoints(client: Any, http: httpx.AsyncClient) -> None:
    twin = await Twin.create(client, "agent")
    assert await client.threads.get_state(twin.thread_id) == rest.empty_state()
    # A thread whose graph has never written one reads as the empty state through LangGraph too.
    assert await twin.state({}) == rest.empty_state()
    assert await client.threads.get_history(twin.thread_id) == []
    assert await twin.history({"limit": 10}) == []


async def test_agent_interrupted_inside_its_subgraph(client: Any, http: httpx.AsyncClient) -> None:
    twin = await Twin.create(client, "agent")
    await twin.run(
        input={"messages": [{"role": "user", "content": "hi", "id": "h1"}]},
        metadata={"tag": "first"},
    )
    tid = twin.thread_id

    state = await client.threads.get_state(tid)
    assert state["next"] == ["review"] and state["interrupts"], "the run stops in the subgraph"
    same(state, await twin.state({}))
    nested = await client.threads.get_state(tid, subgraphs=True)
    assert nested["tasks"][0]["state"]["next"] == ["review"]
    same(nested, await twin.state({"subgraphs": True}))
    # The query string's spelling (GET /state?subgraphs=True), and one the server reads as false.
    same(
        (await http.get(f"/threads/{tid}/state", params={"subgraphs": "True"})).json(),
        await twin.state({"subgraphs": "True"}),
    )
    same(
        (await http.get(f"/threads/{tid}/state", params={"subgraphs": "1"})).json(),
        await twin.state({"subgraphs": "1"}),
    )

    history = await client.threads.get_history(tid, limit=10)
    assert len(history) == 3
    same(history, await twin.history({"limit": 10}))
    same(await client.threads.get_history(tid, limit=2), await twin.history({"limit": 2}))
    # Without a limit: one state (the server's default; the SDK always sends one).
    without = (await http.post(f"/threads/{tid}/history", json={})).json()
    assert len(without) == 1
    same(without, await twin.history({}))

    theirs, ours = await twin.ids()
    # At a checkpoint: GET /state/{id} (no checkpoint_ns in the config) and POST
    # /state/checkpoint {checkpoint: {checkpoint_id}}, with subgraphs.
    same(
        (await http.get(f"/threads/{tid}/state/{theirs[1]}")).json(),
        await twin.state({"checkpoint_id": ours[1]}),
    )
    same(
        await client.threads.get_state(
            tid, checkpoint={"checkpoint_id": theirs[0]}, subgraphs=True
        ),
        await twin.state({"checkpoint": {"checkpoint_id": ours[0]}, "subgraphs": True}),
    )
    # before: a config (POST) and a checkpoint id (GET's query string).
    same(
        await client.threads.get_history(
            tid, limit=10, before={"configurable": {"checkpoint_id": theirs[1]}}
        ),
        await twin.history({"limit": 10, "before": {"configurable": {"checkpoint_id": ours[1]}}}),
    )
    same(
        (
            await http.get(f"/threads/{tid}/history", params={"before": theirs[0], "limit": "5"})
        ).json(),
        await twin.history({"before": ours[0], "limit": "5"}),
    )
    # metadata: every key equal.
    for metadata in ({"step": 1}, {"tag": "first", "source": "loop"}, {"tag": "other"}):
        theirs_ = await client.threads.get_history(tid, limit=10, metadata=metadata)
        same(theirs_, await twin.history({"limit": 10, "metadata": metadata}))
    assert len(await client.threads.get_history(tid, limit=10, metadata={"step": 1})) == 1

    # The subgraph's own namespace: its state and history (the namespace names a task id, each
    # side its own).
    ns_theirs = state["tasks"][0]["checkpoint"]["checkpoint_ns"]
    ns_ours = (await twin.state({}))["tasks"][0]["checkpoint"]["checkpoint_ns"]
    same(
        await client.threads.get_state(tid, checkpoint={"checkpoint_ns": ns_theirs}),
        await twin.state({"checkpoint": {"checkpoint_ns": ns_ours}}),
    )
    same(
        await client.threads.get_history(tid, limit=10, checkpoint={"checkpoint_ns": ns_theirs}),
        await twin.history({"limit": 10, "checkpoint": {"checkpoint_ns": ns_ours}}),
    )


async def test_agent_resumed_to_its_own_interrupt_then_done(client: Any) -> None:
    twin = await Twin.create(client, "agent")
    await twin.run(input={"messages": [{"role": "user", "content": "hi", "id": "h1"}]})
    await twin.run(command={"resume": "looks good"})
    state = await client.threads.get_state(twin.thread_id)
    # The root's interrupt carries its response_schema.
    assert state["interrupts"][0]["response_schema"]["type"] == "object"
    same(state, await twin.state({}))
    same(
        await client.threads.get_history(twin.thread_id, limit=20),
        await twin.history({"limit": 20}),
    )
    await twin.run(command={"resume": {"ok": True}})
    state = await client.threads.get_state(twin.thread_id)
    assert state["next"] == [] and state["values"]["approved"] is True
    same(state, await twin.state({}))
    same(
        await client.threads.get_history(twin.thread_id, limit=50),
        await twin.history({"limit": 50}),
    )


async def test_nested_subgraphs_interrupted_two_levels_down(client: Any) -> None:
    twin = await Twin.create(client, "nested")
    await twin.run(input={"count": 0, "trail": []})
    state = await client.threads.get_state(twin.thread_id, subgraphs=True)
    inner = state["tasks"][0]["state"]["tasks"][0]["state"]
    assert inner["next"] == ["ask"] and inner["interrupts"], "three levels of state"
    same(state, await twin.state({"subgraphs": True}))
    same(
        await client.threads.get_history(twin.thread_id, limit=10),
        await twin.history({"limit": 10}),
    )


@pytest.mark.parametrize(
    ("graph_id", "run"),
    [
        ("pyd", {"input": {"topic": "apples"}}),
        ("dc", {"input": {"text": "a b"}}),
        ("ctx", {"input": {"question": "q"}, "context": {"user": "ann"}}),
        ("odd", {"input": {}}),
    ],
)
async def test_states_of_pydantic_dataclass_context_and_odd_graphs(
    client: Any, graph_id: str, run: dict[str, Any]
) -> None:
    twin = await Twin.create(client, graph_id)
    await twin.run(**run)
    state = await client.threads.get_state(twin.thread_id)
    assert state["values"] and state["next"] == []
    same(state, await twin.state({}))
    same(
        await client.threads.get_history(twin.thread_id, limit=10),
        await twin.history({"limit": 10}),
    )


async def test_values_read_back_as_stored(client: Any) -> None:
    """A state read answers values as the checkpoint stores them, not as a run's stream writes
    them (the same server, the same values)."""
    twin = await Twin.create(client, "odd")
    streamed = await client.runs.wait(twin.thread_id, "odd", input={})
    await twin.graph.ainvoke({}, {"configurable": {"thread_id": twin.thread_id}})
    stored = (await client.threads.get_state(twin.thread_id))["values"]
    assert (streamed["day"], stored["day"]) == ("2024-05-06", [2024, 5, 6])
    assert (streamed["wait"], stored["wait"]) == (86402.000003, [1, 2, 3])
    assert (streamed["price"], stored["price"]) == (12.5, "12.50")
    assert (await twin.state({}))["values"] == stored


async def test_a_failed_task_carries_its_error(client: Any) -> None:
    twin = await Twin.create(client, "fails")
    await twin.run(input={"value": -3}, fails=True)
    state = await client.threads.get_state(twin.thread_id)
    assert state["tasks"][0]["error"] == "ValueError('negative value -3')"
    same(state, await twin.state({}))


async def test_an_unknown_checkpoint(client: Any, http: httpx.AsyncClient) -> None:
    """The server answers 200 with an empty state naming the checkpoint asked for (the worker
    answers what LangGraph reads for it, the same way)."""
    twin = await Twin.create(client, "dc")
    await twin.run(input={"text": "x"})
    bogus = "1f000000-0000-6000-8000-000000000000"
    theirs = await http.get(f"/threads/{twin.thread_id}/state/{bogus}")
    assert theirs.status_code == 200
    assert theirs.json()["checkpoint"] == {"checkpoint_id": bogus, "thread_id": twin.thread_id}
    assert await twin.state({"checkpoint_id": bogus}) == theirs.json()


async def test_state_update_and_its_history(client: Any) -> None:
    twin = await Twin.create(client, "nested")
    await twin.run(input={"count": 0, "trail": []})
    await twin.run(command={"resume": "fine"})
    params = {"values": {"trail": ["edited"]}, "as_node": "outer_step"}
    theirs = await client.threads.update_state(twin.thread_id, **params)
    write = rest.read_state_update(twin.thread_id, params, graph_id="nested")
    ours = rest.update_answer(
        await twin.graph.aupdate_state(write.config, write.values, as_node=write.as_node)
    )
    same(theirs, ours)
    # The update's checkpoint has the graph's id in its metadata, as the server writes it.
    same(
        await client.threads.get_history(twin.thread_id, limit=3),
        await twin.history({"limit": 3}),
    )


async def test_supersteps_of_a_new_thread(client: Any) -> None:
    supersteps = [
        {"updates": [{"values": {"count": 1, "trail": ["a"]}, "as_node": "outer_step"}]},
        {
            "updates": [
                {
                    "values": None,
                    "command": {"update": {"trail": ["b"]}, "goto": "side"},
                    "as_node": "middle",
                }
            ]
        },
    ]
    twin = await Twin.create(client, "nested", graph_id="nested", supersteps=supersteps)
    bulk = rest.read_bulk(twin.thread_id, {"supersteps": supersteps}, graph_id="nested")
    done = await twin.graph.abulk_update_state(bulk.config, bulk.supersteps)
    assert rest.bulk_answer(done)["checkpoint"]["checkpoint_id"]
    state = await client.threads.get_state(twin.thread_id)
    assert state["next"] == ["side"]
    same(state, await twin.state({}))
    same(
        await client.threads.get_history(twin.thread_id, limit=10),
        await twin.history({"limit": 10}),
    )


# ---- assistants: drawing, schemas, subgraphs -----------------------------------------------------


async def assistant_id(client: Any, graph_id: str) -> str:
    found = await client.assistants.search(graph_id=graph_id, metadata={"created_by": "system"})
    return found[0]["assistant_id"]


@pytest.mark.parametrize("graph_id", ["agent", "nested", "dc"])
@pytest.mark.parametrize("xray", [False, True, 1, 2])
async def test_graph_drawing(client: Any, graph_id: str, xray: bool | int) -> None:
    theirs = await client.assistants.get_graph(await assistant_id(client, graph_id), xray=xray)
    assert theirs == schemas.graph_json(getattr(graphs, graph_id), xray)


async def test_xray_depth_numbers(client: Any, http: httpx.AsyncClient) -> None:
    aid = await assistant_id(client, "nested")
    depth = schemas.xray_depth(graphs.nested)
    assert depth == 2
    deepest = await client.assistants.get_graph(aid, xray=True)
    # (True == 1 in Python: each number is asked for apart.)
    one, two, three = [await client.assistants.get_graph(aid, xray=n) for n in (1, 2, 3)]
    assert one != deepest and len(one["nodes"]) < len(deepest["nodes"])
    assert two == three == deepest
    assert schemas.graph_json(graphs.nested, depth) == deepest
    for bad in ("0", "-1", "1.5", "abc"):
        answer = await http.get(f"/assistants/{aid}/graph", params={"xray": bad})
        assert answer.status_code == 422
    for bad in (0, -1):
        with pytest.raises(ValueError):
            schemas.graph_json(graphs.nested, bad)


@pytest.mark.parametrize("graph_id", ["agent", "pyd", "ctx", "dc", "nested", "fails"])
async def test_schemas(client: Any, graph_id: str) -> None:
    theirs = await client.assistants.get_schemas(await assistant_id(client, graph_id))
    assert theirs == schemas.graph_schemas(graph_id, getattr(graphs, graph_id))


async def test_context_schema_is_the_config_schema_too(client: Any) -> None:
    theirs = await client.assistants.get_schemas(await assistant_id(client, "ctx"))
    assert theirs["context_schema"]["title"] == "CtxContext"
    assert theirs["config_schema"] == theirs["context_schema"]
    assert theirs["state_schema"]["title"] == "ctx_state"


@pytest.mark.parametrize(
    ("graph_id", "namespace", "recurse", "expect"),
    [
        ("nested", None, False, ["middle"]),
        ("nested", None, True, ["middle", "middle|inner"]),
        ("nested", "middle", False, ["middle"]),
        ("nested", "middle", True, ["middle"]),
        ("nested", "middle|inner", False, []),
        ("nested", "middle|inner", True, ["middle|inner"]),
        ("nested", "nope", True, []),
        ("agent", None, True, ["review"]),
        ("pyd", None, True, []),
    ],
)
async def test_subgraphs(
    client: Any, graph_id: str, namespace: str | None, recurse: bool, expect: list[str]
) -> None:
    aid = await assistant_id(client, graph_id)
    theirs = await client.assistants.get_subgraphs(aid, namespace=namespace, recurse=recurse)
    assert list(theirs) == expect
    assert theirs == schemas.subgraph_schemas(getattr(graphs, graph_id), namespace, recurse)
