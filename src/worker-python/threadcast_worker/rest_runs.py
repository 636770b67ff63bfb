"""REST runs (protocol/README.md, "REST runs and state"): a ``rest.run`` command, handed over by
threadcast_rest, becomes a graph run here — how its params become LangGraph's input and
options (``rest_plan``), how it waits for its thread and starts (``start_rest_run``; runs.py
runs it), and what the worker reports of it to the REST records' function (``rest_call``:
run.started, run.finished with the run's outcome, after a rollback has taken back what it
wrote). As the JavaScript worker's src/worker/rest-runs.js; a REST run's stream is rendered
here as LangGraph's Python server renders it (observe.py, ``RestStream``), and its root
``started`` says so (``rendered``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from threadcast_worker import config as run_configs
from threadcast_worker import keys, serde
from threadcast_worker.answers import KEEP, Entry
from threadcast_worker.lock import acquire, record_done, record_run, release
from threadcast_worker.observe import RestStream
from threadcast_worker.relay import Relay
from threadcast_worker.rest import to_command
from threadcast_worker.runs import Run, fenced_relay
from threadcast_worker.worker import Waiting, Worker

UNSTARTED_LOCK_WAIT_MS = 30000
"""How long a run cancelled before it started waits for its thread to append its end."""


class InputError(serde.ThreadcastError):
    """Input a REST run cannot run with: the run fails at once with it."""


async def rest_call(w: Worker, op: str, args: dict[str, Any]) -> tuple[int, Any]:
    """FCALL threadcast_rest <op>: the REST records' function. Answers (status, body); never
    raises (status 0 when Redis could not be asked)."""
    try:
        r = await w.cmd.execute_command(
            "FCALL", "threadcast_rest", 1, keys.REST, op, serde.dumps(args)
        )
    except Exception as e:  # noqa: BLE001
        w.log("warn", f"threadcast_rest {op} failed", run_id=args.get("run_id"), error=str(e))
        return 0, None
    status = int(r[0]) if isinstance(r, list) and r else 0
    body = r[1] if isinstance(r, list) and len(r) > 1 else None
    if isinstance(body, bytes):
        body = body.decode()
    if not status < 400:
        w.log(
            "warn",
            f"threadcast_rest {op} refused",
            run_id=args.get("run_id"),
            status=status,
            body=str(body)[:300],
        )
    return status, body


def _plain(value: Any) -> Any:
    return serde.loads(serde.dumps(value))


async def rest_outcome(
    w: Worker, ctl: Run, status: str, error: BaseException | None, head: Any
) -> dict:
    """run.finished's arguments for a REST run that is over: its status (success, error,
    interrupted), the error, the thread's values and pending interrupts. A rollback cancel
    first takes back every checkpoint and write the run made (its undo journal)."""
    out: dict[str, Any] = {"run_id": ctl.run_id}
    try:
        await w.saver.settle(ctl.thread)
        if ctl.cancelled and ctl.cancel_action == "rollback":
            head = None  # read again once taken back
            n = await w.saver.undo(ctl.thread)
            out["rollback"] = True
            w.log("info", "run rolled back", thread=ctl.thread, run_id=ctl.run_id, checkpoints=n)
        else:
            await w.cmd.delete(keys.undo(ctl.thread))
    except Exception as e:  # noqa: BLE001
        w.log("warn", "rollback failed", thread=ctl.thread, run_id=ctl.run_id, error=str(e))
    if ctl.cancelled:
        out["status"] = "interrupted"
    else:
        # A graph that stops at an interrupt (or interrupt_before/after) has run successfully:
        # its thread is "interrupted", not the run.
        out["status"] = "error" if status == "failed" else "success"
    if error is not None:
        # The thread's error as the Python server keeps it: the message hidden unless the
        # server shows it (its stream's error event says the same).
        out["error"] = serde.error_payload(
            error.exceptions[0]
            if isinstance(error, BaseExceptionGroup) and error.exceptions
            else error
        )
    if ctl.graph is None:
        return out  # its graph could not be built: nothing ran
    try:
        st = (
            head
            if head is not None
            else await ctl.graph.aget_state({"configurable": {"thread_id": ctl.thread}})
        )
        out["values"] = _plain(st.values) or {}
        interrupts: dict[str, Any] = {}
        for t in st.tasks or ():
            if getattr(t, "result", None) is None and t.interrupts:
                interrupts[t.id] = [_plain({"id": i.id, "value": i.value}) for i in t.interrupts]
        out["interrupts"] = interrupts
        if status != "failed":  # a failed run's nodes still to run are not a stop
            out["next"] = list(st.next or ())
    except Exception as e:  # noqa: BLE001
        w.log(
            "warn",
            "cannot read the state after a run",
            thread=ctl.thread,
            run_id=ctl.run_id,
            error=str(e),
        )
    return out


async def finish_rest_run(
    w: Worker, ctl: Run, status: str, error: BaseException | None, head: Any
) -> None:
    """Reports run.finished for a REST (or recorded) run that is over."""
    await rest_call(w, "run.finished", await rest_outcome(w, ctl, status, error, head))


@dataclass
class Plan:
    input: Any = None
    config: dict[str, Any] = field(default_factory=dict)  # what a factory is built with
    configurable: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)  # the stream's
    context: Any = None
    options: dict[str, Any] = field(default_factory=dict)


async def rest_plan(w: Worker, thread: str, assistant: str, run_id: str, p: dict[str, Any]) -> Plan:
    """How a REST run's params become LangGraph's input and options: config, context and
    metadata merged with the assistant's and the thread's as the Python server merges them
    (config.py), the start checkpoint, interrupts, recursion limit, tags."""
    try:
        value = to_command(p["command"]) if p.get("command") is not None else p.get("input")
    except Exception as e:  # noqa: BLE001 — a malformed command fails the run, visibly
        raise InputError(f"command: {e}") from e
    config = p.get("config") or {}
    if not isinstance(config, dict):
        raise InputError("config must be an object")
    if config.get("configurable") is not None and not isinstance(config["configurable"], dict):
        raise InputError("config.configurable must be an object")
    if p.get("context") is not None and not isinstance(p["context"], dict):
        raise InputError("context must be an object")
    checkpoint_id = p.get("checkpoint_id") or (config.get("configurable") or {}).get(
        "checkpoint_id"
    )
    served = w.graphs[assistant]
    layer = run_configs.assistant_layer(p, assistant, served.defaults)
    thread_layer = p.get("thread") if isinstance(p.get("thread"), dict) else None
    aid = p.get("assistant_id") if isinstance(p.get("assistant_id"), str) else assistant
    try:
        merged_config, context = run_configs.merge_run(
            layer,
            thread_layer,
            {
                "config": config,
                "context": p.get("context"),
                "metadata": p.get("metadata"),
                "after_seconds": p.get("after_seconds"),
            },
            {"run_id": run_id, "thread_id": thread, "graph_id": assistant, "assistant_id": aid},
        )
    except run_configs.ConfigError as e:
        raise InputError(str(e)) from e
    configurable = merged_config["configurable"]
    configurable.pop("checkpoint_id", None)
    if checkpoint_id is not None:
        if not isinstance(checkpoint_id, str) or not checkpoint_id:
            raise InputError("checkpoint_id must be a non-empty string")
        found = await w.saver.aget_tuple(
            {
                "configurable": {
                    "thread_id": thread,
                    "checkpoint_ns": "",
                    "checkpoint_id": checkpoint_id,
                }
            }
        )
        if not found:
            raise InputError(f'thread "{thread}" has no checkpoint "{checkpoint_id}"')
        configurable["checkpoint_id"] = checkpoint_id
    options: dict[str, Any] = {}
    for k in ("interrupt_before", "interrupt_after"):
        v = p.get(k)
        if v is None:
            continue
        if v != "*" and not (isinstance(v, list) and all(isinstance(n, str) for n in v)):
            raise InputError(f'{k} must be "*" or a list of node names')
        options[k] = v
    limit = merged_config.get("recursion_limit")
    if limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InputError("config.recursion_limit must be a positive integer")
        options["recursion_limit"] = limit
    if isinstance(merged_config.get("tags"), list):
        options["tags"] = [t for t in merged_config["tags"] if isinstance(t, str)]
    return Plan(
        input=value,
        config=merged_config,
        configurable=configurable,
        metadata=run_configs.stream_metadata(merged_config.get("metadata") or {}),
        context=context,
        options=options,
    )


def rest_stream(p: dict[str, Any], run_id: str) -> RestStream:
    """A REST run's stream options, as the run was created with them."""
    modes = p.get("stream_mode")
    if modes is None:
        modes = ["values"]
    elif isinstance(modes, str):
        modes = [modes]
    return RestStream(
        stream_mode=list(modes), subgraphs=bool(p.get("stream_subgraphs")), run_id=run_id
    )


