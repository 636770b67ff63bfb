"""Takeover (protocol/README.md, "When a worker dies"): claiming what a dead worker left, and going
on with the runs it was running — as the JavaScript worker's src/worker/takeover.js, so a run
left by a dead worker of either language's graphs is taken over by a live one of its graph.

A worker acknowledges a run-starting command only when its run is over, so a worker killed mid-run
leaves the entry pending in the group. Every heartbeat, ``claim`` claims the entries idle for
claim_idle_ms (XAUTOCLAIM), which are handled again (keepalive.py keeps the entries this worker has
in hand from looking idle, with an XCLAIM of its own). A claimed entry that started the run its
thread's record names, still ``running``, is taken over (``take_over``): once the dead worker's lock
has lapsed, the run goes on with the same run id from the last checkpoint — or from the start with
the same input when no step had finished — after the messages the dead worker left open are closed
with ``worker_lost`` errors.

Idle entries and lapsed leases are measured on Redis' clock, which runs on while Redis itself
is stalled: when it wakes up, every entry looks idle at once. So the worker the record names
is asked first whether it still counts as live — now, and a moment later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from threadcast_worker import keys, serde
from threadcast_worker.answers import KEEP, Entry
from threadcast_worker.lock import (
    acquire,
    head_of,
    load_input,
    move_run,
    record_done,
    release,
    worker_live,
)
from threadcast_worker.observe import RestStream
from threadcast_worker.relay import close_message, open_messages
from threadcast_worker.rest_runs import rest_call
from threadcast_worker.runs import Run, cancel_run, fenced_relay, run_graph
from threadcast_worker.worker import Worker

RUNS = {"run.start", "input.respond", "state.fork", "rest.run"}
"""Methods that start (or continue) a run: acknowledged when the run is over."""

LIVE_RECHECK_S = 0.25
"""How long after a first look a worker that did not count as live is looked at again."""


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


async def claim(w: Worker, dispatch: Callable[[str, str, dict, bool], None]) -> None:
    """Claims the entries idle for claim_idle_ms, each handed to dispatch(stream, id, fields,
    True). (Those in hand are claimed again by keepalive.py, so they never look idle.)"""
    for stream in w.streams:
        got = await w.cmd.xautoclaim(stream, keys.GROUP, w.name, w.claim_idle_ms, "0-0", count=16)
        for entry_id, fields in got[1] if got and len(got) > 1 else []:
            if not fields:
                await w.cmd.xack(stream, keys.GROUP, entry_id)
            else:
                dispatch(stream, _text(entry_id), fields, True)


async def _still_live(w: Worker, assistant: str, name: str) -> bool:
    if await worker_live(w, assistant, name):
        return True
    await asyncio.sleep(LIVE_RECHECK_S)
    return await worker_live(w, assistant, name)


async def run_left_by(w: Worker, entry: Entry) -> dict[str, str] | None:
    """The record of the run a claimed entry started (its thread's, if it names that entry)."""
    if entry.method not in RUNS:
        return None
    raw = await w.cmd.hgetall(keys.run(entry.thread))
    record = {_text(k): _text(v) for k, v in raw.items()}
    return record if record.get("entry") == entry.key else None


async def take_over(w: Worker, entry: Entry, record: dict[str, str]) -> Any:
    """A run-starting command claimed from a worker that died: its run goes on from the last
    checkpoint (or from the start, when none was written)."""
    thread = entry.thread
    holder = record.get("worker", "")
    if holder and holder != w.name and await _still_live(w, record["assistant"], holder):
        w.log(
            "info",
            "a run claimed from a live worker is left to it",
            thread=thread,
            run_id=record.get("run_id"),
            worker=holder,
        )
        return KEEP
    if not await acquire(w, thread, w.lock_ms + 5000):
        w.log(
            "warn",
            "cannot take over a run yet: the thread stays locked",
            thread=thread,
            run_id=record.get("run_id"),
        )
        return KEEP
    run_id = record["run_id"]
    if not await move_run(w, thread, run_id, holder, w.name):  # over, or taken meanwhile
        await release(w, thread)
        return None
    assistant = record["assistant"]
    recorded_configurable = serde.loads(record.get("configurable") or "{}")
    rest = serde.loads(record["rest"]) if record.get("rest") else None
    relay = fenced_relay(w, thread=thread, assistant=assistant, run_id=run_id)
    meta_run, run_seq, seq = await w.cmd.hmget(keys.meta(thread), "run_id", "run_seq", "seq")
    if meta_run is None or _text(meta_run) != run_id:
        # The dead worker recorded the run but died before its root `started` was appended:
        # the taker starts it, as the dead worker would have, so its streams find it.
        if rest is not None:
            status, _ = await rest_call(
                w, "run.started", {"run_id": run_id, "after_seq": int(seq or 0)}
            )
            if 400 <= status < 500:  # deleted or cancelled meanwhile
                await record_done(w, thread)
                await release(w, thread)
                return None
            relay.started(runId=run_id, rendered=True)
        elif record.get("recorded") == "1":
            relay.started(runId=run_id)
        else:
            relay.started()
    else:
        # Messages the dead worker left open are closed: their step runs again, under new ids.
        rows = await w.cmd.xrange(keys.events(thread), f"{int(run_seq or 1)}-0", "+")
        evs = [serde.loads(fields[b"e"]) for _, fields in rows]
        for m in open_messages(evs):
            relay.raw(
                close_message(
                    m, "the worker running this step stopped; the step runs again", "worker_lost"
                )
            )
    head = await head_of(w, thread)
    from_start = head == record.get("base", "")
    value = load_input(record["input"]) if from_start else None
    configurable = dict(recorded_configurable)
    if not from_start:
        configurable.pop("checkpoint_id", None)  # going on from the last checkpoint
    w.log(
        "info",
        "taking over a run",
        thread=thread,
        run_id=run_id,
        **{"from": "the start" if from_start else "the last checkpoint"},
    )
    served = w.graphs[assistant]
    ctl = Run(
        thread=thread,
        assistant=assistant,
        run_id=run_id,
        relay=relay,
        served=served,
        input=value,
        configurable=configurable,
        recorded=record.get("recorded") == "1",
    )
    if rest is not None:
        stream = rest.get("stream") or {}
        ctl.rest_run = True
        ctl.rest = RestStream(
            stream_mode=list(stream.get("stream_mode") or ["values"]),
            subgraphs=bool(stream.get("subgraphs")),
            run_id=run_id,
        )
        ctl.options = rest.get("options") or {}
        ctl.metadata = rest.get("metadata") or {}
        ctl.context = rest.get("context")
        ctl.dispose = bool(rest.get("dispose"))
        ctl.graph_config = {**(rest.get("config") or {}), "configurable": recorded_configurable}
        if record.get("cancel"):
            cancel_run(ctl, record["cancel"])
    else:
        defaults = dict(served.defaults)
        ctl.context = defaults.pop("context", None)
        ctl.graph_config = {**defaults, "configurable": recorded_configurable}
    w.running[thread] = ctl
    return await run_graph(w, ctl)
