"""A graph whose node puts a value JSON cannot represent into the state."""

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph


class Opaque:
    """An object with no JSON form (no __dict__ worth showing, no pydantic, no dataclass)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int) -> None:
        self.handle = handle


class State(TypedDict, total=False):
    label: str
    thing: Any


def make_thing(state: State) -> dict:
    return {"thing": Opaque(7), "label": "made"}


graph = (
    StateGraph(State)
    .add_node("make_thing", make_thing)
    .add_edge(START, "make_thing")
    .add_edge("make_thing", END)
    .compile()
)
