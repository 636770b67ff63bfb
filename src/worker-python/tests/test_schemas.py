"""schemas.py on its own: what the side-by-side suite (test_shapes_vs_reference.py) does not
reach — the xray values it refuses, how deep graphs go, a graph given its own name."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from threadcast_worker import schemas

sys.path.insert(0, str(Path(__file__).parent / "graphs_shapes"))
import graphs  # noqa: E402


@pytest.mark.parametrize("xray", [0, -1, 1.5, "1", "true", None])
def test_graph_json_refuses_xray(xray: Any) -> None:
    with pytest.raises(ValueError):
        schemas.graph_json(graphs.nested, xray)


def test_graph_json_draws_no_runnable_ids() -> None:
    drawing = schemas.graph_json(graphs.agent, True)
    assert {n["id"] for n in drawing["nodes"]} >= {"plan", "review:draft", "review:review"}
    assert all("id" not in (n.get("data") or {}) for n in drawing["nodes"])


@pytest.mark.parametrize(("graph_id", "depth"), [("pyd", 0), ("agent", 1), ("nested", 2)])
def test_xray_depth(graph_id: str, depth: int) -> None:
    graph = getattr(graphs, graph_id)
    assert schemas.xray_depth(graph) == depth
    if depth:
        assert schemas.graph_json(graph, depth) == schemas.graph_json(graph, True)
        assert schemas.graph_json(graph, depth) != schemas.graph_json(graph, False)
    if depth > 1:
        assert schemas.graph_json(graph, depth - 1) != schemas.graph_json(graph, True)


class Named(TypedDict):
    text: str


def test_a_named_graph_keeps_its_name_and_a_default_one_takes_the_id() -> None:
    builder = StateGraph(Named).add_node("n", lambda s: s).add_edge(START, "n")
    named = schemas.graph_schemas("g", builder.compile(name="Writer"))
    assert named["state_schema"]["title"] == "WriterState"
    assert schemas.graph_schemas("g", builder.compile())["state_schema"]["title"] == "g_state"
    assert named["graph_id"] == "g" and named["context_schema"] is None


def test_subgraph_schemas_have_no_graph_id() -> None:
    found = schemas.subgraph_schemas(graphs.nested, recurse=True)
    assert list(found) == ["middle", "middle|inner"]
    for answer in found.values():
        assert set(answer) == {
            "input_schema",
            "output_schema",
            "state_schema",
            "config_schema",
            "context_schema",
        }
        assert answer["state_schema"]["title"] == "LangGraphState"
