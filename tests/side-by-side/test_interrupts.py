"""Interrupts and Command: a root interrupt resumed, a subgraph's interrupt resumed, resume with an
update, goto, and the approval in LangChain's human-in-the-loop shape answered as the agent chat
UI answers it. Each step's stream, the thread's state and its status are compared.
"""

from __future__ import annotations

from typing import Any

import expected
from sbs import API_VERSION, SSE_IDS, Server, both, events, parts, question

# The interrupt's id, named where it first appears in a scenario's result (sbs.Normaliser): the
# tests assert it is the same id wherever else it comes.
IID = "<hex:at_interrupt.state.interrupts.0.id>"


async def snapshot(client, tid: str, **kwargs: Any) -> dict[str, Any]:
    """The thread's state (all of it) and its status."""
    return {
        "state": await client.threads.get_state(tid, **kwargs),
        "status": (await client.threads.get(tid))["status"],
    }


async def test_interrupt_and_resume(servers: list[Server]) -> None:
    q = "please interrupt"

    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        first = await parts(
            client.runs.stream(tid, "agent", input=question(q), stream_mode=["values", "updates"])
        )
        at_interrupt = await snapshot(client, tid)
        resumed = await parts(
            client.runs.stream(
                tid, "agent", command={"resume": "yes"}, stream_mode=["values", "updates"]
            )
        )
        return {
            "first": first,
            "at_interrupt": at_interrupt,
            "resumed": resumed,
            "after": await snapshot(client, tid),
        }

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    asked = {"question": "Approve the answer?", "options": ["yes", "no"]}
    interrupt = {"id": IID, "value": asked}
    # The interrupt comes as an update and as a values event, after the researcher's; streamed,
    # it carries a response_schema (None), in the state it does not.
    streamed = {"__interrupt__": [{**interrupt, "response_schema": None}]}
    s = r["at_interrupt"]
    assert events(r["first"])[-2:] == ["updates", "values"]
    assert r["first"][-2]["data"] == streamed
    assert r["first"][-1]["data"] == {**s["state"]["values"], **streamed}
    assert s["status"] == "interrupted"
    assert s["state"]["next"] == ["approve"]
    assert s["state"]["interrupts"] == [interrupt]
    assert [(t["name"], t["interrupts"]) for t in s["state"]["tasks"]] == [("approve", [interrupt])]
    assert "approved" not in s["state"]["values"]
    assert [(p["event"], p["data"]) for p in r["resumed"][1:]] == [
        ("values", s["state"]["values"]),
        ("updates", {"approve": {"approved": "yes"}}),
        ("values", {**s["state"]["values"], "approved": "yes"}),
    ]
    assert r["after"]["status"] == "idle"
    assert r["after"]["state"]["next"] == [] and r["after"]["state"]["interrupts"] == []
    assert r["after"]["state"]["values"]["approved"] == "yes"
    assert [
        (m["type"], m["content"]) for m in r["after"]["state"]["values"]["messages"]
    ] == expected.transcript(q)


async def test_interrupt_inside_the_subgraph(servers: list[Server]) -> None:
    """'deep interrupt': the researcher's review node interrupts; the state shows the subgraph's."""
    q = "a deep interrupt please"

    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        first = await parts(
            client.runs.stream(
                tid, "agent", input=question(q), stream_mode=["updates"], stream_subgraphs=True
            )
        )
        at_interrupt = await snapshot(client, tid, subgraphs=True)
        resumed = await parts(
            client.runs.stream(
                tid,
                "agent",
                command={"resume": {"keep": True}},
                stream_mode=["updates"],
                stream_subgraphs=True,
            )
        )
        return {
            "first": first,
            "at_interrupt": at_interrupt,
            "resumed": resumed,
            "after": await snapshot(client, tid),
        }

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    asked = {"question": "Keep the summary?", "from": "researcher"}
    sub_updates = [(p["event"].split("|")[0], p["data"]) for p in r["first"] if "|" in p["event"]]
    assert sub_updates[-1] == (
        "updates",
        {"__interrupt__": [{"id": IID, "value": asked, "response_schema": None}]},
    )
    s = r["at_interrupt"]
    assert s["status"] == "interrupted"
    assert s["state"]["next"] == ["researcher"]
    assert s["state"]["interrupts"] == [{"id": IID, "value": asked}]
    (task,) = s["state"]["tasks"]
    assert task["name"] == "researcher"
    # With subgraphs=True the task carries the subgraph's own state, stopped before review.
    assert task["state"]["next"] == ["review"]
    assert task["state"]["values"]["notes"] == "summarized"
    resumed = [(p["event"].split("|")[0], "|" in p["event"], p["data"]) for p in r["resumed"][1:]]
    assert resumed[0] == ("updates", True, {"review": {"notes": 'reviewed: {"keep":true}'}})
    assert [(name, sub, list(data)) for name, sub, data in resumed[1:]] == [
        ("updates", False, ["researcher"]),
        ("updates", False, ["approve"]),
    ]
    assert r["after"]["status"] == "idle"
    assert [
        (m["type"], m["content"]) for m in r["after"]["state"]["values"]["messages"]
    ] == expected.transcript(q)


