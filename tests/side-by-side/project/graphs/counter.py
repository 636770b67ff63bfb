"""A slow, predictable graph for cancel and multitask tests: tick (async) and tock (sync) alternate.

Exported as a ``StateGraph`` (not compiled): the server compiles it. Each node waits
``delay_ms`` (from the state, default 100) and counts; the run ends when ``count`` reaches
``until`` (default 10).
"""

import asyncio
import operator
import time
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    count: int
    until: int
    delay_ms: int
    trail: Annotated[list[str], operator.add]


async def tick(state: State) -> dict:
    await asyncio.sleep(state.get("delay_ms", 100) / 1000)
    return {"count": state.get("count", 0) + 1, "trail": ["tick"]}


def tock(state: State) -> dict:
    time.sleep(state.get("delay_ms", 100) / 1000)
    return {"count": state["count"] + 1, "trail": ["tock"]}


def more(state: State) -> str:
    return "end" if state["count"] >= state.get("until", 10) else "go"


builder = (
    StateGraph(State)
    .add_node("tick", tick)
    .add_node("tock", tock)
    .add_edge(START, "tick")
    .add_conditional_edges("tick", more, {"go": "tock", "end": END})
    .add_conditional_edges("tock", more, {"go": "tick", "end": END})
)