def _truthy(v: Any) -> bool:
    return v is True or v in ("true", "1", 1)


async def _cancelled(w: Worker, wait: Waiting) -> bool:
    """Whether a run that waits here is cancelled: a rest.cancel this worker read, or one
    another worker read — it found no run to stop, but threadcast_rest marked the run's record
    (``cancel``), which is read here."""
    if wait.cancel_action is None:
        got = await w.cmd.hget(keys.rest_run(wait.run_id), "cancel")
        if got:
            wait.cancel_action = got.decode() if isinstance(got, bytes) else got
    return wait.cancel_action is not None


async def _wait_after_seconds(
    w: Worker, thread: str, run_id: str, p: dict[str, Any], wait: Waiting
) -> bool:
    """A run asked to start after_seconds after it was created: waits until then (its record's
    created_at plus the delay, on Redis' clock), unless cancelled or the worker closes."""
    try:
        delay = float(p.get("after_seconds") or 0)
    except (TypeError, ValueError):
        delay = 0
    if delay <= 0:
        return True
    status, body = await rest_call(w, "runs.get", {"path": {"thread_id": thread, "run_id": run_id}})
    created = None
    if status == 200 and body:
        try:
            created = (
                datetime.fromisoformat(
                    serde.loads(body)["created_at"].replace("Z", "+00:00")
                ).timestamp()
                * 1000
            )
        except Exception:  # noqa: BLE001
            created = None
    sec, usec = await w.cmd.time()
    redis_now = int(sec) * 1000 + int(usec) // 1000
    until = (
        time.monotonic()
        + ((created if created is not None else redis_now) + delay * 1000 - redis_now) / 1000
    )
    while time.monotonic() < until:
        if w.closing or await _cancelled(w, wait):
            return False
        await asyncio.sleep(min(0.25, max(0.0, until - time.monotonic())))
    return True


