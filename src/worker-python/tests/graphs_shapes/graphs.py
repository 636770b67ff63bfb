"""Small graphs whose REST answers tests/test_rest_shapes.py and test_schemas_shapes.py compare
with `langgraph dev`'s: messages, a subgraph, interrupts (one inside the subgraph), a pydantic
state, a dataclass state, config/context schemas with distinct input and output schemas, a
subgraph inside a subgraph, a node that fails. Every id a node writes is derived from its input,
so a run here and the same run in-process write the same values."""

from __future__ import annotations

import datetime
import decimal
import enum
import operator
import uuid
from dataclasses import dataclass, field
from typing import Annotated

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

# ---- agent: messages, a subgraph that interrupts, an interrupt of its own ----------------------


class AgentState(MessagesState):
    notes: Annotated[list[str], operator.add]
    approved: bool


class ReviewState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[list[str], operator.add]


def draft(state: ReviewState) -> dict:
    n = len(state["messages"])
    return {"messages": [AIMessage(content=f"draft {n}", id=f"draft-{n}")], "notes": ["drafted"]}


def review(state: ReviewState) -> dict:
    verdict = interrupt({"question": "approve the draft?", "draft": state["messages"][-1].content})
    return {"notes": [f"review: {verdict}"]}


review_graph = (
    StateGraph(ReviewState)
    .add_node("draft", draft)
    .add_node("review", review)
    .add_edge(START, "draft")
    .add_edge("draft", "review")
    .compile()
)


def plan(state: AgentState) -> dict:
    n = len(state["messages"])
    return {"messages": [AIMessage(content="planning", id=f"plan-{n}")], "notes": ["planned"]}


def confirm(state: AgentState) -> dict:
    answer = interrupt(
        "send it?",
        response_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
    )
    ok = bool(answer.get("ok")) if isinstance(answer, dict) else bool(answer)
    return {"approved": ok, "notes": [f"confirmed {ok}"]}


agent = (
    StateGraph(AgentState)
    .add_node("plan", plan)
    .add_node("review", review_graph)
    .add_node("confirm", confirm)
    .add_edge(START, "plan")
    .add_edge("plan", "review")
    .add_edge("review", "confirm")
    .add_edge("confirm", END)
    .compile()
)

# ---- pyd: a pydantic state -------------------------------------------------------------------


class Item(BaseModel):
    name: str
    qty: int = 1


class PydState(BaseModel):
    topic: str = Field(description="what the run is about")
    items: Annotated[list[Item], operator.add] = []
    score: float | None = None


def count(state: PydState) -> dict:
    return {"items": [Item(name=state.topic, qty=len(state.items) + 1)], "score": 0.5}


pyd = StateGraph(PydState).add_node("count", count).add_edge(START, "count").compile()

# ---- ctx: input/output schemas, a context schema, a config type --------------------------------


class CtxInput(TypedDict):
    question: str


class CtxOutput(TypedDict):
    answer: str


class CtxState(CtxInput, CtxOutput):
    hops: int


@dataclass
class CtxContext:
    user: str
    depth: int = 2
    tags: list[str] = field(default_factory=list)


def answer(state: CtxState, runtime) -> dict:  # noqa: ANN001 — LangGraph's Runtime
    return {"answer": f"{state['question']} for {runtime.context.user}", "hops": 1}


ctx = (
    StateGraph(CtxState, input_schema=CtxInput, output_schema=CtxOutput, context_schema=CtxContext)
    .add_node("answer", answer)
    .add_edge(START, "answer")
    .compile()
)

# ---- nested: a subgraph inside a subgraph ------------------------------------------------------


class Counter(TypedDict):
    count: Annotated[int, operator.add]
    trail: Annotated[list[str], operator.add]


def step(name: str):
    def run(state: Counter) -> dict:
        return {"count": 1, "trail": [name]}

    return run


def ask(state: Counter) -> dict:
    got = interrupt({"at": "inner", "count": state["count"]})
    return {"trail": [f"asked {got}"]}


inner = (
    StateGraph(Counter)
    .add_node("inner_step", step("inner"))
    .add_node("ask", ask)
    .add_edge(START, "inner_step")
    .add_edge("inner_step", "ask")
    .compile()
)
middle = (
    StateGraph(Counter)
    .add_node("middle_step", step("middle"))
    .add_node("inner", inner)
    .add_edge(START, "middle_step")
    .add_edge("middle_step", "inner")
    .compile()
)
nested = (
    StateGraph(Counter)
    .add_node("outer_step", step("outer"))
    .add_node("middle", middle)
    .add_node("side", step("side"))
    .add_edge(START, "outer_step")
    .add_edge("outer_step", "middle")
    .add_edge("middle", "side")
    .compile()
)

# ---- dc: a dataclass state, and a Command with goto ---------------------------------------------


@dataclass
class DcState:
    text: str
    words: Annotated[list[str], operator.add] = field(default_factory=list)


def split(state: DcState) -> Command:
    return Command(update={"words": state.text.split()}, goto="shout")


def shout(state: DcState) -> dict:
    return {"words": [w.upper() for w in state.words]}


dc = StateGraph(DcState).add_node("split", split, destinations=("shout",)).add_node("shout", shout)
dc = dc.add_edge(START, "split").compile()

# ---- fails: a node that raises -------------------------------------------------------------------


class FailState(TypedDict):
    value: int


def boom(state: FailState) -> dict:
    if state["value"] < 0:
        raise ValueError(f"negative value {state['value']}")
    return {"value": state["value"] * 2}


fails = StateGraph(FailState).add_node("boom", boom).add_edge(START, "boom").compile()

# ---- odd: values JSON has no type for ------------------------------------------------------------


class Mood(enum.Enum):
    CALM = "calm"


class OddState(TypedDict, total=False):
    when: datetime.datetime
    day: datetime.date
    wait: datetime.timedelta
    price: decimal.Decimal
    ref: uuid.UUID
    tags: set[str]
    pair: tuple[int, str]
    mood: Mood
    item: Item


def oddities(state: OddState) -> dict:
    return {
        "when": datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.UTC),
        "day": datetime.date(2024, 5, 6),
        "wait": datetime.timedelta(days=1, seconds=2, microseconds=3),
        "price": decimal.Decimal("12.50"),
        "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "tags": {"only"},
        "pair": (1, "one"),
        "mood": Mood.CALM,
        "item": Item(name="thing"),
    }


odd = StateGraph(OddState).add_node("oddities", oddities).add_edge(START, "oddities").compile()
