"""The commands (protocol/README.md, "Worker contract", "The LangGraph worker", "REST runs and
state"): ``handle`` turns one stream entry into a command — or a run to take over, for an entry
claimed from a dead worker — and runs its method's handler; the handler table has one function
per method, as the JavaScript worker's src/worker/commands.js. A handler answers through
answers.py (or raises a ProtocolError, answered here) and returns KEEP to leave its entry
pending; loops.py acknowledges the entry once handle() is done. The shapes of the REST API's
answers are rest.py's, as LangGraph's Python server gives them.
"""

from __future__ import annotations

import re
import time
import traceback
from typing import Any

from langgraph.errors import InvalidUpdateError
from langgraph.types import Command

from threadcast_worker import keys, rest, serde
from threadcast_worker.answers import KEEP, Entry, ProtocolError, answer, success
from threadcast_worker.lock import claim_thread, forward, mark_cancel, release
from threadcast_worker.rest_runs import start_rest_run
from threadcast_worker.runs import (
    cancel_run,
    inject,
    pending_interrupts,
    run_graph,
    start_run,
    thread_configurable,
    with_ids,
)
from threadcast_worker.takeover import run_left_by, take_over
from threadcast_worker.worker import Worker

THREAD_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _plain(value: Any) -> Any:
    return serde.loads(serde.dumps(value))


def _graph(w: Worker, entry: Entry, configurable: dict[str, Any], access: str) -> Any:
    """The graph a state command reads or updates: a factory is built with the configurable of
    the thread's last run here, as the server builds it with the thread's config."""
    return w.graphs[entry.assistant or ""].graph({"configurable": configurable}, access=access)


async def _claim_for_update(w: Worker, thread: str) -> None:
    """Takes the thread for a state update, refused while a REST run waits here to start on it
    or any run holds it: the reference refuses updates while a run is pending or running."""
    for wait in w.waiting.values():
        if wait.thread == thread:
            raise ProtocolError(
                "invalid_argument",
                f'run "{wait.run_id}" is pending on thread "{thread}"; wait for it to end',
            )
    await claim_thread(w, thread)


# ---- the REST API's commands ------------------------------------------------------------------


