"""The producer against a private Redis with threadcast's functions: order, batching, BATCH
idempotence across a lost reply, refusals, the 16 MiB limit, loading the library, the options,
the bounded queue, the sync wrapper and the event helpers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest
import redis.asyncio as aredis
import redis.exceptions

from threadcast_worker.produce import (
    EVENT_MAX,
    EventRefused,
    EventTooLarge,
    MessageEvents,
    ProduceError,
    Producer,
    ProducerClosed,
    SyncProducer,
    custom,
    lifecycle,
    message_events,
)

if TYPE_CHECKING:
    from conftest import RedisServer

WAIT = 10.0  # the longest any step of these tests may take


async def stored(client: aredis.Redis, thread: str) -> list[tuple[int, dict[str, Any]]]:
    """The thread's events as threadcast stored them: (seq, event)."""
    out = []
    for entry_id, fields in await client.xrange(f"tc:{{{thread}}}:events"):
        out.append((int(entry_id.split(b"-")[0]), orjson.loads(fields[b"e"])))
    return out


async def fcalls(client: aredis.Redis) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_fcall", {}).get("calls", 0))


class Doorbells:
    """The events of every doorbell a thread rings (one doorbell per append call), counted."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.rang = asyncio.Event()

    async def until(self, events: int) -> list[int]:
        """The counts, once the doorbells carried that many events (bounded by WAIT)."""
        async with asyncio.timeout(WAIT):
            while sum(self.counts) < events:
                self.rang.clear()
                await self.rang.wait()
        return self.counts


@contextlib.asynccontextmanager
async def doorbells(port: int, thread: str) -> AsyncIterator[Doorbells]:
    client = aredis.Redis(port=port)
    ps = client.pubsub()
    await ps.ssubscribe(f"tc:{{{thread}}}:live")
    bells = Doorbells()

    async def read() -> None:
        while True:
            m = await ps.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if m is None:
                continue
            data: bytes = m["data"]
            # "*<epoch>\n<first seq>\n<count>\n…" for a batch, else one event's doorbell.
            bells.counts.append(int(data.split(b"\n")[2]) if data.startswith(b"*") else 1)
            bells.rang.set()

    task = asyncio.create_task(read())
    try:
        yield bells
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await ps.aclose()
        await client.aclose()


async def test_seqs_follow_the_order_of_the_calls(
    redis_srv: RedisServer, aredis_client: aredis.Redis
) -> None:
    async with Producer(aredis_client, "t-order") as p:
        burst = [p.send(custom({"i": i})) for i in range(100)]
        seqs = await asyncio.wait_for(asyncio.gather(*burst), WAIT)
        assert seqs == list(range(1, 101))

        got: dict[tuple[int, int], int] = {}

        async def writer(t: int) -> None:
            for i in range(40):
                got[(t, i)] = await p.append(custom({"t": t, "i": i}))
                if i % 7 == 0:
                    await asyncio.sleep(0)

        await asyncio.wait_for(asyncio.gather(*(writer(t) for t in range(8))), WAIT)

    events = await stored(aredis_client, "t-order")
    assert [s for s, _ in events] == list(range(1, 421))
    # Every event is where its seq says, and each writer's events are in its own order.
    for seq, ev in events[100:]:
        payload = ev["params"]["data"]["payload"]
        assert got[(payload["t"], payload["i"])] == seq
    for t in range(8):
        mine = [got[(t, i)] for i in range(40)]
        assert mine == sorted(mine)


async def test_what_arrives_during_a_call_goes_in_the_next(
    redis_srv: RedisServer, aredis_client: aredis.Redis
) -> None:
    async with (
        doorbells(redis_srv.port, "t-batch") as rung,
        Producer(aredis_client, "t-batch") as p,
    ):
        before = await fcalls(aredis_client)
        # A lone event is sent at once: no batch waits to fill.
        assert await asyncio.wait_for(p.append(custom("alone")), WAIT) == 1
        # With Redis paused, the next call stays out while 40 more events arrive.
        await aredis_client.execute_command("CLIENT", "PAUSE", 400, "WRITE")
        first = p.send(custom(0))
        await asyncio.sleep(0.1)
        rest = [p.send(custom(i)) for i in range(1, 41)]
        assert not first.done()
        seqs = await asyncio.wait_for(asyncio.gather(first, *rest), WAIT)
        assert seqs == list(range(2, 43))
        assert await fcalls(aredis_client) - before == 5
        assert await rung.until(42) == [1, 1, 16, 16, 8]


async def test_batch_option_sets_the_events_a_call(
    redis_srv: RedisServer, aredis_client: aredis.Redis
) -> None:
    async with doorbells(redis_srv.port, "t-b3") as rung:
        async with Producer(aredis_client, "t-b3", batch=3) as p:
            await asyncio.wait_for(asyncio.gather(*(p.send(custom(i)) for i in range(10))), WAIT)
        assert await rung.until(10) == [3, 3, 3, 1]


class DropOneReply:
    """A TCP proxy to Redis that, once armed, forwards the next append call and then closes the
    connection instead of passing its reply on: the call landed, its answer was lost."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.armed = False
        self.calls = 0  # append calls that went through
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        dropping = False

        async def upstream() -> None:
            nonlocal dropping
            while data := await reader.read(1 << 20):
                if b"threadcast_append_batch" in data:
                    self.calls += 1
                    if self.armed:
                        self.armed = False
                        dropping = True
                up_writer.write(data)
                await up_writer.drain()

        async def downstream() -> None:
            while data := await up_reader.read(1 << 20):
                if dropping:
                    break
                writer.write(data)
                await writer.drain()
            writer.close()
            up_writer.close()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        self.tasks.update(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
        writer.close()
        up_writer.close()


async def test_a_call_resent_after_a_lost_reply_lands_once(
    redis_srv: RedisServer, aredis_client: aredis.Redis
) -> None:
    proxy = DropOneReply(redis_srv.port)
    port = await proxy.start()
    before = await fcalls(aredis_client)
    try:
        async with Producer(f"redis://127.0.0.1:{port}", "t-resend", retry_for=5) as p:
            assert await asyncio.wait_for(p.append(custom("before")), WAIT) == 1
            proxy.armed = True
            lost = [p.send(custom(i)) for i in range(3)]
            assert await asyncio.wait_for(asyncio.gather(*lost), WAIT) == [2, 3, 4]
            assert await asyncio.wait_for(p.append(custom("after")), WAIT) == 5
    finally:
        await proxy.stop()
    assert proxy.calls == 4  # the lost call was sent twice
    assert await fcalls(aredis_client) - before == 4  # and Redis ran it twice
    events = await stored(aredis_client, "t-resend")
    payloads = [ev["params"]["data"]["payload"] for _, ev in events]
    assert payloads == ["before", 0, 1, 2, "after"]


async def test_a_refused_event_fails_alone(
    redis_srv: RedisServer, aredis_client: aredis.Redis
) -> None:
    async with Producer(aredis_client, "t-refused") as p:
        futs = [
            p.send(custom("a")),
            p.send({"method": "custom", "params": {"namespace": []}}),
            p.send(custom("b")),
            p.send(lifecycle("done", graph_name="g")),  # type: ignore[arg-type]
            p.send('{"method": "nope", "params": {"namespace": [], "data": 1}}'),
            p.send(custom("c")),
        ]
        results = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), WAIT)
        assert results[0] == 1 and results[2] == 2 and results[5] == 3
        for pos, words in (
            (1, "threadcast: event.params.data is required"),
            (3, "threadcast: lifecycle event.params.data.event must be started, running, "),
            (4, 'threadcast: event.method "nope" is not an event method'),
        ):
            err = results[pos]
            assert isinstance(err, EventRefused)
            assert err.position == pos
            assert err.detail.startswith(words)
            assert str(err).startswith(f"event {pos} refused: {words}")
        with pytest.raises(EventRefused, match="event 6 refused: threadcast: event.params must"):
            await p.append({"method": "custom", "params": "x"})
        assert await p.append(custom("d")) == 4  # the producer goes on
    assert [
        ev["params"]["data"]["payload"] for _, ev in await stored(aredis_client, "t-refused")
    ] == [
        "a",
        "b",
        "c",
        "d",
    ]


