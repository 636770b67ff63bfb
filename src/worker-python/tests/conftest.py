"""Fixtures the worker's tests share: a private redis-server (started on a free port, stopped by
its PID; ``$TC_REDIS_SERVER`` names another binary, valkey-server), with threadcast's three
function libraries loaded as protocol/README.md says ("The function libraries": threadcast.lua as
it is, the other two assembled by scripts/embed.py).

``redis_session`` is one such server per session; ``redis_srv`` the same, emptied of keys;
``redis_url`` its URL; ``redis`` and ``aredis_client`` a ``redis.asyncio.Redis`` on it
(``decode_responses=False``) with the database emptied; ``new_redis`` a server of the test's own."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import redis as redis_lib
import redis.asyncio as aredis

REPO = Path(__file__).resolve().parents[3]
LIBRARY_DIR = REPO / "protocol" / "redis"
START_TIMEOUT = 10.0  # seconds a redis-server may take to answer PING


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def library_sources() -> list[str]:
    """threadcast, threadcast_store and threadcast_rest, ready for FUNCTION LOAD."""
    base = LIBRARY_DIR / "threadcast.lua"
    out = [base.read_text()]
    for name in ("threadcast_store.lua", "threadcast_rest.lua"):
        out.append(
            subprocess.run(
                [
                    sys.executable,
                    str(REPO / "scripts" / "embed.py"),
                    "--library",
                    str(base),
                    str(LIBRARY_DIR / name),
                ],
                check=True,
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout
        )
    return out


class RedisServer:
    """A redis-server of the test's own; ``url`` reaches it."""

    def __init__(self, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.port = port
        self.proc = proc
        self.url = f"redis://127.0.0.1:{port}"

    def client(self) -> redis_lib.Redis:
        return redis_lib.Redis(port=self.port, socket_timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@contextlib.contextmanager
def redis_server(*, libraries: bool = True) -> Iterator[RedisServer]:
    """Starts a redis-server (with threadcast's libraries unless told not to) and stops it."""
    exe = os.environ.get("TC_REDIS_SERVER") or shutil.which("redis-server")
    assert exe, "redis-server is required (Debian: apt-get install redis-server)"
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = RedisServer(port, proc)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        with server.client() as c:
            while True:
                try:
                    c.ping()
                    break
                except redis_lib.ConnectionError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            if libraries:
                for src in library_sources():
                    c.function_load(src, replace=True)
        yield server
    finally:
        server.stop()


@pytest.fixture
def new_redis() -> Callable[..., contextlib.AbstractContextManager[RedisServer]]:
    """``redis_server`` itself, for a test that needs a server of its own
    (``with new_redis(libraries=False) as srv:``)."""
    return redis_server


@pytest.fixture(scope="session")
def redis_session() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
def redis_srv(redis_session: RedisServer) -> RedisServer:
    """The session's redis-server, emptied of keys (the libraries stay)."""
    with redis_session.client() as c:
        c.flushall()
    return redis_session


@pytest.fixture
async def aredis_client(redis_srv: RedisServer) -> AsyncIterator[aredis.Redis]:
    client = aredis.Redis(port=redis_srv.port, socket_timeout=10)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture(scope="session")
def redis_url(redis_session: RedisServer) -> str:
    return f"{redis_session.url}/0"


@pytest.fixture
async def redis(redis_srv: RedisServer) -> AsyncIterator[aredis.Redis]:
    client = aredis.Redis(port=redis_srv.port, socket_timeout=10)
    try:
        yield client
    finally:
        await client.aclose()
