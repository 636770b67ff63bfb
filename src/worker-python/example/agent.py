"""The example graph threadcast's Python worker serves: src/worker/graphs/agent.js's twin.

A real LangGraph ``StateGraph`` whose chat model is a fake streaming model built on
``langchain_core`` (no network, no keys)::

    START → model ─(tool call)→ tools → model → researcher (a subgraph) → approve → END
                  └─(no tool call)──────────↗

- ``model`` streams its text token by token. On a fresh human turn it first calls the ``search``
  tool (streamed as ``tool_call_chunks``), then, after the tool's result, streams an answer that
  quotes the question. A question containing "no tools" is answered at once.
- ``tools`` is LangGraph's prebuilt ``ToolNode`` with the one tool.
- ``researcher`` is a compiled subgraph (namespace ``researcher:<task id>``) with its own model
  node, ``summarize``; when the question contains "deep interrupt" its ``review`` node calls
  ``interrupt()``.
- ``approve`` calls ``interrupt()`` when the question contains "interrupt" (and not "deep
  interrupt"), or, when it contains "approval", with a request LangChain's chat UI answers with its
  Approve button (``approval_request``); the answer is kept in the state's ``approved``.

Both LangGraph's Python server (``langgraph dev``) and threadcast serve it from langgraph.json
beside it. To put a real chat model in its place, replace ``make_model()``: any LangChain chat
model that streams works, e.g. ``ChatOpenAI(model="gpt-4o-mini").bind_tools([search])``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.language_models.chat_models import (
    BaseChatModel,
    agenerate_from_stream,
    generate_from_stream,
)
from langchain_core.messages import AIMessageChunk, AnyMessage, BaseMessage, HumanMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt


def token_ms() -> float:
    """Milliseconds between the fake model's tokens (THREADCAST_FAKE_TOKEN_MS, default 20)."""
    return float(os.environ.get("THREADCAST_FAKE_TOKEN_MS", "20"))


def json_text(value: Any) -> str:
    """``value`` as JavaScript's ``JSON.stringify`` writes it: no spaces, characters as they are."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@tool
def search(query: str) -> str:
    """Search the knowledge base"""
    return f'3 results for "{query}": threadcast, redis streams, langgraph'


class FakeStreamingModel(BaseChatModel):
    """A chat model that streams a script: text pieces, and tool calls as ``tool_call_chunks``.

    ``langchain_core``'s ``GenericFakeChatModel`` neither paces its tokens nor streams tool calls
    as ``tool_call_chunks`` (it puts them whole on a message), and a stream of messages shows a
    tool call only through those chunks. Each script entry is a text piece (a ``str``) or a tool
    call (``{"id", "name", "args"}``), whose arguments come as three chunks, as the JavaScript
    example's model sends them. The model sleeps ``sleep_ms`` before each chunk, the arguments'
    too, so a front end shows them forming as a real model's. Invoked without streaming it runs
    the same script, so a run takes as long either way.
    """

    script: list[str | dict[str, Any]]
    sleep_ms: float = 20

    @property
    def _llm_type(self) -> str:
        return "threadcast-fake-streaming"

    def _chunks(self) -> Iterator[AIMessageChunk]:
        """The script's chunks, in order."""
        block = 0  # the text is block 0; each tool call gets the next index, as in JavaScript
        for entry in self.script:
            if isinstance(entry, str):
                yield AIMessageChunk(content=entry)
                continue
            block += 1
            args = json_text(entry["args"])
            cut = -(-len(args) // 3)
            for i, part in enumerate([args[:cut], args[cut : 2 * cut], args[2 * cut :]]):
                yield AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        tool_call_chunk(
                            index=block,
                            id=entry["id"] if i == 0 else None,
                            name=entry["name"] if i == 0 else None,
                            args=part,
                        )
                    ],
                )

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._chunks():
            time.sleep(self.sleep_ms / 1000)
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks():
            await asyncio.sleep(self.sleep_ms / 1000)
            yield ChatGenerationChunk(message=chunk)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return generate_from_stream(self._stream(messages, stop, run_manager, **kwargs))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await agenerate_from_stream(self._astream(messages, stop, run_manager, **kwargs))


