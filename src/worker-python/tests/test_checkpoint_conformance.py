"""LangGraph's checkpoint conformance suite (langgraph-checkpoint-conformance) against
RedisSaver and WorkerSaver, one pytest test per capability, on a flushed private Redis.

The suite is a library: ``@checkpointer_test`` registers an async generator of savers
and ``validate()`` runs the capabilities' specs against fresh ones, returning a report.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aredis
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from langgraph.checkpoint.conformance.spec.test_copy_thread import ALL_COPY_THREAD_TESTS
from langgraph.checkpoint.conformance.spec.test_delete_for_runs import ALL_DELETE_FOR_RUNS_TESTS
from langgraph.checkpoint.conformance.spec.test_delete_thread import ALL_DELETE_THREAD_TESTS
from langgraph.checkpoint.conformance.spec.test_get_tuple import ALL_GET_TUPLE_TESTS
from langgraph.checkpoint.conformance.spec.test_list import ALL_LIST_TESTS
from langgraph.checkpoint.conformance.spec.test_prune import ALL_PRUNE_TESTS
from langgraph.checkpoint.conformance.spec.test_put import ALL_PUT_TESTS
from langgraph.checkpoint.conformance.spec.test_put_writes import ALL_PUT_WRITES_TESTS

from threadcast_worker.checkpoint import RedisSaver, WorkerSaver

# How many specs each capability has in 0.0.2: a run that executes fewer did not run them all.
SPECS = {
    Capability.PUT: len(ALL_PUT_TESTS),
    Capability.PUT_WRITES: len(ALL_PUT_WRITES_TESTS),
    Capability.GET_TUPLE: len(ALL_GET_TUPLE_TESTS),
    Capability.LIST: len(ALL_LIST_TESTS),
    Capability.DELETE_THREAD: len(ALL_DELETE_THREAD_TESTS),
    Capability.DELETE_FOR_RUNS: len(ALL_DELETE_FOR_RUNS_TESTS),
    Capability.COPY_THREAD: len(ALL_COPY_THREAD_TESTS),
    Capability.PRUNE: len(ALL_PRUNE_TESTS),
}


def _registered(name: str, make: Any) -> Any:
    @checkpointer_test(name=name)
    async def factory() -> AsyncIterator[Any]:
        yield make()

    return factory


async def _run(registered: Any, capability: Capability) -> Any:
    report = await validate(
        registered, capabilities={capability.value}, progress=ProgressCallbacks.verbose()
    )
    report.print_report()
    return report.results[capability.value]


@pytest.mark.parametrize("capability", list(Capability), ids=lambda c: c.value)
async def test_redis_saver_passes_conformance(redis: aredis.Redis, capability: Capability) -> None:
    result = await _run(_registered("RedisSaver", lambda: RedisSaver(redis)), capability)
    assert result.detected, f"{capability.value} is not implemented"
    assert result.failures == []
    assert result.passed is True
    assert result.tests_passed == SPECS[capability]


@pytest.mark.parametrize("capability", list(Capability), ids=lambda c: c.value)
async def test_worker_saver_passes_conformance(redis: aredis.Redis, capability: Capability) -> None:
    """The worker's saver, unfenced and outside REST runs, is a conforming saver too."""

    def make() -> WorkerSaver:
        return WorkerSaver(redis, worker_name="w1", rest_run_of=lambda _t: False)

    result = await _run(_registered("WorkerSaver", make), capability)
    assert result.failures == []
    assert result.passed is True
    assert result.tests_passed == SPECS[capability]


class _LosesWrites(RedisSaver):
    """A broken saver: it keeps only the first write of each put_writes call."""

    async def aput_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        await super().aput_writes(config, list(writes)[:1], task_id, task_path)


class _IgnoresBefore(RedisSaver):
    """A broken saver: alist ignores before."""

    def alist(self, config, *, filter=None, before=None, limit=None):  # type: ignore[override]
        return super().alist(config, filter=filter, limit=limit)


async def test_the_suite_fails_broken_savers(redis: aredis.Redis) -> None:
    """So a pass above means something: the same wiring fails savers that lose data."""
    result = await _run(
        _registered("LosesWrites", lambda: _LosesWrites(redis)), Capability.PUT_WRITES
    )
    assert result.passed is False
    assert any("multiple_writes_same_task" in f for f in result.failures)
    result = await _run(
        _registered("IgnoresBefore", lambda: _IgnoresBefore(redis)), Capability.LIST
    )
    assert result.passed is False
    assert any("test_list_before" in f for f in result.failures)
