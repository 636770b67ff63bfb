"""graphs.py: langgraph.json read as LangGraph's Python server reads it, and every form a graph
may take (tests/projects/forms)."""

import os
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from threadcast_worker.graphs import (
    GraphLoadError,
    apply_environment,
    load_project,
    serve_graphs,
    spec_of,
)

FORMS = Path(__file__).parent / "projects" / "forms" / "langgraph.json"


@pytest.fixture
def served(monkeypatch):
    monkeypatch.delenv("THREADCAST_TEST_FORMS", raising=False)
    logged = []
    project = load_project(FORMS)
    apply_environment(project)
    graphs = serve_graphs(
        project,
        None,
        checkpointer=InMemorySaver(),
        store=InMemoryStore(),
        log=lambda level, msg, **f: logged.append((level, msg, f)),
    )
    return project, graphs, logged


def test_project_file_read_as_the_python_server_reads_it(served):
    project, _, _ = served
    assert project.js_graphs == ["js_graph"]
    assert project.graphs["factory_config"].description == "a factory of config"
    assert project.graphs["compiled"].path == str(FORMS.parent / "graphs.py")
    assert project.graphs["compiled"].variable == "compiled"
    assert os.environ["THREADCAST_TEST_FORMS"] == "from langgraph.json"
    assert str(FORMS.parent) in project.paths
    notes = " ".join(project.notes)
    assert "some-pip-package" in notes and "python_version" in notes and '"auth"' in notes


def test_environment_wins_over_the_project_env(monkeypatch):
    monkeypatch.setenv("THREADCAST_TEST_FORMS", "from the environment")
    apply_environment(load_project(FORMS))
    assert os.environ["THREADCAST_TEST_FORMS"] == "from the environment"


def test_bad_graphs_are_refused_with_their_reason_and_the_others_served(served):
    _, graphs, logged = served
    errors = {f["graph"]: f["error"] for level, _, f in logged if level == "error"}
    assert set(errors) == {"missing_attr", "not_a_graph", "broken"}
    assert 'no attribute "nothing_here"' in errors["missing_attr"]
    assert "compiled" in errors["missing_attr"]  # it names the graphs the file has
    assert "int" in errors["not_a_graph"]
    assert "does not import" in errors["broken"] and "no_such_module_anywhere" in errors["broken"]
    served_ids = {"compiled", "state_graph", "factory_none", "factory_cm", "factory_raises"}
    assert served_ids <= set(graphs)


async def _say(served_graph, config=None, access="threads.create_run"):
    async with served_graph.graph(config, access=access) as g:
        out = await g.ainvoke({"text": "x"}, {"configurable": {"thread_id": "t"}})
        return g, out["text"]


async def test_every_form_runs(served):
    _, graphs, _ = served
    g, text = await _say(graphs["compiled"])
    assert text == "x, hello" and g.name == "compiled"  # LangGraph's default name → the graph id
    assert isinstance(g.checkpointer, InMemorySaver) and isinstance(g.store, InMemoryStore)
    assert (await _say(graphs["state_graph"]))[1] == "x, hello"
    assert (await _say(graphs["factory_none"]))[1] == "x, hello (none)"
    who = {"configurable": {"who": "ada"}}
    assert (await _say(graphs["factory_config"], who))[1] == "x, hello (ada)"
    assert (await _say(graphs["factory_runtime"]))[1] == "x, hello (threads.create_run)"
    assert (await _say(graphs["factory_runtime"], None, "threads.read"))[1] == (
        "x, hello (threads.read)"
    )
    assert (await _say(graphs["factory_both"], who))[1] == "x, hello (threads.create_run, ada)"
    assert (await _say(graphs["factory_async"]))[1] == "x, hello (async)"
    assert graphs["factory_async"].is_factory and not graphs["compiled"].is_factory


async def test_a_context_manager_factory_is_closed_after_its_use(served):
    _, graphs, _ = served
    opened = graphs["factory_cm"]._factory.__wrapped__.__globals__["opened"]
    opened.clear()
    async with graphs["factory_cm"].graph(None) as g:
        assert opened == ["open"]
        await g.ainvoke({"text": "x"}, {"configurable": {"thread_id": "t"}})
    assert opened == ["open", "closed"]


async def test_a_factory_that_raises_fails_its_use_only(served):
    _, graphs, _ = served
    with pytest.raises(RuntimeError, match="cannot build a graph"):
        async with graphs["factory_raises"].graph(None):
            pass
    assert (await _say(graphs["compiled"]))[1] == "x, hello"


def test_specs():
    base = Path("/p")
    assert spec_of("a", "./src/agent.py:graph", base).path == "/p/src/agent.py"
    m = spec_of("b", "my.pkg.agent:graph", base)
    assert (m.module, m.variable, m.path) == ("my.pkg.agent", "graph", None)
    assert spec_of("c", "./agent.py", base).variable is None
    with pytest.raises(GraphLoadError, match='graph "d"'):
        spec_of("d", 42, base)


def test_unreadable_project(tmp_path):
    (tmp_path / "langgraph.json").write_text('{"graphs": 3}')
    with pytest.raises(GraphLoadError, match='"graphs"'):
        load_project(tmp_path / "langgraph.json")
    with pytest.raises(GraphLoadError, match="cannot read"):
        load_project(tmp_path / "nope.json")
