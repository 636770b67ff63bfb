"""Graphs in every form langgraph.json may name, for test_graphs.py."""

import contextlib
from typing import TypedDict

from helper_module import GREETING  # a sibling module: imported as the Python server does
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph_sdk.runtime import ServerRuntime


class State(TypedDict):
    text: str


def builder(suffix: str = "") -> StateGraph:
    def say(state: State) -> dict:
        return {"text": state["text"] + GREETING + suffix}

    b = StateGraph(State)
    b.add_node("say", say)
    b.add_edge(START, "say")
    b.add_edge("say", END)
    return b


compiled = builder().compile()
state_graph = builder()
not_a_graph = 42


def factory_none():
    return builder(" (none)").compile()


def factory_config(config: RunnableConfig):
    return builder(f" ({config['configurable'].get('who', '?')})").compile()


def factory_runtime(runtime: ServerRuntime):
    return builder(f" ({runtime.access_context})")


def factory_both(runtime: ServerRuntime, config: RunnableConfig):
    return builder(f" ({runtime.access_context}, {config['configurable'].get('who', '?')})")


async def factory_async(config: RunnableConfig):
    return builder(" (async)").compile()


opened: list[str] = []


@contextlib.asynccontextmanager
async def factory_cm(runtime: ServerRuntime):
    opened.append("open")
    try:
        yield builder(" (cm)").compile()
    finally:
        opened.append("closed")


def factory_raises(config: RunnableConfig):
    raise RuntimeError("this factory cannot build a graph")
