"""The worker's connections and loops (protocol/README.md, "Worker contract (the command
bridge)"), as the JavaScript worker's src/worker/loops.js:

- connections to Redis: ``cmd`` for every command (a pool), ``block`` for the blocking
  XREADGROUP, and a pub/sub connection for the control channel;
- start-up (``prepare``): the function library, loaded when no gateway has loaded it yet; the
  consumer group on each graph's stream; what the REST API shows of each graph (and its
  defaults); the registry;
- the read loop: XREADGROUP on the graphs' streams, each entry handled (commands.handle) and
  acknowledged once handled (unless it answered KEEP), never twice at once (``inflight``);
- the control channel ``tc:worker:<name>``: inject and cancel for runs this worker holds;
- the heartbeat: take over what dead workers left (takeover.claim); staying registered, keeping
  the entries in hand from looking idle and the leases of the threads it runs are
  keepalive.py's, from a thread of its own (a busy loop is not a dead worker);
- close: stop reading, leave the registry, let the runs in hand finish.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ResponseError

from threadcast_worker import config as run_configs
from threadcast_worker import keys, serde
from threadcast_worker.answers import KEEP
from threadcast_worker.functions import function_source
from threadcast_worker.worker import Worker


def redis_options(url: str, tls: dict[str, str | None] | None) -> dict[str, Any]:
    """redis-py options for a Redis URL read as the gateway reads it (deploy/configuration.md):
    rediss:// is TLS, the server's certificate checked against the URL's host, signed by
    tls["ca"] (a PEM file; the system's CAs when absent); tls["cert"] and tls["key"] are a
    client certificate. ``redis://secret@host`` is a password alone."""
    tls = {k: v for k, v in (tls or {}).items() if v}
    parts = urlsplit(url)
    o: dict[str, Any] = {}
    if parts.username is not None and parts.password is None:
        o["username"] = None
        o["password"] = unquote(parts.username)
    if parts.scheme == "rediss":
        if bool(tls.get("cert")) != bool(tls.get("key")):
            raise ValueError("a client certificate needs its key, and a key its certificate")
        if tls.get("ca"):
            o["ssl_ca_certs"] = tls["ca"]
        if tls.get("cert"):
            o["ssl_certfile"] = tls["cert"]
            o["ssl_keyfile"] = tls["key"]
    elif tls:
        first = next(iter(tls))
        raise ValueError(f"--redis-tls-{first} is set but the Redis URL is not rediss:// (TLS)")
    return o


RETRY = Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=20)
"""How a command whose connection broke is sent again: for about 30 s (50 ms, doubling, at most
2 s apart), so a Redis restarting (refused, then LOADING) stops nothing. Every command the worker
sends may be sent twice: appends carry BATCH ids, the records' writes are idempotent, a second
answer to a command is dropped by the gateway."""


async def connect(url: str, tls: dict[str, str | None] | None) -> tuple[Redis, Redis]:
    """The worker's clients: cmd (a pool) and block (the XREADGROUP's own connection)."""
    opts = redis_options(url, tls)
    cmd = Redis.from_url(url, socket_timeout=30, retry=RETRY, **opts)
    block = Redis.from_url(
        url, socket_timeout=30, single_connection_client=True, retry=RETRY, **opts
    )
    await cmd.ping()
    await block.ping()
    return cmd, block


# ---- start-up -------------------------------------------------------------------------------


async def register(w: Worker) -> None:
    """Registers (and so keeps registering, as the heartbeat) every graph this worker serves."""
    for a in w.assistants:
        await w.cmd.execute_command(
            "FCALL",
            "threadcast_register",
            2,
            keys.workers(a),
            keys.ASSISTANTS,
            a,
            w.name,
            w.live_ms,
        )


