"""What a run is run with, built as LangGraph's Python server builds it; no I/O.

The Python server (``langgraph-api``: ``models/run.py`` ``create_valid_run``, the runtime's
``Runs.put``, ``stream.py`` ``astream_state``) layers a run's config, context and metadata so:

1. the run's own request: ``config``, ``context``, ``metadata``. A run may not give both a
   non-empty ``config.configurable`` and a non-empty ``context`` (the server answers 400). When it
   gives a context, its ``configurable`` becomes a copy of that context; otherwise its context is a
   copy of its ``configurable`` (so graphs reading either see the same). ``checkpoint_id`` (the
   run's param) goes into ``configurable``, and ``__after_seconds__`` too;
2. ``configurable`` = assistant's ∪ thread's ∪ run's ∪ ``{run_id, thread_id, graph_id,
   assistant_id, user_id}`` (``user_id``: the first given by the run's, thread's or assistant's
   configurable, else the unauthenticated user's ``""``), later layers winning key by key;
3. metadata = assistant's ∪ thread's ∪ the run's ``config.metadata`` ∪ the run's ``metadata``, then
   ``assistant_id`` (the thread's metadata gets ``graph_id`` and ``assistant_id`` when the run is
   created, so every run's metadata holds both);
4. the config = assistant's config ∪ the run's config (top-level keys: ``tags``,
   ``recursion_limit``, …; the thread's only lends its ``configurable``), with the ``configurable``
   and metadata above;
5. context = the assistant's context ∪ the run's (step 1);
6. the stream's metadata adds ``run_attempt``, ``langgraph_version``, ``langgraph_api_version``,
   ``langgraph_plan`` (``"enterprise"``), ``langgraph_host`` (``"self-hosted"``) and
   ``langgraph_api_url`` (``$LANGGRAPH_API_URL`` or ``None``), in that order, and the run's
   ``run_id`` is the root run id of its callbacks.

Differences from the JavaScript server (``src/worker/config.js``, protocol/README.md "The graph's
environment"): the JS server merges ``context`` only from the assistant's and the run's context
(no mirroring of ``configurable``), never refuses ``configurable`` with ``context``, adds no
``user_id`` / ``__after_seconds__`` to ``configurable``, adds no ``langgraph_api_version`` and
leaves ``langgraph_api_url`` out when unset (Python writes ``null``); and Python's metadata always
holds ``graph_id`` and ``assistant_id`` (from the thread's), JS's only what the layers hold.
From the request the server also puts in ``configurable``: the auth context of its (absent)
auth (``langgraph_auth_user`` None, ``langgraph_auth_user_id`` "", ``langgraph_auth_permissions``
[], and so ``user_id`` "" when no layer gives one), ``langgraph_request_id`` (the id of the request
that created the run) and ``__request_start_time_ms__`` (when that request came). ``merge_run``
takes those two from ``ids`` (``request_id``, ``request_start_ms``) when the caller knows them (a
``langgraph_request_id`` the run's own ``configurable`` gives wins, as on the server); without
them the request id is named after the run (``request_id()``: the same on every attempt and on
every worker that takes the run over, as the server's stays in its run's kwargs) and the start is
the time the run is planned. The request's headers (``x-*``, ``user-agent``) threadcast does not
pass.
"""

from __future__ import annotations

import copy
import os
import time
import uuid
from collections.abc import Mapping
from importlib import metadata as _dist
from typing import Any

# The reference's namespace for a graph's system assistant id (uuid5 of the graph id in it).
SYSTEM_ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")

# threadcast's namespace for the request id of a run whose request id nobody gave (uuid5 of the
# run id in it): any uuid would do, this one keeps it the same across attempts and takeovers.
REQUEST_NAMESPACE = uuid.UUID("5f0c8a52-3c1e-4d8e-9a39-6f1b2c7d4e90")

# The langgraph-api version whose behaviour this worker follows (its stream metadata says it).
LANGGRAPH_API_VERSION = "0.16.7"

# `langgraph dev` and every licensed deployment of the Python server say "enterprise" (their plus
# features on); threadcast has no tiers, every feature is on, so it says what they say. (Only an
# unlicensed self-hosted Python server says "developer".)
PLAN = "enterprise"
HOST = "self-hosted"


class ConfigError(ValueError):
    """A run's config that the server refuses (the run fails with it)."""


def system_assistant_id(graph_id: str) -> str:
    """The reference's id of a graph's own (system) assistant."""
    return str(uuid.uuid5(SYSTEM_ASSISTANT_NAMESPACE, graph_id))


