"""The token graph of scripts/bench's tokens-py scenario, loaded unchanged by both servers:
threadcast's Python worker (``threadcast-worker-python --config`` langgraph.json beside this
file) and LangGraph's Python server (``langgraph dev`` on a copy of this folder). It is
tests/bench/agent-server/graph.mjs in Python: one node, "model", whose fake chat model streams
``tokens`` tokens, ``pace_ms`` apart (the run's config.configurable; 200 and 20 when absent).
pace_ms 0 is full speed: the next token follows after one turn of the event loop
(``asyncio.sleep(0)``), so the process still does its I/O between tokens, as it would between a
real model's network chunks.

Each token says when it was emitted: its text is ``tok<i>@<t> ``, where i counts from 0 and t is
CLOCK_MONOTONIC in microseconds (``time.monotonic_ns``, the clock Node's ``process.hrtime``
reads in the clients), read as the chunk is made, right before the model yields it to
LangChain. A client's receipt time minus t is the token's latency through the whole server side.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph


def now_us() -> int:
    """CLOCK_MONOTONIC in microseconds: the stamp's clock."""
    return time.monotonic_ns() // 1000


class StampedModel(BaseChatModel):
    """A fake chat model that streams ``tokens`` stamped tokens, ``pace`` ms apart.

    BaseChatModel streams through ``_astream`` when a streaming callback (LangGraph's messages
    stream) is attached, and calls ``on_llm_new_token`` for each chunk itself."""

    tokens: int = 200
    pace: float = 20

    @property
    def _llm_type(self) -> str:
        return "stamped-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = "".join(c.text for c in self._stream(messages, stop, run_manager, **kwargs))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for i in range(self.tokens):
            if self.pace > 0:
                time.sleep(self.pace / 1000)
            text = f"tok{i}@{now_us()} "
            yield ChatGenerationChunk(message=AIMessageChunk(content=text), text=text)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for i in range(self.tokens):
            await asyncio.sleep(self.pace / 1000 if self.pace > 0 else 0)
            text = f"tok{i}@{now_us()} "
            yield ChatGenerationChunk(message=AIMessageChunk(content=text), text=text)


async def model(state: MessagesState, config: RunnableConfig) -> dict:
    c = (config or {}).get("configurable") or {}
    llm = StampedModel(tokens=int(c.get("tokens", 200)), pace=float(c.get("pace_ms", 20)))
    return {"messages": [await llm.ainvoke(state["messages"], config)]}


# Not compiled: each server compiles it with its own checkpointer and store.
graph = StateGraph(MessagesState).add_node("model", model).add_edge(START, "model")
graph = graph.add_edge("model", END)