async def describe(w: Worker) -> None:
    """What the REST API shows of each graph (assistants.get, /graph, /schemas, /subgraphs) and
    its system assistant's config and context (the graph's defaults): the ainfo hashes."""
    from threadcast_worker import schemas

    for graph_id, served in w.graphs.items():
        defaults = dict(served.defaults)
        context = defaults.pop("context", None)
        info: dict[str, Any] = {
            "name": graph_id,
            # The REST API answers a Python graph's routes as LangGraph's Python server does
            # (protocol/README.md, "Two servers"); run_metadata: what a run's record shows of
            # the metadata it streams with, as langgraph dev's in-memory records show it.
            "language": "python",
            "run_metadata": serde.dumps(run_configs.stream_metadata({})),
            "graph": "{}",
            "schemas": serde.dumps(
                {
                    "graph_id": graph_id,
                    "input_schema": None,
                    "output_schema": None,
                    "state_schema": None,
                    "config_schema": None,
                    "context_schema": None,
                }
            ),
        }
        if served.defaults:
            info["config"] = serde.dumps(defaults)
            info["context"] = serde.dumps(context if context is not None else {})
        try:
            config = {**defaults, "configurable": dict(defaults.get("configurable") or {})}
            async with served.graph(config, access="assistants.read") as graph:
                info["graph"] = serde.dumps(schemas.graph_json(graph, False))
                info["graph_xray"] = serde.dumps(schemas.graph_json(graph, True))
                # The Python server draws xray=n n levels deep; from xray_depth on, as xray=true.
                for n in range(1, schemas.xray_depth(graph)):
                    info[f"graph_xray_{n}"] = serde.dumps(schemas.graph_json(graph, n))
                info["schemas"] = serde.dumps(schemas.graph_schemas(graph_id, graph))
                info["subgraphs"] = serde.dumps(schemas.subgraph_schemas(graph, recurse=True))
        except Exception as e:  # noqa: BLE001 — a graph that cannot be described is served on
            w.log(
                "warn",
                "cannot describe the graph for the REST API",
                assistant=graph_id,
                error=str(e),
            )
        stale = [
            k
            for k in await w.cmd.hkeys(keys.ainfo(graph_id))
            if k.startswith(b"graph_xray_") and k.decode() not in info
        ]
        async with w.cmd.pipeline(transaction=True) as tx:
            if stale:  # depths an earlier version of the graph had
                tx.hdel(keys.ainfo(graph_id), *stale)
            if "config" not in info:
                tx.hdel(keys.ainfo(graph_id), "config", "context")
            tx.hset(keys.ainfo(graph_id), mapping=info)
            tx.hsetnx(
                keys.ainfo(graph_id),
                "created_at",
                datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            )
            await tx.execute()


async def prepare(w: Worker) -> None:
    """Makes Redis ready for the worker — the function library, the groups, the graphs'
    descriptions — and registers it."""
    libs = await w.cmd.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "threadcast")
    if not libs:
        src = function_source()
        if src is None:
            raise RuntimeError(
                "threadcast's Redis functions are not loaded and protocol/redis/threadcast.lua "
                "was not found (THREADCAST_FUNCTION names it)"
            )
        await w.cmd.execute_command("FUNCTION", "LOAD", "REPLACE", src)
    for s in w.streams:
        try:
            await w.cmd.xgroup_create(s, keys.GROUP, id="0", mkstream=True)
        except ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise
    await describe(w)
    await register(w)


# ---- the loops ------------------------------------------------------------------------------


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def dispatch(w: Worker, stream: str, entry_id: str, fields: dict[Any, Any], claimed: bool) -> None:
    """Handles an entry unless it is in hand already; acknowledges it once handled (unless
    KEEP, or the worker is closing)."""
    from threadcast_worker.commands import handle

    k = f"{stream} {entry_id}"
    if k in w.inflight:
        return
    w.inflight[k] = (stream, entry_id)

    async def run() -> None:
        keep: Any = None
        try:
            keep = await handle(
                w, stream, entry_id, {_text(a): _text(b) for a, b in fields.items()}, claimed
            )
        except Exception as e:  # noqa: BLE001
            import traceback

            w.log("error", "command handling failed", error="".join(traceback.format_exception(e)))
        finally:
            w.inflight.pop(k, None)
        if keep is not KEEP and not w.closing:
            try:
                await w.cmd.xack(stream, keys.GROUP, entry_id)
            except Exception:  # noqa: BLE001 — acknowledged by a later claim
                pass

    w.spawn(run())


