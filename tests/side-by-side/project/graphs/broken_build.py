"""A graph factory that raises when the server builds the graph for a run."""

from langgraph.graph import StateGraph


class GraphBuildError(Exception):
    """Raised by the factory: a run of this graph fails with it."""


def make_graph() -> StateGraph:
    raise GraphBuildError("this graph cannot be built: its model is not configured")
