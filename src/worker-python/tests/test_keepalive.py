"""The keepalive thread (keepalive.py): a worker whose event loop is held by a graph keeps its
registry entry, its pending entries and its leases alive; a lease another worker took is given up
on the loop; a loop that stops answering for too long stops being kept alive."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import redis as redis_sync

from threadcast_worker import keys
from threadcast_worker.keepalive import Keepalive, lease
from threadcast_worker.worker import Worker


def worker(url: str, name: str = "ka1") -> Worker:
    return Worker(
        log=lambda level, msg, **f: None,
        name=name,
        heartbeat_ms=200,
        live_ms=600,
        claim_idle_ms=1000,
        lock_ms=400,
        cmd=None,  # type: ignore[arg-type]
        block=None,  # type: ignore[arg-type]
        graphs={"g": None},  # type: ignore[dict-item]
        redis_url=url,
    )


def redis_now_ms(r: redis_sync.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def running(r: redis_sync.Redis, w: Worker, thread: str, run_id: str) -> None:
    """What a run of w on thread looks like in Redis: its lock, its record."""
    r.set(keys.lock(thread), w.name, px=w.lock_ms)
    r.hset(keys.run(thread), mapping={"worker": w.name, "run_id": run_id, "status": "running"})


async def test_a_blocked_loop_keeps_its_leases_registry_and_entries(redis_srv: Any) -> None:
    w = worker(redis_srv.url)
    r = redis_srv.client()
    running(r, w, "t1", "run-1")
    r.xgroup_create(keys.stream("g"), keys.GROUP, id="0", mkstream=True)
    entry = r.xadd(keys.stream("g"), {"thread": "t1", "method": "run.start"}).decode()
    r.xreadgroup(keys.GROUP, w.name, {keys.stream("g"): ">"})
    w.inflight[f"{keys.stream('g')} {entry}"] = (keys.stream("g"), entry)
    lost: list[str] = []
    stop = lease(w, "t1", "run-1", lambda: lost.append("t1"))
    ka = Keepalive(w, asyncio.get_running_loop())
    ka.start()
    try:
        await asyncio.sleep(0.3)
        time.sleep(1.5)  # noqa: ASYNC251 — a graph holding the loop: 3.75 leases long
        assert r.get(keys.lock("t1")) == b"ka1"
        assert r.pttl(keys.lock("t1")) > 0
        assert int(float(r.zscore(keys.workers("g"), "ka1"))) > redis_now_ms(r)
        pending = r.xpending_range(keys.stream("g"), keys.GROUP, "-", "+", 10)
        assert [p["time_since_delivered"] < 600 for p in pending] == [True]
        assert lost == []
        stop()
        assert "t1" not in w.leases
    finally:
        await asyncio.to_thread(ka.stop)
        r.close()


async def test_a_lease_another_worker_holds_is_given_up_on_the_loop(redis_srv: Any) -> None:
    w = worker(redis_srv.url)
    r = redis_srv.client()
    running(r, w, "t2", "run-2")
    loop = asyncio.get_running_loop()
    lost = asyncio.Event()
    lease(w, "t2", "run-2", lambda: (asyncio.get_running_loop() is loop) and lost.set())
    ka = Keepalive(w, loop)
    ka.start()
    try:
        r.set(keys.lock("t2"), "ka-other", px=5000)  # taken over
        await asyncio.wait_for(lost.wait(), 3)
        assert "t2" not in w.leases
        assert r.get(keys.lock("t2")) == b"ka-other", "never taken back"
    finally:
        await asyncio.to_thread(ka.stop)
        r.close()


async def test_a_loop_silent_past_the_stall_bound_is_let_go(redis_srv: Any) -> None:
    w = worker(redis_srv.url)
    r = redis_srv.client()
    running(r, w, "t3", "run-3")
    lease(w, "t3", "run-3", lambda: None)
    ka = Keepalive(w, asyncio.get_running_loop(), stall_s=0.5)
    ka.start()
    try:
        await asyncio.sleep(0.3)
        time.sleep(2.0)  # noqa: ASYNC251 — hung, as far as anyone can tell
        assert r.get(keys.lock("t3")) is None, "the lease lapsed"
        assert int(float(r.zscore(keys.workers("g"), "ka1"))) < redis_now_ms(r), "looks dead"
        await asyncio.sleep(0.5)  # the loop answers again: alive again
        assert int(float(r.zscore(keys.workers("g"), "ka1"))) > redis_now_ms(r)
    finally:
        await asyncio.to_thread(ka.stop)
        r.close()


async def test_a_worker_that_left_the_registry_stays_out_keeps_its_leases(redis_srv: Any) -> None:
    """Closing: it leaves the registry (other workers may take its runs once it is gone) while the
    runs it still has keep their leases for its grace."""
    w = worker(redis_srv.url)
    r = redis_srv.client()
    running(r, w, "t4", "run-4")
    lease(w, "t4", "run-4", lambda: None)
    ka = Keepalive(w, asyncio.get_running_loop())
    ka.start()
    try:
        await asyncio.sleep(0.3)
        assert r.zscore(keys.workers("g"), "ka1") is not None
        await asyncio.to_thread(ka.leave)
        r.zrem(keys.workers("g"), "ka1")
        await asyncio.sleep(1.0)  # five heartbeats, two leases
        assert r.zscore(keys.workers("g"), "ka1") is None
        assert r.get(keys.lock("t4")) == b"ka1" and r.pttl(keys.lock("t4")) > 0
    finally:
        await asyncio.to_thread(ka.stop)
        r.close()
