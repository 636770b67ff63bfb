"""The protocol events observe() makes of a run: shapes, order, one message per model call with
its tool call chunks, subgraph lifecycle (and none for plain nodes nor the root), interrupts
(side events, then input.requested once per id), failures and cancellation."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from threadcast_worker import serde
from threadcast_worker.observe import (
    SIDE,
    RestStream,
    _Feed,
    cancel_events,
    failure_events,
    observe,
)

sys.path.insert(0, str(Path(__file__).parent / "graphs"))
import agent  # noqa: E402


def compiled(graph: Any = None) -> Any:
    return (graph or agent.graph).copy(update={"checkpointer": InMemorySaver()})


async def run(graph: Any, graph_input: Any, thread: str = "t", **kw: Any) -> list[dict[str, Any]]:
    config = {"configurable": {"thread_id": thread}}
    out = []
    async for ev in observe(graph, graph_input, config, **kw):
        out.append(orjson.loads(serde.dumps(ev)))  # written at once, as the relay does
    return out


def said(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def of(events: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [e for e in events if e["method"] == method]


def messages_by_id(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The message events of each message, in order (a message's events follow its start)."""
    out: dict[str, list[dict[str, Any]]] = {}
    current: dict[tuple[str, ...], str] = {}
    for e in of(events, "messages"):
        key = (*e["params"]["namespace"], e["params"].get("node", ""))
        data = e["params"]["data"]
        if data["event"] == "message-start":
            current[key] = data["id"]
        out.setdefault(current[key], []).append(e)
    return out


async def test_tool_call_run_shapes_and_order() -> None:
    events = await run(compiled(), said("lookup otters"))
    for e in events:
        assert set(e) == {"method", "params"}  # type and seq are threadcast's
        assert isinstance(e["params"]["timestamp"], int)
    final = of(events, "values")[-1]["params"]["data"]["messages"]
    ai = [m for m in final if m["type"] == "ai"]
    msgs = messages_by_id(events)
    # One message per model call, under the id the state holds.
    assert list(msgs) == [m["id"] for m in ai]
    for m, evs in zip(ai, msgs.values(), strict=True):
        kinds = [e["params"]["data"]["event"] for e in evs]
        assert kinds[0] == "message-start" and kinds[-1] == "message-finish"
        assert evs[0]["params"]["data"]["role"] == "ai"
        assert {e["params"]["node"] for e in evs} == {"model"}
        assert {tuple(e["params"]["namespace"]) for e in evs} == {()}
        text = "".join(
            e["params"]["data"]["delta"]["text"]
            for e in evs
            if e["params"]["data"]["event"] == "content-block-delta"
            and e["params"]["data"]["delta"]["type"] == "text-delta"
        )
        assert text == m["content"]
    # The first call's tool call: started with its id and name, args in pieces, finished parsed.
    first = [e["params"]["data"] for e in next(iter(msgs.values()))]
    start = next(d for d in first if d["event"] == "content-block-start" and d["index"] == 1)
    assert start["content"]["type"] == "tool_call_chunk"
    assert (start["content"]["id"], start["content"]["name"]) == ("call_1", "search")
    pieces = [
        d["delta"]["args"]
        for d in first
        if d["event"] == "content-block-delta" and d["delta"]["type"] == "tool-call-delta"
    ]
    assert len(pieces) == 2 and orjson.loads("".join(pieces)) == {"query": "otters"}
    finish = next(d for d in first if d["event"] == "content-block-finish" and d["index"] == 1)
    assert finish["content"] == {
        "type": "tool_call",
        "id": "call_1",
        "name": "search",
        "args": {"query": "otters"},
    }
    # The tool's events, its custom chunks, the nodes' updates.
    tools = [e["params"]["data"] for e in of(events, "tools")]
    assert [t["event"] for t in tools] == ["tool-started", "tool-finished"]
    assert tools[0]["tool_call_id"] == "call_1" and tools[0]["input"] == {"query": "otters"}
    assert tools[1]["output"]["content"] == "results for otters"
    assert [e["params"]["data"] for e in of(events, "custom")] == [
        {"payload": {"progress": "searching", "query": "otters"}},
        {"payload": {"progress": "done"}},
    ]
    updates = of(events, "updates")
    assert [u["params"]["node"] for u in updates] == ["model", "tools", "model"]
    assert all(u["params"]["data"]["node"] == u["params"]["node"] for u in updates)
    # No lifecycle: plain nodes have none, and the root's is the caller's.
    assert of(events, "lifecycle") == []
    # Each checkpoint's envelope comes just before the values of the state it saved.
    for i, e in enumerate(events):
        if e["method"] == "values":
            before = events[i - 1]
            assert before["method"] == "checkpoints"
            assert set(before["params"]["data"]) == {"id", "parent_id", "step", "source"}
    assert of(events, "input.requested") == []
    assert of(events, SIDE) == []


