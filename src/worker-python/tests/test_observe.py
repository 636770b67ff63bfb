"""The protocol events observe() makes of a run: shapes, order, one message per model call with
its tool call chunks, subgraph lifecycle (and none for plain nodes nor the root), interrupts
(side events, then input.requested once per id), failures and cancellation."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from threadcast_worker import serde
from threadcast_worker.observe import (
    SIDE,
    RestStream,
    _Feed,
    _Slots,
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


def rest(*modes: str) -> RestStream:
    return RestStream(
        stream_mode=list(modes), subgraphs=False, run_id="00000000-0000-4000-8000-0000000000aa"
    )


def without_message_deltas(events: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Each event's method and namespace, a message's events as its start alone."""
    return [
        (e["method"], e["params"]["namespace"], e["params"].get("node"))
        for e in events
        if e["method"] != SIDE
        and (e["method"] != "messages" or e["params"]["data"]["event"] == "message-start")
    ]


def writes(state: Outer) -> dict[str, Any]:
    return {"messages": [AIMessage("made here")]}  # no id: the reducer names it


def echoes(state: Outer) -> dict[str, Any]:
    return {"messages": state["messages"]}  # the same messages, named by now


echo = (
    StateGraph(Outer)
    .add_node("writes", writes)
    .add_node("echoes", echoes)
    .add_edge(START, "writes")
    .add_edge("writes", "echoes")
    .compile()
)


async def test_a_quiet_run_gives_an_id_less_message_once() -> None:
    """A node returns an id-less message, the next returns it again (named by the reducer since):
    its protocol clients get it once, from the node that made it."""
    events = await run(compiled(echo), said("hi"), thread="n", rest=rest("values"))
    (writes_update,) = [u["writes"] for u in of_updates(events) if "writes" in u]
    assert writes_update["messages"][0]["id"] is None  # written before the reducer named it
    msgs = messages_by_id(events)
    assert len(msgs) == 1
    (evs,) = msgs.values()
    assert {e["params"]["node"] for e in evs} == {"writes"}
    texts = [e["params"]["data"]["delta"]["text"] for e in evs if "delta" in e["params"]["data"]]
    assert texts == ["made here"]


async def test_a_rest_run_streams_its_models_only_when_it_asked_for_messages() -> None:
    """As the Python server: models stream (LangChain names their messages lc_run--<id>) only
    for a REST run asking for messages, messages-tuple or events; another's are invoked
    (lc_run--<id>-0), and its protocol clients get the same events with each message whole."""
    quiet = await run(compiled(), said("lookup otters"), thread="q", rest=rest("values"))
    loud = await run(compiled(), said("lookup otters"), thread="l", rest=rest("messages-tuple"))
    protocol = await run(compiled(), said("lookup otters"), thread="p")

    def ai_ids(events: list[dict[str, Any]]) -> list[str]:
        final = of(events, "values")[-1]["params"]["data"]["messages"]
        return [m["id"] for m in final if m["type"] == "ai"]

    assert all(i.startswith("lc_run--") and i.endswith("-0") for i in ai_ids(quiet))
    for streamed in (loud, protocol):
        assert all(i.startswith("lc_run--") and not i.endswith("-0") for i in ai_ids(streamed))
    # One message a model call, under the state's id, whole: its text in one delta.
    msgs = messages_by_id(quiet)
    assert list(msgs) == ai_ids(quiet)
    for evs in msgs.values():
        deltas = [e for e in evs if e["params"]["data"]["event"] == "content-block-delta"]
        assert len([d for d in deltas if d["params"]["data"]["delta"]["type"] == "text-delta"]) == 1
        assert {e["params"]["node"] for e in evs} == {"model"}
    # The same events in the same places as when the models stream, tools' included.
    assert without_message_deltas(quiet) == without_message_deltas(protocol)
    assert [t["params"]["data"]["event"] for t in of(quiet, "tools")] == [
        "tool-started",
        "tool-finished",
    ]
    # The tool's message has no id in its node's update (the state's reducer names it later):
    # only LangGraph's messages handler, on when messages stream, names it as the node returns it.
    (quiet_tools,) = [u["tools"] for u in of_updates(quiet) if "tools" in u]
    assert quiet_tools["messages"][0]["id"] is None
    (loud_tools,) = [u["tools"] for u in of_updates(loud) if "tools" in u]
    assert loud_tools["messages"][0]["id"] is not None