async def rest_run(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    """rest.run: a REST run, run to its end; acknowledged then."""
    ctl = await start_rest_run(w, entry, p)
    if ctl is KEEP or ctl is None:
        return ctl
    return await run_graph(w, ctl)


async def rest_cancel(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    """rest.cancel (no answer): the run waiting here, running here, or — through its record and
    its lock's owner — elsewhere."""
    thread = entry.thread
    action = p.get("action") or "interrupt"
    if not isinstance(p.get("run_id"), str) or action not in ("interrupt", "rollback"):
        w.log(
            "warn", "rest.cancel needs a run_id and an action interrupt or rollback", thread=thread
        )
        return None
    waiting = w.waiting.get(p["run_id"])
    if waiting is not None:
        waiting.cancel_action = action
        return None
    local = w.running.get(thread)
    if local is not None and local.run_id == p["run_id"]:
        cancel_run(local, action)
        return None
    marked = await mark_cancel(w, thread, p["run_id"], action)
    if await forward(w, thread, {"op": "cancel", "run_id": p["run_id"], "action": action}):
        return None
    if marked < 0:
        w.log(
            "info", "rest.cancel for a run that is not running", thread=thread, run_id=p["run_id"]
        )
    return None


async def rest_state_get(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    r = rest.read_state_get(entry.thread, p)
    named = r.config["configurable"].get("checkpoint_id")
    # The graph is built first, as the Python server builds it for every state read: a factory
    # that raises fails the read, whatever the thread holds.
    async with _graph(w, entry, await thread_configurable(w, entry.thread), "threads.read") as g:
        if not named and not await w.saver.aget_tuple(
            {"configurable": {"thread_id": entry.thread, "checkpoint_ns": ""}}
        ):
            return await success(w.cmd, w.log, entry, rest.empty_state())
        # An unknown checkpoint is read as the Python server reads it: 200, a state naming it.
        snap = await g.aget_state(r.config, subgraphs=r.subgraphs)
    return await success(w.cmd, w.log, entry, rest.thread_state(snap))


async def rest_state_update(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    thread = entry.thread
    u = rest.read_state_update(thread, p, graph_id=entry.assistant)
    await _claim_for_update(w, thread)
    try:
        async with _graph(w, entry, await thread_configurable(w, thread), "threads.update") as g:
            try:
                nxt = await g.aupdate_state(u.config, u.values, as_node=u.as_node)
            except (ValueError, KeyError, TypeError, InvalidUpdateError) as e:
                raise ProtocolError("invalid_argument", f"cannot update the state: {e}") from e
        return await success(w.cmd, w.log, entry, rest.update_answer(nxt))
    finally:
        await release(w, thread)


async def rest_state_bulk(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    """rest.state.bulk: a thread's state written as consecutive supersteps, one checkpoint per
    superstep, as LangGraph's bulk_update_state writes them. Answers the last checkpoint."""
    thread = entry.thread
    b = rest.read_bulk(thread, p, graph_id=entry.assistant)
    await _claim_for_update(w, thread)
    try:
        async with _graph(w, entry, await thread_configurable(w, thread), "threads.update") as g:
            try:
                nxt = await g.abulk_update_state(b.config, b.supersteps)
            except (ValueError, KeyError, TypeError, InvalidUpdateError) as e:
                raise ProtocolError("invalid_argument", f"cannot update the state: {e}") from e
        return await success(w.cmd, w.log, entry, rest.bulk_answer(nxt))
    finally:
        await release(w, thread)


async def rest_history(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    h = rest.read_history(entry.thread, p)
    states = []
    async with _graph(w, entry, await thread_configurable(w, entry.thread), "threads.read") as g:
        async for s in g.aget_state_history(
            h.config, limit=h.limit, before=h.before, filter=h.filter
        ):
            states.append(rest.thread_state(s, history=True))
    return await success(w.cmd, w.log, entry, states)


async def rest_copy(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    to = p.get("new_thread_id")
    if not isinstance(to, str) or not THREAD_ID.match(to):
        raise ProtocolError(
            "invalid_argument", "new_thread_id must be a thread id ([A-Za-z0-9._:-]{1,128})"
        )
    if to == entry.thread:
        raise ProtocolError("invalid_argument", "new_thread_id is the thread itself")
    # Every checkpoint, write and value, the target thread id in their metadata (as the
    # Python server's copy writes it), the source's TTLs kept.
    await w.saver.acopy_thread(entry.thread, to)
    return await success(w.cmd, w.log, entry, {})


# ---- the runtime commands ---------------------------------------------------------------------


async def run_start(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    thread = entry.thread
    given = p.get("input")
    if isinstance(given, str):
        message: Any = {"role": "user", "content": given}
    elif isinstance(given, dict) and isinstance(given.get("messages"), list) and given["messages"]:
        message = given["messages"][-1]
    else:
        message = given
    local = w.running.get(thread)
    if local is not None and local.over:  # its end is out: a new run, once this one is gone
        await local.settled.wait()
        local = w.running.get(thread)
    if local is not None:  # CDDL 4a: input for an active run is injected into it
        inject(local, message if isinstance(message, dict) else {})
        return await success(w.cmd, w.log, entry, {"run_id": local.run_id})
    if await forward(w, thread, {"op": "inject", "message": message}):
        run_id = await w.cmd.hget(keys.run(thread), "run_id")
        return await success(w.cmd, w.log, entry, {"run_id": run_id.decode() if run_id else None})
    await claim_thread(w, thread)
    try:
        configurable = dict((p.get("config") or {}).get("configurable") or {})
        configurable.pop("thread_id", None)
        if configurable.get("checkpoint_id"):
            found = await w.saver.aget_tuple(
                {
                    "configurable": {
                        "thread_id": thread,
                        "checkpoint_ns": "",
                        "checkpoint_id": configurable["checkpoint_id"],
                    }
                }
            )
            if not found:
                raise ProtocolError(
                    "no_such_checkpoint",
                    f'thread "{thread}" has no checkpoint "{configurable["checkpoint_id"]}"',
                )
            value, humans = with_ids(p.get("input"))
            return await start_run(
                w,
                entry,
                thread=thread,
                assistant=entry.assistant,
                input=value,
                configurable=configurable,
                metadata=p.get("metadata"),
                humans=humans,
            )
        try:
            async with _graph(w, entry, await thread_configurable(w, thread), "threads.read") as g:
                pending = pending_interrupts(
                    await g.aget_state({"configurable": {"thread_id": thread}})
                )
        except Exception as e:  # noqa: BLE001 — a graph factory that raises: the run fails
            # with its exception, as a REST run's does, rather than the command.
            value, humans = with_ids(p.get("input"))
            return await start_run(
                w,
                entry,
                thread=thread,
                assistant=entry.assistant,
                input=value,
                configurable=configurable,
                metadata=p.get("metadata"),
                humans=humans,
                start_error=e,
            )
        if pending:  # an interrupted run: the input answers it
            resume = {i["id"]: p.get("input") for i in pending}
            return await start_run(
                w,
                entry,
                thread=thread,
                assistant=entry.assistant,
                input=Command(resume=resume),
                configurable=configurable,
                metadata=p.get("metadata"),
                answered=[i["id"] for i in pending],
            )
        value, humans = with_ids(p.get("input"))
        return await start_run(
            w,
            entry,
            thread=thread,
            assistant=entry.assistant,
            input=value,
            configurable=configurable,
            metadata=p.get("metadata"),
            humans=humans,
        )
    except BaseException:
        if thread not in w.running:
            await release(w, thread)
        raise


async def input_respond(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    thread = entry.thread
    responses = p.get("responses") or [
        {
            "namespace": p.get("namespace"),
            "interrupt_id": p.get("interrupt_id"),
            "response": p.get("response"),
        }
    ]
    await claim_thread(w, thread)
    try:
        async with _graph(w, entry, await thread_configurable(w, thread), "threads.read") as g:
            pending = pending_interrupts(
                await g.aget_state({"configurable": {"thread_id": thread}})
            )
        ids = {i["id"] for i in pending}
        for r in responses:
            if r.get("interrupt_id") not in ids:
                raise ProtocolError(
                    "no_such_interrupt",
                    f'no interrupt "{r.get("interrupt_id")}" is waiting for an answer '
                    f'on thread "{thread}"',
                )
        kwargs: dict[str, Any] = {
            "resume": {r["interrupt_id"]: r.get("response") for r in responses}
        }
        if p.get("update") is not None:
            kwargs["update"] = p["update"]
        if p.get("goto") is not None:
            kwargs["goto"] = p["goto"]
        return await start_run(
            w,
            entry,
            thread=thread,
            assistant=entry.assistant,
            input=Command(**kwargs),
            configurable=dict((p.get("config") or {}).get("configurable") or {}),
            metadata=p.get("metadata"),
            answered=[r["interrupt_id"] for r in responses],
            result=lambda r: {},
        )
    except BaseException:
        if thread not in w.running:
            await release(w, thread)
        raise


async def input_inject(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    local = w.running.get(entry.thread)
    if local is not None and not local.over:
        inject(local, p.get("message") or {})
    elif not await forward(w, entry.thread, {"op": "inject", "message": p.get("message")}):
        raise ProtocolError(
            "no_such_run", f'no run is active on thread "{entry.thread}" to inject into'
        )
    return await success(w.cmd, w.log, entry, {})


async def run_cancel(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    local = w.running.get(entry.thread)
    if local is not None and not local.over:
        cancel_run(local)
    elif not await forward(w, entry.thread, {"op": "cancel"}):
        raise ProtocolError("no_such_run", f'no run is active on thread "{entry.thread}"')
    return await success(w.cmd, w.log, entry, {})


async def state_get(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    ns = "|".join(p.get("namespace") or [])
    cfg = {"configurable": {"thread_id": entry.thread, "checkpoint_ns": ns}}
    if not await w.saver.aget_tuple(cfg):
        if ns:
            raise ProtocolError(
                "no_such_namespace",
                f'thread "{entry.thread}" has no state at namespace '
                f"{serde.dumps(p.get('namespace')).decode()}",
            )
        return await success(w.cmd, w.log, entry, {"values": {}})
    async with _graph(w, entry, await thread_configurable(w, entry.thread), "threads.read") as g:
        st = await g.aget_state(cfg)
    values = _plain(st.values) or {}
    if isinstance(p.get("keys"), list):
        values = {k: values[k] for k in p["keys"] if k in values}
    return await success(
        w.cmd,
        w.log,
        entry,
        {
            "values": values,
            "checkpoint": {"id": st.config["configurable"]["checkpoint_id"], "ns": ns},
        },
    )


async def state_list_checkpoints(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    limit = p.get("limit") if isinstance(p.get("limit"), int) else 20
    limit = min(max(limit, 1), 200)
    cfg = {
        "configurable": {
            "thread_id": entry.thread,
            "checkpoint_ns": "|".join(p.get("namespace") or []),
        }
    }
    before = {"configurable": {"checkpoint_id": p["before"]}} if p.get("before") else None
    page = []
    async with _graph(w, entry, await thread_configurable(w, entry.thread), "threads.read") as g:
        # One more than asked: a checkpoint's node is what its parent had next.
        async for s in g.aget_state_history(cfg, limit=limit + 1, before=before):
            page.append(s)
    out = []
    for i, s in enumerate(page[:limit]):
        c: dict[str, Any] = {
            "id": s.config["configurable"]["checkpoint_id"],
            "timestamp": s.created_at,
            "step": max(0, (s.metadata or {}).get("step", 0)),
            "metadata": _plain(s.metadata),
        }
        parent = page[i + 1] if i + 1 < len(page) else None
        if parent is not None and parent.next:
            c["node_name"] = ",".join(parent.next)
        elif (s.metadata or {}).get("source") == "input":
            c["node_name"] = "__input__"
        out.append(c)
    return await success(w.cmd, w.log, entry, {"checkpoints": out})


async def state_fork(w: Worker, entry: Entry, p: dict[str, Any]) -> Any:
    thread = entry.thread
    await claim_thread(w, thread)
    try:
        found = await w.saver.aget_tuple(
            {
                "configurable": {
                    "thread_id": thread,
                    "checkpoint_ns": "",
                    "checkpoint_id": p.get("checkpoint_id"),
                }
            }
        )
        if not found:
            raise ProtocolError(
                "no_such_checkpoint",
                f'thread "{thread}" has no checkpoint "{p.get("checkpoint_id")}"',
            )
        configurable = {
            **((p.get("config") or {}).get("configurable") or {}),
            "checkpoint_id": p["checkpoint_id"],
        }
        configurable.pop("thread_id", None)
        value, humans = with_ids(p.get("input"))
        # LangGraph forks on the same thread: the fork becomes the thread's head.
        return await start_run(
            w,
            entry,
            thread=thread,
            assistant=entry.assistant,
            input=value,
            configurable=configurable,
            humans=humans,
            result=lambda r: {**r, "thread_id": thread},
        )
    except BaseException:
        if thread not in w.running:
            await release(w, thread)
        raise


HANDLERS = {
    "rest.run": rest_run,
    "rest.cancel": rest_cancel,
    "rest.state.get": rest_state_get,
    "rest.state.update": rest_state_update,
    "rest.state.bulk": rest_state_bulk,
    "rest.history": rest_history,
    "rest.copy": rest_copy,
    "run.start": run_start,
    "input.respond": input_respond,
    "input.inject": input_inject,
    "run.cancel": run_cancel,
    "state.get": state_get,
    "state.listCheckpoints": state_list_checkpoints,
    "state.fork": state_fork,
}
"""method → handler(w, entry, params)."""


async def handle(w: Worker, stream: str, entry_id: str, f: dict[str, str], claimed: bool) -> Any:
    """Handles one entry of a command stream; claimed: taken from a dead worker. Returns KEEP to
    leave it pending."""
    entry = Entry(
        key=f"{stream} {entry_id}",
        stream=stream,
        id=entry_id,
        thread=f.get("thread", ""),
        method=f.get("method", ""),
        corr=f.get("corr", ""),
        reply=f.get("reply", ""),
        assistant=w.assistant_of(stream),
    )
    if not entry.thread or not entry.method:
        return None  # deleted or malformed: acknowledged
    if claimed:
        record = await run_left_by(w, entry)
        if record is not None:
            if record.get("status") == "running" and record.get("assistant") in w.graphs:
                return await take_over(w, entry, record)
            return None
    deadline = f.get("deadline")
    if deadline and deadline.isdigit() and int(deadline) and time.time() * 1000 > int(deadline):
        return None  # the gateway gave up
    try:
        params = serde.loads(f.get("params") or "{}")
    except Exception:  # noqa: BLE001
        return await answer(
            w.cmd,
            w.log,
            entry,
            {"type": "error", "error": "invalid_argument", "message": "params is not JSON"},
        )
    if not isinstance(params, dict):
        params = {}
    if isinstance(params.get("assistant_id"), str):
        entry.assistant_id = params["assistant_id"]
    if not entry.assistant:
        got = params.get("assistant_id") or await w.cmd.hget(
            keys.meta(entry.thread), "assistant_id"
        )
        entry.assistant = got.decode() if isinstance(got, bytes) else got
    handler = HANDLERS.get(entry.method)
    if handler is None:
        return await answer(
            w.cmd,
            w.log,
            entry,
            {
                "type": "error",
                "error": "unknown_command",
                "message": f"this worker does not handle {entry.method}",
            },
        )
    if entry.assistant not in w.graphs:
        return await answer(
            w.cmd,
            w.log,
            entry,
            {
                "type": "error",
                "error": "invalid_argument",
                "message": f'this worker does not serve assistant "{entry.assistant}"',
            },
        )
    try:
        return await handler(w, entry, params)
    except ProtocolError as e:
        return await answer(
            w.cmd, w.log, entry, {"type": "error", "error": e.code, "message": str(e)}
        )
    except Exception as e:  # noqa: BLE001 — one command's failure is its answer
        w.log(
            "error",
            "command failed",
            thread=entry.thread,
            method=entry.method,
            error="".join(traceback.format_exception(e)),
        )
        return await answer(
            w.cmd,
            w.log,
            entry,
            {"type": "error", "error": "unknown_error", "message": str(e) or type(e).__name__},
        )