def text_of(content: Any) -> str:
    """A message's content as text.

    A string as it is; a list of content blocks (what LangChain's chat UI sends:
    ``[{"type": "text", "text": …}, …]``) as its text blocks joined by a space, other blocks
    (images, files) left out.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            texts.append(block["text"])
    return " ".join(t for t in texts if t)


def last_human(messages: list[AnyMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return text_of(message.content)
    return ""


def words(s: str) -> list[str]:
    return re.findall(r"\S+\s*", s)


class Lines:
    """What the model says; the tests compare transcripts with these."""

    searching = "Let me search for that. "
    summary = "Summary: the search found three sources."

    @staticmethod
    def answer(question: str) -> str:
        return f'Here is what I found about "{question}".'


lines = Lines()


def make_model(state: MessagesState) -> BaseChatModel:
    """The chat model for this turn: a tool call on a fresh human turn, else the answer."""
    question = last_human(state["messages"])
    last = state["messages"][-1] if state["messages"] else None
    if isinstance(last, HumanMessage) and "no tools" not in question:
        call = {
            "id": f"call_{len(state['messages'])}",
            "name": "search",
            "args": {"query": question},
        }
        return FakeStreamingModel(script=[*words(lines.searching), call], sleep_ms=token_ms())
    # The answer streams character by character, as the JavaScript example's FakeListChatModel.
    return FakeStreamingModel(script=list(lines.answer(question)), sleep_ms=token_ms())


async def model(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
    return {"messages": [await make_model(state).ainvoke(state["messages"], config)]}


def after_model(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if getattr(last, "tool_calls", None) else "researcher"


class Research(MessagesState):
    notes: str


async def summarize(state: Research, config: RunnableConfig) -> dict[str, Any]:
    llm = FakeStreamingModel(script=list(lines.summary), sleep_ms=token_ms())
    return {"messages": [await llm.ainvoke(state["messages"], config)], "notes": "summarized"}


def review(state: Research) -> dict[str, Any]:
    if "deep interrupt" in last_human(state["messages"]):
        answer = interrupt({"question": "Keep the summary?", "from": "researcher"})
        # Written as the JavaScript example writes it, so both keep the same notes.
        return {"notes": f"reviewed: {json_text(answer)}"}
    return {"notes": "reviewed"}


def researcher() -> CompiledStateGraph:
    return (
        StateGraph(Research)
        .add_node("summarize", summarize)
        .add_node("review", review)
        .add_edge(START, "summarize")
        .add_edge("summarize", "review")
        .add_edge("review", END)
        .compile()
    )


class State(MessagesState):
    approved: Any


def approval_request(question: str) -> dict[str, Any]:
    """What ``approve`` asks when the question contains "approval".

    A request in the shape of LangChain's human-in-the-loop middleware (``action_requests`` and
    ``review_configs``), which LangChain's chat UI (agent-chat-ui) and Agent Inbox show with
    Approve and Reject buttons; they resume with ``{"decisions": [...]}``. A plain
    ``interrupt()`` value ("interrupt") they can only show, not answer.
    """
    action = {"name": "send_answer", "args": {"question": question}}
    return {
        "action_requests": [{**action, "description": "Send this answer?"}],
        "review_configs": [
            {"action_name": "send_answer", "allowed_decisions": ["approve", "reject"]}
        ],
    }


def approve(state: State) -> dict[str, Any]:
    q = last_human(state["messages"])
    if "approval" in q:
        return {"approved": interrupt(approval_request(q))}
    if "interrupt" in q and "deep interrupt" not in q:
        asked = {"question": "Approve the answer?", "options": ["yes", "no"]}
        return {"approved": interrupt(asked)}
    return {}


def builder() -> StateGraph:
    """The graph, not yet compiled."""
    return (
        StateGraph(State)
        .add_node("model", model)
        .add_node("tools", ToolNode([search]))
        .add_node("researcher", researcher())
        .add_node("approve", approve)
        .add_edge(START, "model")
        .add_conditional_edges("model", after_model, ["tools", "researcher"])
        .add_edge("tools", "model")
        .add_edge("researcher", "approve")
        .add_edge("approve", END)
    )


# Compiled without a checkpointer: the server that serves it gives it its own.
graph = builder().compile()
