"""The worker's liveness, kept from a thread of its own (protocol/README.md, "When a worker dies").

Three things tell other workers that this one is alive and still running what it holds: its
registry heartbeat (``threadcast_register`` every heartbeat), its pending entries claimed again
(so they never look idle, however long their runs), and the leases of the threads it runs
(``tc:{T}:lg:lock``, renewed every quarter of ``lock_ms``). They are sent from this thread, on a
Redis connection of its own, not from the event loop: a graph can hold the loop for seconds — an
async node calling blocking code, or LangGraph itself (its messages handler walks a node's output
item by item: a 16 MiB string in the state costs it seconds) — and a worker whose loop is busy is
not a dead one. Were they sent from the loop, its runs would be taken over while it is still
running them, and then taken back and forth.

A loop that does not answer for ``stall_s`` (60 s) is taken as hung: the thread stops
signalling, so the worker soon looks dead and its runs are taken over (and fenced, should the
loop come back).

The loop registers what it runs with ``lease()``; a lease found lost (another worker holds the
thread, or its record is not this run's any more) has its ``on_lost`` called on the loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis as redis_sync

from threadcast_worker import keys
from threadcast_worker.lock import LOCK_RENEW

if TYPE_CHECKING:
    from threadcast_worker.worker import Worker

TICK_S = 0.1
"""How often the thread looks at what is due."""

STALL_S = 60.0
"""A loop silent this long is taken as hung: the worker stops signalling that it is alive."""


@dataclass(eq=False)
class Lease:
    """A thread whose lock this worker holds for run run_id."""

    run_id: str
    on_lost: Callable[[], None]


def lease(w: Worker, thread: str, run_id: str, on_lost: Callable[[], None]) -> Callable[[], None]:
    """Keeps the thread's lease renewed while run run_id goes on; returns what stops it. on_lost
    is called (on the loop) when a renewal finds the lock another's."""
    held = Lease(run_id, on_lost)
    w.leases[thread] = held

    def stop() -> None:
        if w.leases.get(thread) is held:
            del w.leases[thread]

    return stop


class Keepalive:
    """The thread that keeps the worker's registry entry, pending entries and leases alive."""

    def __init__(
        self, w: Worker, loop: asyncio.AbstractEventLoop, stall_s: float | None = None
    ) -> None:
        self.w = w
        self.loop = loop
        self.stall_s = STALL_S if stall_s is None else stall_s
        self.redis = redis_sync.Redis.from_url(w.redis_url, socket_timeout=10, **w.redis_opts)
        self.renew = self.redis.register_script(LOCK_RENEW)
        self.stopping = threading.Event()
        self.registering = threading.Lock()  # held while the registry entry is renewed
        self.left = False  # the worker has left the registry: never renewed again
        self.seen = time.monotonic()  # when the loop last answered
        self.stalled = False
        self.thread = threading.Thread(target=self._run, name=f"keepalive {w.name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def leave(self) -> None:
        """Renews the registry entry no more (the worker is closing and leaves it); once this
        returns, no renewal is under way, so the entry can be removed for good."""
        with self.registering:
            self.left = True

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        self.thread.join(timeout)
        self.redis.close()

    def _answered(self) -> None:
        self.seen = time.monotonic()

    def _run(self) -> None:
        w = self.w
        next_beat = next_renew = time.monotonic()
        while not self.stopping.wait(TICK_S):
            try:
                self.loop.call_soon_threadsafe(self._answered)
            except RuntimeError:  # the loop is closed
                return
            now = time.monotonic()
            if now - self.seen > self.stall_s:
                if not self.stalled:
                    self.stalled = True
                    w.log(
                        "error",
                        "the event loop has not answered for a long time: the worker stops "
                        "signalling that it is alive, its runs will be taken over",
                        seconds=round(now - self.seen, 1),
                    )
                continue
            if self.stalled:
                self.stalled = False
                w.log("warn", "the event loop answers again", name=w.name)
            try:
                if now >= next_beat:
                    next_beat = now + w.heartbeat_ms / 1000
                    self._beat()
                if now >= next_renew:
                    next_renew = now + w.lock_ms / 4000
                    self._renew()
            except Exception as e:  # noqa: BLE001 — Redis away: the next round tries again
                w.log("warn", "keepalive", error=str(e))

    def _beat(self) -> None:
        """Stay registered (not once closing: it has left the registry), and keep the entries
        in hand from looking idle."""
        w = self.w
        with self.registering:
            for a in [] if self.left else w.assistants:
                self.redis.fcall(
                    "threadcast_register",
                    2,
                    keys.workers(a),
                    keys.ASSISTANTS,
                    a,
                    w.name,
                    str(w.live_ms),
                )
        mine: dict[str, list[str]] = {}
        for stream, entry_id in list(w.inflight.values()):
            mine.setdefault(stream, []).append(entry_id)
        for stream, ids in mine.items():
            self.redis.xclaim(stream, keys.GROUP, w.name, 0, ids, justid=True)

    def _renew(self) -> None:
        w = self.w
        for thread, held in list(w.leases.items()):
            got = self.renew(
                keys=[keys.lock(thread), keys.run(thread)],
                args=[w.name, w.lock_ms, held.run_id],
            )
            if int(got) != 1:
                self.loop.call_soon_threadsafe(self._lost, thread, held)

    def _lost(self, thread: str, held: Lease) -> None:
        if self.w.leases.get(thread) is held:
            del self.w.leases[thread]
            held.on_lost()