async def test_subgraph_lifecycle_only_for_the_subgraph() -> None:
    events = await run(compiled(), said("research otters"))
    life = of(events, "lifecycle")
    assert [e["params"]["data"]["event"] for e in life] == ["started", "completed"]
    ns = life[0]["params"]["namespace"]
    assert len(ns) == 1 and ns[0].startswith("researcher:")
    assert life[1]["params"]["namespace"] == ns
    assert {e["params"]["data"]["graph_name"] for e in life} == {"researcher"}
    at_ns = [i for i, e in enumerate(events) if e["params"]["namespace"] == ns]
    started, completed = events.index(life[0]), events.index(life[1])
    assert at_ns[0] == started and at_ns[-1] == completed  # first and last at its namespace
    # The subgraph's model streams at the subgraph's namespace, named by its node.
    sub = [e for e in of(events, "messages") if e["params"]["namespace"] == ns]
    assert sub and {e["params"]["node"] for e in sub} == {"sub_model"}
    # The root node that ran the subgraph is done after its child.
    root_update = next(e for e in of(events, "updates") if e["params"]["node"] == "researcher")
    assert events.index(root_update) < completed


class Outer(TypedDict):
    messages: Annotated[list, add_messages]


def asks(state: Outer) -> dict[str, Any]:
    answer = interrupt({"question": "go on?"})
    return {"messages": [AIMessage(f"answered {answer}", id="answer")]}


inner = StateGraph(Outer).add_node("asks", asks).add_edge(START, "asks").compile()
nested = (
    StateGraph(Outer)
    .add_node("inner", inner)
    .add_edge(START, "inner")
    .add_edge("inner", END)
    .compile()
)


async def test_interrupt_side_events_then_one_request() -> None:
    graph = compiled()
    events = await run(graph, said("interrupt me"))
    requested = of(events, "input.requested")
    assert len(requested) == 1
    data = requested[0]["params"]["data"]
    assert data["payload"] == {"question": "approve?", "about": "interrupt me"}
    sides = [(i, e) for i, e in enumerate(events) if e["method"] == SIDE]
    assert [e["params"]["data"]["mode"] for _, e in sides] == ["updates", "values"]
    # LangGraph's own chunks: the update, then the state with its interrupts.
    upd = sides[0][1]["params"]["data"]["data"]["__interrupt__"]
    vals = sides[1][1]["params"]["data"]["data"]
    assert upd[0]["id"] == data["interrupt_id"] == vals["__interrupt__"][0]["id"]
    assert vals["messages"][0]["content"] == "interrupt me"
    assert sides[-1][0] < events.index(requested[0])
    # Resumed: the answer goes on; nothing is asked again.
    after = await run(graph, Command(resume="yes"))
    assert of(after, "input.requested") == []
    last = of(after, "values")[-1]["params"]["data"]["messages"][-1]
    assert last["content"] == "You answered: yes."


async def test_subgraph_interrupt_requested_once_at_its_namespace() -> None:
    events = await run(compiled(nested), {"messages": [HumanMessage("hi")]})
    requested = of(events, "input.requested")
    assert len(requested) == 1
    ns = requested[0]["params"]["namespace"]
    assert len(ns) == 1 and ns[0].startswith("inner:")
    # LangGraph shows it at the subgraph's namespace and again at the root's.
    value_sides = [e for e in of(events, SIDE) if e["params"]["data"]["mode"] == "values"]
    assert [e["params"]["namespace"] for e in value_sides] == [ns, []]
    life = of(events, "lifecycle")
    assert [e["params"]["data"]["event"] for e in life] == ["started", "interrupted"]


