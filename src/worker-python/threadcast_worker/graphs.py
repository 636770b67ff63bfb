"""The graphs a worker serves: where they come from, in which forms they are taken, and how a
run gets its graph — as LangGraph's Python server takes them, so a project that runs under
``langgraph dev`` runs here unchanged.

- A graph is a module attribute named by ``langgraph.json``'s ``graphs``
  (``"./src/agent.py:graph"``, ``"my.package.module:graph"``, or ``{"path": …}``), relative
  paths from the project file's directory. Its value may be a compiled graph, a ``StateGraph``
  (compiled here), or a factory: a function of nothing, of the run's config, of the server
  runtime (a parameter annotated ``ServerRuntime``), or of both, returning a graph, a
  coroutine of one, or a context manager (sync or async) that yields one. A factory is called
  for every run (``threads.create_run``, with the run's config and context), every state read
  or update (``threads.read`` / ``threads.update``) and every description
  (``assistants.read``), as the Python server calls it.
- ``env`` (an object, or a ``.env`` file's path) is put into the environment before any graph
  is imported, where the environment does not set the name already. ``dependencies``: local
  directories are put on ``sys.path`` (the Python server installs them; a package name must be
  installed in the worker's environment by its owner), ``python_version`` is the image's
  business: both are named in a log line, as are the keys this worker does not serve (``auth``,
  ``http``, ``ui``, …) and the JavaScript graphs (the JavaScript worker's).
- Every graph gets the worker's checkpointer and store, and the graph id as its name when it
  has LangGraph's default name, as the Python server gives them (``Pregel.copy``).
- Per-graph defaults: ``LANGGRAPH_CONFIG`` (JSON ``{<graph id>: {configurable, context, …}}``),
  the config and context of the graph's system assistant.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import typing
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin

import orjson
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from threadcast_worker.logger import Log

AccessContext = typing.Literal[
    "threads.create_run", "threads.update", "threads.read", "assistants.read"
]

JS_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx")


class GraphLoadError(Exception):
    """A graph that cannot be served: its file does not import, its attribute is missing or not
    a graph. The message names the graph and what is wrong."""


# ---- the project file -------------------------------------------------------------------------


@dataclass
class GraphSpec:
    id: str
    path: str | None  # a file, absolute
    module: str | None  # or a module name
    variable: str | None  # the attribute; None: the first graph the module has
    description: str | None = None


@dataclass
class Project:
    """What a langgraph.json says the Python worker must serve."""

    graphs: dict[str, GraphSpec] = field(default_factory=dict)
    js_graphs: list[str] = field(default_factory=list)  # served by the JavaScript worker
    env: dict[str, str] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)  # put on sys.path
    notes: list[str] = field(default_factory=list)  # what is not served, said once at start


def is_js_source(source: str) -> bool:
    return source.split(":", 1)[0].endswith(JS_SUFFIXES)


def _read_dotenv(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        name = name.removeprefix("export ").strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[name] = value
    return env


def spec_of(graph_id: str, value: Any, base: Path) -> GraphSpec:
    """A graphs entry (``"./file.py:attr"``, ``"pkg.module:attr"``, ``{"path": …}``) as a spec."""
    source = value.get("path") if isinstance(value, dict) else value
    if not isinstance(source, str) or not source:
        raise GraphLoadError(
            f'graph "{graph_id}": expected "./path/file.py:attribute", "module:attribute" '
            f'or {{"path": …}}, got {value!r}'
        )
    where, sep, variable = source.rpartition(":")
    if not sep:
        where, variable = source, ""
    description = value.get("description") if isinstance(value, dict) else None
    if "/" in where or where.endswith(".py"):
        return GraphSpec(
            graph_id, str((base / where).resolve()), None, variable or None, description
        )
    return GraphSpec(graph_id, None, where, variable or None, description)


def load_project(config_path: str | os.PathLike[str]) -> Project:
    """Reads a langgraph.json as the Python server reads it; raises GraphLoadError when it is
    not one."""
    path = Path(config_path).resolve()
    try:
        conf = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise GraphLoadError(f"cannot read {path}: {e}") from e
    if not isinstance(conf, dict) or not isinstance(conf.get("graphs"), dict):
        raise GraphLoadError(f'{path}: expected an object with "graphs"')
    base = path.parent
    project = Project()
    for graph_id, value in conf["graphs"].items():
        source = value.get("path") if isinstance(value, dict) else value
        if isinstance(source, str) and is_js_source(source):
            project.js_graphs.append(graph_id)
            continue
        project.graphs[graph_id] = spec_of(graph_id, value, base)
    env = conf.get("env")
    if isinstance(env, dict):
        project.env = {str(k): str(v) for k, v in env.items()}
    elif isinstance(env, str):
        try:
            project.env = _read_dotenv(base / env)
        except OSError as e:
            raise GraphLoadError(f'{path}: env "{env}": {e}') from e
    for dep in conf.get("dependencies") or []:
        if isinstance(dep, str) and (dep.startswith((".", "/"))):
            project.paths.append(str((base / dep).resolve()))
        else:
            project.notes.append(
                f"dependency {dep!r} is not installed by the worker: install it into its "
                "environment"
            )
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if "python_version" in conf and str(conf["python_version"]) != running:
        project.notes.append(
            f"python_version {conf['python_version']!r} is ignored: the worker runs on "
            f"Python {sys.version_info.major}.{sys.version_info.minor}"
        )
    for key in ("auth", "http", "ui", "store", "checkpointer", "webhooks", "keep_alive"):
        if key in conf:
            project.notes.append(f'"{key}" is not served by threadcast\'s Python worker yet')
    return project


def apply_environment(project: Project) -> None:
    """The project's env (where the environment does not set a name) and paths, before any
    graph is imported."""
    for name, value in project.env.items():
        os.environ.setdefault(name, value)
    for p in reversed(project.paths):
        if p not in sys.path:
            sys.path.insert(0, p)


def graph_defaults() -> dict[str, dict[str, Any]]:
    """LANGGRAPH_CONFIG: each graph's system assistant's config (and context)."""
    text = os.environ.get("LANGGRAPH_CONFIG")
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise GraphLoadError(f"LANGGRAPH_CONFIG is not JSON: {e}") from e
    if not isinstance(value, dict):
        raise GraphLoadError("LANGGRAPH_CONFIG must be a JSON object {<graph id>: {…}}")
    return {k: v for k, v in value.items() if isinstance(v, dict)}


# ---- importing ------------------------------------------------------------------------------


def _import(spec: GraphSpec) -> Any:
    try:
        if spec.module:
            module = importlib.import_module(spec.module)
        else:
            assert spec.path is not None
            name = "threadcast_graph_" + "".join(c if c.isalnum() else "_" for c in spec.path)
            mspec = importlib.util.spec_from_file_location(name, spec.path)
            if mspec is None or mspec.loader is None:
                raise GraphLoadError(f'graph "{spec.id}": {spec.path} is not a Python file')
            module = importlib.util.module_from_spec(mspec)
            sys.modules[name] = module
            parent = str(Path(spec.path).parent)
            if parent not in sys.path:  # sibling imports, as the server's project directory
                sys.path.insert(0, parent)
            mspec.loader.exec_module(module)
    except GraphLoadError:
        raise
    except FileNotFoundError as e:
        raise GraphLoadError(f'graph "{spec.id}": no such file {spec.path}') from e
    except BaseException as e:  # an import that fails in any way is this graph's failure
        where = spec.module or spec.path
        raise GraphLoadError(
            f'graph "{spec.id}": {where} does not import: {type(e).__name__}: {e}'
        ) from e
    if spec.variable is None:
        found = [v for v in vars(module).values() if isinstance(v, Pregel)] or [
            v for v in vars(module).values() if isinstance(v, StateGraph)
        ]
        if not found:
            raise GraphLoadError(f'graph "{spec.id}": {spec.path or spec.module} has no graph')
        return found[0]
    try:
        return vars(module)[spec.variable]
    except KeyError:
        graphs = [k for k, v in vars(module).items() if isinstance(v, Pregel | StateGraph)]
        hint = f" (graphs it has: {', '.join(graphs)})" if graphs else ""
        raise GraphLoadError(
            f'graph "{spec.id}": {spec.path or spec.module} has no attribute '
            f'"{spec.variable}"{hint}'
        ) from None


# ---- factories ------------------------------------------------------------------------------


def _is_runtime_annotation(annotation: Any) -> bool:
    from langgraph_sdk.runtime import ServerRuntime, _ExecutionRuntime, _ReadRuntime

    if annotation is inspect.Parameter.empty:
        return False
    if annotation is ServerRuntime:
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, _ExecutionRuntime | _ReadRuntime)
    origin = get_origin(annotation)
    if origin is ServerRuntime:
        return True
    args = get_args(annotation)
    return origin is typing.Annotated and bool(args) and _is_runtime_annotation(args[0])


def factory_arguments(fn: Callable[..., Any], graph_id: str) -> Callable[[Any, Any], dict]:
    """How a factory is called: its arguments for (config, runtime), by its signature (nothing,
    a config, a ServerRuntime-annotated runtime, or both in either order), as the server."""
    from langchain_core.runnables import RunnableConfig
    from langgraph_sdk.runtime import ServerRuntime

    params = list(inspect.signature(fn).parameters.values())
    try:
        hints = typing.get_type_hints(
            fn, localns={"ServerRuntime": ServerRuntime, "RunnableConfig": RunnableConfig}
        )
    except Exception:  # noqa: BLE001 — unresolvable annotations: judged by what is written
        hints = {}

    def runtime_param(p: inspect.Parameter) -> bool:
        return _is_runtime_annotation(hints.get(p.name, p.annotation))

    if not params:
        return lambda config, runtime: {}
    if len(params) == 1:
        name = params[0].name
        if runtime_param(params[0]):
            return lambda config, runtime: {name: runtime}
        return lambda config, runtime: {name: config}
    if len(params) == 2:
        rt = [p.name for p in params if runtime_param(p)]
        if len(rt) != 1:
            raise GraphLoadError(
                f'graph "{graph_id}": a factory of two arguments takes a ServerRuntime and a config'
            )
        cfg = next(p.name for p in params if p.name != rt[0])
        return lambda config, runtime: {rt[0]: runtime, cfg: config}
    raise GraphLoadError(f'graph "{graph_id}": a factory takes 0, 1 or 2 arguments')


@contextlib.asynccontextmanager
async def _as_async_cm(value: Any) -> AsyncIterator[Any]:
    if hasattr(value, "__aenter__") and hasattr(value, "__aexit__"):
        async with value as got:
            yield got
    elif hasattr(value, "__enter__") and hasattr(value, "__exit__"):
        with value as got:
            yield got
    elif inspect.isawaitable(value):
        yield await value
    else:
        yield value


# ---- what a run gets ------------------------------------------------------------------------


class ServedGraph:
    """One graph the worker serves: built once (a graph) or per call (a factory)."""

    def __init__(
        self,
        graph_id: str,
        value: Any,
        *,
        defaults: dict[str, Any] | None,
        checkpointer: Any,
        store: Any,
        description: str | None = None,
    ) -> None:
        self.id = graph_id
        self.defaults = defaults or {}
        self.description = description
        self.checkpointer = checkpointer
        self.store = store
        self._factory: Callable[..., Any] | None = None
        self._compiled: Pregel | None = None
        if isinstance(value, Pregel | StateGraph):
            self._compiled = self._equip(value)
        elif callable(value):
            self._factory = value
            self._arguments = factory_arguments(value, graph_id)
        else:
            raise GraphLoadError(
                f'graph "{graph_id}" is a {type(value).__name__}, '
                "not a graph, a StateGraph or a graph factory"
            )

    @property
    def is_factory(self) -> bool:
        return self._factory is not None

    def _equip(self, value: Any) -> Pregel:
        if isinstance(value, StateGraph):
            value = value.compile()
        if not isinstance(value, Pregel):
            raise GraphLoadError(
                f'graph "{self.id}": its factory gave a {type(value).__name__}, not a graph'
            )
        update: dict[str, Any] = {"checkpointer": self.checkpointer, "store": self.store}
        if value.name == "LangGraph":
            update["name"] = self.id
        return value.copy(update=update)

    @contextlib.asynccontextmanager
    async def graph(
        self,
        config: dict[str, Any] | None = None,
        *,
        access: AccessContext = "threads.create_run",
        context: Any = None,
    ) -> AsyncIterator[Pregel]:
        """The graph for one use: a factory is called with config (and the server runtime
        of this access), and whatever it opened is closed when the use ends."""
        if self._compiled is not None:
            yield self._compiled
            return
        from langgraph_sdk.runtime import _ExecutionRuntime, _ReadRuntime

        if access == "threads.create_run":
            runtime: Any = _ExecutionRuntime(
                access_context=access, user=None, store=self.store, context=context
            )
        else:
            runtime = _ReadRuntime(access_context=access, user=None, store=self.store)
        cfg = dict(config or {})
        cfg["configurable"] = dict(cfg.get("configurable") or {})
        assert self._factory is not None
        made = self._factory(**self._arguments(cfg, runtime))
        async with _as_async_cm(made) as value:
            yield self._equip(value)


def serve_graphs(
    project: Project | None,
    given: dict[str, Any] | None,
    *,
    checkpointer: Any,
    store: Any,
    log: Log,
) -> dict[str, ServedGraph]:
    """The graphs of a project (imported now, so a bad one fails at start with its reason, and
    the others are served on) and graphs given as objects (``serve(graphs=…)``)."""
    defaults = graph_defaults()
    served: dict[str, ServedGraph] = {}
    specs = project.graphs if project else {}
    for graph_id, spec in specs.items():
        try:
            value = _import(spec)
            served[graph_id] = ServedGraph(
                graph_id,
                value,
                defaults=defaults.get(graph_id),
                checkpointer=checkpointer,
                store=store,
                description=spec.description,
            )
        except GraphLoadError as e:
            log("error", "graph not served", graph=graph_id, error=str(e))
    for graph_id, value in (given or {}).items():
        try:
            served[graph_id] = ServedGraph(
                graph_id,
                value,
                defaults=defaults.get(graph_id),
                checkpointer=checkpointer,
                store=store,
            )
        except GraphLoadError as e:
            log("error", "graph not served", graph=graph_id, error=str(e))
    return served