def of_updates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{e["params"]["node"]: e["params"]["data"]["values"]} for e in of(events, "updates")]


def rendered(events: list[dict[str, Any]], name: str) -> list[Any]:
    """The data of a REST run's rendered SSE events of that name."""
    sse = [e["params"]["data"]["data"] for e in of(events, SIDE)]
    return [r["data"] for r in sse if r["event"] == name]


@pytest.mark.parametrize(
    "modes,late",
    [(["updates"], True), (["updates", "debug"], True), (["updates", "custom"], False)],
)
async def test_a_run_the_server_streams_late_is_rendered_late(modes: list[str], late: bool) -> None:
    """The Python server writes a run's step once the step's writes were applied unless its
    stream is eager (subgraphs, messages, custom): its tool messages then show the name the
    state's reducer gave them, an eager stream's show null. Nothing else moves: the same events
    in the same order, the protocol's written at once."""
    events = await run(compiled(), said("lookup otters"), thread="w", rest=rest(*modes))
    (tools,) = [u["tools"] for u in rendered(events, "updates") if "tools" in u]
    assert (tools["messages"][0]["id"] is not None) is late
    (protocol,) = [u["tools"] for u in of_updates(events) if "tools" in u]
    assert protocol["messages"][0]["id"] is None
    assert [list(u) for u in rendered(events, "updates")] == [["model"], ["tools"], ["model"]]


async def test_an_events_run_shows_a_tools_message_under_the_id_the_state_keeps() -> None:
    """As the server's events (written behind the graph, once the reducer named it) show it."""
    events = await run(compiled(), said("lookup otters"), thread="e", rest=rest("events"))
    evs = rendered(events, "events")
    (ended,) = [e["data"]["output"] for e in evs if e["event"] == "on_tool_end"]
    final = of(events, "values")[-1]["params"]["data"]["messages"]
    (tool,) = [m for m in final if m["type"] == "tool"]
    assert ended["id"] is not None and ended["id"] == tool["id"]
    streamed = [
        e["data"]["chunk"]["messages"][0]["id"]
        for e in evs
        if e["event"] == "on_chain_stream" and e["name"] == "tools"
    ]
    assert streamed == [tool["id"]]


async def test_a_quiet_run_gives_a_message_a_node_returns_once() -> None:
    """A node's own message (approve's, after the resume) comes whole, once, at its node; the
    messages the node was given are not given again."""
    graph = compiled()
    await run(graph, said("interrupt me"), thread="i", rest=rest("values"))
    after = await run(graph, Command(resume="yes"), thread="i", rest=rest("updates"))
    msgs = messages_by_id(after)
    assert list(msgs) == ["approved"]
    (evs,) = msgs.values()
    assert [e["params"]["node"] for e in evs] == ["approve"] * len(evs)
    assert evs[0]["params"]["data"]["role"] == "ai"
    start = after.index(evs[0])
    update = next(e for e in of(after, "updates") if e["params"]["node"] == "approve")
    assert start < after.index(update)


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


