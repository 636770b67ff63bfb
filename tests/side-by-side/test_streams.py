"""An answer with a tool call, streamed in each stream mode alone and in several at once, with and
without subgraphs; a graph writing custom stream data. The whole stream is compared, then the
thread's state and record after the run.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import expected
from sbs import API_VERSION, SSE_IDS, Server, both, events, parts, question

MODES = [
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
]


async def run_streamed(client, server: Server, q: str, **kwargs: Any) -> dict[str, Any]:
    """A run of the agent on a new thread, streamed; the thread's state and record after it."""
    thread = await client.threads.create()
    tid = thread["thread_id"]
    got = await parts(client.runs.stream(tid, "agent", input=question(q), **kwargs))
    return {
        "parts": got,
        "state": await client.threads.get_state(tid),
        "thread": await client.threads.get(tid),
    }


def ai_texts(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values["messages"] if m["type"] == "ai"]


def assert_final_state(result: dict[str, Any], q: str) -> None:
    values = result["state"]["values"]
    assert [(m["type"], m["content"]) for m in values["messages"]] == expected.transcript(q)
    assert values["messages"][1]["tool_calls"] == [
        {"name": "search", "args": {"query": q}, "id": "call_1", "type": "tool_call"}
    ]
    assert result["state"]["next"] == []
    assert result["thread"]["status"] == "idle"
    assert result["thread"]["values"] == values


def streamed_text(chunks: list[dict[str, Any]]) -> dict[str, str]:
    """Text per message id, from message chunks in the order they came."""
    texts: dict[str, str] = {}
    for c in chunks:
        texts[c["id"]] = texts.get(c["id"], "") + c["content"]
    return texts


