"""The side-by-side suite's servers: LangGraph's Python server (``langgraph dev``) and threadcast
(a private redis-server, the gateway, the Python worker), both on the project in ``project/``.

``TC_SBS_THREADCAST=0`` leaves threadcast out: every test then runs its calls twice against the
reference and compares the two, which checks the harness, the normalising and that every
scenario is deterministic enough to compare. The processes' logs are kept in a temporary
directory, printed with a failing test's report and left in place when anything failed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import procs
from sbs import Server

THREADCAST = os.environ.get("TC_SBS_THREADCAST", "1") != "0"
# The graphs' environment on both sides: the fake model's pace (tokens stay in order at any pace).
GRAPH_ENV = {"THREADCAST_FAKE_TOKEN_MS": os.environ.get("THREADCAST_FAKE_TOKEN_MS", "5")}

_failed = False


@pytest.fixture(scope="session")
def logdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="tc-sbs-"))
    yield path
    procs.stop_all()
    if _failed:
        print(f"\nthe side-by-side suite's logs are in {path}")
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def reference(logdir: Path) -> Iterator[Server]:
    proc, url = procs.start_reference(logdir, procs.PROJECT, GRAPH_ENV)
    yield Server("reference", url)
    proc.stop()


@pytest.fixture(scope="session")
def threadcast(logdir: Path) -> Iterator[Server | None]:
    if not THREADCAST:
        yield None
        return
    redis, redis_url = procs.start_redis(logdir)
    gateway, url = procs.start_gateway(logdir, redis_url)
    worker = procs.start_worker(
        logdir, redis_url, procs.PROJECT / "langgraph.json", url, procs.GRAPHS, GRAPH_ENV
    )
    yield Server("threadcast", url)
    worker.stop()
    gateway.stop()
    redis.stop()
    reports = [
        m
        for m in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
        if m in gateway.text()
    ]
    assert not reports, f"the gateway's sanitizer reports:\n{gateway.tail(200)}"


@pytest.fixture(scope="session")
def servers(reference: Server, threadcast: Server | None) -> list[Server]:
    """The servers every test calls in turn: the reference first."""
    if threadcast is None:
        return [reference, Server("reference (again)", reference.url)]
    return [reference, threadcast]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    global _failed
    report = yield
    if report.failed:
        _failed = True
        for proc in procs.started():
            report.sections.append((f"{proc.name} log (last lines, {proc.log})", proc.tail(40)))
    return report
