"""rest.py on its own: the bridge params' readers (what they give LangGraph, and the
invalid_argument each bad field gets, naming it) and the shapes' corners a run does not reach.
Side by side with the Python server: test_shapes_vs_reference.py."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.types import Command, Interrupt, PregelTask, Send, StateSnapshot, StateUpdate

from threadcast_worker import rest
from threadcast_worker.answers import ProtocolError

T = "thread-1"


def refused(read: Any, *args: Any, naming: str, **kw: Any) -> str:
    with pytest.raises(ProtocolError) as e:
        read(*args, **kw)
    assert e.value.code == "invalid_argument"
    assert naming in str(e.value), f"{str(e.value)!r} should name {naming!r}"
    return str(e.value)


# ---- rest.state.get ----------------------------------------------------------------------------


def test_state_get_reads_the_head_with_the_thread_alone() -> None:
    read = rest.read_state_get(T, {"thread_id": T})
    assert read == rest.StateRead({"configurable": {"thread_id": T}}, False)


def test_state_get_at_a_checkpoint_id_has_no_namespace() -> None:
    read = rest.read_state_get(T, {"checkpoint_id": "c1"})
    assert read.config == {"configurable": {"checkpoint_id": "c1", "thread_id": T}}


def test_state_get_checkpoint_members_and_the_thread_wins() -> None:
    checkpoint = {
        "thread_id": "another",
        "checkpoint_ns": "review:1",
        "checkpoint_id": "c2",
        "checkpoint_map": {"": "c0"},
        "unknown": "left out",
    }
    read = rest.read_state_get(T, {"checkpoint": checkpoint, "subgraphs": True})
    assert read.config == {
        "configurable": {
            "thread_id": T,
            "checkpoint_ns": "review:1",
            "checkpoint_id": "c2",
            "checkpoint_map": {"": "c0"},
        }
    }
    assert read.subgraphs is True


@pytest.mark.parametrize(
    ("given", "expect"),
    [(True, True), ("true", True), ("True", True), (False, False), ("false", False), ("1", False)],
)
def test_subgraphs_as_a_body_or_a_query_string_says_it(given: Any, expect: bool) -> None:
    assert rest.read_state_get(T, {"subgraphs": given}).subgraphs is expect


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"checkpoint": "c1"}, "checkpoint must be an object"),
        ({"checkpoint": {"checkpoint_id": 5}}, "checkpoint.checkpoint_id"),
        ({"checkpoint": {"checkpoint_ns": ["a"]}}, "checkpoint.checkpoint_ns"),
        ({"checkpoint": {"checkpoint_map": ["a"]}}, "checkpoint.checkpoint_map"),
        ({"checkpoint_id": 7}, "checkpoint_id"),
        ({"subgraphs": 1}, "subgraphs"),
    ],
)
def test_state_get_refuses(params: dict[str, Any], field: str) -> None:
    refused(rest.read_state_get, T, params, naming=field)


# ---- rest.state.update -------------------------------------------------------------------------


def test_state_update_config_is_the_servers() -> None:
    write = rest.read_state_update(
        T, {"values": {"a": 1}, "as_node": "plan", "checkpoint_id": "c1"}, graph_id="agent"
    )
    assert write.config == {
        "configurable": {
            "checkpoint_id": "c1",
            "thread_id": T,
            "graph_id": "agent",
            "checkpoint_ns": "",
        }
    }
    assert (write.values, write.as_node) == ({"a": 1}, "plan")


def test_state_update_of_a_namespace_keeps_it_and_an_empty_id_is_none() -> None:
    write = rest.read_state_update(
        T, {"values": [{"a": 1}], "checkpoint_id": "", "checkpoint": {"checkpoint_ns": "x:1"}}
    )
    assert write.config == {"configurable": {"checkpoint_ns": "x:1", "thread_id": T}}
    assert write.values == [{"a": 1}] and write.as_node is None
    assert rest.read_state_update(T, {}).values is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"values": "text"}, "values"),
        ({"values": 3}, "values"),
        ({"as_node": 5}, "as_node"),
        ({"checkpoint": {"checkpoint_id": 1}}, "checkpoint.checkpoint_id"),
        ({"checkpoint_id": ["c"]}, "checkpoint_id"),
    ],
)
def test_state_update_refuses(params: dict[str, Any], field: str) -> None:
    refused(rest.read_state_update, T, params, naming=field)


# ---- rest.history ------------------------------------------------------------------------------


def test_history_defaults_to_one_state_of_the_root() -> None:
    read = rest.read_history(T, {})
    assert read == rest.HistoryRead(
        {"configurable": {"thread_id": T, "checkpoint_ns": ""}}, 1, None, None
    )


@pytest.mark.parametrize(("given", "limit"), [(10, 10), ("5", 5), (2.0, 2), (1000, 1000), (1, 1)])
def test_history_limit(given: Any, limit: int) -> None:
    assert rest.read_history(T, {"limit": given}).limit == limit


@pytest.mark.parametrize("given", [0, 1001, -1, "x", "2.5", 1.5, True, [3], {}])
def test_history_limit_refused(given: Any) -> None:
    message = refused(rest.read_history, T, {"limit": given}, naming="limit")
    assert "1 to 1000" in message


@pytest.mark.parametrize(
    "given",
    ["c1", {"configurable": {"checkpoint_id": "c1"}}, {"checkpoint_id": "c1", "thread_id": T}],
)
def test_history_before(given: Any) -> None:
    assert rest.read_history(T, {"before": given}).before == {
        "configurable": {"checkpoint_id": "c1"}
    }


def test_history_before_empty_is_none() -> None:
    assert rest.read_history(T, {"before": ""}).before is None


@pytest.mark.parametrize("given", [5, ["c1"], {"configurable": {}}, {"configurable": {"x": 1}}, {}])
def test_history_before_refused(given: Any) -> None:
    refused(rest.read_history, T, {"before": given}, naming="before")


def test_history_metadata_and_namespace() -> None:
    read = rest.read_history(
        T, {"metadata": {"step": 1}, "checkpoint": {"checkpoint_ns": "a:1", "thread_id": "x"}}
    )
    assert read.filter == {"step": 1}
    assert read.config == {"configurable": {"thread_id": T, "checkpoint_ns": "a:1"}}


@pytest.mark.parametrize("given", ["x", ["step"], 1])
def test_history_metadata_refused(given: Any) -> None:
    refused(rest.read_history, T, {"metadata": given}, naming="metadata")


# ---- command -----------------------------------------------------------------------------------


def test_command_resume_update_goto() -> None:
    c = rest.to_command({"resume": {"id1": "yes"}, "update": {"a": 1}, "goto": "plan"})
    assert isinstance(c, Command)
    assert (c.resume, c.update, list(c.goto)) == ({"id1": "yes"}, {"a": 1}, ["plan"])


def test_command_goto_sends_and_update_pairs() -> None:
    c = rest.to_command(
        {"goto": [{"node": "a", "input": {"x": 1}}, "b"], "update": [["k", 1], ["m", 2]]}
    )
    send, name = c.goto
    assert isinstance(send, Send) and (send.node, send.arg) == ("a", {"x": 1})
    assert name == "b"
    assert c.update == [("k", 1), ("m", 2)]
    one = rest.to_command({"goto": {"node": "a", "input": None}})
    assert isinstance(one.goto[0], Send) and one.goto[0].arg is None


def test_command_without_goto_has_none() -> None:
    c = rest.to_command({"resume": "r"})
    assert not c.goto and c.update is None and c.resume == "r"


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ("resume", "command must be an object"),
        (["resume"], "command must be an object"),
        ({"goto": 5}, "command.goto"),
        ({"goto": {"node": "a"}}, "command.goto"),
        ({"goto": {"node": 1, "input": 1}}, "command.goto"),
        ({"goto": ["a", {"input": 1}]}, "command.goto[1]"),
        ({"update": "x"}, "command.update"),
    ],
)
def test_command_refused(given: Any, field: str) -> None:
    refused(rest.to_command, given, naming=field)


# ---- rest.state.bulk ---------------------------------------------------------------------------


def test_bulk_supersteps() -> None:
    bulk = rest.read_bulk(
        T,
        {
            "supersteps": [
                {"updates": [{"values": {"a": 1}, "as_node": "x"}, {"as_node": "y"}]},
                {"updates": [{"values": {"a": 2}, "command": {"goto": "z"}, "as_node": "x"}]},
                {"updates": [{"values": [{"a": 3}], "command": {}, "as_node": "x"}]},
            ]
        },
        graph_id="g",
    )
    assert bulk.config == {"configurable": {"thread_id": T, "checkpoint_ns": "", "graph_id": "g"}}
    first, second, third = bulk.supersteps
    assert first == [StateUpdate({"a": 1}, "x"), StateUpdate(None, "y")]
    # A command is taken over the values; an empty one is none.
    assert isinstance(second[0].values, Command) and list(second[0].values.goto) == ["z"]
    assert third == [StateUpdate([{"a": 3}], "x")]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "supersteps"),
        ({"supersteps": []}, "supersteps"),
        ({"supersteps": {"updates": []}}, "supersteps"),
        ({"supersteps": [{"updates": []}]}, "supersteps[0].updates"),
        ({"supersteps": ["x"]}, "supersteps[0].updates"),
        ({"supersteps": [{"updates": ["x"]}]}, "supersteps[0].updates[0]"),
        ({"supersteps": [{"updates": [{"values": {}}]}]}, "supersteps[0].updates[0].as_node"),
        (
            {"supersteps": [{"updates": [{"values": "v", "as_node": "a"}]}]},
            "supersteps[0].updates[0].values",
        ),
        (
            {
                "supersteps": [
                    {"updates": [{"as_node": "a"}]},
                    {"updates": [{"as_node": "a", "command": {"goto": 3}}]},
                ]
            },
            "supersteps[1].updates[0].command.goto",
        ),
    ],
)
def test_bulk_refused(params: dict[str, Any], field: str) -> None:
    refused(rest.read_bulk, T, params, naming=field)


# ---- shapes ------------------------------------------------------------------------------------


def config(checkpoint_id: str, **more: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": T, "checkpoint_id": checkpoint_id, **more}}


def snapshot(**over: Any) -> StateSnapshot:
    fields = {
        "values": {"a": 1},
        "next": ("n",),
        "config": config("c2", checkpoint_ns=""),
        "metadata": {"checkpoint_ns": "", "step": 1},
        "created_at": "2024-01-01T00:00:00+00:00",
        "parent_config": config("c1", checkpoint_ns=""),
        "tasks": (),
        "interrupts": (),
    }
    return StateSnapshot(**{**fields, **over})


def test_checkpoint_of_has_only_the_members_the_config_has() -> None:
    assert rest.checkpoint_of(None) is None
    assert rest.checkpoint_of({"configurable": {"thread_id": T}}) is None
    assert rest.checkpoint_of({"configurable": {"checkpoint_id": "c"}}) is None
    assert rest.checkpoint_of(config("c")) == {"checkpoint_id": "c", "thread_id": T}
    assert rest.checkpoint_of(config("c", checkpoint_ns=None, checkpoint_map={"": "c0"})) == {
        "checkpoint_id": "c",
        "thread_id": T,
        "checkpoint_ns": "",
        "checkpoint_map": {"": "c0"},
    }


def test_the_root_states_empty_namespace_is_dropped_from_its_metadata_only() -> None:
    assert rest.thread_state(snapshot())["metadata"] == {"step": 1}
    assert rest.thread_state(snapshot(), history=True)["metadata"] == {
        "checkpoint_ns": "",
        "step": 1,
    }
    assert rest.thread_state(snapshot(metadata=None))["metadata"] is None


def test_tasks_interrupts_and_deprecated_ids() -> None:
    waiting = Interrupt(value={"q": 1}, id="i1")
    schema = {"type": "string"}
    task = PregelTask(
        "t1",
        "review",
        ("__pregel_pull", "review"),
        interrupts=(waiting, Interrupt("v", id="i2", response_schema=schema)),
        state={"configurable": {"thread_id": T, "checkpoint_ns": "review:t1"}},
    )
    state = rest.thread_state(snapshot(tasks=(task,), interrupts=(waiting,)))
    assert state["tasks"] == [
        {
            "id": "t1",
            "name": "review",
            "path": ["__pregel_pull", "review"],
            "error": None,
            "interrupts": [
                {"id": "i1", "value": {"q": 1}},
                {"id": "i2", "value": "v", "response_schema": schema},
            ],
            "checkpoint": {"thread_id": T, "checkpoint_ns": "review:t1"},
            "state": None,
            "result": None,
        }
    ]
    assert state["interrupts"] == [{"id": "i1", "value": {"q": 1}}]
    assert (state["checkpoint_id"], state["parent_checkpoint_id"]) == ("c2", "c1")
    orphan = rest.thread_state(snapshot(parent_config=None))
    assert orphan["parent_checkpoint"] is None and orphan["parent_checkpoint_id"] is None


def test_a_nested_state_keeps_its_namespace_and_interrupts() -> None:
    inner = snapshot(
        config=config("s1", checkpoint_ns="review:t1"),
        metadata={"checkpoint_ns": "review:t1", "step": 1},
        interrupts=(Interrupt("v", id="i1"),),
    )
    task = PregelTask("t1", "review", ("__pregel_pull", "review"), state=inner)
    state = rest.thread_state(snapshot(tasks=(task,)))
    nested = state["tasks"][0]["state"]
    assert state["tasks"][0]["checkpoint"] is None
    assert nested["metadata"]["checkpoint_ns"] == "review:t1"
    assert nested["interrupts"] == [{"id": "i1", "value": "v"}]
    assert nested["checkpoint"]["checkpoint_ns"] == "review:t1"


def test_answers_of_updates() -> None:
    done = {"configurable": {"thread_id": T, "checkpoint_ns": "", "checkpoint_id": "c3"}}
    assert rest.update_answer(done) == {
        "checkpoint": done["configurable"],
        "configurable": done["configurable"],
        "checkpoint_id": "c3",
    }
    assert rest.bulk_answer(done) == {"checkpoint": done["configurable"]}


def test_empty_state_is_a_fresh_dict() -> None:
    first = rest.empty_state()
    first["values"]["x"] = 1
    assert rest.empty_state()["values"] == {}