def tool_call_chunks(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [tc for c in chunks for tc in c.get("tool_call_chunks") or []]


async def test_values(servers: list[Server]) -> None:
    q = "what is redis"
    r = await both(
        servers, lambda c, s: run_streamed(c, s, q, stream_mode="values"), [API_VERSION, SSE_IDS]
    )
    assert events(r["parts"]) == ["metadata"] + ["values"] * 5
    assert r["parts"][0]["data"] == {"run_id": "<id:parts.0.data.run_id>", "attempt": 1}
    # One values event a step that wrote: the input, model, tools, model, researcher (approve
    # writes nothing on a question that asks for no approval).
    assert [len(p["data"]["messages"]) for p in r["parts"][1:]] == [1, 2, 3, 4, 5]
    assert r["parts"][-1]["data"] == r["state"]["values"]
    assert_final_state(r, q)


async def test_updates(servers: list[Server]) -> None:
    q = "what is redis"
    r = await both(
        servers, lambda c, s: run_streamed(c, s, q, stream_mode="updates"), [API_VERSION, SSE_IDS]
    )
    assert events(r["parts"]) == ["metadata"] + ["updates"] * 5
    assert [list(p["data"]) for p in r["parts"][1:]] == [
        ["model"],
        ["tools"],
        ["model"],
        ["researcher"],
        ["approve"],
    ]
    assert r["parts"][-1]["data"] == {"approve": None}
    assert [m["content"] for m in r["parts"][4]["data"]["researcher"]["messages"]][
        -1
    ] == expected.SUMMARY
    assert_final_state(r, q)


async def test_messages_tuple(servers: list[Server]) -> None:
    q = "what is redis"
    r = await both(
        servers,
        lambda c, s: run_streamed(c, s, q, stream_mode="messages-tuple"),
        [API_VERSION, SSE_IDS],
    )
    assert set(events(r["parts"][1:])) == {"messages"}
    pairs = [p["data"] for p in r["parts"][1:]]
    ai = [c for c, _ in pairs if c["type"] == "AIMessageChunk"]
    # The root model's tokens as it streamed them (its tool call chunks carry no text), each of
    # its two answers closed by an empty chunk at position "last".
    assert [c["content"] for c in ai if c["content"]] == expected.tokens(q)
    assert [c["chunk_position"] for c in ai].count("last") == 2
    # The call's arguments, '{"query":"what is redis"}', in three chunks as the model cut them.
    assert [c["args"] for c in tool_call_chunks(ai)] == ['{"query":', '"what is ', 'redis"}']
    assert (tool_call_chunks(ai)[0]["name"], tool_call_chunks(ai)[0]["id"]) == ("search", "call_1")
    assert list(streamed_text(ai).values()) == [expected.SEARCHING, expected.answer(q)]
    assert {m["langgraph_node"] for c, m in pairs if c["type"] == "AIMessageChunk"} == {"model"}
    # Messages not streamed come whole: the tool's result, and (without stream_subgraphs) the
    # subgraph's summary from the root node that ran the subgraph.
    whole = [
        (c["type"], c["content"], m["langgraph_node"])
        for c, m in pairs
        if c["type"] != "AIMessageChunk"
    ]
    assert whole == [("tool", expected.found(q), "tools"), ("ai", expected.SUMMARY, "researcher")]
    assert_final_state(r, q)


async def test_messages(servers: list[Server]) -> None:
    q = "what is redis"
    r = await both(
        servers, lambda c, s: run_streamed(c, s, q, stream_mode="messages"), [API_VERSION, SSE_IDS]
    )
    names = events(r["parts"])
    assert set(names[1:]) == {"messages/metadata", "messages/partial", "messages/complete"}
    partial = [p["data"][0] for p in r["parts"] if p["event"] == "messages/partial"]
    # Each partial is the message so far: its last one per id is the whole text.
    final = {}
    for m in partial:
        final[m["id"]] = m
    # Without stream_subgraphs the subgraph's model is not streamed.
    assert [m["content"] for m in final.values()] == [expected.SEARCHING, expected.answer(q)]
    assert list(final.values())[0]["tool_calls"] == [
        {"name": "search", "args": {"query": q}, "id": "call_1", "type": "tool_call"}
    ]
    # The messages not streamed come complete: the tool's result and, without stream_subgraphs,
    # the subgraph's summary (from the root node that ran the subgraph); each message after its
    # messages/metadata.
    complete = [m for p in r["parts"] if p["event"] == "messages/complete" for m in p["data"]]
    assert [(m["type"], m["content"]) for m in complete] == [
        ("tool", expected.found(q)),
        ("ai", expected.SUMMARY),
    ]
    collapsed = [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]
    assert collapsed == [
        "metadata",
        "messages/metadata",
        "messages/partial",
        "messages/metadata",
        "messages/complete",
        "messages/metadata",
        "messages/partial",
        "messages/metadata",
        "messages/complete",
    ]
    assert_final_state(r, q)


async def test_custom_on_a_graph_that_writes_none(servers: list[Server]) -> None:
    q = "what is redis"
    r = await both(
        servers, lambda c, s: run_streamed(c, s, q, stream_mode="custom"), [API_VERSION, SSE_IDS]
    )
    assert events(r["parts"]) == ["metadata"]
    assert_final_state(r, q)


async def test_events(servers: list[Server]) -> None:
    q = "what is redis"
    r = await both(
        servers, lambda c, s: run_streamed(c, s, q, stream_mode="events"), [API_VERSION, SSE_IDS]
    )
    evs = [p["data"] for p in r["parts"][1:]]
    assert set(events(r["parts"][1:])) == {"events"}
    assert evs[0]["event"] == "on_chain_start" and evs[0]["name"] == "agent"
    assert evs[-1]["event"] == "on_chain_end" and evs[-1]["name"] == "agent"
    stream = [e["data"]["chunk"] for e in evs if e["event"] == "on_chat_model_stream"]
    assert "".join(c["content"] for c in stream) == (
        expected.SEARCHING + expected.answer(q) + expected.SUMMARY
    )
    tools = [(e["event"], e["name"]) for e in evs if e["event"].startswith("on_tool")]
    assert tools == [("on_tool_start", "search"), ("on_tool_end", "search")]
    starts = [
        e["name"]
        for e in evs
        if e["event"] == "on_chain_start" and e["metadata"].get("langgraph_node") == e["name"]
    ]
    assert starts == ["model", "tools", "model", "researcher", "summarize", "review", "approve"]
    assert_final_state(r, q)


async def test_debug(servers: list[Server]) -> None:
    q = "what is redis"
    r = await both(
        servers, lambda c, s: run_streamed(c, s, q, stream_mode="debug"), [API_VERSION, SSE_IDS]
    )
    chunks = [p["data"] for p in r["parts"][1:]]
    assert [(c["type"], c["step"]) for c in chunks] == [
        ("checkpoint", -1),
        ("checkpoint", 0),
        ("task", 1),
        ("task_result", 1),
        ("checkpoint", 1),
        ("task", 2),
        ("task_result", 2),
        ("checkpoint", 2),
        ("task", 3),
        ("task_result", 3),
        ("checkpoint", 3),
        ("task", 4),
        ("task_result", 4),
        ("checkpoint", 4),
        ("task", 5),
        ("task_result", 5),
        ("checkpoint", 5),
    ]
    tasks = [c["payload"]["name"] for c in chunks if c["type"] == "task"]
    assert tasks == ["model", "tools", "model", "researcher", "approve"]
    checkpoints = [c["payload"] for c in chunks if c["type"] == "checkpoint"]
    # Each checkpoint's parent is the one before it.
    for before, after in zip(checkpoints, checkpoints[1:], strict=False):
        assert after["parent_config"] == before["config"]
    assert_final_state(r, q)


async def test_tasks(servers: list[Server]) -> None:
    q = "what is redis"
    r = await both(
        servers, lambda c, s: run_streamed(c, s, q, stream_mode="tasks"), [API_VERSION, SSE_IDS]
    )
    tasks = [p["data"] for p in r["parts"][1:]]
    assert [(t["name"], "result" in t) for t in tasks] == [
        ("model", False),
        ("model", True),
        ("tools", False),
        ("tools", True),
        ("model", False),
        ("model", True),
        ("researcher", False),
        ("researcher", True),
        ("approve", False),
        ("approve", True),
    ]
    assert all(t["error"] is None and t["interrupts"] == [] for t in tasks if "result" in t)
    assert_final_state(r, q)


async def test_checkpoints(servers: list[Server]) -> None:
    q = "what is redis"
    r = await both(
        servers,
        lambda c, s: run_streamed(c, s, q, stream_mode="checkpoints"),
        [API_VERSION, SSE_IDS],
    )
    cps = [p["data"] for p in r["parts"][1:]]
    assert [(c["metadata"]["step"], c["metadata"]["source"], c["next"]) for c in cps] == [
        (-1, "input", ["__start__"]),
        (0, "loop", ["model"]),
        (1, "loop", ["tools"]),
        (2, "loop", ["model"]),
        (3, "loop", ["researcher"]),
        (4, "loop", ["approve"]),
        (5, "loop", []),
    ]
    assert cps[-1]["values"] == r["state"]["values"]
    assert r["state"]["checkpoint"] == {
        "checkpoint_id": cps[-1]["config"]["configurable"]["checkpoint_id"],
        "checkpoint_ns": "",
        "thread_id": r["thread"]["thread_id"],
    }
    assert_final_state(r, q)


@pytest.mark.parametrize(
    "modes",
    [
        ["values", "messages-tuple", "updates"],
        MODES,
    ],
)
async def test_modes_combined(servers: list[Server], modes: list[str]) -> None:
    q = "what is redis"
    r = await both(
        servers, lambda c, s: run_streamed(c, s, q, stream_mode=modes), [API_VERSION, SSE_IDS]
    )
    names = events(r["parts"])
    expected_names = {"metadata", *modes} - {"messages", "messages-tuple"}
    # Asked for both, the server sends the messages as tuples only.
    if "messages-tuple" in modes:
        expected_names.add("messages")
    elif "messages" in modes:
        expected_names |= {"messages/metadata", "messages/partial", "messages/complete"}
    expected_names.discard("custom")  # the agent writes no custom data
    assert set(names) == expected_names
    assert names.count("values") == (5 if "values" in modes else 0)
    assert names.count("updates") == (5 if "updates" in modes else 0)
    assert_final_state(r, q)


async def test_subgraphs(servers: list[Server]) -> None:
    """stream_subgraphs: the researcher's own events come named with its namespace."""
    q = "what is redis"
    modes = ["values", "updates", "messages-tuple", "debug", "tasks", "checkpoints", "custom"]
    r = await both(
        servers,
        lambda c, s: run_streamed(c, s, q, stream_mode=modes, stream_subgraphs=True),
        [API_VERSION, SSE_IDS],
    )
    names = events(r["parts"])
    sub = [n.split("|", 1) for n in names if "|" in n]
    assert sorted({mode for mode, _ in sub}) == [
        "checkpoints",
        "debug",
        "messages",
        "tasks",
        "updates",
        "values",
    ]
    namespaces = {ns for _, ns in sub}
    assert len(namespaces) == 1 and re.fullmatch(r"researcher:<id:[^>]+>", namespaces.pop())
    sub_updates = [p["data"] for p in r["parts"] if p["event"].startswith("updates|")]
    assert [list(u) for u in sub_updates] == [["summarize"], ["review"]]
    assert sub_updates[1] == {"review": {"notes": "reviewed"}}
    sub_values = [p["data"] for p in r["parts"] if p["event"].startswith("values|")]
    assert [v.get("notes") for v in sub_values] == [None, "summarized", "reviewed"]
    sub_text = "".join(
        p["data"][0]["content"] for p in r["parts"] if p["event"].startswith("messages|")
    )
    assert sub_text == expected.SUMMARY
    assert_final_state(r, q)


async def test_custom_stream_data(servers: list[Server]) -> None:
    """A sync and an async node write custom data (dicts and a string) with get_stream_writer."""

    async def scenario(client, server):
        thread = await client.threads.create()
        tid = thread["thread_id"]
        got = await parts(
            client.runs.stream(
                tid, "reporter", input={"topic": "seals"}, stream_mode=["custom", "updates"]
            )
        )
        return {"parts": got, "state": await client.threads.get_state(tid)}

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    assert [(p["event"], p["data"]) for p in r["parts"][1:]] == [
        ("custom", {"progress": 1, "of": 3, "topic": "seals"}),
        ("custom", {"progress": 2, "of": 3, "topic": "seals"}),
        ("custom", {"progress": 3, "of": 3, "topic": "seals"}),
        ("updates", {"gather": {"report": "gathered seals"}}),
        ("custom", "a plain string chunk"),
        ("custom", {"published": "gathered seals"}),
        ("updates", {"publish": {"report": "gathered seals, published"}}),
    ]
    assert r["state"]["values"] == {"topic": "seals", "report": "gathered seals, published"}
