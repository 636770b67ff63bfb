"""Events to threadcast: a run's events appended in order with ``FCALL
threadcast_append_batch`` (protocol/README.md, "The functions").

observe.py says what a run appends; a ``Relay`` appends it: what arrives while a call is out
goes in the next one, so a token stream costs a few calls, not one each, and the calls of
several runs made in one loop turn go to Redis in one pipeline (``Appends``). Every call
carries ``FENCE <worker>`` (refused once another worker holds the thread: a worker whose lease
lapsed cannot append into a run another took over) and ``BATCH <id>`` (a call resent after a
broken connection never lands twice). The relay also remembers the messages its run started
and did not finish, so a run that stops halfway closes them (``close_open``).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from threadcast_worker import keys, serde
from threadcast_worker.logger import Log

BATCH_MAX = 256
"""Most events per append call (the function takes up to 1000)."""
BATCH_BYTES = 8 * 1024 * 1024
"""Most bytes of events per call (one bigger event goes alone): held by Redis at once."""
QUEUE_HIGH = 4096
"""Events waiting to be appended past which the graph waits for Redis."""
EVENT_MAX = 16 * 1024 * 1024
"""threadcast_append's cap on one event: a bigger one fails the run."""


class EventTooLargeError(serde.ThreadcastError):
    """An event the run made that threadcast cannot carry: the run fails with it, visibly,
    rather than go on with a hole in its stream."""

    def __init__(self, method: str, size: int) -> None:
        super().__init__(
            f"the run's {method} event is {size} bytes, over threadcast's limit of "
            f"{EVENT_MAX} bytes per event; the run cannot be streamed"
        )


def is_fenced(e: BaseException) -> bool:
    """Whether an append was refused by its FENCE: the thread's lock is another worker's."""
    return bool(re.search(r"\bFENCED\b", str(e)))


def _msg_key(ns: list[str], node: str | None, run_id: str | None) -> tuple:
    return (tuple(ns), node or "", run_id or "")


def open_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages started and not finished among events (oldest first): what a run stopped
    halfway (a worker killed, a run cancelled) leaves open."""
    still: dict[tuple, dict[str, Any]] = {}
    for ev in events:
        if ev.get("method") != "messages":
            continue
        params = ev.get("params") or {}
        data = params.get("data") or {}
        ns = params.get("namespace") or []
        key = _msg_key(ns, params.get("node"), data.get("run_id"))
        if data.get("event") == "message-start":
            still[key] = {
                "namespace": ns,
                "node": params.get("node"),
                "run_id": data.get("run_id"),
                "id": data.get("id"),
            }
        elif data.get("event") in ("message-finish", "error"):
            still.pop(key, None)
    return list(still.values())


def close_message(m: dict[str, Any], message: str, code: str) -> dict[str, Any]:
    """The ``error`` event that closes an open message (open_messages)."""
    data: dict[str, Any] = {"event": "error", "message": message, "code": code}
    if m.get("run_id"):
        data["run_id"] = m["run_id"]
    params: dict[str, Any] = {"namespace": m["namespace"], "data": data}
    if m.get("node"):
        params["node"] = m["node"]
    return {"method": "messages", "params": params}


class Appends:
    """The FCALLs of one Redis client made in one loop turn, sent in one pipeline. Bounded by
    what it carries: one call per relay with an append out, each at most BATCH_BYTES."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self.calls: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []

    def call(self, args: tuple[Any, ...]) -> asyncio.Future[Any]:
        fut = asyncio.get_running_loop().create_future()
        self.calls.append((args, fut))
        if len(self.calls) == 1:
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self._send()))
        return fut

    async def _send(self) -> None:
        calls, self.calls = self.calls, []
        try:
            if len(calls) == 1:
                answers: list[Any] = [await self.redis.execute_command(*calls[0][0])]
            else:
                pipe = self.redis.pipeline(transaction=False)
                for args, _ in calls:
                    pipe.execute_command(*args)
                answers = await pipe.execute(raise_on_error=False)
        except BaseException as e:  # noqa: BLE001 — each run gets the error as its answer
            for _, fut in calls:
                if not fut.done():
                    fut.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))
            return
        for (_, fut), got in zip(calls, answers, strict=True):
            if fut.done():
                continue
            if isinstance(got, Exception):
                fut.set_exception(got)
            else:
                fut.set_result(got)


_appends: dict[int, Appends] = {}


def _appends_for(redis: Any) -> Appends:
    a = _appends.get(id(redis))
    if a is None or a.redis is not redis:
        a = _appends[id(redis)] = Appends(redis)
    return a


