"""The REST API's answers a worker makes from LangGraph objects, as LangGraph's Python server
(``langgraph-api``) answers them, and how the bridge methods' params read (protocol/README.md,
"REST runs and state"; where the Python server's answers differ from the JavaScript one's:
"Python graphs"). No I/O: the caller reads the graph (``aget_state``, ``aget_state_history``,
``aupdate_state``, ``abulk_update_state``) with what the readers give, and answers with what
the shapes give.

The Python server's ThreadState is
``{values, next, tasks, metadata, created_at, checkpoint, parent_checkpoint, interrupts,
checkpoint_id, parent_checkpoint_id}`` (the last two deprecated, still sent) at every level,
nested subgraph states included. Its state reads decode the checkpoints' msgpack with LangGraph's
"to JSON" hook rather than into objects, so values read back as stored: a date as ``[y, m, d]``,
a timedelta as ``[days, seconds, microseconds]``, a Decimal as its string, a model as its
``model_dump()`` (where a run's stream, written from the objects, has ``"2024-05-06"``,
seconds, a number). ``thread_state`` gives the same by taking the snapshot through the
checkpoint serializer and that hook before writing it as JSON (``serde``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer, _msgpack_ext_hook_to_json
from langgraph.types import Command, Send, StateSnapshot, StateUpdate

from threadcast_worker import serde
from threadcast_worker.answers import ProtocolError

HISTORY_LIMIT_MAX = 1000
"""Most states ``rest.history`` answers with (the Python server's bound)."""

HISTORY_LIMIT_DEFAULT = 1
"""What ``rest.history`` answers without a ``limit``: the Python server's default (the SDKs send
10 of their own)."""

_CHECKPOINT_KEYS = ("thread_id", "checkpoint_ns", "checkpoint_id")


# A checkpoint serializer that reads back as the Python server's state reads do. The hook is
# LangGraph's (private: no public API turns checkpoint msgpack into plain data).
_STORED = JsonPlusSerializer(__unpack_ext_hook__=_msgpack_ext_hook_to_json)


def _json(value: Any) -> Any:
    return orjson.loads(serde.dumps(value))


def _as_stored(value: Any) -> Any:
    """value as the server reads it from a checkpoint: encoded by LangGraph's checkpoint
    serializer, decoded to plain data."""
    try:
        return _STORED.loads_typed(_STORED.dumps_typed(value))
    except Exception:  # noqa: BLE001 — what msgpack cannot encode no saver stored: written as is
        return value


def _invalid(message: str) -> ProtocolError:
    return ProtocolError("invalid_argument", message)


# ---- the shapes ----------------------------------------------------------------------------------


def checkpoint_of(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The API's Checkpoint of a LangGraph config, or None when it names no checkpoint.

    Only the members the config has: ``checkpoint_ns`` and ``checkpoint_map`` are left out
    where the config has none (a checkpoint read by its id alone), as the Python server does.
    """
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    checkpoint_id = configurable.get("checkpoint_id")
    if not thread_id or not checkpoint_id:
        return None
    out: dict[str, Any] = {"checkpoint_id": checkpoint_id, "thread_id": thread_id}
    if "checkpoint_ns" in configurable:
        out["checkpoint_ns"] = configurable["checkpoint_ns"] or ""
    if "checkpoint_map" in configurable:
        out["checkpoint_map"] = configurable["checkpoint_map"]
    return out


def _interrupt(interrupt: Any) -> dict[str, Any]:
    """{id, value} of a LangGraph Interrupt (or its dict form), with ``response_schema`` when the
    graph gave one."""
    if isinstance(interrupt, Mapping):
        get = interrupt.get
    else:

        def get(name: str) -> Any:
            return getattr(interrupt, name, None)

    out = {"id": get("id"), "value": get("value")}
    if get("response_schema") is not None:
        out["response_schema"] = get("response_schema")
    return out


def _snapshot(snapshot: StateSnapshot, *, root_state: bool) -> dict[str, Any]:
    metadata = snapshot.metadata
    # The server's state read drops the root namespace's empty checkpoint_ns from the metadata
    # (its history and nested states keep theirs).
    if root_state and metadata is not None and metadata.get("checkpoint_ns", None) == "":
        metadata = {k: v for k, v in metadata.items() if k != "checkpoint_ns"}
    config = snapshot.config
    parent = snapshot.parent_config
    return {
        "values": snapshot.values,
        "next": list(snapshot.next),
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "path": task.path,
                "error": task.error,
                "interrupts": [_interrupt(i) for i in task.interrupts],
                # A subgraph's task names its checkpoint namespace (a config) unless the read
                # asked for subgraphs, which puts its state there instead.
                "checkpoint": (
                    task.state["configurable"]
                    if task.state is not None and not isinstance(task.state, StateSnapshot)
                    else None
                ),
                "state": (
                    _snapshot(task.state, root_state=False)
                    if isinstance(task.state, StateSnapshot)
                    else None
                ),
                "result": getattr(task, "result", None),
            }
            for task in snapshot.tasks
        ],
        "metadata": metadata,
        "created_at": snapshot.created_at,
        "checkpoint": checkpoint_of(config),
        "parent_checkpoint": checkpoint_of(parent),
        "interrupts": [_interrupt(i) for i in getattr(snapshot, "interrupts", ())],
        "checkpoint_id": config["configurable"].get("checkpoint_id") if config else None,
        "parent_checkpoint_id": parent["configurable"]["checkpoint_id"] if parent else None,
    }


def thread_state(snapshot: StateSnapshot, *, history: bool = False) -> dict[str, Any]:
    """The ThreadState the Python server answers for a LangGraph ``StateSnapshot``: what
    ``GET /threads/{id}/state``, ``/state/{checkpoint_id}`` and ``POST /state/checkpoint`` return
    (``history=False``), or one item of ``/history`` (``history=True``). JSON-ready.

    A snapshot read with ``subgraphs=True`` carries its subgraphs' states in its tasks; they are
    rendered the same way, ``interrupts`` and all. ``interrupts`` is the snapshot's own (the
    interrupts still waiting, for the latest state; those of that step, for an older one).
    """
    return _json(_as_stored(_snapshot(snapshot, root_state=not history)))


def empty_state() -> dict[str, Any]:
    """What the Python server answers for the state of a thread that has no checkpoint."""
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "metadata": None,
        "created_at": None,
        "checkpoint": None,
        "parent_checkpoint": None,
        "interrupts": [],
        "checkpoint_id": None,
        "parent_checkpoint_id": None,
    }


def update_answer(config: RunnableConfig) -> dict[str, Any]:
    """What ``POST /threads/{id}/state`` answers for the config ``aupdate_state`` returned: the new
    checkpoint's configurable, also under the deprecated ``configurable`` and ``checkpoint_id``."""
    configurable = _json(config["configurable"])
    return {
        "checkpoint": configurable,
        "configurable": configurable,
        "checkpoint_id": configurable["checkpoint_id"],
    }


def bulk_answer(config: RunnableConfig) -> dict[str, Any]:
    """What a thread's supersteps (``rest.state.bulk``) answer for the config
    ``abulk_update_state`` returned."""
    return {"checkpoint": _json(config["configurable"])}


# ---- the params ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateRead:
    """``rest.state.get``: read ``graph.aget_state(config, subgraphs=subgraphs)``."""

    config: RunnableConfig
    subgraphs: bool


@dataclass(frozen=True)
class StateWrite:
    """``rest.state.update``: ``graph.aupdate_state(config, values, as_node=as_node)``."""

    config: RunnableConfig
    values: dict[str, Any] | list[Any] | None
    as_node: str | None


@dataclass(frozen=True)
class HistoryRead:
    """``rest.history``: ``graph.aget_state_history(config, limit=…, before=…, filter=…)``."""

    config: RunnableConfig
    limit: int
    before: RunnableConfig | None
    filter: dict[str, Any] | None


@dataclass(frozen=True)
class BulkWrite:
    """``rest.state.bulk``: ``graph.abulk_update_state(config, supersteps)``."""

    config: RunnableConfig
    supersteps: list[list[StateUpdate]]


def _object(params: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _invalid(f"{name} must be an object")
    return value


def _checkpoint(params: Mapping[str, Any], field: str = "checkpoint") -> dict[str, Any]:
    """The configurable members a ``checkpoint`` param (the API's CheckpointConfig) names."""
    given = _object(params, field)
    if given is None:
        return {}
    out: dict[str, Any] = {}
    for key in _CHECKPOINT_KEYS:
        value = given.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise _invalid(f"{field}.{key} must be a string")
        out[key] = value
    checkpoint_map = given.get("checkpoint_map")
    if checkpoint_map is not None:
        if not isinstance(checkpoint_map, Mapping):
            raise _invalid(f"{field}.checkpoint_map must be an object")
        out["checkpoint_map"] = dict(checkpoint_map)
    return out


def _checkpoint_id(params: Mapping[str, Any]) -> str | None:
    value = params.get("checkpoint_id")
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _invalid("checkpoint_id must be a string")
    return value


def _flag(params: Mapping[str, Any], name: str) -> bool:
    """A boolean param: JSON's true and false (a body), or a query string's "true"/"True" (any
    other string is false, as the Python server reads its query)."""
    value = params.get(name)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value in ("true", "True")
    raise _invalid(f"{name} must be a boolean")


def read_state_get(thread_id: str, params: Mapping[str, Any]) -> StateRead:
    """``rest.state.get`` params (``checkpoint_id``, ``checkpoint``, ``subgraphs``) as the config
    the Python server reads the state with: the thread, and only the checkpoint members given (a
    checkpoint id alone reads without ``checkpoint_ns``, which then is absent from an unknown
    checkpoint's answer)."""
    configurable = _checkpoint(params)
    checkpoint_id = _checkpoint_id(params)
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    configurable["thread_id"] = thread_id
    return StateRead({"configurable": configurable}, _flag(params, "subgraphs"))


def _values(value: Any, field: str) -> dict[str, Any] | list[Any] | None:
    if value is None or isinstance(value, dict | list):
        return value
    raise _invalid(f"{field} must be an object, a list or null")


def _as_node(value: Any, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _invalid(f"{field} must be a string")


def read_state_update(
    thread_id: str, params: Mapping[str, Any], *, graph_id: str | None = None
) -> StateWrite:
    """``rest.state.update`` params (``values``, ``as_node``, ``checkpoint_id``, ``checkpoint``).

    The config is the Python server's: the checkpoint named (the thread's head without one),
    ``checkpoint_ns`` "" unless named, and ``graph_id`` (the thread's graph), which LangGraph
    copies into the new checkpoint's metadata.
    """
    values = _values(params.get("values"), "values")
    as_node = _as_node(params.get("as_node"), "as_node")
    configurable: dict[str, Any] = {}
    checkpoint_id = _checkpoint_id(params)
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    configurable.update(_checkpoint(params))
    configurable["thread_id"] = thread_id
    if graph_id is not None:
        configurable.setdefault("graph_id", graph_id)
    configurable.setdefault("checkpoint_ns", "")
    return StateWrite({"configurable": configurable}, values, as_node)


def _limit(value: Any) -> int:
    if value is None:
        return HISTORY_LIMIT_DEFAULT
    limit: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        limit = value
    elif isinstance(value, float) and value.is_integer():
        limit = int(value)
    elif isinstance(value, str):  # a query string's
        try:
            limit = int(value)
        except ValueError:
            limit = None
    if limit is None or not 1 <= limit <= HISTORY_LIMIT_MAX:
        raise _invalid(f"limit must be an integer from 1 to {HISTORY_LIMIT_MAX}, not {value!r}")
    return limit


def _before(value: Any) -> RunnableConfig | None:
    """``before``: a checkpoint id (a query string's), or a config naming one
    (``{configurable: {checkpoint_id}}``, as the Python server takes it; or the API's Checkpoint
    ``{checkpoint_id, …}``, which that server fails on)."""
    if value is None or value == "":
        return None
    checkpoint_id: Any = None
    if isinstance(value, str):
        checkpoint_id = value
    elif isinstance(value, Mapping):
        configurable = value.get("configurable")
        if isinstance(configurable, Mapping):
            checkpoint_id = configurable.get("checkpoint_id")
        else:
            checkpoint_id = value.get("checkpoint_id")
    if not isinstance(checkpoint_id, str):
        raise _invalid(
            "before must be a checkpoint id, or a config naming configurable.checkpoint_id"
        )
    return {"configurable": {"checkpoint_id": checkpoint_id}} if checkpoint_id else None


def read_history(thread_id: str, params: Mapping[str, Any]) -> HistoryRead:
    """``rest.history`` params (``limit``, ``before``, ``metadata``, ``checkpoint``): the states of
    the namespace ``checkpoint`` names (the root's by default), newest first."""
    limit = _limit(params.get("limit"))
    before = _before(params.get("before"))
    metadata = _object(params, "metadata")
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    configurable.update(_checkpoint(params))
    configurable["thread_id"] = thread_id
    return HistoryRead(
        {"configurable": configurable},
        limit,
        before,
        dict(metadata) if metadata is not None else None,
    )


def _goto(value: Any, field: str) -> list[str | Send]:
    items = value if isinstance(value, list) else [value]
    out: list[str | Send] = []
    for i, item in enumerate(items):
        where = f"{field}[{i}]" if isinstance(value, list) else field
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, Mapping) and isinstance(item.get("node"), str) and "input" in item:
            out.append(Send(item["node"], item["input"]))
        else:
            raise _invalid(f"{where} must be a node name or a Send {{node, input}}")
    return out


def to_command(value: Any, field: str = "command") -> Command:
    """The API's ``command`` (``{resume, update, goto}``) as a LangGraph ``Command``, as the Python
    server maps it: ``goto`` a node name, a ``{node, input}`` Send or a list of them; an
    ``update`` given as a list of ``[key, value]`` pairs becomes a list of tuples."""
    if not isinstance(value, Mapping):
        raise _invalid(f"{field} must be an object with resume, update or goto")
    update = value.get("update")
    if update is not None and not isinstance(update, dict | list):
        raise _invalid(f"{field}.update must be an object, a list or null")
    if isinstance(update, list) and all(
        isinstance(u, list | tuple) and len(u) == 2 and isinstance(u[0], str) for u in update
    ):
        update = [tuple(u) for u in update]
    goto = value.get("goto")
    return Command(
        update=update,
        goto=_goto(goto, f"{field}.goto") if goto is not None and goto != [] else (),
        resume=value.get("resume"),
    )


def read_bulk(
    thread_id: str, params: Mapping[str, Any], *, graph_id: str | None = None
) -> BulkWrite:
    """``rest.state.bulk`` params (``supersteps``: ``[{updates: [{values, command, as_node}, …]},
    …]``, what ``threads.create`` is given): one LangGraph ``StateUpdate`` per update, its
    ``command`` (when not empty) taken over its ``values``; ``as_node`` is required, as the
    Python server's schema requires it."""
    steps = params.get("supersteps")
    if not isinstance(steps, list) or not steps:
        raise _invalid("supersteps must be a non-empty list")
    supersteps: list[list[StateUpdate]] = []
    for i, step in enumerate(steps):
        updates = step.get("updates") if isinstance(step, Mapping) else None
        if not isinstance(updates, list) or not updates:
            raise _invalid(f"supersteps[{i}].updates must be a non-empty list")
        superstep: list[StateUpdate] = []
        for j, update in enumerate(updates):
            where = f"supersteps[{i}].updates[{j}]"
            if not isinstance(update, Mapping):
                raise _invalid(f"{where} must be an object")
            as_node = update.get("as_node")
            if not isinstance(as_node, str):
                raise _invalid(f"{where}.as_node must be a string")
            command = update.get("command")
            if command:
                values: Any = to_command(command, f"{where}.command")
            else:
                values = _values(update.get("values"), f"{where}.values")
            superstep.append(StateUpdate(values, as_node))
        supersteps.append(superstep)
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if graph_id is not None:
        configurable["graph_id"] = graph_id
    return BulkWrite({"configurable": configurable}, supersteps)
