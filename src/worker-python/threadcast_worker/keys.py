"""Every Redis name the worker uses: keys, streams, their consumer group,
channels, and the keys FCALL is given.

They are part of the contract between the worker, the gateway and the Redis
functions — protocol/README.md ("Redis contract", "Worker contract (the
command bridge)", "The LangGraph worker", "REST runs and state") — so each is
spelled here and nowhere else, exactly as the contract writes it, and as the
JavaScript worker spells them (src/worker/keys.js).

Hash tags: the command bridge's names share ``{tc:commands}`` (one Cluster
slot, the one ``tc:commands`` hashes to); everything of thread T shares
``{T}``; the store is ``{tc:store}``. The reply channel is not built here: a
command entry names it (``reply``).
"""

from __future__ import annotations

from typing import NamedTuple

GROUP = "workers"
"""The consumer group on every command stream."""

COMMANDS = "tc:commands"  # the wildcard workers' stream (threadcast-agent)
ASSISTANTS = "{tc:commands}:assistants"  # every assistant ever registered
REST = "{tc:commands}"  # FCALL threadcast_rest 1 {tc:commands} <op> <json>
STORE = "{tc:store}"  # FCALL threadcast_store 1 {tc:store} <op> <json>

SIDE = "custom:threadcast.modes"
"""The method of side events (a named custom channel: nobody subscribed to
``custom`` gets them), protocol/README.md "Run streams"."""


def stream(assistant: str) -> str:
    """The command stream of an assistant (graph)."""
    return f"{{tc:commands}}:a:{assistant}"


def workers(assistant: str) -> str:
    """Its live workers: consumer name → until when (ms, Redis' clock)."""
    return f"{{tc:commands}}:w:{assistant}"


def ainfo(assistant: str) -> str:
    """What the REST API shows of a graph (drawing, schemas, defaults)."""
    return f"{{tc:commands}}:ainfo:{assistant}"


def rest_run(run_id: str) -> str:
    """A REST run's record (the worker reads its ``cancel``)."""
    return f"{{tc:commands}}:r:{run_id}"


def control(consumer: str) -> str:
    """Inject and cancel for the runs a worker holds (pub/sub)."""
    return f"tc:worker:{consumer}"


def events(thread: str) -> str:
    return f"tc:{{{thread}}}:events"


def meta(thread: str) -> str:
    return f"tc:{{{thread}}}:meta"


def lock(thread: str) -> str:
    """The worker running the thread's run (a PX lease)."""
    return f"tc:{{{thread}}}:lg:lock"


def run(thread: str) -> str:
    """That run's record: entry, id, status, input, …"""
    return f"tc:{{{thread}}}:lg:run"


def undo(thread: str) -> str:
    """What the thread's REST run wrote, for a rollback cancel."""
    return f"tc:{{{thread}}}:lg:undo"


def append(thread: str) -> str:
    """FCALL threadcast_append_batch's key: the thread id itself."""
    return thread


# ---- the checkpoint saver's keys (checkpoint.py has their layout) ----------------------------

CHECKPOINT_PREFIX = "tc:"
"""RedisSaver's default key prefix: its keys sit beside threadcast's tc:{T}:…"""


class CheckpointKeys(NamedTuple):
    idx: str
    cp: str
    blobs: str
    widx: str
    w: str


def checkpoint_keys(prefix: str, thread: str) -> CheckpointKeys:
    """The five checkpoint keys of a thread (its id already checked: non-empty, brace-free)."""
    base = f"{prefix}{{{thread}}}:lg:"
    return CheckpointKeys(f"{base}idx", f"{base}cp", f"{base}blobs", f"{base}widx", f"{base}w")