def sized(size: int) -> bytes:
    """A custom event of exactly size bytes of JSON."""
    head, tail = b'{"method":"custom","params":{"namespace":[],"data":{"payload":"', b'"}}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


async def test_an_event_over_16_mib_is_refused_before_sending(
    redis_srv: RedisServer, aredis_client: aredis.Redis
) -> None:
    async with Producer(aredis_client, "t-big") as p:
        before = await fcalls(aredis_client)
        with pytest.raises(EventTooLarge, match=f"{EVENT_MAX + 1} bytes of JSON; the limit is"):
            p.send(sized(EVENT_MAX + 1))
        with pytest.raises(EventTooLarge):
            await p.append(sized(EVENT_MAX + 1))
        big = {
            "method": "custom",
            "params": {"namespace": [], "data": {"payload": "x" * EVENT_MAX}},
        }
        with pytest.raises(EventTooLarge):
            await p.append(big)
        assert await fcalls(aredis_client) == before  # nothing went out
        # 16 MiB exactly is appended, whole, and alone in its call.
        seqs = await asyncio.wait_for(
            asyncio.gather(p.send(custom(1)), p.send(sized(EVENT_MAX)), p.send(custom(2))), WAIT
        )
        assert seqs == [1, 2, 3]
    events = await stored(aredis_client, "t-big")
    assert len(events[1][1]["params"]["data"]["payload"]) == EVENT_MAX - 67


