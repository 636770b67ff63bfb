"""A graph whose nodes (one sync, one async) write custom stream data as they go."""

import asyncio
from typing import TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    topic: str
    report: str


def gather(state: State) -> dict:
    write = get_stream_writer()
    for i in range(3):
        write({"progress": i + 1, "of": 3, "topic": state["topic"]})
    return {"report": f"gathered {state['topic']}"}


async def publish(state: State) -> dict:
    write = get_stream_writer()
    await asyncio.sleep(0.01)
    write("a plain string chunk")
    write({"published": state["report"]})
    return {"report": state["report"] + ", published"}


graph = (
    StateGraph(State)
    .add_node("gather", gather)
    .add_node("publish", publish)
    .add_edge(START, "gather")
    .add_edge("gather", "publish")
    .add_edge("publish", END)
    .compile()
)