async def test_whole_messages_with_their_role() -> None:
    class S(TypedDict):
        messages: Annotated[list, add_messages]

    quiet = agent.ScriptedModel(disable_streaming=True)

    async def answer(state: S) -> dict[str, Any]:
        reply = await quiet.ainvoke(state["messages"])
        return {"messages": [reply, HumanMessage("a note", id="note")]}

    graph = StateGraph(S).add_node("answer", answer).add_edge(START, "answer").compile()
    events = await run(compiled(graph), said("hello"))
    msgs = messages_by_id(events)
    assert len(msgs) == 2
    starts = [evs[0]["params"]["data"] for evs in msgs.values()]
    assert [s["role"] for s in starts] == ["ai", "human"]
    assert starts[1]["id"] == "note"
    texts = [
        e["params"]["data"]["delta"]["text"]
        for evs in msgs.values()
        for e in evs
        if e["params"]["data"]["event"] == "content-block-delta"
    ]
    assert texts == ["You said: hello", "a note"]


async def test_failure_raises_after_its_events() -> None:
    seen: list[dict[str, Any]] = []
    with pytest.raises(agent.CustomError):
        async for ev in observe(
            compiled(), said("fail custom"), {"configurable": {"thread_id": "f"}}
        ):
            seen.append(ev)
    # What ran before the failing node is there.
    assert any(e["method"] == "messages" for e in seen)
    assert (
        of([orjson.loads(serde.dumps(e)) for e in seen], "updates")[-1]["params"]["node"] == "model"
    )


def test_failure_events() -> None:
    rest = RestStream(stream_mode=["values"], subgraphs=False, run_id="r")
    shown = [orjson.loads(serde.dumps(e)) for e in failure_events(ValueError("bad input"), rest)]
    assert shown[0]["method"] == SIDE
    assert shown[0]["params"]["data"] == {
        "mode": "error",
        "data": {"error": "ValueError", "message": "bad input"},
    }
    assert shown[1]["params"]["data"] == {
        "mode": "sse",
        "data": {"event": "error", "data": {"error": "ValueError", "message": "bad input"}},
    }
    # A graph's own exception class keeps its message in the side event; the server's rendered
    # error hides it.
    hidden = [
        orjson.loads(serde.dumps(e))
        for e in failure_events(agent.CustomError("secret detail"), rest)
    ]
    assert hidden[0]["params"]["data"]["data"] == {
        "error": "CustomError",
        "message": "secret detail",
    }
    assert hidden[1]["params"]["data"]["data"]["data"] == {
        "error": "CustomError",
        "message": "An internal error occurred",
    }
    # No REST stream: only the side event; a group is named by its first exception.
    group = ExceptionGroup("many", [KeyError("k")])
    assert [e["params"]["data"]["data"]["error"] for e in failure_events(group, None)] == [
        "KeyError"
    ]
    assert cancel_events("interrupt", rest) == [] and cancel_events("rollback", rest) == []