async def _read(w: Worker) -> None:
    while not w.closing:
        try:
            got = await w.block.xreadgroup(
                keys.GROUP, w.name, {s: ">" for s in w.streams}, count=16, block=1000
            )
        except Exception as e:  # noqa: BLE001
            if w.closing:
                return
            w.log("warn", "reading commands", error=str(e))
            await asyncio.sleep(0.5)
            continue
        for stream, entries in got or []:
            for entry_id, fields in entries:
                dispatch(w, _text(stream), _text(entry_id), fields, False)


async def _control(w: Worker) -> None:
    """Inject and cancel sent by workers that got those commands for a run this worker runs."""
    from threadcast_worker.runs import cancel_run, inject

    while not w.closing:
        try:
            msg = await w.pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
        except Exception as e:  # noqa: BLE001
            if w.closing:
                return
            w.log("warn", "control channel", error=str(e))
            await asyncio.sleep(0.5)
            continue
        if not msg or msg.get("type") != "message":
            continue
        try:
            m = serde.loads(msg["data"])
        except Exception:  # noqa: BLE001
            continue
        ctl = w.running.get(m.get("thread"))
        if ctl is None or ctl.over:
            continue
        if m.get("run_id") and m["run_id"] != ctl.run_id:
            continue  # a REST cancel for a run that is over
        if m.get("op") == "inject":
            inject(ctl, m.get("message") or {})
        elif m.get("op") == "cancel":
            cancel_run(ctl, m.get("action"))


async def _beat(w: Worker) -> None:
    """Take over what dead workers left, every heartbeat."""
    from threadcast_worker.takeover import claim

    while not w.closing:
        t0 = time.monotonic()
        try:
            await claim(w, lambda s, i, f, c: dispatch(w, s, i, f, c))
        except Exception as e:  # noqa: BLE001
            w.log("warn", "heartbeat", error=str(e))
        await asyncio.sleep(max(0.0, w.heartbeat_ms / 1000 - (time.monotonic() - t0)))


async def start(w: Worker) -> None:
    """Starts the keepalive thread, the control channel, the read loop and the heartbeat."""
    from threadcast_worker.keepalive import Keepalive

    w.keepalive = Keepalive(w, asyncio.get_running_loop())
    w.keepalive.start()
    w.pubsub = w.cmd.pubsub()
    await w.pubsub.subscribe(keys.control(w.name))
    w.controlling = w.spawn(_control(w))
    w.reading = w.spawn(_read(w))
    w.beating = w.spawn(_beat(w))


async def close(w: Worker, grace_s: float = 10.0) -> None:
    """Stops reading, leaves the registry, waits up to grace_s for the runs in hand."""
    w.closing = True
    for t in (w.beating, w.reading, w.controlling):
        if t is not None:
            t.cancel()
    if w.keepalive is not None:
        await asyncio.to_thread(w.keepalive.leave)
    for a in w.assistants:
        try:
            await w.cmd.zrem(keys.workers(a), w.name)
        except Exception:  # noqa: BLE001
            pass
    until = time.monotonic() + grace_s
    while w.inflight and time.monotonic() < until:  # noqa: ASYNC110 — entries end in many tasks
        await asyncio.sleep(0.1)
    for t in list(w.tasks):
        t.cancel()
    await asyncio.gather(*w.tasks, return_exceptions=True)
    if w.keepalive is not None:
        await asyncio.to_thread(w.keepalive.stop)
    try:
        await w.pubsub.aclose()
    except Exception:  # noqa: BLE001
        pass
    await w.block.aclose()
    await w.cmd.aclose()
