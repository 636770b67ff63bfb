"""A graph using the server's store: one node (sync) puts an item, the next (async) reads it back
and lists the user's items (what the graph put and what a client put before the run).
"""

from typing import TypedDict

from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    user: str
    fact: str
    remembered: dict
    found: list


def remember(state: State) -> dict:
    store = get_store()
    store.put(("memories", state["user"]), "fact", {"text": state["fact"]})
    return {}


async def recall(state: State) -> dict:
    store = get_store()
    item = await store.aget(("memories", state["user"]), "fact")
    found = await store.asearch(("memories", state["user"]))
    return {
        "remembered": {"namespace": list(item.namespace), "key": item.key, "value": item.value},
        "found": sorted(i.key for i in found),
    }


graph = (
    StateGraph(State)
    .add_node("remember", remember)
    .add_node("recall", recall)
    .add_edge(START, "remember")
    .add_edge("remember", "recall")
    .add_edge("recall", END)
    .compile()
)
