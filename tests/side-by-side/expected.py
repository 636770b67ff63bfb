"""What the example agent (src/worker-python/example/agent.py) says, spelled out for the tests."""

from __future__ import annotations

SEARCHING = "Let me search for that. "
SUMMARY = "Summary: the search found three sources."


def answer(q: str) -> str:
    return f'Here is what I found about "{q}".'


def found(q: str) -> str:
    return f'3 results for "{q}": threadcast, redis streams, langgraph'


def transcript(q: str) -> list[tuple[str, str]]:
    """The (type, text) of the messages a run on question q leaves in the state."""
    return [("human", q), ("ai", SEARCHING), ("tool", found(q)), ("ai", answer(q)), ("ai", SUMMARY)]


def tokens(q: str) -> list[str]:
    """The text tokens the model streams, in order: words, then characters."""
    return ["Let ", "me ", "search ", "for ", "that. ", *answer(q)]
