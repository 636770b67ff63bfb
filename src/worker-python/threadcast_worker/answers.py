"""What the sender of a command gets back (protocol/README.md, "Worker
contract", steps 3 and 4): an answer on its gateway's reply channel — a
success with the method's result, or an error (``ProtocolError``: the
protocol's error code and a message) — or, for an entry handled with the
result ``KEEP``, nothing yet: the entry stays pending, unacknowledged, for
another worker or a later try."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from threadcast_worker import serde

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from threadcast_worker.logger import Log


class ProtocolError(Exception):
    """An error a command is answered with: ``code`` is the protocol's ErrorCode."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()
"""A handler's answer for an entry to leave pending (another worker, or a later try, takes it)."""


@dataclass
class Entry:
    """One command stream entry as a handler sees it."""

    key: str  # "<stream> <entry id>": what the run record names
    stream: str
    id: str
    thread: str
    method: str
    corr: str
    reply: str
    assistant: str | None  # the graph (the stream's), or the one a wildcard entry names
    assistant_id: str | None = None  # the assistant the params name, where assistant is its graph


async def answer(redis: Redis, log: Log, entry: Entry, msg: dict[str, Any]) -> None:
    """SPUBLISHes {corr, …msg} on the entry's reply channel (none: no answer); never raises."""
    if not entry.reply:
        return
    try:
        await redis.execute_command(
            "SPUBLISH", entry.reply, serde.dumps({"corr": entry.corr, **msg})
        )
    except Exception as e:  # noqa: BLE001 — an answer nobody gets is logged, not raised
        log("warn", "answer not sent", corr=entry.corr, error=str(e))


async def success(redis: Redis, log: Log, entry: Entry, result: Any) -> None:
    await answer(redis, log, entry, {"type": "success", "result": result})


async def error(redis: Redis, log: Log, entry: Entry, code: str, message: str) -> None:
    await answer(redis, log, entry, {"type": "error", "error": code, "message": message})