class Relay:
    """Appends one run's events, in order, batched."""

    def __init__(
        self,
        *,
        redis: Any,
        thread: str,
        assistant: str,
        run_id: str,
        log: Log,
        append_opts: list[str] | None = None,
        regain: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.redis = redis
        self.thread = thread
        self.assistant = assistant
        self.run_id = run_id
        self.log = log
        self.append_opts = list(append_opts or [])
        self.regain = regain
        self.queue: list[bytes] = []  # event JSON waiting to be appended
        self.queued_bytes = 0
        self.flushing: asyncio.Task[None] | None = None
        self.open: dict[tuple, dict[str, Any]] = {}  # messages of this run not finished yet
        self.failed: BaseException | None = None  # an append error nothing could fix
        self.batch_id = str(uuid.uuid4())
        self.batches = 0

    # ---- what a run appends -------------------------------------------------------------

    async def push(self, ev: dict[str, Any]) -> None:
        """Queues one event; waits for Redis when too much is queued. Raises the append error
        that stopped the relay, and EventTooLargeError for one threadcast cannot carry."""
        if self.failed is not None:
            raise self.failed
        self._track(ev)
        self.enqueue(ev)
        if len(self.queue) >= QUEUE_HIGH or self.queued_bytes >= BATCH_BYTES:
            await self.drain()

    def started(self, **extra: Any) -> None:
        """The root lifecycle event that opens a run (extra joins its data: ``runId``,
        ``rendered``)."""
        data = {"event": "started", "graph_name": self.assistant, **extra}
        self.enqueue({"method": "lifecycle", "params": {"namespace": [], "data": data}})

    def raw(self, ev: dict[str, Any]) -> None:
        """Appends an event as it is."""
        self._track(ev)
        self.enqueue(ev)

    def close_open(self, message: str, code: str) -> None:
        """Closes the messages this run left open (cancelled, failed) with ``error`` events."""
        for m in self.open.values():
            self.enqueue(close_message(m, message, code))
        self.open.clear()

    async def end(self, status: str, **extra: Any) -> None:
        """Ends the run: its root lifecycle event with status (completed, failed,
        interrupted); then waits until everything is appended."""
        data = {"event": status, "graph_name": self.assistant, **extra}
        self.enqueue({"method": "lifecycle", "params": {"namespace": [], "data": data}})
        await self.drain()

    def _track(self, ev: dict[str, Any]) -> None:
        if ev.get("method") != "messages":
            return
        params = ev["params"]
        data = params.get("data") or {}
        kind = data.get("event")
        if kind not in ("message-start", "message-finish", "error"):
            return
        ns = params.get("namespace") or []
        key = _msg_key(ns, params.get("node"), data.get("run_id"))
        if kind == "message-start":
            self.open[key] = {
                "namespace": ns,
                "node": params.get("node"),
                "run_id": data.get("run_id"),
                "id": data.get("id"),
            }
        else:
            self.open.pop(key, None)

    def enqueue(self, ev: dict[str, Any]) -> None:
        """Queues one event; one over EVENT_MAX raises EventTooLargeError (nothing queued)."""
        ev.pop("type", None)
        ev.pop("seq", None)
        text = serde.dumps(ev)
        if len(text) > EVENT_MAX:
            raise EventTooLargeError(str(ev.get("method")), len(text))
        self.queue.append(text)
        self.queued_bytes += len(text)
        if self.flushing is None:
            self.flushing = asyncio.get_running_loop().create_task(self._flush())

    # ---- appending ----------------------------------------------------------------------

    async def drain(self) -> None:
        """Returns once everything queued so far is appended; raises what stopped it."""
        while self.flushing is not None:
            await asyncio.shield(self.flushing)
        if self.failed is not None:
            raise self.failed

    async def settle(self) -> None:
        """Returns once every event the run made so far is appended — those still on their way
        from the graph's stream too (a few loop turns). A checkpoint is written only after it:
        a worker killed in between must not leave a step saved whose events nobody will see."""
        for _ in range(8):
            await asyncio.sleep(0)
            await self.drain()
            if not self.queue and self.flushing is None:
                return

    async def _flush(self) -> None:
        try:
            await asyncio.sleep(0)  # what the graph makes in this turn joins the call
            while self.queue:
                n, size = 0, 0
                while (
                    n < len(self.queue)
                    and n < BATCH_MAX
                    and (n == 0 or size + len(self.queue[n]) <= BATCH_BYTES)
                ):
                    size += len(self.queue[n])
                    n += 1
                batch = self.queue[:n]
                del self.queue[:n]
                self.queued_bytes -= size
                await self._append(batch)
        except BaseException as e:  # noqa: BLE001 — kept; every later push raises it
            self.failed = e
            self.queue.clear()
            self.queued_bytes = 0
        finally:
            self.flushing = None

    async def _append(self, batch: list[bytes]) -> None:
        """Appends a batch; an event the function refuses is logged and left out. A FENCED
        append is sent again once regain() says the lock is this worker's again (its lease
        lapsed while Redis stalled, nobody took it); else it raises."""
        self.batches += 1
        batch_id = f"{self.batch_id}:{self.batches}"
        regained = 0
        while True:
            args = (
                "FCALL",
                "threadcast_append_batch",
                1,
                keys.append(self.thread),
                len(batch),
                *batch,
                *self.append_opts,
                "RUN",
                self.run_id,
                "BATCH",
                batch_id,
            )
            try:
                await _appends_for(self.redis).call(args)
                return
            except Exception as e:
                if is_fenced(e):
                    if regained < 2 and self.regain is not None and await self.regain():
                        regained += 1
                        continue
                    raise
                m = re.match(r"^(?:ERR )?threadcast: (?:[\w.:-]+ )?event (\d+)\b", str(e))
                k = int(m.group(1)) if m else 0
                if not k or k > len(batch):
                    raise
                self.log(
                    "error",
                    "event refused by threadcast_append, left out",
                    thread=self.thread,
                    error=str(e),
                    event=batch[k - 1][:200].decode(errors="replace"),
                )
                del batch[k - 1]
                if not batch:
                    return