async def test_cancel_stops_the_graph() -> None:
    class S(TypedDict):
        messages: Annotated[list, add_messages]

    state = {"entered": False, "cancelled": False}

    async def slow(s: S) -> dict[str, Any]:
        state["entered"] = True
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        return {}

    graph = StateGraph(S).add_node("slow", slow).add_edge(START, "slow").compile()

    async def consume() -> None:
        async for _ in observe(compiled(graph), said("x"), {"configurable": {"thread_id": "c"}}):
            pass

    task = asyncio.create_task(consume())
    for _ in range(200):
        if state["entered"]:
            break
        await asyncio.sleep(0.01)
    assert state["entered"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert state["cancelled"]


async def test_cancel_mid_message_leaves_no_converter_running() -> None:
    """A run cancelled while a model's message streams (run.cancel): observe() is closed at a
    yield with the message's converter suspended in its __anext__; it must be dropped, or the
    loop's finalizer fails to close it later ("aclose(): asynchronous generator is already
    running", a "Task exception was never retrieved" in the worker's log)."""
    import contextlib
    import gc

    from langchain_core.language_models import GenericFakeChatModel

    class S(TypedDict):
        messages: Annotated[list, add_messages]

    async def talk(s: S) -> dict[str, Any]:
        model = GenericFakeChatModel(messages=iter([AIMessage("one two three four five six")]))
        return {"messages": [await model.ainvoke(s["messages"])]}

    graph = StateGraph(S).add_node("talk", talk).add_edge(START, "talk").compile()
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    streaming = asyncio.Event()

    async def consume() -> None:
        stream = observe(compiled(graph), said("x"), {"configurable": {"thread_id": "m"}})
        async with contextlib.aclosing(stream) as events:
            async for ev in events:
                if ev["method"] == "messages" and ev["params"]["data"]["event"] == (
                    "content-block-delta"
                ):
                    streaming.set()
                    await asyncio.sleep(30)  # cancelled here, mid-message

    try:
        task = asyncio.create_task(consume())
        await asyncio.wait_for(streaming.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        for _ in range(5):
            gc.collect()
            await asyncio.sleep(0.01)
    finally:
        loop.set_exception_handler(previous)
    assert [str(c.get("exception") or c.get("message")) for c in reported] == []


async def test_rest_run_renders_beside_protocol_events() -> None:
    rest = RestStream(
        stream_mode=["events", "values"],
        subgraphs=False,
        run_id="00000000-0000-4000-8000-0000000000aa",
    )
    events = await run(compiled(), said("hello"), rest=rest)
    sse = [e["params"]["data"]["data"] for e in of(events, SIDE)]
    assert {e["params"]["data"]["mode"] for e in of(events, SIDE)} == {"sse"}
    names = [s["event"] for s in sse]
    assert "values" in names and "events" in names
    roots = [s["data"] for s in sse if s["event"] == "events" and s["data"]["parent_ids"] == []]
    assert roots and {r["run_id"] for r in roots} == {rest.run_id}
    # The protocol events are the same as without rendering.
    assert [e["method"] for e in events if e["method"] != SIDE] == [
        e["method"] for e in await run(compiled(), said("hello"), thread="u")
    ]


def test_plain_text_fast_path_converts_as_langchain_does() -> None:
    """The converter's events are the same with the plain-text shortcut as without it."""
    from langchain_core.messages import AIMessageChunk
    from langchain_core.messages.tool import tool_call_chunk

    chunks = [
        AIMessageChunk(content="Hel", id="m"),
        AIMessageChunk(content="lo ", id="m"),
        AIMessageChunk(content="", id="m"),
        AIMessageChunk(content="there", id="m", response_metadata={"model_name": "x"}),
        AIMessageChunk(content="!", id="m", additional_kwargs={"reasoning_content": "hmm"}),
        AIMessageChunk(
            content="", id="m", tool_call_chunks=[tool_call_chunk(name="t", args='{"a"', index=0)]
        ),
        AIMessageChunk(
            content="", id="m", tool_call_chunks=[tool_call_chunk(args=": 1}", index=0)]
        ),
        AIMessageChunk(
            content=" bye",
            id="m",
            usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        ),
        AIMessageChunk(content="", id="m", chunk_position="last"),
    ]
    made = {}
    for fast in (True, False):
        feed = _Feed(fast=fast)
        out = [ev for c in chunks for ev in feed.push(c)] + feed.close()
        made[fast] = out
    assert made[True] == made[False]
    kinds = [e["event"] for e in made[True]]
    assert kinds[0] == "message-start" and kinds[-1] == "message-finish"
    text = "".join(
        e["delta"].get("text", "") for e in made[True] if e["event"] == "content-block-delta"
    )
    assert text == "Hello there! bye"


async def test_static_interrupt_asks_nothing() -> None:
    graph = compiled()
    events = await run(graph, said("lookup otters"), interrupt_before=["tools"])
    assert of(events, "input.requested") == []
    sides = [e["params"]["data"] for e in of(events, SIDE)]
    assert sides == [{"mode": "updates", "data": {"__interrupt__": []}}]
    assert of(events, "tools") == []
    resumed = await run(graph, None)
    assert [e["params"]["data"]["event"] for e in of(resumed, "tools")] == [
        "tool-started",
        "tool-finished",
    ]
