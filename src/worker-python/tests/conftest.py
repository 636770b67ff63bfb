"""Fixtures shared by the worker's tests: a private redis-server per test session.

``redis_url`` starts one redis-server on a free port (no persistence), stopped by
its PID at the end; ``$TC_REDIS_SERVER`` names another binary (valkey-server).
``redis`` is a ``redis.asyncio.Redis`` on it (``decode_responses=False``), its
database flushed before the test.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aredis
from redis import Redis as SyncRedis
from redis.exceptions import ConnectionError as RedisConnectionError

_START_TIMEOUT = 10.0  # s for redis-server to answer PING
_STOP_TIMEOUT = 10.0  # s for it to exit after SIGTERM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    binary = os.environ.get("TC_REDIS_SERVER") or shutil.which("redis-server")
    if not binary:
        raise RuntimeError("redis-server is not installed (Debian: apt-get install redis-server)")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--daemonize", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                with SyncRedis.from_url(url, socket_timeout=1) as probe:
                    probe.ping()
                break
            except RedisConnectionError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {port} did not answer") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=_STOP_TIMEOUT)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aredis.Redis]:
    client = aredis.Redis.from_url(redis_url, decode_responses=False)
    await client.flushdb()
    try:
        yield client
    finally:
        await client.aclose()