async def test_function_not_found_loads_the_library(new_redis: Any) -> None:
    with new_redis(libraries=False) as srv:
        client = aredis.Redis(port=srv.port)
        try:
            assert await client.function_list() == []
            async with Producer(srv.url, "t-load") as p:
                assert await asyncio.wait_for(p.append(custom("x")), WAIT) == 1
            libs = [lib[lib.index(b"library_name") + 1] for lib in await client.function_list()]
            assert libs == [b"threadcast"]
            # A library already there (a gateway's) is left as it is.
            async with Producer(srv.url, "t-load") as p:
                assert await p.append(custom("y")) == 2
        finally:
            await client.aclose()
    with new_redis(libraries=False) as srv:
        p = Producer(srv.url, "t-load", library=Path("/nonexistent/threadcast.lua"))
        with pytest.raises(ProduceError, match="/nonexistent/threadcast.lua cannot be read"):
            await asyncio.wait_for(p.append(custom("x")), WAIT)
        with pytest.raises(ProducerClosed):
            p.send(custom("y"))
        with pytest.raises(ProducerClosed, match="pass library= the path"):
            await p.close()


async def test_the_options(redis_srv: RedisServer, aredis_client: aredis.Redis) -> None:
    async with Producer(
        aredis_client, "t-opts", ttl=100, run="r-1", assistant="agent", maxlen=10
    ) as p:
        await p.append(lifecycle("started", graph_name="agent"))
        await asyncio.gather(*(p.send(custom(i)) for i in range(499)))
    meta = await aredis_client.hgetall("tc:{t-opts}:meta")
    assert meta[b"run_id"] == b"r-1" and meta[b"assistant_id"] == b"agent"
    assert 90 < await aredis_client.ttl("tc:{t-opts}:events") <= 100
    assert await aredis_client.xlen("tc:{t-opts}:events") < 300  # MAXLEN ~ 10 trims

    # FENCE: refused unless the thread's lock holds the owner; then the producer stops.
    await aredis_client.set("tc:{t-fence}:lg:lock", "w1")
    async with Producer(aredis_client, "t-fence", fence="w1") as p:
        assert await p.append(custom("mine")) == 1
    with pytest.raises(ProducerClosed):
        async with Producer(aredis_client, "t-fence", fence="w2") as p:
            futs = [p.send(custom(i)) for i in range(20)]
            done = await asyncio.gather(*futs, return_exceptions=True)
            assert isinstance(done[0], ProduceError) and "FENCED" in str(done[0])
            assert all(isinstance(d, ProducerClosed) for d in done[16:])
            with pytest.raises(ProducerClosed, match="FENCED"):
                p.send(custom("later"))
    assert await aredis_client.xlen("tc:{t-fence}:events") == 1

    for bad in ({"maxlen": 0}, {"ttl": "1s"}, {"assistant": "a b"}, {"fence": ""}, {"batch": 1001}):
        with pytest.raises(ValueError):
            Producer(aredis_client, "t", **bad)
    with pytest.raises(ValueError, match="not a thread id"):
        Producer(aredis_client, "t{1}")


async def test_the_queue_is_bounded(redis_srv: RedisServer, aredis_client: aredis.Redis) -> None:
    async with Producer(aredis_client, "t-bound", max_queued=4) as p:
        await aredis_client.execute_command("CLIENT", "PAUSE", 400, "WRITE")
        held = [p.send(custom(i)) for i in range(4)]
        with pytest.raises(asyncio.QueueFull):
            p.send(custom("over"))
        waiting = asyncio.create_task(p.append(custom("waits")))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        with pytest.raises(asyncio.QueueFull):  # it would pass the append that waits
            p.send(custom("jump"))
        cancelled = asyncio.create_task(p.append(custom("cancelled")))
        await asyncio.sleep(0.01)
        cancelled.cancel()
        last = asyncio.create_task(p.append(custom("last")))
        assert await asyncio.wait_for(asyncio.gather(*held, waiting, last), WAIT) == [
            1,
            2,
            3,
            4,
            5,
            6,
        ]
    payloads = [ev["params"]["data"]["payload"] for _, ev in await stored(aredis_client, "t-bound")]
    assert payloads == [0, 1, 2, 3, "waits", "last"]