async def _cancelled_before_start(
    w: Worker, wait: Waiting, assistant: str, locked: bool = False
) -> None:
    """A run cancelled before it started: reported interrupted (a rollback deletes it), nothing
    of the graph run. Its start and end are still appended, under the thread's lock, so run
    streams and waits that joined it end as for any run."""
    args: dict[str, Any] = {"run_id": wait.run_id, "status": "interrupted"}
    if wait.cancel_action == "rollback":
        args["rollback"] = True
    await rest_call(w, "run.finished", args)
    if not locked and not await acquire(w, wait.thread, UNSTARTED_LOCK_WAIT_MS):
        w.log(
            "warn",
            "a run cancelled before it started: its end is not appended, the thread stays locked",
            thread=wait.thread,
            run_id=wait.run_id,
        )
        return
    try:
        relay = Relay(
            redis=w.cmd,
            thread=wait.thread,
            assistant=assistant,
            run_id=wait.run_id,
            log=w.log,
            append_opts=["ASSISTANT", assistant],
        )
        relay.started(runId=wait.run_id)
        await relay.end("interrupted", cancelled=True, action=wait.cancel_action or "interrupt")
    finally:
        if not locked:
            await release(w, wait.thread)


async def start_rest_run(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    """The start of a REST run: waits for its after_seconds, then for the thread (runs never
    overlap; a rest.cancel meanwhile reports the run interrupted; a closing worker leaves it
    to another), records it, reports run.started, appends its root ``started`` (``runId``,
    ``rendered``). Returns the Run for run_graph, None when there is nothing to run, or KEEP
    when the worker closes before the thread was free. Input that cannot run or a graph
    factory that cannot be called makes a run that fails at once."""
    thread = entry.thread
    run_id = p.get("run_id") if isinstance(p.get("run_id"), str) and p.get("run_id") else entry.corr
    if not run_id:
        w.log("warn", "rest.run without a run_id, dropped", thread=thread)
        return None
    assistant = entry.assistant
    assert assistant is not None
    wait = Waiting(run_id=run_id, thread=thread)
    w.waiting[run_id] = wait
    try:
        due = await _wait_after_seconds(w, thread, run_id, p, wait)
        while True:
            if w.closing:
                return KEEP
            if await _cancelled(w, wait):
                await _cancelled_before_start(w, wait, assistant)
                return None
            if due and thread not in w.running and await acquire(w, thread):
                break
            await asyncio.sleep(0.25)
    finally:
        w.waiting.pop(run_id, None)
    try:
        start_error: BaseException | None = None
        try:
            plan = await rest_plan(w, thread, assistant, run_id, p)
        except InputError as e:
            start_error = e
            plan = Plan()
        dispose = _truthy(p.get("temporary")) and p.get("on_completion") != "keep"
        stream = rest_stream(p, run_id)
        await record_run(
            w,
            thread=thread,
            entry_key=entry.key,
            run_id=run_id,
            assistant=assistant,
            input=plan.input,
            configurable=plan.configurable,
            rest={
                "options": plan.options,
                "metadata": plan.metadata,
                "config": {k: v for k, v in plan.config.items() if k != "configurable"},
                "context": plan.context,
                "dispose": dispose,
                "stream": {"stream_mode": stream.stream_mode, "subgraphs": stream.subgraphs},
            },
        )
        await w.cmd.hdel(keys.run(thread), "cancel")
        await w.cmd.delete(keys.undo(thread))
        relay = fenced_relay(w, thread=thread, assistant=assistant, run_id=run_id)
        ctl = Run(
            thread=thread,
            assistant=assistant,
            run_id=run_id,
            relay=relay,
            served=w.graphs[assistant],
            input=plan.input,
            configurable=dict(plan.configurable),
            graph_config=plan.config,
            metadata=plan.metadata,
            context=plan.context,
            options=plan.options,
            rest=stream,
            rest_run=True,
            dispose=dispose,
            start_error=start_error,
        )
        w.running[thread] = ctl
        # A rest.cancel read between the lock and here found no run to stop (its mark in the
        # record stays): the run ends before it starts, as one cancelled while it waits.
        if await _cancelled(w, wait):
            w.running.pop(thread, None)
            await record_done(w, thread)
            await _cancelled_before_start(w, wait, assistant, locked=True)
            await release(w, thread)
            return None
        seq = await w.cmd.hget(keys.meta(thread), "seq")
        started = await rest_call(w, "run.started", {"run_id": run_id, "after_seq": int(seq or 0)})
        if 400 <= started[0] < 500:  # deleted or cancelled before it could start
            w.log(
                "info",
                "REST run dropped: threadcast_rest refused run.started",
                thread=thread,
                run_id=run_id,
                status=started[0],
            )
            w.running.pop(thread, None)
            await record_done(w, thread)
            if started[0] == 409:
                wait.cancel_action = wait.cancel_action or "interrupt"
                await _cancelled_before_start(w, wait, assistant, locked=True)
            await release(w, thread)
            return None
        relay.started(runId=run_id, rendered=True)
        await relay.drain()
    except BaseException:
        w.running.pop(thread, None)
        await release(w, thread)
        raise
    return ctl