class Words(BaseChatModel):
    """Streams its text word by word, yielding to the loop between words (so parallel calls
    interleave), and notes each word it streams in ``streamed``."""

    text: str
    streamed: Any  # the caller's list (a list[str] field would be validated into a copy)

    @property
    def _llm_type(self) -> str:
        return "words"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.text))])

    async def _astream(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> Any:
        for word in re.findall(r"\S+\s*", self.text):
            await asyncio.sleep(0.001)
            self.streamed.append(word)
            yield ChatGenerationChunk(message=AIMessageChunk(content=word))


class Fan(TypedDict):
    messages: Annotated[list, add_messages]
    topic: str


def fan_graph(streamed: list[str]) -> Any:
    async def model(state: Fan, config: RunnableConfig) -> dict[str, Any]:
        text = " ".join([state["topic"]] * 8)
        return {
            "messages": [
                await Words(text=text, streamed=streamed).ainvoke(state["messages"], config)
            ]
        }

    def fan(state: Fan) -> list[Send]:
        return [
            Send("model", {"messages": state["messages"], "topic": t}) for t in ("alpha", "omega")
        ]

    return compiled(
        StateGraph(Fan)
        .add_node("model", model)
        .add_conditional_edges(START, fan, ["model"])
        .add_edge("model", END)
        .compile()
    )


async def test_parallel_tasks_of_one_node_do_not_interleave_their_messages() -> None:
    streamed: list[str] = []
    events = await run(fan_graph(streamed), said("go"))
    # The two model calls did stream at once...
    first = [w.strip() for w in streamed[:4]]
    assert "alpha" in first and "omega" in first, streamed
    # ...and both messages are at [] on node "model", where the protocol tells messages apart
    # only by namespace and node: each is given whole before the next starts.
    msgs = of(events, "messages")
    assert {(tuple(e["params"]["namespace"]), e["params"]["node"]) for e in msgs} == {((), "model")}
    kinds = [e["params"]["data"]["event"] for e in msgs]
    starts = [i for i, k in enumerate(kinds) if k == "message-start"]
    finishes = [i for i, k in enumerate(kinds) if k == "message-finish"]
    assert len(starts) == len(finishes) == 2
    assert starts[0] < finishes[0] < starts[1] < finishes[1]
    by_id = messages_by_id(events)
    final = of(events, "values")[-1]["params"]["data"]["messages"]
    texts = {
        i: "".join(
            e["params"]["data"]["delta"]["text"]
            for e in evs
            if e["params"]["data"]["event"] == "content-block-delta"
        )
        for i, evs in by_id.items()
    }
    assert texts == {m["id"]: m["content"] for m in final if m["type"] == "ai"}
    assert sorted(texts.values()) == [" ".join(["alpha"] * 8), " ".join(["omega"] * 8)]


def test_slots_hold_a_message_until_the_one_open_there_finishes() -> None:
    slots = _Slots()
    a, b, c, d = object(), object(), object(), object()
    here, there = ((), "model"), (("sub:1",), "model")
    assert slots.give(here, a, ["a1"], False) == ["a1"]
    assert slots.give(here, b, ["b1"], False) == []
    assert slots.give(there, d, ["d1"], False) == ["d1"], "another slot is not held"
    assert slots.give(here, b, ["b2"], True) == []
    assert slots.give(here, c, ["c1"], False) == []
    assert slots.give(here, a, ["a2"], False) == ["a2"]
    # a finishes: b (finished meanwhile) is given whole, then c so far; c owns the slot.
    assert slots.give(here, a, ["a3"], True) == ["a3", "b1", "b2", "c1"]
    assert slots.give(here, c, ["c2"], False) == ["c2"]
    assert slots.give(here, object(), ["e1"], True) == []
    assert slots.give(here, c, ["c3"], True) == ["c3", "e1"]
    assert slots.give(here, object(), ["f1"], True) == ["f1"], "a free slot gives at once"
    assert slots.flush() == []
    slots.give(here, a, ["a1"], False)
    slots.give(here, b, ["b1"], False)
    assert slots.flush() == ["b1"]


class Breaks(Words):
    """Streams two words, then raises."""

    async def _astream(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> Any:
        async for chunk in super()._astream(messages, *args, **kw):
            if len(self.streamed) > 2:
                raise RuntimeError("the model broke")
            yield chunk


async def test_a_model_call_that_broke_off_is_closed_where_it_streamed() -> None:
    async def model(state: Fan, config: RunnableConfig) -> dict[str, Any]:
        try:
            await Breaks(text="one two three four", streamed=[]).ainvoke(state["messages"], config)
        except RuntimeError:
            pass  # the node goes on without the model's answer
        return {}

    inner = StateGraph(Fan).add_node("model", model).add_edge(START, "model").compile()
    graph = StateGraph(Fan).add_node("sub", inner).add_edge(START, "sub").add_edge("sub", END)
    events = await run(compiled(graph.compile()), said("go"))
    msgs = of(events, "messages")
    assert [e["params"]["data"]["event"] for e in msgs][0] == "message-start"
    # The error that closes it is at the message's own namespace and node.
    start, error = msgs[0]["params"], msgs[-1]["params"]
    assert error["data"]["event"] == "error" and error["data"]["code"] == "incomplete"
    assert start["namespace"][0].startswith("sub:")
    assert (error["namespace"], error["node"]) == (start["namespace"], start["node"])