async def test_resume_with_an_update_then_goto(servers: list[Server]) -> None:
    """Command(resume, update) on the interrupt; then Command(goto, update) on the ended thread."""
    q = "please interrupt"

    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "agent", input=question(q))
        note = {"role": "ai", "content": "noted", "id": "note-1"}
        resumed = await parts(
            client.runs.stream(
                tid,
                "agent",
                command={"resume": "no", "update": {"messages": [note]}},
                stream_mode=["updates"],
            )
        )
        after_resume = await snapshot(client, tid)
        again = {"role": "user", "content": "summarize again"}
        jumped = await parts(
            client.runs.stream(
                tid,
                "agent",
                command={"goto": "researcher", "update": {"messages": [again]}},
                stream_mode=["updates", "values"],
            )
        )
        return {
            "resumed": resumed,
            "after_resume": after_resume,
            "jumped": jumped,
            "after": await snapshot(client, tid),
        }

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    assert [p["data"] for p in r["resumed"][1:]] == [{"approve": {"approved": "no"}}]
    values = r["after_resume"]["state"]["values"]
    assert values["approved"] == "no"
    assert [(m["type"], m["content"]) for m in values["messages"]] == [
        *expected.transcript(q),
        ("ai", "noted"),
    ]
    assert values["messages"][-1]["id"] == "note-1"
    assert [list(p["data"]) for p in r["jumped"] if p["event"] == "updates"] == [
        ["researcher"],
        ["approve"],
    ]
    final = r["after"]["state"]["values"]
    assert [(m["type"], m["content"]) for m in final["messages"]][-3:] == [
        ("ai", "noted"),
        ("human", "summarize again"),
        ("ai", expected.SUMMARY),
    ]
    assert final["approved"] == "no", "approve asked nothing of 'summarize again'"
    assert r["after"]["status"] == "idle"


async def test_approval_round_trip(servers: list[Server]) -> None:
    """The HITL request the agent chat UI shows with Approve, resumed with its decision."""
    q = "please ask for approval"

    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        waited = await client.runs.wait(tid, "agent", input=question(q))
        at_interrupt = await snapshot(client, tid)
        decision = {"decisions": [{"type": "approve"}]}
        resumed = await client.runs.wait(tid, "agent", command={"resume": decision})
        return {
            "waited": waited,
            "at_interrupt": at_interrupt,
            "resumed": resumed,
            "after": await snapshot(client, tid),
        }

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    request = {
        "action_requests": [
            {"name": "send_answer", "args": {"question": q}, "description": "Send this answer?"}
        ],
        "review_configs": [
            {"action_name": "send_answer", "allowed_decisions": ["approve", "reject"]}
        ],
    }
    # runs.wait answers the interrupted run's values with LangGraph's __interrupt__.
    assert r["waited"]["__interrupt__"] == [{"id": IID, "value": request, "response_schema": None}]
    assert r["at_interrupt"]["state"]["interrupts"] == [{"id": IID, "value": request}]
    assert r["at_interrupt"]["status"] == "interrupted"
    assert r["resumed"]["approved"] == {"decisions": [{"type": "approve"}]}
    assert "__interrupt__" not in r["resumed"]
    assert r["after"]["state"]["values"] == r["resumed"]
    assert r["after"]["status"] == "idle"
