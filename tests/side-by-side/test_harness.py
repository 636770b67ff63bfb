"""The suite's own machinery: the normalising and the comparison, the reference's project copy,
and the threadcast side's processes (Redis and the gateway, started and stopped as the fixtures
do; the worker's readiness probe answers 404 until a worker registered the graph).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

import expected
import procs
from sbs import Exempt, Normaliser, Server, assert_same, exempted, question, transcript

SERVER = Server("test", "http://127.0.0.1:2024")


def test_ids_are_named_by_first_appearance_and_keep_their_name() -> None:
    run, thread, task = (
        "01a252e0-fe83-7577-8f51-01ecd0598927",
        "0f4d5438-458a-43db-b490-8c2aa187a03e",
        "1ae6e122-0fdf-7a7e-c71b-9cd6142a1864",
    )
    got = Normaliser(SERVER)(
        {
            "b": [run, f"lc_run--{run}-0", f"researcher:{task}"],
            "a": {"thread_id": thread, "run_id": run},
            "interrupt": "f8d8b54e96a9b84c79580ea8f47f959a",
        }
    )
    # Keys are visited sorted: "a" first, and in it "run_id" before "thread_id".
    assert got == {
        "a": {"run_id": "<id:a.run_id>", "thread_id": "<id:a.thread_id>"},
        "b": ["<id:a.run_id>", "lc_run--<id:a.run_id>-0", "researcher:<id:b.2>"],
        "interrupt": "<hex:interrupt>",
    }
    keyed = Normaliser(SERVER)({"messages": {run: {"n": 1}}, "z": run})
    assert keyed == {"messages": {"<id:messages[key]>": {"n": 1}}, "z": "<id:messages[key]>"}


def test_times_versions_and_the_server_address() -> None:
    got = Normaliser(SERVER)(
        {
            "created_at": "2026-12-07T23:45:10.294184+00:00",
            "ts": "2026-12-07T23:45:10Z",
            "__request_start_time_ms__": 1796686966988,
            "step": 1796686966988,
            "version": "00000000000000000000000000000002.0.7234412345",
            "langgraph_api_url": "http://127.0.0.1:2024",
        }
    )
    assert got == {
        "created_at": "<time>",
        "ts": "<time>",
        "__request_start_time_ms__": "<time>",
        "step": 1796686966988,
        "version": "00000000000000000000000000000002.<random>",
        "langgraph_api_url": "http://<server>",
    }


def test_two_results_that_link_ids_differently_differ() -> None:
    a, b, c = (
        "00000000-0000-4000-8000-00000000000a",
        "00000000-0000-4000-8000-00000000000b",
        "00000000-0000-4000-8000-00000000000c",
    )

    def norm(v: object) -> object:
        return Normaliser(SERVER)(v)

    same_shape = norm({"checkpoint": a, "parent": b}), norm({"checkpoint": c, "parent": a})
    assert same_shape[0] == same_shape[1]
    linked, unlinked = norm({"x": a, "y": a}), norm({"x": a, "y": b})
    with pytest.raises(AssertionError, match=r"at \.y"):
        assert_same(linked, unlinked, [])
    # An id one side lacks renames no other.
    assert norm({"a": a, "b": b})["b"] == norm({"b": b})["b"]


def test_exempt_fields_are_left_out_of_both_sides() -> None:
    value = {"parts": [{"id": "1-0", "data": 1}, {"id": "2-0", "data": 2}], "meta": {"v": "x"}}
    assert exempted(value, [Exempt("parts.*.id", "resume tokens"), Exempt("**.v", "release")]) == {
        "parts": [{"data": 1}, {"data": 2}],
        "meta": {},
    }
    assert exempted(value, [Exempt("parts.1", "the second part")])["parts"] == [
        {"id": "1-0", "data": 1},
        "<exempt: the second part>",
    ]
    # A field one side has and the other not is left out of both.
    assert_same(value, {**value, "parts": [{"data": 1}, {"data": 2}]}, [Exempt("**.id", "ids")])
    assert_same(value, {**value, "meta": {"v": "y"}}, [Exempt("**.v", "release")])
    with pytest.raises(AssertionError, match=r"at \.meta\.v"):
        assert_same(value, {**value, "meta": {"v": "y"}}, [])


def test_the_reference_reads_a_copy_with_absolute_paths(tmp_path: Path) -> None:
    copy = json.loads(procs.reference_project(procs.PROJECT, tmp_path).read_text())
    original = json.loads((procs.PROJECT / "langgraph.json").read_text())
    assert list(copy["graphs"]) == procs.GRAPHS == list(original["graphs"])
    for graph_id, spec in copy["graphs"].items():
        path, _, attr = spec.rpartition(":")
        assert Path(path).is_absolute() and Path(path).is_file(), spec
        assert attr == original["graphs"][graph_id].rpartition(":")[2]
    assert copy["dependencies"] == [str(procs.PROJECT)]
    assert copy["env"] == original["env"]


def test_redis_and_the_gateway_start_and_stop(tmp_path: Path) -> None:
    redis, redis_url = procs.start_redis(tmp_path)
    try:
        gateway, url = procs.start_gateway(tmp_path, redis_url)
        try:
            assert procs.http_status(f"{url}/readyz") == 200
            # No worker: no graph is registered, which is what the worker's readiness waits on.
            assert procs.http_status(f"{url}/assistants/agent") == 404
        finally:
            gateway.stop()
        assert gateway.popen.returncode is not None
        assert procs.http_status(f"{url}/readyz") is None
    finally:
        redis.stop()
    assert redis.popen.returncode is not None
    port = int(redis_url.rsplit(":", 1)[1])
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "redis-server is stopped"


def test_free_ports_are_outside_the_ephemeral_range() -> None:
    lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = {procs.free_port() for _ in range(20)}
    assert all(not lo <= p <= hi for p in ports)


async def test_the_example_project_is_served_by_the_reference(tmp_path: Path) -> None:
    """src/worker-python/example as the Python server reads it: its graph answers, with the tool."""
    example = procs.REPO / "src" / "worker-python" / "example"
    proc, url = procs.start_reference(tmp_path, example, {"THREADCAST_FAKE_TOKEN_MS": "1"})
    try:
        client = Server("example", url).client()
        try:
            (assistant,) = await client.assistants.search(graph_id="agent")
            values = await client.runs.wait(None, "agent", input=question("what is redis"))
        finally:
            await client.aclose()
    finally:
        proc.stop()
    assert assistant["name"] == "agent"
    assert transcript(values) == expected.transcript("what is redis")
