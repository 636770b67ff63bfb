"""A graph file that does not import: the worker names it at start and serves the others."""

from threadcast_test_graphs_nowhere import graph  # noqa: F401 — no such module, on purpose
