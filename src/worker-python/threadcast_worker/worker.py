"""threadcast's Python worker: runs LangGraph (Python) graphs for the runtime commands and REST
runs browsers send through threadcast, and appends what the graphs emit to the threads' event
streams.

    worker = await serve(redis="redis://127.0.0.1:6379", config="./langgraph.json")
    …
    await worker.close()

The contract it implements is protocol/README.md's "Worker contract" and "The LangGraph worker",
as the JavaScript worker (src/worker/) implements it: per-graph command streams with a consumer
group, a registry with heartbeats, answers on the gateway's reply channel, events through
``FCALL threadcast_append_batch``, checkpoints on the same Redis. Runs of one thread never
overlap, on any number of workers of either language: a lock per thread.

This module owns ``serve()`` and the worker's shared state (``Worker``), which every other
module's functions take first. README.md has the map.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadcast_worker import keys
from threadcast_worker.graphs import (
    Project,
    ServedGraph,
    apply_environment,
    load_project,
    serve_graphs,
)
from threadcast_worker.logger import Log, json_log

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from threadcast_worker.keepalive import Lease
    from threadcast_worker.lock import Scripts
    from threadcast_worker.runs import Run


@dataclass
class Waiting:
    """A REST run waiting here for its after_seconds or its thread."""

    run_id: str
    thread: str
    cancel_action: str | None = None


@dataclass
class Worker:
    """The worker's shared state: settings, connections, graphs, and what it has in hand."""

    log: Log
    name: str
    heartbeat_ms: int
    live_ms: int
    claim_idle_ms: int
    lock_ms: int
    cmd: Redis
    block: Redis
    graphs: dict[str, ServedGraph] = field(default_factory=dict)
    running: dict[str, Run] = field(default_factory=dict)  # thread → the run it runs there
    waiting: dict[str, Waiting] = field(default_factory=dict)  # REST run id → its wait
    inflight: dict[str, tuple[str, str]] = field(default_factory=dict)  # "<stream> <id>"
    closing: bool = False
    saver: Any = None
    store: Any = None
    scripts: Scripts | None = None  # type: ignore[assignment]
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    reading: asyncio.Task[None] | None = None
    beating: asyncio.Task[None] | None = None
    controlling: asyncio.Task[None] | None = None
    pubsub: Any = None
    redis_url: str = ""
    redis_opts: dict[str, Any] = field(default_factory=dict)  # redis-py's, for the keepalive
    leases: dict[str, Lease] = field(default_factory=dict)  # thread → the lease renewed for it
    keepalive: Any = None

    @property
    def assistants(self) -> list[str]:
        return list(self.graphs)

    @property
    def streams(self) -> list[str]:
        return [keys.stream(a) for a in self.graphs]

    def assistant_of(self, stream: str) -> str | None:
        for a in self.graphs:
            if keys.stream(a) == stream:
                return a
        return None

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """A task the worker keeps until it is done (asyncio holds tasks weakly)."""
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task


class ServedWorker:
    """What serve() returns: the worker's name, graphs, and close()."""

    def __init__(self, w: Worker) -> None:
        self._w = w

    @property
    def name(self) -> str:
        return self._w.name

    @property
    def graphs(self) -> dict[str, ServedGraph]:
        return self._w.graphs

    @property
    def state(self) -> Worker:
        return self._w

    async def close(self, grace_s: float = 10.0) -> None:
        """Stops reading, leaves the registry, and waits up to grace_s for the runs in hand;
        what is still running then is left to other workers."""
        from threadcast_worker.loops import close

        await close(self._w, grace_s)


async def serve(
    *,
    redis: str | None = None,
    config: str | None = None,
    graphs: dict[str, Any] | None = None,
    project: Project | None = None,
    name: str | None = None,
    log: Log = json_log,
    heartbeat_ms: int = 1000,
    live_ms: int | None = None,
    claim_idle_ms: int = 3000,
    lock_ms: int = 3000,
    ttl_seconds: int | None = None,
    tls: dict[str, str | None] | None = None,
) -> ServedWorker:
    """Starts a worker; returns once it is registered and reading.

    redis: a redis:// or rediss:// URL (default $THREADCAST_REDIS_URL, else
    redis://127.0.0.1:6379); config: a langgraph.json whose Python graphs it serves; graphs:
    ``{<graph id>: graph, StateGraph or factory}`` given as objects; tls: ``{ca, cert, key}``
    PEM files for rediss:// (default $THREADCAST_REDIS_TLS_CA, _CERT, _KEY). A dead worker's
    run is taken over within claim_idle_ms (+ a heartbeat), once its lock lapsed."""
    from threadcast_worker.checkpoint import WorkerSaver
    from threadcast_worker.lock import Scripts
    from threadcast_worker.loops import connect, prepare, redis_options, start
    from threadcast_worker.store import ThreadcastStore

    url = redis or os.environ.get("THREADCAST_REDIS_URL") or "redis://127.0.0.1:6379"
    if tls is None:
        tls = {
            "ca": os.environ.get("THREADCAST_REDIS_TLS_CA"),
            "cert": os.environ.get("THREADCAST_REDIS_TLS_CERT"),
            "key": os.environ.get("THREADCAST_REDIS_TLS_KEY"),
        }
    if project is None and config is not None:
        project = load_project(config)
    if project is not None:
        apply_environment(project)
        for note in project.notes:
            log("warn", "langgraph.json", note=note)
        if project.js_graphs:
            log(
                "info",
                "JavaScript graphs are left to the JavaScript worker",
                graphs=project.js_graphs,
            )
    cmd, block = await connect(url, tls)
    w = Worker(
        log=log,
        name=name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}",
        heartbeat_ms=heartbeat_ms,
        live_ms=live_ms if live_ms is not None else 3 * heartbeat_ms,
        claim_idle_ms=claim_idle_ms,
        lock_ms=lock_ms,
        cmd=cmd,
        block=block,
        redis_url=url,
        redis_opts=redis_options(url, tls),
    )
    w.scripts = Scripts(cmd)

    def rest_run_of(thread: str) -> bool:
        run = w.running.get(thread)
        return bool(run and run.rest_run)

    w.saver = WorkerSaver(cmd, worker_name=w.name, rest_run_of=rest_run_of, ttl_seconds=ttl_seconds)
    w.store = ThreadcastStore(cmd)
    w.graphs = serve_graphs(project, graphs, checkpointer=w.saver, store=w.store, log=log)
    if not w.graphs:
        await cmd.aclose()
        await block.aclose()
        raise RuntimeError("no graph to serve")
    await prepare(w)
    await start(w)
    log("info", "worker ready", name=w.name, assistants=w.assistants)
    return ServedWorker(w)
