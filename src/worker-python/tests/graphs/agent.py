"""The side-by-side test project's graphs: a model node with a fake streaming chat model (text and
tool call chunks), a tool node whose tool writes custom chunks, a subgraph with a model of its own,
an interrupt, and a failing node. Every model answer is decided by the messages it is given, so
the reference server and observe() produce the same runs."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt
from typing_extensions import TypedDict


class ScriptedModel(BaseChatModel):
    """Answers from the conversation: asks for the `search` tool once, then answers; streams its
    text word by word and its tool call's arguments in pieces."""

    name_: str = "scripted"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _answer(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"The search said: {last.content}. Done.")
        text = str(last.content)
        if "lookup" in text:
            query = text.replace("lookup", "").strip() or "nothing"
            return AIMessage(
                content="Let me look that up.",
                tool_calls=[{"name": "search", "args": {"query": query}, "id": "call_1"}],
            )
        return AIMessage(content=f"You said: {text}")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages))])

    def _chunks(self, messages: list[BaseMessage]) -> Iterator[AIMessageChunk]:
        answer = self._answer(messages)
        for word in re.split(r"(\s)", str(answer.content)):
            if word:
                yield AIMessageChunk(content=word)
        for i, call in enumerate(answer.tool_calls):
            args = '{"query": "' + call["args"]["query"] + '"}'
            pieces = [args[: len(args) // 2], args[len(args) // 2 :]]
            yield AIMessageChunk(
                content="",
                tool_call_chunks=[
                    tool_call_chunk(name=call["name"], args=pieces[0], id=call["id"], index=i)
                ],
            )
            yield AIMessageChunk(
                content="", tool_call_chunks=[tool_call_chunk(args=pieces[1], index=i)]
            )

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages):
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages):
            yield ChatGenerationChunk(message=chunk)


class State(TypedDict):
    messages: Annotated[list, add_messages]
    notes: list[str]


model = ScriptedModel()


@tool
def search(query: str) -> str:
    """Searches for query."""
    write = get_stream_writer()
    write({"progress": "searching", "query": query})
    write({"progress": "done"})
    return f"results for {query}"


async def call_model(state: State) -> dict:
    return {"messages": [await model.ainvoke(state["messages"])]}


def route(state: State) -> str:
    last = state["messages"][-1]
    if getattr(last, "tool_calls", None):
        return "tools"
    text = str(state["messages"][0].content)
    if "research" in text:
        return "researcher"
    if "interrupt" in text:
        return "approve"
    if "fail" in text:
        return "fail"
    return END


# The subgraph: a model of its own, and a note.
class SubState(TypedDict):
    messages: Annotated[list, add_messages]
    notes: list[str]


async def sub_model(state: SubState) -> dict:
    answer = await model.ainvoke([*state["messages"][:1], ("user", "researching deeply")])
    return {"messages": [answer]}


def sub_note(state: SubState) -> dict:
    get_stream_writer()("noted")
    return {"notes": ["researched"]}


researcher = (
    StateGraph(SubState)
    .add_node("sub_model", sub_model)
    .add_node("sub_note", sub_note)
    .add_edge(START, "sub_model")
    .add_edge("sub_model", "sub_note")
    .add_edge("sub_note", END)
    .compile()
)


def approve(state: State) -> dict:
    answer = interrupt({"question": "approve?", "about": str(state["messages"][0].content)})
    return {"messages": [AIMessage(content=f"You answered: {answer}.", id="approved")]}


class CustomError(Exception):
    """A graph's own exception class."""


def fail(state: State) -> dict:
    if "custom" in str(state["messages"][0].content):
        raise CustomError("the node failed on purpose")
    raise ValueError("the node failed on purpose")


graph = (
    StateGraph(State)
    .add_node("model", call_model)
    .add_node("tools", ToolNode([search]))
    .add_node("researcher", researcher)
    .add_node("approve", approve)
    .add_node("fail", fail)
    .add_edge(START, "model")
    .add_conditional_edges("model", route, ["tools", "researcher", "approve", "fail", END])
    .add_edge("tools", "model")
    .add_edge("researcher", END)
    .add_edge("approve", END)
    .add_edge("fail", END)
    .compile()
)