def request_id(ids: Mapping[str, Any]) -> str:
    """The request id of a run: ``ids["request_id"]`` when given, else one named after the run."""
    given = ids.get("request_id")
    if given:
        return str(given)
    return str(uuid.uuid5(REQUEST_NAMESPACE, str(ids["run_id"])))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _merge(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Later layers win key by key; values are copied (a layer is never shared with the run)."""
    out: dict[str, Any] = {}
    for layer in layers:
        if layer:
            out.update(copy.deepcopy(dict(layer)))
    return out


def assistant_layer(
    params: Mapping[str, Any], graph_id: str, defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The assistant layer ``{config, context, metadata}`` of a run: ``params["assistant"]`` when
    the gateway sent it; else, for the graph's own assistant (its id is the graph id or the
    system assistant's uuid), the graph's defaults (``context`` its context, the rest its config)
    and metadata ``{created_by: "system"}``; else nothing."""
    given = params.get("assistant")
    if isinstance(given, dict):
        return {
            "config": _obj(given.get("config")),
            "context": given.get("context"),
            "metadata": _obj(given.get("metadata")),
        }
    aid = params.get("assistant_id")
    if aid is None or aid == graph_id or aid == system_assistant_id(graph_id):
        config = dict(defaults or {})
        context = config.pop("context", None)
        return {"config": config, "context": context, "metadata": {"created_by": "system"}}
    return {"config": {}, "context": None, "metadata": {}}


def merge_run(
    assistant: Mapping[str, Any],
    thread: Mapping[str, Any] | None,
    run: Mapping[str, Any],
    ids: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``(config, context)`` a run is run with.

    assistant: ``{config, context, metadata}`` (see ``assistant_layer``); thread: ``{config,
    metadata}`` or None; run: ``{config, context, metadata, checkpoint_id?, after_seconds?}`` as
    the REST request gave them; ids: ``{run_id, thread_id, graph_id, assistant_id}`` and, when
    known, the id of the request that created the run (``request_id``) and its time
    (``request_start_ms``, the run's creation time; see the module's doc for without). Raises
    ConfigError for a run giving both ``configurable`` and ``context``, as the server does."""
    run_config = copy.deepcopy(_obj(run.get("config")))
    run_context = run.get("context") or {}
    run_configurable = _obj(run_config.get("configurable"))
    if run_configurable and run_context:
        raise ConfigError(
            "Cannot specify both configurable and context. Prefer setting context alone. Context "
            "was introduced in LangGraph 0.6.0 and is the long term planned replacement for "
            "configurable."
        )
    if run_context:
        run_configurable = dict(run_context) if isinstance(run_context, dict) else {}
    else:
        run_context = dict(run_configurable)
    if run.get("checkpoint_id"):
        run_configurable["checkpoint_id"] = str(run["checkpoint_id"])
    # No auth in front of the graphs: the server's unauthenticated user.
    run_configurable["langgraph_auth_user"] = None
    run_configurable["langgraph_auth_user_id"] = ""
    run_configurable["langgraph_auth_permissions"] = []
    if not run_configurable.get("langgraph_request_id"):
        run_configurable["langgraph_request_id"] = request_id(ids)
    run_configurable["__request_start_time_ms__"] = ids.get("request_start_ms") or _now_ms()
    run_configurable["__after_seconds__"] = run.get("after_seconds") or 0
    run_config["configurable"] = run_configurable

    a_config = _obj(assistant.get("config"))
    a_configurable = _obj(a_config.get("configurable"))
    t_config = _obj((thread or {}).get("config"))
    t_configurable = _obj(t_config.get("configurable"))
    user_id = (
        run_configurable.get("user_id")
        or t_configurable.get("user_id")
        or a_configurable.get("user_id")
        or ""  # the unauthenticated user's id
    )
    configurable = _merge(
        a_configurable,
        t_configurable,
        run_configurable,
        {
            "run_id": str(ids["run_id"]),
            "thread_id": str(ids["thread_id"]),
            "graph_id": ids["graph_id"],
            "assistant_id": str(ids["assistant_id"]),
            "user_id": user_id,
        },
    )
    thread_metadata = _merge(
        _obj((thread or {}).get("metadata")),
        {"graph_id": ids["graph_id"], "assistant_id": str(ids["assistant_id"])},
    )
    metadata = _merge(
        _obj(assistant.get("metadata")),
        thread_metadata,
        _obj(run_config.get("metadata")),
        _obj(run.get("metadata")),
    )
    metadata["assistant_id"] = str(ids["assistant_id"])
    config = _merge(a_config, run_config, {"configurable": configurable}, {"metadata": metadata})
    a_context = assistant.get("context")
    context = _merge(a_context if isinstance(a_context, dict) else {}, _obj(run_context))
    return config, context


def filter_context(
    context: dict[str, Any],
    context_schema: Mapping[str, Any] | None,
    configurable: dict[str, Any],
    provided: bool,
) -> dict[str, Any]:
    """The context a graph with a context schema gets: only the schema's properties (the server
    drops the others); when the run gave its context (``provided``), the dropped keys leave
    ``configurable`` too where it mirrors them. ``context_schema`` is the graph's
    ``get_context_jsonschema()``."""
    properties = _obj((context_schema or {}).get("properties"))
    if not context or not properties:
        return context
    kept = {k: v for k, v in context.items() if k in properties}
    if provided:
        for k in context.keys() - kept.keys():
            if configurable.get(k) == context[k]:
                configurable.pop(k, None)
    return kept


def _version(dist: str, fallback: str) -> str:
    try:
        return _dist.version(dist)
    except _dist.PackageNotFoundError:
        return fallback


LANGGRAPH_VERSION = _version("langgraph", "0.0.0")


def stream_metadata(metadata: Mapping[str, Any], attempt: int = 1) -> dict[str, Any]:
    """The metadata a run is streamed with: metadata, then the server's own keys (positions of
    keys metadata already has are kept, as the server's in-place update keeps them)."""
    out = dict(metadata)
    out["run_attempt"] = attempt
    out["langgraph_version"] = LANGGRAPH_VERSION
    out["langgraph_api_version"] = LANGGRAPH_API_VERSION
    out["langgraph_plan"] = PLAN
    out["langgraph_host"] = HOST
    out["langgraph_api_url"] = os.environ.get("LANGGRAPH_API_URL")
    return out


def run_config(config: Mapping[str, Any], run_id: str, attempt: int = 1) -> dict[str, Any]:
    """The config a run's graph is streamed with: config, its metadata the stream's, and (first
    attempt) ``run_id`` the root run id of its callbacks, as the server gives them."""
    out = dict(config)
    out["metadata"] = stream_metadata(_obj(config.get("metadata")), attempt)
    if attempt == 1:
        out["run_id"] = uuid.UUID(str(run_id))
    return out