async def test_retrying_is_bounded() -> None:
    port = 1  # nothing listens there
    started = time.monotonic()
    p = Producer(f"redis://127.0.0.1:{port}", "t-gone", retry_for=0.5, batch=1)
    first = p.send(custom(1))  # the call that fails
    second = p.send(custom(2))  # queued behind it: never sent
    with pytest.raises(ProducerClosed):
        await asyncio.wait_for(p.flush(), WAIT)
    with pytest.raises(redis.exceptions.ConnectionError):  # the connection's own error
        await first
    with pytest.raises(ProducerClosed):
        await second
    with pytest.raises(ProducerClosed):
        await p.append(custom(3))
    with pytest.raises(ProducerClosed, match="Connect"):
        await p.close()
    assert time.monotonic() - started < 5


def test_sync_producer(redis_srv: RedisServer) -> None:
    with SyncProducer(redis_srv.url, "t-sync") as p:
        assert p.append(custom("first"), timeout=WAIT) == 1
        futs = [p.send(custom(i)) for i in range(30)]
        p.flush(timeout=WAIT)
        assert [f.result(0) for f in futs] == list(range(2, 32))
        with pytest.raises(EventRefused):
            p.append({"method": "custom", "params": {"namespace": []}}, timeout=WAIT)

        got: dict[int, list[int]] = {}

        def writer(t: int) -> None:
            got[t] = [p.append(custom({"t": t, "i": i}), timeout=WAIT) for i in range(25)]

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        assert sorted(s for seqs in got.values() for s in seqs) == list(range(32, 132))
        assert all(seqs == sorted(seqs) for seqs in got.values())
        loop_thread = p._thread
    assert not loop_thread.is_alive()
    with pytest.raises(ProducerClosed):
        p.send(custom("closed"))
    with pytest.raises(TypeError):
        SyncProducer(object(), "t")  # type: ignore[arg-type]


async def test_the_helpers_make_events_threadcast_takes(
    redis_srv: RedisServer, aredis_client: aredis.Redis
) -> None:
    msg = MessageEvents(id="m1", namespace=["agent:1"], node="model")
    events = [
        lifecycle("started", graph_name="agent"),
        *message_events(["Hel", "lo"], id="m0", role="human"),
        *msg.start(),
        msg.text("a"),
        msg.text("b"),
        *msg.finish(usage={"input_tokens": 3, "output_tokens": 2}),
        custom({"step": 1}, name="progress"),
        custom({"step": 2}, channel="progress", namespace=["agent:1"]),
        lifecycle("failed", graph_name="agent", error="boom"),
    ]
    async with Producer(aredis_client, "t-helpers") as p:
        seqs = await asyncio.gather(*(p.send(e) for e in events))
    assert seqs == list(range(1, len(events) + 1))
    got = [ev for _, ev in await stored(aredis_client, "t-helpers")]
    assert [e["method"] for e in got] == [
        "lifecycle",
        *["messages"] * 12,
        "custom",
        "custom:progress",
        "lifecycle",
    ]
    datas = [e["params"]["data"] for e in got]
    assert [d["event"] for d in datas[1:13]] == [
        "message-start",
        "content-block-start",
        "content-block-delta",
        "content-block-delta",
        "content-block-finish",
        "message-finish",
    ] * 2
    assert datas[1] == {"event": "message-start", "role": "human", "id": "m0"}
    assert datas[2]["content"] == {"type": "text", "text": ""}
    assert datas[5]["content"] == {"type": "text", "text": "Hello"}
    assert datas[7] == {"event": "message-start", "role": "ai", "id": "m1"}
    assert got[7]["params"]["namespace"] == ["agent:1"] and got[7]["params"]["node"] == "model"
    assert datas[10] == {
        "event": "content-block-delta",
        "index": 0,
        "delta": {"type": "text-delta", "text": "b"},
    }
    assert datas[11]["content"] == {"type": "text", "text": "ab"}
    assert datas[12] == {
        "event": "message-finish",
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    assert datas[13] == {"payload": {"step": 1}, "name": "progress"}
    assert got[14]["params"] == {
        **got[14]["params"],
        "namespace": ["agent:1"],
        "data": {"payload": {"step": 2}},
    }
    assert datas[15] == {"event": "failed", "graph_name": "agent", "error": "boom"}
    assert all(isinstance(e["params"]["timestamp"], int) for e in got)
    # threadcast's indexes read them: the run began at seq 1, the root failed.
    meta = await aredis_client.hgetall("tc:{t-helpers}:meta")
    assert meta[b"run_seq"] == b"1" and meta[b"run_status"] == b"failed"
    assert MessageEvents().error("quota", code="429")["params"]["data"] == {
        "event": "error",
        "message": "quota",
        "code": "429",
    }
