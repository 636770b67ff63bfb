"""A graph whose second node raises an exception of its own class (the run's error names it)."""

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class ToolFailure(Exception):
    """The error the failing node raises: the run's error event names this class."""


class State(TypedDict):
    steps: Annotated[list[str], operator.add]
    fail: bool


def prepare(state: State) -> dict:
    return {"steps": ["prepared"]}


async def explode(state: State) -> dict:
    if state.get("fail", True):
        raise ToolFailure("the search backend is down")
    return {"steps": ["exploded safely"]}


graph = (
    StateGraph(State)
    .add_node("prepare", prepare)
    .add_node("explode", explode)
    .add_edge(START, "prepare")
    .add_edge("prepare", "explode")
    .add_edge("explode", END)
    .compile()
)
