"""config.py: a run's config, context and metadata layered as the Python server layers them (the
side-by-side suite checks the same against the server's own streams)."""

from __future__ import annotations

import uuid

import pytest

from threadcast_worker import config as cfg

IDS = {"run_id": "r1", "thread_id": "t1", "graph_id": "agent", "assistant_id": "a1"}


def test_assistant_layer() -> None:
    defaults = {"configurable": {"k": 1}, "context": {"c": 2}, "tags": ["x"]}
    system = cfg.assistant_layer({"assistant_id": "agent"}, "agent", defaults)
    assert system == {
        "config": {"configurable": {"k": 1}, "tags": ["x"]},
        "context": {"c": 2},
        "metadata": {"created_by": "system"},
    }
    by_uuid = cfg.assistant_layer(
        {"assistant_id": cfg.system_assistant_id("agent")}, "agent", defaults
    )
    assert by_uuid == system
    given = cfg.assistant_layer(
        {"assistant_id": "x", "assistant": {"config": {"a": 1}, "metadata": {"m": 1}}}, "agent"
    )
    assert given == {"config": {"a": 1}, "context": None, "metadata": {"m": 1}}
    assert cfg.assistant_layer({"assistant_id": "other"}, "agent") == {
        "config": {},
        "context": None,
        "metadata": {},
    }


def test_layers_win_in_order() -> None:
    assistant = {
        "config": {"configurable": {"a": "assistant", "b": "assistant"}, "tags": ["a"]},
        "context": {"x": 1, "y": 1},
        "metadata": {"created_by": "system", "who": "assistant"},
    }
    thread = {"config": {"configurable": {"b": "thread", "c": "thread"}}, "metadata": {"t": 1}}
    run = {
        "config": {"configurable": {"c": "run"}, "recursion_limit": 7},
        "metadata": {"who": "run"},
        "checkpoint_id": "cp",
        "after_seconds": 3,
    }
    config, context = cfg.merge_run(assistant, thread, run, IDS)
    c = config["configurable"]
    assert (c["a"], c["b"], c["c"]) == ("assistant", "thread", "run")
    assert c["checkpoint_id"] == "cp" and c["__after_seconds__"] == 3
    assert {k: c[k] for k in IDS} == IDS
    assert c["user_id"] == "" and c["langgraph_auth_user_id"] == ""
    assert config["tags"] == ["a"] and config["recursion_limit"] == 7
    # Metadata: assistant's, thread's (with graph_id, assistant_id), run's, in that order.
    assert list(config["metadata"].items()) == [
        ("created_by", "system"),
        ("who", "run"),
        ("t", 1),
        ("graph_id", "agent"),
        ("assistant_id", "a1"),
    ]
    # No run context: the run's configurable is its context, under the assistant's.
    assert context == {"x": 1, "y": 1, "c": "run"}
    # The layers are not shared with the run.
    c["a"] = "changed"
    assert assistant["config"]["configurable"]["a"] == "assistant"


def test_context_becomes_configurable() -> None:
    config, context = cfg.merge_run(
        {"config": {}, "context": None, "metadata": {}},
        None,
        {"context": {"model": "m"}, "config": {"configurable": {}}},
        IDS,
    )
    assert context == {"model": "m"}
    assert config["configurable"]["model"] == "m"
    with pytest.raises(cfg.ConfigError, match="both configurable and context"):
        cfg.merge_run(
            {"config": {}, "metadata": {}},
            None,
            {"context": {"a": 1}, "config": {"configurable": {"b": 2}}},
            IDS,
        )


def test_user_id_from_the_first_layer_that_has_one() -> None:
    thread = {"config": {"configurable": {"user_id": "from-thread"}}}
    config, _ = cfg.merge_run({"config": {}, "metadata": {}}, thread, {}, IDS)
    assert config["configurable"]["user_id"] == "from-thread"


def test_the_request_a_run_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """langgraph_request_id and __request_start_time_ms__, as the server puts them in every run's
    configurable: the caller's when it knows them; else an id named after the run (the same on
    every attempt and every worker) and the time the run is planned."""
    layers = ({"config": {}, "metadata": {}}, None)
    given = {**IDS, "request_id": "req-1", "request_start_ms": 1700000000000}
    config, _ = cfg.merge_run(*layers, {}, given)
    c = config["configurable"]
    assert (c["langgraph_request_id"], c["__request_start_time_ms__"]) == ("req-1", 1700000000000)

    monkeypatch.setattr(cfg.time, "time", lambda: 1800000000.5)
    config, _ = cfg.merge_run(*layers, {}, IDS)
    again, _ = cfg.merge_run(*layers, {}, dict(IDS))
    named = config["configurable"]["langgraph_request_id"]
    assert uuid.UUID(named) == uuid.uuid5(cfg.REQUEST_NAMESPACE, "r1")
    assert again["configurable"]["langgraph_request_id"] == named
    other, _ = cfg.merge_run(*layers, {}, {**IDS, "run_id": "r2"})
    assert other["configurable"]["langgraph_request_id"] != named
    assert config["configurable"]["__request_start_time_ms__"] == 1800000000500
    # A request id the run's own configurable gives wins, as on the server.
    mine, _ = cfg.merge_run(
        *layers, {"config": {"configurable": {"langgraph_request_id": "x"}}}, given
    )
    assert mine["configurable"]["langgraph_request_id"] == "x"


def test_filter_context() -> None:
    schema = {"properties": {"keep": {"type": "string"}}}
    configurable = {"keep": "k", "drop": "d", "other": 1}
    kept = cfg.filter_context({"keep": "k", "drop": "d"}, schema, configurable, provided=True)
    assert kept == {"keep": "k"}
    assert configurable == {"keep": "k", "other": 1}
    untouched = {"drop": "d"}
    assert cfg.filter_context({"drop": "d"}, schema, untouched, provided=False) == {}
    assert untouched == {"drop": "d"}
    assert cfg.filter_context({"a": 1}, None, {}, provided=True) == {"a": 1}


def test_stream_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_API_URL", "http://gw")
    out = cfg.stream_metadata({"run_attempt": 9, "x": 1}, attempt=2)
    assert list(out) == [
        "run_attempt",
        "x",
        "langgraph_version",
        "langgraph_api_version",
        "langgraph_plan",
        "langgraph_host",
        "langgraph_api_url",
    ]
    assert out["run_attempt"] == 2 and out["langgraph_api_url"] == "http://gw"
    # What `langgraph dev` (and a licensed Python server) says: every feature is on.
    assert (out["langgraph_plan"], out["langgraph_host"]) == ("enterprise", "self-hosted")
    monkeypatch.delenv("LANGGRAPH_API_URL")
    assert cfg.stream_metadata({})["langgraph_api_url"] is None
    run_id = str(uuid.uuid4())
    first = cfg.run_config({"metadata": {}}, run_id)
    assert first["run_id"] == uuid.UUID(run_id)
    assert "run_id" not in cfg.run_config({"metadata": {}}, run_id, attempt=2)
