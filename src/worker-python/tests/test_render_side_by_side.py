"""Side by side with the reference: the SSE events LangGraph's Python server (``langgraph dev``)
sends for a REST run, through ``langgraph_sdk``, against the ones ``observe()`` renders running the
same graph in-process with the same input and the config ``config.py`` builds as the server would.

Both are compared after normalising what differs from run to run: uuids (thread, run, message,
checkpoint and task ids) become ``<id N>`` numbered by first appearance in each stream, interrupt
ids ``<iid N>``, ISO times ``<time>``. The differences kept are named in ``KEPT`` with their reason.
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from langgraph_sdk import get_client
from reference import langgraph_dev

from threadcast_worker import config as cfg
from threadcast_worker import serde
from threadcast_worker.observe import SIDE, RestStream, failure_events, observe

GRAPHS = Path(__file__).parent / "graphs"
sys.path.insert(0, str(GRAPHS))
import agent  # noqa: E402

GRAPH_ID = "agent"

# Differences kept, each with its reason (applied to both streams' metadata dicts).
KEPT = {
    # `langgraph dev` sets LANGGRAPH_API_URL to its own address; threadcast's is another.
    "langgraph_api_url": "<api url>",
    # When each request started: another time on each side.
    "__request_start_time_ms__": "<ms>",
}

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX32 = re.compile(r"(?<![0-9a-f-])[0-9a-f]{32}(?![0-9a-f-])")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:\+00:00|Z)?")


# Kept difference: LangGraph copies these from `configurable` into the run's metadata in the order
# of a frozenset, which follows the process's string hash seed (random per process): the same
# server orders them differently from one start to the next.
_PROPAGATED = frozenset(
    ("thread_id", "checkpoint_id", "checkpoint_ns", "task_id", "run_id", "assistant_id", "graph_id")
)


def _in_seed_order(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """items with each run of consecutive propagated keys sorted."""
    out: list[tuple[str, Any]] = []
    run: list[tuple[str, Any]] = []
    for item in [*items, ("", None)]:
        if item[0] in _PROPAGATED:
            run.append(item)
            continue
        out.extend(sorted(run))
        run = []
        out.append(item)
    return out[:-1]


def _kept(value: Any) -> Any:
    if isinstance(value, dict):
        items = [(k, KEPT[k] if k in KEPT else _kept(v)) for k, v in value.items()]
        return dict(_in_seed_order(items))
    if isinstance(value, list):
        return [_kept(v) for v in value]
    return value


def _saver_metadata(name: str, data: Any) -> Any:
    """A checkpoint's metadata with its keys sorted, without `thread_id` and `langgraph_api_url`.

    Kept difference: a checkpoint read back from the saver (a resumed run's first) carries what
    the saver wrote: the reference's puts the run's metadata before LangGraph's own (`source`,
    `step`, `parents`) and keeps `thread_id` and a null `langgraph_api_url`; the test's
    InMemorySaver (standing for the worker's RedisSaver, tested on its own) writes LangGraph's
    first and leaves those two out."""
    base = name.split("|")[0]
    if base == "debug" and isinstance(data, dict) and data.get("type") == "checkpoint":
        payload = data.get("payload") or {}
        return {**data, "payload": {**payload, "metadata": _sorted_meta(payload.get("metadata"))}}
    if base == "checkpoints" and isinstance(data, dict) and "metadata" in data:
        return {**data, "metadata": _sorted_meta(data["metadata"])}
    return data


def _sorted_meta(meta: Any) -> Any:
    if not isinstance(meta, dict):
        return meta
    return {k: meta[k] for k in sorted(meta) if k not in ("thread_id", "langgraph_api_url")}


def normalise(events: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    ids: dict[str, str] = {}
    iids: dict[str, str] = {}

    def uid(m: re.Match[str]) -> str:
        return ids.setdefault(m.group(0), f"<id {len(ids)}>")

    def iid(m: re.Match[str]) -> str:
        return iids.setdefault(m.group(0), f"<iid {len(iids)}>")

    out = []
    for name, data in events:
        data = _saver_metadata(name, data)
        text = orjson.dumps(_kept(data)).decode()
        name = _UUID.sub(uid, name)
        text = _TIME.sub("<time>", _HEX32.sub(iid, _UUID.sub(uid, text)))
        out.append((name, text))
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with langgraph_dev(GRAPHS, tmp_path_factory.mktemp("reference")) as url:
        yield url


async def reference_run(
    url: str,
    thread_id: str | None,
    body: dict[str, Any],
    modes: list[str],
    subgraphs: bool,
    thread_metadata: dict[str, Any] | None = None,
) -> tuple[str, list[tuple[str, Any]]]:
    client = get_client(url=url)
    if thread_id is None:
        thread_id = (await client.threads.create(metadata=thread_metadata))["thread_id"]
    events = []
    async for part in client.runs.stream(
        thread_id, GRAPH_ID, stream_mode=modes, stream_subgraphs=subgraphs, **body
    ):
        if part.event != "metadata":
            events.append((part.event, part.data))
    return thread_id, events


class InProcess:
    """The graph compiled as the server compiles it, on a thread of its own."""

    def __init__(self, thread_metadata: dict[str, Any] | None = None) -> None:
        self.thread = {"config": {}, "metadata": thread_metadata or {}}
        self.graph = agent.graph.copy(
            update={"checkpointer": InMemorySaver(), "store": InMemoryStore(), "name": GRAPH_ID}
        )
        self.thread_id = str(uuid.uuid4())

    async def run(self, body: dict[str, Any], modes: list[str], subgraphs: bool) -> list[Any]:
        run_id = str(uuid.uuid4())
        ids = {
            "run_id": run_id,
            "thread_id": self.thread_id,
            "graph_id": GRAPH_ID,
            "assistant_id": cfg.system_assistant_id(GRAPH_ID),
            "request_id": str(uuid.uuid4()),
            "request_start_ms": int(time.time() * 1000),
        }
        assistant = cfg.assistant_layer({"assistant_id": GRAPH_ID}, GRAPH_ID, {})
        layer = {k: body.get(k) for k in ("config", "context", "metadata")}
        config, context = cfg.merge_run(assistant, self.thread, layer, ids)
        config = cfg.run_config(config, run_id)
        rest = RestStream(stream_mode=modes, subgraphs=subgraphs, run_id=run_id)
        command = body.get("command")
        graph_input = Command(**command) if command else body.get("input")
        events: list[tuple[str, Any]] = []
        try:
            async for ev in observe(
                self.graph,
                graph_input,
                config,
                rest=rest,
                context=context,
                interrupt_before=body.get("interrupt_before"),
                interrupt_after=body.get("interrupt_after"),
                durability="sync",
            ):
                self._take(ev, events)
        except Exception as exc:
            for ev in failure_events(exc, rest):
                self._take(ev, events)
        return events

    @staticmethod
    def _take(ev: dict[str, Any], events: list[tuple[str, Any]]) -> None:
        # Written at once, as the relay writes each event before it reads the next.
        if ev["method"] == SIDE and ev["params"]["data"]["mode"] == "sse":
            sse = orjson.loads(serde.dumps(ev["params"]["data"]["data"]))
            events.append((sse["event"], sse["data"]))


ALONE = [
    ["values"],
    ["updates"],
    ["messages-tuple"],
    ["messages"],
    ["custom"],
    ["events"],
    ["debug"],
    ["tasks"],
    ["checkpoints"],
]
COMBINED = [
    ["values", "messages-tuple", "updates", "custom"],
    ["messages", "updates", "checkpoints", "tasks"],
]
INPUTS = {
    "tool call": "lookup otters",
    "subgraph": "research otters",
    "interrupt": "interrupt me",
}


def _input(text: str) -> dict[str, Any]:
    return {"input": {"messages": [{"role": "user", "content": text}]}}


async def _compare(
    server: str,
    steps: list[dict[str, Any]],
    modes: list[str],
    subgraphs: bool,
    thread_metadata: dict[str, Any] | None = None,
) -> None:
    mine = InProcess(thread_metadata)
    thread = None
    for body in steps:
        thread, theirs = await reference_run(
            server, thread, body, modes, subgraphs, thread_metadata
        )
        ours = await mine.run(body, modes, subgraphs)
        # (a subgraph's custom chunks are not sent without stream_subgraphs: nothing to compare)
        assert theirs or modes == ["custom"], "the reference sent nothing"
        assert normalise(ours) == normalise(theirs)


@pytest.mark.parametrize("subgraphs", [False, True], ids=["root", "subgraphs"])
@pytest.mark.parametrize("modes", ALONE + COMBINED, ids=lambda m: "+".join(m))
@pytest.mark.parametrize("case", list(INPUTS), ids=list(INPUTS))
async def test_stream_equals_reference(
    server: str, case: str, modes: list[str], subgraphs: bool
) -> None:
    await _compare(server, [_input(INPUTS[case])], modes, subgraphs)


@pytest.mark.parametrize("subgraphs", [False, True], ids=["root", "subgraphs"])
async def test_resume_equals_reference(server: str, subgraphs: bool) -> None:
    modes = ["values", "updates", "messages-tuple"]
    await _compare(
        server, [_input("interrupt me"), {"command": {"resume": "yes"}}], modes, subgraphs
    )


@pytest.mark.parametrize("text", ["fail", "fail custom"], ids=["ValueError", "CustomError"])
async def test_failure_equals_reference(server: str, text: str) -> None:
    await _compare(server, [_input(text)], ["values", "updates"], False)


CONFIGS = {
    "run config and metadata": {
        "config": {
            "configurable": {"user_id": "u1", "model": "fast"},
            "tags": ["mine"],
            "recursion_limit": 30,
            "metadata": {"from_config": True},
        },
        "metadata": {"from_run": "yes", "owner": "run"},
    },
    "context": {"context": {"model": "slow", "depth": 2}, "metadata": {"m": 1}},
}


@pytest.mark.parametrize("layers", list(CONFIGS), ids=list(CONFIGS))
async def test_config_layers_equal_reference(server: str, layers: str) -> None:
    """The config a run is run with, as the reference's debug checkpoints (its configurable and
    metadata) and messages metadata show it, with the thread's metadata under the run's."""
    body = {**_input("lookup otters"), **CONFIGS[layers]}
    await _compare(
        server, [body], ["debug", "messages-tuple", "events"], True, {"owner": "thread", "t": 1}
    )


async def test_system_assistant_id_is_the_references(server: str) -> None:
    found = await get_client(url=server).assistants.search(graph_id=GRAPH_ID)
    system = [a for a in found if a["metadata"].get("created_by") == "system"]
    assert [a["assistant_id"] for a in system] == [cfg.system_assistant_id(GRAPH_ID)]


@pytest.mark.parametrize("where", ["interrupt_before", "interrupt_after"])
async def test_static_interrupt_equals_reference(server: str, where: str) -> None:
    """A run stopped before/after a node, then resumed with no input."""
    modes = ["values", "updates", "debug"]
    steps = [{**_input("lookup otters"), where: ["tools"]}, {"input": None}]
    await _compare(server, steps, modes, False)
