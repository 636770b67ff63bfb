"""What a Python graph's workers register for the REST API's assistant routes (protocol/README.md,
"REST runs and state": the ``ainfo`` hash's ``graph``, ``graph_xray``, ``schemas`` and
``subgraphs``), as LangGraph's Python server (``langgraph-api``) answers
``GET /assistants/{id}/graph[?xray=]``, ``/schemas`` and ``/subgraphs[/{namespace}][?recurse=]``.
No I/O: every answer is made from the compiled graph, through LangGraph's and LangChain's own
schema and drawing methods, and is JSON-ready.

The Python server serves a graph left with LangGraph's default name (``"LangGraph"``) under its
graph id: the state schema's title (and the input's or output's, where LangGraph names them
after the graph) are ``<graph id>_state`` and the like. Its subgraphs keep their own names."""

from __future__ import annotations

import warnings
from typing import Any

import orjson
from langchain_core.utils.pydantic import create_model_v2
from langgraph.pregel import Pregel
from pydantic import TypeAdapter

from threadcast_worker import serde

DEFAULT_NAME = "LangGraph"
"""The name LangGraph gives a compiled graph that was given none."""

# Configurable keys LangGraph itself sets, left out of the config schema (the Python server's).
_RESERVED_CONFIGURABLE = (
    "__pregel_checkpointer",
    "__pregel_store",
    "checkpoint_id",
    "checkpoint_ns",
    "thread_id",
)


def _json(value: Any) -> Any:
    return orjson.loads(serde.dumps(value))


def _served(graph_id: str, graph: Pregel) -> Pregel:
    return graph.copy(update={"name": graph_id}) if graph.name == DEFAULT_NAME else graph


# ---- the drawing -------------------------------------------------------------------------------


def graph_json(graph: Pregel, xray: bool | int = False) -> dict[str, Any]:
    """``GET /assistants/{id}/graph``: the graph's drawing (``{nodes, edges}``) as LangChain's
    ``Graph.to_json()`` gives it, without the nodes' ``data.id`` (the runnable's class path).

    ``xray``: ``True`` draws every subgraph's nodes inside it (``<node>:<subnode>``); a number
    ``n`` (1 or more) that many levels down, deeper subgraphs drawn as single nodes (``n`` at
    least ``xray_depth(graph)`` draws as ``True`` does). The server answers 422 ``Invalid xray
    value`` for a number below 1, as this raises ValueError.
    """
    if not isinstance(xray, bool) and (not isinstance(xray, int) or xray < 1):
        raise ValueError(f"xray must be a boolean or a number of levels from 1, not {xray!r}")
    drawing = graph.get_graph(xray=xray).to_json()
    for node in drawing.get("nodes", []):
        data = node.get("data")
        if isinstance(data, dict):
            data.pop("id", None)
    return _json(drawing)


def xray_depth(graph: Pregel) -> int:
    """How many levels of subgraphs the graph has (0: none): the drawings for ``xray`` numbers
    below it differ from ``xray=True``'s, and every number from it on draws the same."""
    deepest = 0
    for namespace, _ in graph.get_subgraphs(recurse=True):
        deepest = max(deepest, namespace.count("|") + 1)
    return deepest


# ---- the schemas -------------------------------------------------------------------------------


def _schemable(kind: Any) -> bool:
    try:
        create_model_v2("probe", root=(kind, None)).model_json_schema()
    except Exception:  # noqa: BLE001 — a type pydantic cannot describe is drawn as Any
        return False
    return True


def _state_schema(graph: Pregel) -> dict[str, Any]:
    """The state as the Python server describes it: every channel the graph streams, typed by
    what a node may write to it (its reducer's update type; ``Any`` where pydantic has no schema
    for that type), none required."""
    fields: dict[str, Any] = {}
    for name in graph.stream_channels_list:
        kind = graph.channels[name].UpdateType
        fields[name] = (kind if _schemable(kind) else Any, None)
    model = create_model_v2(graph.get_name("State"), field_definitions=fields)
    return model.model_json_schema()


def _config_schema(graph: Pregel) -> dict[str, Any]:
    """The ``configurable`` members the graph takes (its context schema, LangGraph's legacy config
    schema), without the ones LangGraph sets itself; ``{}`` for a graph that takes none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # config_schema() is deprecated, and what the server reads
        config = graph.config_schema()
    configurable = config.model_fields.get("configurable")
    if configurable is None:
        return {}
    schema = TypeAdapter(configurable.annotation).json_schema()
    if schema:
        for key in _RESERVED_CONFIGURABLE:
            schema["properties"].pop(key, None)
    return schema


def _guarded(make: Any, graph: Pregel) -> Any:
    """A schema the server could make, else null: it answers null for each one that fails."""
    try:
        return make(graph)
    except Exception:  # noqa: BLE001 — the server logs and answers null
        return None


def _schemas(graph: Pregel) -> dict[str, Any]:
    return _json(
        {
            "input_schema": _guarded(lambda g: g.get_input_jsonschema(), graph),
            "output_schema": _guarded(lambda g: g.get_output_jsonschema(), graph),
            "state_schema": _guarded(_state_schema, graph),
            "config_schema": _guarded(_config_schema, graph),
            "context_schema": _guarded(lambda g: g.get_context_jsonschema(), graph),
        }
    )


def graph_schemas(graph_id: str, graph: Pregel) -> dict[str, Any]:
    """``GET /assistants/{id}/schemas``: ``{graph_id, input_schema, output_schema, state_schema,
    config_schema, context_schema}`` of the graph served as ``graph_id``.

    Input and output are the graph's input/output schemas (pydantic's JSON Schema of the
    TypedDict, pydantic model or dataclass, or of the channels); the state is every streamed
    channel, none required; config is the ``configurable`` a graph with a context schema takes
    (``{}`` for none) and context its context schema (``null`` for none).
    """
    return {"graph_id": graph_id, **_schemas(_served(graph_id, graph))}


def subgraph_schemas(
    graph: Pregel, namespace: str | None = None, recurse: bool = False
) -> dict[str, Any]:
    """``GET /assistants/{id}/subgraphs[/{namespace}][?recurse=]``: ``{"<namespace>":
    {input_schema, output_schema, state_schema, config_schema, context_schema}}``, parents first,
    namespaces joined with ``|`` (``"middle|inner"``), as LangGraph's ``get_subgraphs`` picks
    them: the graph's own subgraphs, every level with ``recurse``; with a namespace, only that
    one (a nested one only with ``recurse``). Every subgraph keeps its own name."""
    return {
        ns: _schemas(sub) for ns, sub in graph.get_subgraphs(namespace=namespace, recurse=recurse)
    }
