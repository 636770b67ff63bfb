"""The graphs tests/integration/python-worker*.test.mjs have the Python worker serve, beside the
example graph (src/worker-python/example/agent.py), from langgraph.json in this directory:

- ``steps``: START → first → second → END over ``{text, log, answer}``. The input's ``text``
  steers it: "slow" makes each step sleep ``pause`` seconds (default 0.4), "ask" makes ``second``
  call ``interrupt()`` (its answer kept in ``answer``), "fail" makes ``second`` raise
  ``StepFailed``;
- ``big``: one node that stores ``"x" * bytes`` in ``doc.blob`` (a values event that size);
- ``unserializable``: a node that puts an object with no JSON form in the state;
- ``make_broken``: a graph factory that raises when a run builds it;
- ``not_a_graph``: an attribute that is no graph.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class StepFailed(Exception):
    """What ``second`` raises for a text with "fail": the run's error names this class."""


class Steps(TypedDict, total=False):
    text: str
    pause: float
    log: Annotated[list[str], operator.add]
    answer: Any


async def _pace(state: Steps) -> None:
    if "slow" in state.get("text", ""):
        await asyncio.sleep(state.get("pause") or 0.4)


async def first(state: Steps) -> dict[str, Any]:
    await _pace(state)
    return {"log": [f"first saw {state.get('text', '')}"]}


async def second(state: Steps) -> dict[str, Any]:
    text = state.get("text", "")
    await _pace(state)
    if "fail" in text:
        raise StepFailed("the second step failed on purpose")
    out: dict[str, Any] = {"log": ["second done"]}
    if "ask" in text:
        out["answer"] = interrupt({"question": "go on?"})
    return out


steps = (
    StateGraph(Steps)
    .add_node("first", first)
    .add_node("second", second)
    .add_edge(START, "first")
    .add_edge("first", "second")
    .add_edge("second", END)
    .compile()
)


class Big(TypedDict, total=False):
    bytes: int
    doc: dict[str, str]


def grow(state: Big) -> dict[str, Any]:
    # The blob sits one level down: LangGraph's messages handler looks for messages in a node's
    # output, walking every string at its top level item by item — seconds of the event loop
    # for 16 MiB, a cost of LangGraph's own that these tests do not measure.
    return {"doc": {"blob": "x" * int(state.get("bytes") or 0)}}


big = (
    StateGraph(Big)
    .add_node("grow", grow)
    .add_edge(START, "grow")
    .add_edge("grow", END)
    .compile()
)


class Opaque:
    """An object with no JSON form (no __dict__, not a dataclass, not a pydantic model)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int) -> None:
        self.handle = handle


class Thing(TypedDict, total=False):
    label: str
    thing: Any


def make_thing(state: Thing) -> dict[str, Any]:
    return {"thing": Opaque(7), "label": "made"}


unserializable = (
    StateGraph(Thing)
    .add_node("make_thing", make_thing)
    .add_edge(START, "make_thing")
    .add_edge("make_thing", END)
    .compile()
)


class GraphBuildError(Exception):
    """What the factory raises: a run of ``broken_build`` fails with it."""


def make_broken() -> StateGraph:
    raise GraphBuildError("this graph cannot be built: its model is not configured")


not_a_graph = 42
