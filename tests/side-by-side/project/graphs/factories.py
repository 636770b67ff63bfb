"""Graph factories in the forms LangGraph's Python server accepts: of the config, of the server
runtime, of both (sync and async). Each graph says in its state what its factory was given.
"""

import os
from typing import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph_sdk.runtime import ServerRuntime


class State(TypedDict, total=False):
    question: str
    built_with: dict
    answer: str


def _graph(built_with: dict) -> CompiledStateGraph:
    def answer(state: State) -> dict:
        return {"built_with": built_with, "answer": f"{state.get('question', '')}: answered"}

    return (
        StateGraph(State)
        .add_node("answer", answer)
        .add_edge(START, "answer")
        .add_edge("answer", END)
        .compile()
    )


def from_config(config: RunnableConfig) -> CompiledStateGraph:
    configurable = config.get("configurable", {})
    return _graph(
        {
            "form": "config",
            "persona": configurable.get("persona", "plain"),
            "greeting": os.environ.get("SBS_GREETING"),
        }
    )


async def from_runtime(runtime: ServerRuntime) -> CompiledStateGraph:
    execution = runtime.execution_runtime
    return _graph(
        {
            "form": "runtime",
            "access_context": runtime.access_context,
            "executing": execution is not None,
            "has_store": runtime.store is not None,
        }
    )


def from_both(config: RunnableConfig, runtime: ServerRuntime) -> StateGraph:
    built = _graph(
        {
            "form": "config and runtime",
            "persona": config.get("configurable", {}).get("persona", "plain"),
            "access_context": runtime.access_context,
        }
    )
    return built.builder
