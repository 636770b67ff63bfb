"""The producer: any Python agent — LangGraph or not — appends protocol events to a thread, with
the guarantees ``threadcast-produce`` (src/tools/produce.c) gives, over the producer contract of
protocol/README.md ("The functions: threadcast_append and threadcast_append_batch").

    async with Producer("redis://127.0.0.1:6379", "t1") as p:
        await p.append(lifecycle("started", graph_name="agent"))
        msg = MessageEvents(id="m1")
        for ev in msg.start():
            p.send(ev)
        for token in tokens:
            p.send(msg.text(token))        # never waits; the seq comes on the future
        for ev in msg.finish():
            p.send(ev)
        await p.append(lifecycle("completed", graph_name="agent"))

- **Batched, never held back.** Events go out with ``FCALL threadcast_append_batch``, up to
  ``batch`` (16) a call and 8 MiB of JSON (a bigger event goes alone). One call is out at a
  time; what arrives while it is out goes in the next one, and a call leaves as soon as the
  previous one is answered, however few events it has. A burst of ``send()`` calls made in one
  go shares calls; a lone event goes at once.
- **In order.** Events are appended in the order ``send()``/``append()`` were called (appends
  waiting for room keep their turn), each with the seq threadcast gave it.
- **Never twice.** Every call carries ``BATCH <id>`` (new for each call, the same when it is
  sent again): a call resent after a broken connection — by this producer, or by redis-py's own
  retry — whose first sending had landed appends nothing and answers the first seq again.
  Connection errors (and Redis loading, ``TRYAGAIN``, ``CLUSTERDOWN``) are retried with
  exponential backoff for ``retry_for`` seconds. Threadcast remembers only a thread's last
  ``BATCH``, so this holds for one producer per thread (two producers appending to one thread
  each keep their own order, and a resent call may land twice if the other appended between).
- **Refusals.** An event the function refuses fails alone: its future raises ``EventRefused``
  (its position among the events given to this producer, and the function's words), and the
  others of its call are sent again without it. An event of more than 16 MiB of JSON is refused
  before anything is sent (``EventTooLarge``, from ``send``/``append``). A call refused as a whole
  (``FENCE`` not holding the thread's lock, say) or a connection not back within ``retry_for``
  stops the producer: that call's events raise the error, every other event not yet appended and
  every later ``send`` raise ``ProducerClosed`` — nothing is appended after a hole.
- **Bounded.** At most ``max_queued`` events and ``max_queued_bytes`` of JSON wait (one event
  always may); past that ``append()`` waits for room and ``send()`` raises ``asyncio.QueueFull``.
- **Loads the functions.** When Redis answers ``Function not found``, the producer loads
  protocol/redis/threadcast.lua (``library``; by default ``$THREADCAST_FUNCTION``, the
  repository's file, or the one installed beside the package) with ``FUNCTION LOAD`` — never
  ``REPLACE``: a library already there, loaded by a gateway, is left as it is — and sends the
  call again.

Events are typed after the protocol's published Python bindings (``langchain_protocol``): a
dict of the shape of ``langchain_protocol.protocol.EventData`` (``{"method", "params":
{"namespace", "data", …}}``), or JSON text (``str``/``bytes``) appended byte for byte. The members
threadcast assigns (``type``, ``seq``, ``event_id``/``eventId``) are left out of a dict, so an
event read from a stream can be appended again. ``lifecycle``, ``custom``, ``MessageEvents`` and
``message_events`` build the common ones.

``SyncProducer`` is the same producer for code without an event loop: it runs a ``Producer`` on a
loop of its own, in a thread of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import re
import threading
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import redis.asyncio as aredis
from langchain_protocol.protocol import (
    AgentStatus,
    CustomEvent,
    EventData,
    LifecycleEvent,
    MessageMetadata,
    MessageRole,
    MessagesEvent,
    UsageInfo,
)
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    ClusterDownError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from threadcast_worker import keys, serde

__all__ = [
    "EVENT_MAX",
    "Event",
    "EventRefused",
    "EventTooLarge",
    "MessageEvents",
    "ProduceError",
    "Producer",
    "ProducerClosed",
    "SyncProducer",
    "custom",
    "encode_event",
    "lifecycle",
    "message_events",
]

EVENT_MAX = 16 * 1024 * 1024
"""The most bytes of JSON one event may have (the function's limit)."""
CALL_MAX = 1000  # events threadcast_append_batch takes in one call
CALL_BYTES = (
    8 * 1024 * 1024
)  # JSON a call carries (one bigger event goes alone): Redis holds it whole
DEFAULT_LIBRARY = Path(__file__).resolve().parents[3] / "protocol" / "redis" / "threadcast.lua"
"""The repository's threadcast.lua; a producer without ``library`` looks where the worker does
(``$THREADCAST_FUNCTION``, the repository, beside the package: functions.function_path)."""

Event = EventData | Mapping[str, Any]
"""An event as a producer gives it: the bindings' shapes, or any mapping of that form."""

_THREAD_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_PRINTABLE = re.compile(r"[^\x00-\x1f\x7f]+")
# "threadcast: event 3.params.data is required", "threadcast: lifecycle event 3.params…"
_EVENT_REFUSAL = re.compile(r"^threadcast: (?:[\w.:-]+ )?event (\d+)\b")
_ASSIGNED = ("type", "seq", "event_id", "eventId")
_BACKOFF_FIRST, _BACKOFF_MAX = 0.05, 2.0


class ProduceError(Exception):
    """A call threadcast refused as a whole (its message), or a producer that cannot go on."""


class EventRefused(ProduceError):
    """threadcast refused one event. ``position``: the event's place among those given to the
    producer (0 the first); ``detail``: the function's words, the event named ``event``."""

    def __init__(self, position: int, detail: str) -> None:
        super().__init__(f"event {position} refused: {detail}")
        self.position = position
        self.detail = detail


class EventTooLarge(ProduceError, ValueError):
    """An event over ``EVENT_MAX`` bytes of JSON: refused before anything is sent."""

    def __init__(self, size: int) -> None:
        super().__init__(f"the event is {size} bytes of JSON; the limit is {EVENT_MAX}")
        self.size = size


class ProducerClosed(ProduceError):
    """The producer was closed, or stopped by an error (its ``__cause__``)."""


def encode_event(event: Event | str | bytes) -> bytes:
    """The JSON threadcast is given for an event; ``EventTooLarge`` past ``EVENT_MAX``."""
    if isinstance(event, bytes):
        data = event
    elif isinstance(event, str):
        data = event.encode()
    elif isinstance(event, Mapping):
        if any(k in event for k in _ASSIGNED):
            event = {k: v for k, v in event.items() if k not in _ASSIGNED}
        data = serde.dumps(event if isinstance(event, dict) else dict(event))
    else:
        raise TypeError(f"an event is a mapping or JSON text, not {type(event).__name__}")
    if len(data) > EVENT_MAX:
        raise EventTooLarge(len(data))
    return data


@dataclass(slots=True, eq=False)
class _Pending:
    data: bytes
    position: int
    fut: asyncio.Future[int]
    queued: asyncio.Future[None] | None = None  # while it waits for room


class _Refused(Exception):
    def __init__(self, index: int, detail: str) -> None:
        self.index = index
        self.detail = detail


def _option(name: str, value: str | int | None, pattern: re.Pattern[str], most: int) -> list[str]:
    if value is None:
        return []
    text = str(value)
    if not (1 <= len(text.encode()) <= most and pattern.fullmatch(text)):
        raise ValueError(f"{name.lower()} {value!r} is not what threadcast takes for {name}")
    return [name, text]


def _retryable(e: BaseException) -> bool:
    if isinstance(e, AuthenticationError | AuthorizationError):
        return False
    return isinstance(
        e,
        RedisConnectionError | RedisTimeoutError | OSError | TryAgainError | ClusterDownError,
    )


class Producer:
    """Appends events to one thread (see the module's doc).

    ``redis``: a URL (the producer makes its client, and closes it) or a ``redis.asyncio.Redis``
    (used as it is, never closed here). ``batch``: events a call (1 to 1000). ``maxlen``,
    ``ttl`` (seconds), ``run``, ``assistant``, ``fence``: the function's options MAXLEN, TTL,
    RUN, ASSISTANT and FENCE, on every call. ``retry_for``: seconds a lost connection is
    retried. ``library``: threadcast.lua, for a Redis without it.
    """

    def __init__(
        self,
        redis: str | aredis.Redis,
        thread_id: str,
        *,
        batch: int = 16,
        maxlen: int | None = None,
        ttl: int | None = None,
        run: str | None = None,
        assistant: str | None = None,
        fence: str | None = None,
        max_queued: int = 4096,
        max_queued_bytes: int = 64 * 1024 * 1024,
        retry_for: float = 30.0,
        library: str | PathLike[str] | None = None,
    ) -> None:
        if not _THREAD_ID.fullmatch(thread_id):
            raise ValueError(f"{thread_id!r} is not a thread id ([A-Za-z0-9._:-]{{1,128}})")
        if not 1 <= batch <= CALL_MAX:
            raise ValueError(f"batch must be from 1 to {CALL_MAX}")
        if max_queued < 1 or max_queued_bytes < 1 or retry_for < 0:
            raise ValueError("max_queued and max_queued_bytes must be positive, retry_for >= 0")
        digits = re.compile(r"[1-9][0-9]*")
        self._opts = [
            *_option("MAXLEN", maxlen, digits, 18),
            *_option("TTL", ttl, digits, 10),
            *_option("RUN", run, _PRINTABLE, 128),
            *_option("ASSISTANT", assistant, re.compile(r"[!-~\x80-\U0010ffff]+"), 128),
            *_option("FENCE", fence, _PRINTABLE, 200),
        ]
        if isinstance(redis, str):
            # This loop owns the retrying (bounded by retry_for), not redis-py's.
            self._redis = aredis.Redis.from_url(
                redis,
                socket_connect_timeout=min(5.0, max(retry_for, 0.5)),
                socket_timeout=60.0,
                retry=Retry(NoBackoff(), 0),
            )
            self._own_client = True
        else:
            self._redis = redis
            self._own_client = False
        self._thread = thread_id
        self._batch = batch
        self._max_queued = max_queued
        self._max_bytes = max_queued_bytes
        self._retry_for = retry_for
        if library is None:
            from threadcast_worker.functions import function_path

            library = function_path() or DEFAULT_LIBRARY
        self._library = Path(library)
        self._queue: deque[_Pending] = deque()
        self._waiting: deque[_Pending] = deque()
        self._inflight: list[_Pending] = []
        self._bytes = 0  # of the queued and in-flight events
        self._positions = 0
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._fatal: BaseException | None = None
        self._loaded = False
        self._batch_id = uuid.uuid4().hex
        self._calls = 0

    @property
    def thread_id(self) -> str:
        return self._thread

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            await self.close()
            return
        try:  # the body's error is the one to see
            await self.close()
        except ProduceError:
            pass

    # ---- the API ----------------------------------------------------------------------------

    def send(self, event: Event | str | bytes) -> asyncio.Future[int]:
        """Queues an event without waiting; the future gives its seq once it is appended.
        Raises ``EventTooLarge``, ``asyncio.QueueFull`` (too much waiting: ``append`` waits
        instead), ``ProducerClosed``. Cancelling the future does not take the event back."""
        self._check_open()
        data = encode_event(event)
        if self._waiting or not self._room(len(data)):
            raise asyncio.QueueFull(
                f"{len(self._queue) + len(self._inflight)} events ({self._bytes} bytes) wait to "
                "be appended; append() waits for room"
            )
        return self._take(data).fut

    async def append(self, event: Event | str | bytes) -> int:
        """Appends an event, waiting for room first when too much is queued; returns its seq.
        Cancelled while it waits for room, the event is not sent; once queued, it is."""
        self._check_open()
        p = self._take(encode_event(event))
        try:
            return await asyncio.shield(p.fut)
        except asyncio.CancelledError:
            self._withdraw(p)
            raise

    async def flush(self) -> None:
        """Waits until every event given so far is appended or refused; raises
        ``ProducerClosed`` if the producer stopped on an error."""
        futs = [p.fut for p in (*self._inflight, *self._queue, *self._waiting)]
        if futs:
            await asyncio.wait(futs)
        if self._fatal is not None:
            raise ProducerClosed(f"the producer stopped: {self._fatal}") from self._fatal

    async def close(self) -> None:
        """Refuses new events, waits for those given (as ``flush``), closes its own client."""
        self._closed = True
        try:
            await self.flush()
        finally:
            if self._own_client:
                self._own_client = False
                await self._redis.aclose()

    # ---- queueing ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._fatal is not None:
            raise ProducerClosed(f"the producer stopped: {self._fatal}") from self._fatal
        if self._closed:
            raise ProducerClosed("the producer is closed")

    def _room(self, size: int) -> bool:
        held = len(self._queue) + len(self._inflight)
        return held == 0 or (held < self._max_queued and self._bytes + size <= self._max_bytes)

    def _take(self, data: bytes) -> _Pending:
        """Queues the event, or puts it in line for room (its turn kept)."""
        loop = asyncio.get_running_loop()
        p = _Pending(data, self._positions, loop.create_future())
        self._positions += 1
        if not self._waiting and self._room(len(data)):
            self._admit(p)
        else:
            p.queued = loop.create_future()
            self._waiting.append(p)
        return p

    def _admit(self, p: _Pending) -> None:
        self._queue.append(p)
        self._bytes += len(p.data)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _admit_waiting(self) -> None:
        while self._waiting and self._room(len(self._waiting[0].data)):
            p = self._waiting.popleft()
            if p.queued is not None and not p.queued.done():
                p.queued.set_result(None)
            self._admit(p)

    def _withdraw(self, p: _Pending) -> None:
        if p in self._waiting:
            self._waiting.remove(p)
            p.fut.cancel()

    async def _enqueue(self, data: bytes, out: concurrent.futures.Future[int]) -> None:
        """For SyncProducer: queues data (waiting for room), its seq going to out."""
        self._check_open()
        p = self._take(data)

        def settle(f: asyncio.Future[int]) -> None:
            try:
                if f.cancelled():
                    out.cancel()
                elif f.exception() is not None:
                    out.set_exception(f.exception())  # type: ignore[arg-type]
                else:
                    out.set_result(f.result())
            except concurrent.futures.InvalidStateError:
                pass  # the caller cancelled it

        p.fut.add_done_callback(settle)
        if p.queued is not None:
            try:
                await p.queued
            except asyncio.CancelledError:
                self._withdraw(p)
                raise

    # ---- appending ---------------------------------------------------------------------------

    async def _run(self) -> None:
        """Sends what is queued, one call at a time, until nothing is."""
        try:
            while self._queue:
                take: list[_Pending] = []
                size = 0
                while (
                    self._queue
                    and len(take) < self._batch
                    and (not take or size + len(self._queue[0].data) <= CALL_BYTES)
                ):
                    p = self._queue.popleft()
                    take.append(p)
                    size += len(p.data)
                self._inflight = take
                try:
                    first = await self._call(take)
                except _Refused as r:
                    bad = take.pop(r.index)
                    self._bytes -= len(bad.data)
                    if not bad.fut.done():
                        bad.fut.set_exception(EventRefused(bad.position, r.detail))
                    self._queue.extendleft(reversed(take))  # the rest go again, in order
                    self._inflight = []
                    self._admit_waiting()
                    continue
                except Exception as e:  # noqa: BLE001 — every event still waiting is told
                    self._stop(e)
                    return
                self._inflight = []
                for i, p in enumerate(take):
                    self._bytes -= len(p.data)
                    if not p.fut.done():
                        p.fut.set_result(first + i)
                self._admit_waiting()
        finally:
            self._task = None

    def _stop(self, error: BaseException) -> None:
        self._fatal = error
        for p in self._inflight:
            if not p.fut.done():
                p.fut.set_exception(error)
        closed = ProducerClosed(f"not appended: the producer stopped: {error}")
        closed.__cause__ = error
        for p in (*self._queue, *self._waiting):
            if p.queued is not None and not p.queued.done():
                p.queued.set_exception(closed)
                p.queued.exception()  # read: SyncProducer's send is told by fut
            if not p.fut.done():
                p.fut.set_exception(closed)
        self._inflight = []
        self._queue.clear()
        self._waiting.clear()
        self._bytes = 0

    async def _call(self, take: list[_Pending]) -> int:
        """One FCALL threadcast_append_batch of take (resent as it is while Redis is away)."""
        self._calls += 1
        args = [
            "FCALL",
            "threadcast_append_batch",
            1,
            keys.append(self._thread),
            len(take),
            *(p.data for p in take),
            *self._opts,
            "BATCH",
            f"{self._batch_id}:{self._calls}",
        ]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._retry_for
        delay = _BACKOFF_FIRST
        load = False
        while True:
            try:
                if load:
                    await self._load()
                    load = False
                return int(await self._redis.execute_command(*args))
            except ResponseError as e:
                msg = str(e)
                if msg.startswith("Function not found") and not self._loaded:
                    load = True
                    continue
                m = _EVENT_REFUSAL.match(msg)
                if m and 1 <= int(m[1]) <= len(take):
                    k = int(m[1])
                    raise _Refused(k - 1, msg.replace(f"event {k}", "event", 1)) from e
                if not _retryable(e):
                    raise ProduceError(msg) from e
                error: Exception = e
            except Exception as e:
                if not _retryable(e):
                    raise
                error = e
            if loop.time() + delay > deadline:
                raise error
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, _BACKOFF_MAX)

    async def _load(self) -> None:
        """Loads threadcast.lua, for a Redis that has none of threadcast's functions (once: a
        call that still finds no function then fails)."""
        try:
            source = self._library.read_text()
        except OSError as e:
            raise ProduceError(
                f"Redis has no function threadcast_append_batch, and {self._library} cannot be "
                f"read ({e.strerror}): pass library= the path of protocol/redis/threadcast.lua"
            ) from e
        try:
            await self._redis.function_load(source)
        except ResponseError as e:
            if "already exists" not in str(e):  # another producer, or a gateway, was first
                raise ProduceError(f"FUNCTION LOAD {self._library}: {e}") from e
        self._loaded = True


class SyncProducer:
    """``Producer`` for code without an event loop: the same producer, on a loop of its own run
    by a thread of its own (so batching, retrying and ordering are the async one's). ``redis``
    is a URL; the options are ``Producer``'s. ``send`` waits only while the queue is full and
    returns a ``concurrent.futures.Future`` of the seq; ``append`` waits for the seq."""

    def __init__(self, redis: str, thread_id: str, **options: Any) -> None:
        if not isinstance(redis, str):
            raise TypeError("SyncProducer takes a Redis URL (its client lives on its own loop)")
        self._producer = Producer(redis, thread_id, **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"threadcast-producer {thread_id}", daemon=True
        )
        self._thread.start()
        self._done = False

    @property
    def thread_id(self) -> str:
        return self._producer.thread_id

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except ProduceError:
            pass

    def _wait(self, coro: Any, timeout: float | None) -> Any:
        if self._done:
            coro.close()
            raise ProducerClosed("the producer is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def send(self, event: Event | str | bytes) -> concurrent.futures.Future[int]:
        """Queues an event (waiting while the queue is full); the future gives its seq."""
        out: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._wait(self._producer._enqueue(encode_event(event), out), None)
        return out

    def append(self, event: Event | str | bytes, timeout: float | None = None) -> int:
        """Appends an event; returns its seq."""
        return self.send(event).result(timeout)

    def flush(self, timeout: float | None = None) -> None:
        """Waits until every event given so far is appended or refused."""
        self._wait(self._producer.flush(), timeout)

    def close(self, timeout: float | None = None) -> None:
        """Waits for the events given (as ``flush``), then stops the loop and its thread."""
        if self._done:
            return
        try:
            self._wait(self._producer.close(), timeout)
        finally:
            self._done = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self._loop.close()


# ---- events ----------------------------------------------------------------------------------


def _params(namespace: Sequence[str], data: Any, node: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"namespace": list(namespace), "data": data}
    if node is not None:
        params["node"] = node
    return params


def lifecycle(
    status: AgentStatus,
    *,
    namespace: Sequence[str] = (),
    graph_name: str | None = None,
    error: str | None = None,
    **data: Any,
) -> LifecycleEvent:
    """A lifecycle event: ``started`` (at the root: a new run), ``running``, ``completed``,
    ``failed`` (with ``error``), ``interrupted``; ``data`` joins its data (``cause``, …)."""
    d: dict[str, Any] = {"event": status}
    if graph_name is not None:
        d["graph_name"] = graph_name
    if error is not None:
        d["error"] = error
    d.update(data)
    return {"method": "lifecycle", "params": _params(namespace, d)}


def custom(
    payload: Any,
    *,
    name: str | None = None,
    channel: str | None = None,
    namespace: Sequence[str] = (),
) -> CustomEvent | dict[str, Any]:
    """A custom event, data ``{name?, payload}``: on the ``custom`` channel, or with
    ``channel`` on ``custom:<channel>`` (which only its subscribers get)."""
    data: dict[str, Any] = {"payload": payload}
    if name is not None:
        data["name"] = name
    method = "custom" if channel is None else f"custom:{channel}"
    return {"method": method, "params": _params(namespace, data)}


class MessageEvents:
    """The ``messages`` events of one text message, made as its text arrives: ``start()``,
    ``text(delta)`` per chunk, then ``finish()`` (or ``error()``). One text block, index 0, as
    threadcast-agent writes messages; ``id`` defaults to a new ``msg-<uuid>``."""

    def __init__(
        self,
        *,
        id: str | None = None,
        role: MessageRole = "ai",
        namespace: Sequence[str] = (),
        node: str | None = None,
        metadata: MessageMetadata | None = None,
    ) -> None:
        self.id = id if id is not None else f"msg-{uuid.uuid4()}"
        self.role = role
        self.namespace = list(namespace)
        self.node = node
        self.metadata = metadata
        self._text: list[str] = []

    def _event(self, data: dict[str, Any]) -> MessagesEvent:
        return {"method": "messages", "params": _params(self.namespace, data, self.node)}

    def start(self) -> list[MessagesEvent]:
        """``message-start`` and the text block's ``content-block-start``."""
        start: dict[str, Any] = {"event": "message-start", "role": self.role, "id": self.id}
        if self.metadata is not None:
            start["metadata"] = self.metadata
        block = {
            "event": "content-block-start",
            "index": 0,
            "content": {"type": "text", "text": ""},
        }
        return [self._event(start), self._event(block)]

    def text(self, delta: str) -> MessagesEvent:
        """A ``content-block-delta`` of text."""
        self._text.append(delta)
        return self._event(
            {
                "event": "content-block-delta",
                "index": 0,
                "delta": {"type": "text-delta", "text": delta},
            }
        )

    def finish(self, *, usage: UsageInfo | None = None) -> list[MessagesEvent]:
        """The block's ``content-block-finish`` (the whole text) and ``message-finish``."""
        text = "".join(self._text)
        done: dict[str, Any] = {"event": "message-finish"}
        if usage is not None:
            done["usage"] = usage
        return [
            self._event(
                {
                    "event": "content-block-finish",
                    "index": 0,
                    "content": {"type": "text", "text": text},
                }
            ),
            self._event(done),
        ]

    def error(self, message: str, *, code: str | None = None) -> MessagesEvent:
        """The ``error`` event that ends a message its model failed to finish."""
        data: dict[str, Any] = {"event": "error", "message": message}
        if code is not None:
            data["code"] = code
        return self._event(data)


def message_events(
    text: str | Iterable[str],
    *,
    id: str | None = None,
    role: MessageRole = "ai",
    namespace: Sequence[str] = (),
    node: str | None = None,
    usage: UsageInfo | None = None,
) -> list[MessagesEvent]:
    """A whole text message's events: start, one delta per chunk of ``text`` (a string is one
    chunk), finish."""
    m = MessageEvents(id=id, role=role, namespace=namespace, node=node)
    chunks = [text] if isinstance(text, str) else list(text)
    return [*m.start(), *(m.text(c) for c in chunks), *m.finish(usage=usage)]
