"""Graph runs (protocol/README.md, "The LangGraph worker"): how a run starts (``start_run``, the
common start of run.start, input.respond and state.fork), how it runs to its end
(``run_graph``: the graph observed once, its events through a Relay, injected messages applied
at step boundaries, cancel, the run's last root lifecycle event, its record, the thread
released), and what reaches a running run (``inject``, ``cancel_run``). As the JavaScript
worker's src/worker/runs.js.

A run is its ``Run``, kept in ``w.running`` under its thread while this worker runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from threadcast_worker import keys, serde
from threadcast_worker.answers import KEEP, Entry, success
from threadcast_worker.config import system_assistant_id
from threadcast_worker.graphs import ServedGraph
from threadcast_worker.keepalive import lease
from threadcast_worker.lock import move_run, record_done, record_run, release, renew_lock
from threadcast_worker.observe import RestStream, cancel_events, failure_events, observe
from threadcast_worker.relay import Relay, is_fenced
from threadcast_worker.worker import Worker


@dataclass
class Run:
    """One run this worker runs (the JavaScript worker's ``ctl``)."""

    thread: str
    assistant: str
    run_id: str
    relay: Relay
    served: ServedGraph
    input: Any
    configurable: dict[str, Any]
    graph_config: dict[str, Any] = field(default_factory=dict)  # what a factory is built with
    metadata: dict[str, Any] | None = None
    context: Any = None
    options: dict[str, Any] = field(default_factory=dict)  # interrupt_*, recursion_limit, tags
    rest: RestStream | None = None  # a REST run's stream (rendered)
    rest_run: bool = False  # a REST run (reports run.started / run.finished)
    recorded: bool = False  # a protocol run the REST records follow (run.adopted)
    dispose: bool = False  # a stateless run's thread: its checkpoints go at the end
    start_error: BaseException | None = None
    injects: list[dict[str, Any]] = field(default_factory=list)
    cancelled: bool = False
    cancel_action: str | None = None
    lost: bool = False
    over: bool = False
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None  # the graph's, while it runs
    control: RunControl | None = None
    graph: Any = None


def pending_interrupts(state: Any) -> list[dict[str, Any]]:
    """Interrupts waiting for an answer at the thread's head: [{id, value}]."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for t in getattr(state, "tasks", ()) or ():
        if getattr(t, "result", None) is not None:
            continue
        for i in getattr(t, "interrupts", ()) or ():
            if i.id and i.id not in seen:
                seen.add(i.id)
                out.append({"id": i.id, "value": i.value})
    return out


def with_ids(value: Any) -> tuple[Any, list[dict[str, Any]]]:
    """Human messages of a run's input, each with an id (so the echo and the state agree)."""
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return value, []
    messages = [
        {**m, "id": f"msg-{uuid.uuid4()}"} if isinstance(m, dict) and not m.get("id") else m
        for m in value["messages"]
    ]
    humans = [
        m
        for m in messages
        if isinstance(m, dict)
        and (m.get("role") in ("user", "human") or m.get("type") == "human")
        and isinstance(m.get("content"), str)
    ]
    return {**value, "messages": messages}, humans


def whole_message(ns: list[str], node: str | None, role: str, mid: str, text: str) -> list[dict]:
    """A whole message as ``messages`` events: how input and injected messages are shown."""

    def ev(data: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {"namespace": ns, "data": data}
        if node:
            params["node"] = node
        return {"method": "messages", "params": params}

    return [
        ev({"event": "message-start", "role": role, "id": mid}),
        ev({"event": "content-block-start", "index": 0, "content": {"type": "text", "text": ""}}),
        ev(
            {
                "event": "content-block-delta",
                "index": 0,
                "delta": {"type": "text-delta", "text": text},
            }
        ),
        ev(
            {"event": "content-block-finish", "index": 0, "content": {"type": "text", "text": text}}
        ),
        ev({"event": "message-finish", "reason": "stop"}),
    ]


def fenced_relay(w: Worker, *, thread: str, assistant: str, run_id: str) -> Relay:
    """The relay of a run on the thread whose lock this worker holds: its appends are fenced by
    the lock, and one refused because the lease lapsed while Redis stalled is sent again once
    renew_lock took it back."""
    return Relay(
        redis=w.cmd,
        thread=thread,
        assistant=assistant,
        run_id=run_id,
        log=w.log,
        append_opts=["ASSISTANT", assistant, "FENCE", w.name],
        regain=lambda: renew_lock(w, thread, run_id),
    )


def run_config(ctl: Run) -> dict[str, Any]:
    """The RunnableConfig a run's graph is streamed with."""
    config: dict[str, Any] = {"configurable": {**ctl.configurable, "thread_id": ctl.thread}}
    if ctl.metadata:
        config["metadata"] = dict(ctl.metadata)
    if ctl.options.get("recursion_limit") is not None:
        config["recursion_limit"] = ctl.options["recursion_limit"]
    if ctl.options.get("tags"):
        config["tags"] = list(ctl.options["tags"])
    return config  # a REST run's id becomes its root run id in observe(), as the server's


async def _consume(ctl: Run, graph: Any, value: Any) -> None:
    stream = observe(
        graph,
        value,
        run_config(ctl),
        rest=ctl.rest,
        context=ctl.context,
        interrupt_before=ctl.options.get("interrupt_before"),
        interrupt_after=ctl.options.get("interrupt_after"),
        durability="sync",
        control=ctl.control,
    )
    async with contextlib.aclosing(stream) as events:
        async for ev in events:
            await ctl.relay.push(ev)


async def run_graph(w: Worker, ctl: Run) -> Any:
    """Runs the graph on the thread until the run is over: appends its events, then its last
    root lifecycle event, then releases the thread. Returns KEEP when the thread was lost to a
    worker that took the run over."""
    thread, relay = ctl.thread, ctl.relay

    def lose() -> None:
        ctl.lost = True
        if ctl.task is not None:
            ctl.task.cancel()

    stop_renewing = lease(w, thread, ctl.run_id, lose)
    w.saver.fence(thread, regain=lambda: renew_lock(w, thread, ctl.run_id), settle=relay.settle)
    status, extra, error, head = "completed", {}, None, None
    try:
        if ctl.start_error is not None:
            raise ctl.start_error
        async with ctl.served.graph(
            ctl.graph_config, access="threads.create_run", context=ctl.context
        ) as graph:
            ctl.graph = graph
            value = ctl.input
            while True:
                ctl.control = RunControl()
                ctl.task = asyncio.create_task(_consume(ctl, graph, value))
                if ctl.cancelled or ctl.lost:  # told before the graph had a task to stop
                    ctl.task.cancel()
                try:
                    await ctl.task
                except GraphDrained:
                    if not ctl.injects:
                        raise
                finally:
                    ctl.task = None
                ctl.configurable.pop("checkpoint_id", None)  # a fork starts there once
                if not ctl.injects:
                    break
                value = await apply_injects(ctl, graph)
            await w.saver.settle(thread)
            head = await graph.aget_state({"configurable": {"thread_id": thread}})
            stopped = ctl.rest_run and bool(head.next)
            status = "interrupted" if pending_interrupts(head) or stopped else "completed"
    except (Exception, asyncio.CancelledError) as e:
        outer = asyncio.current_task()
        if isinstance(e, asyncio.CancelledError) and outer is not None and outer.cancelling():
            stop_renewing()
            raise  # the worker is closing: the run is left to another
        status = "failed"
        if ctl.lost or is_fenced(e):
            lose()
        elif ctl.cancelled and ctl.rest_run:
            relay.close_open("the run was cancelled", "cancelled")
            for ev in cancel_events(ctl.cancel_action or "interrupt", ctl.rest):
                relay.raw(ev)
            status = "interrupted"
            extra = {"cancelled": True, "action": ctl.cancel_action or "interrupt"}
        elif ctl.cancelled:
            relay.close_open("the run was cancelled", "cancelled")
            extra = {"error": "cancelled", "cancelled": True}
        else:
            message = str(e) or type(e).__name__
            relay.close_open(message, "run_failed")
            for ev in failure_events(e, ctl.rest):
                relay.raw(ev)
            extra = {"error": message}
            error = e
            w.log(
                "warn",
                "run failed",
                thread=thread,
                run_id=ctl.run_id,
                error=f"{type(e).__name__}: {e}",
            )
    finally:
        stop_renewing()
    if ctl.lost:
        return await lost_run(w, ctl)
    # Over from here: what a client sends once it has seen the run's end must find no run.
    ctl.over = True
    try:
        if ctl.rest_run or ctl.recorded:
            from threadcast_worker.rest_runs import finish_rest_run

            await finish_rest_run(w, ctl, status, error, head)
        try:
            await relay.end(status, **extra)
        except Exception as e:
            if not is_fenced(e):
                raise
            ctl.lost = True  # its end is the taker's to append
        if ctl.lost:
            w.log(
                "warn",
                "lost the thread's lock at the run's end: the end is the taker's",
                thread=thread,
                run_id=ctl.run_id,
            )
        elif ctl.dispose:
            await w.saver.adelete_thread(thread)
            await w.cmd.delete(keys.run(thread), keys.undo(thread))
        else:
            await record_done(w, thread)
    finally:
        w.running.pop(thread, None)
        await release(w, thread)
        w.saver.unfence(thread, lost=ctl.lost)
        ctl.settled.set()
    w.log("info", "run over", thread=thread, run_id=ctl.run_id, status=status)
    return KEEP if ctl.lost else None


async def lost_run(w: Worker, ctl: Run) -> Any:
    """A run whose thread this worker lost: it stops here, leaving the run, its record and its
    command's entry (not acknowledged: KEEP) to the worker that took it over — or, if nobody
    has yet, to the first that claims the entry: the record says nobody runs it any more."""
    ctl.over = True
    ctl.settled.set()
    w.running.pop(ctl.thread, None)
    w.saver.unfence(ctl.thread, lost=True)
    with contextlib.suppress(Exception):
        await move_run(w, ctl.thread, ctl.run_id, w.name, "")
    w.log(
        "warn",
        "lost the thread's lock (a stall longer than the lease): the run is left to "
        "the worker that takes it over",
        thread=ctl.thread,
        run_id=ctl.run_id,
    )
    return KEEP


async def apply_injects(ctl: Run, graph: Any) -> Any:
    """Messages injected into a running run, applied at a step boundary: the run was drained;
    they join the state as if written by the node that wrote the head, so what comes next is
    unchanged. Returns the input to go on with."""
    cfg = {"configurable": {"thread_id": ctl.thread}}
    messages, ctl.injects = ctl.injects, []
    head = await graph.aget_state(cfg)
    if not head.next:
        return {"messages": messages}  # the run had finished: the messages start the next turn
    as_node = None
    async for s in graph.aget_state_history(cfg, limit=2):
        if (
            s.config["configurable"]["checkpoint_id"]
            != head.config["configurable"]["checkpoint_id"]
        ):
            as_node = s.next[0] if s.next else None
    nxt = await graph.aupdate_state(head.config, {"messages": messages}, as_node=as_node)
    ctl.configurable = {**ctl.configurable, **nxt["configurable"]}
    ctl.configurable.pop("thread_id", None)
    return None


async def adopt(
    w: Worker,
    entry: Entry,
    *,
    thread: str,
    run_id: str,
    assistant: str,
    configurable: dict[str, Any],
    metadata: dict[str, Any] | None,
) -> bool:
    """A run started over the protocol on a thread the REST API knows is one of its runs there
    too (run.adopted: runs.get, runs.join and runs.list see it). Returns whether it was
    recorded; the thread's run record says so for a worker that takes the run over."""
    from threadcast_worker.rest_runs import rest_call

    named = entry.assistant_id
    assistant_id = (
        named if isinstance(named, str) and named != assistant else system_assistant_id(assistant)
    )
    seq = await w.cmd.hget(keys.meta(thread), "seq")
    kwargs: dict[str, Any] = {"config": {"configurable": configurable}}
    if metadata:
        kwargs["metadata"] = metadata
    got = await rest_call(
        w,
        "run.adopted",
        {
            "run_id": run_id,
            "thread_id": thread,
            "assistant_id": assistant_id,
            "graph_id": assistant,
            "after_seq": int(seq or 0),
            "kwargs": kwargs,
        },
    )
    if got[0] != 200 or got[1] in (None, "null", b"null"):
        return False
    await w.cmd.hset(keys.run(thread), "recorded", "1")
    return True


async def start_run(
    w: Worker,
    entry: Entry,
    *,
    thread: str,
    assistant: str,
    input: Any,
    configurable: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    answered: list[str] | None = None,
    humans: list[dict[str, Any]] | None = None,
    result: Any = None,
    start_error: BaseException | None = None,
) -> Any:
    """The common start of every protocol run: the thread is claimed; records the run (so a
    worker that takes over after a crash can go on with it), appends its first events,
    answers, then runs it. start_error: why the graph cannot be built (its factory raised):
    the run fails at once with it."""
    served = w.graphs[assistant]
    defaults = dict(served.defaults)
    context = defaults.pop("context", None)
    configurable = {**(defaults.get("configurable") or {}), **(configurable or {})}
    run_id = str(uuid.uuid4())
    await record_run(
        w,
        thread=thread,
        entry_key=entry.key,
        run_id=run_id,
        assistant=assistant,
        input=input,
        configurable=configurable,
    )
    recorded = await adopt(
        w,
        entry,
        thread=thread,
        run_id=run_id,
        assistant=assistant,
        configurable=configurable,
        metadata=metadata,
    )
    relay = fenced_relay(w, thread=thread, assistant=assistant, run_id=run_id)
    if recorded:
        relay.started(runId=run_id)  # a recorded run is found by its id, as a REST run
    else:
        relay.started()
    if answered:
        relay.raw(
            {
                "method": "input.answered",
                "params": {"namespace": [], "data": {"interrupt_ids": answered}},
            }
        )
    for h in humans or []:
        for ev in whole_message([], None, "human", h["id"], h["content"]):
            relay.raw(ev)
    ctl = Run(
        thread=thread,
        assistant=assistant,
        run_id=run_id,
        relay=relay,
        served=served,
        input=input,
        configurable=dict(configurable),
        metadata=metadata,
        recorded=recorded,
        context=context,
        start_error=start_error,
        graph_config={
            **defaults,
            "configurable": configurable,
            **({"metadata": metadata} if metadata else {}),
        },
    )
    w.running[thread] = ctl
    try:
        await relay.drain()
    except BaseException:
        w.running.pop(thread, None)
        await release(w, thread)
        raise
    answer = {"run_id": run_id} if result is None else result({"run_id": run_id})
    await success(w.cmd, w.log, entry, answer)
    return await run_graph(w, ctl)


async def thread_configurable(w: Worker, thread: str) -> dict[str, Any]:
    """The configurable of the thread's last run here (its record's): what a factory graph is
    built with for a state command, as the server builds it with the thread's config."""
    try:
        got = await w.cmd.hget(keys.run(thread), "configurable")
        return serde.loads(got) if got else {}
    except Exception:  # noqa: BLE001 — no run yet: the factory's default
        return {}


def inject(ctl: Run, message: dict[str, Any]) -> None:
    """An injected message: shown whole at once, applied at the next step boundary."""
    role = "system" if message.get("role") == "system" else "user"
    m: dict[str, Any] = {
        "role": role,
        "content": str(message.get("content") or ""),
        "id": f"msg-{uuid.uuid4()}",
    }
    if message.get("name"):
        m["name"] = message["name"]
    for ev in whole_message(
        [], "input", "human" if role == "user" else "system", m["id"], m["content"]
    ):
        ctl.relay.raw(ev)
    ctl.injects.append(m)
    if ctl.control is not None:
        ctl.control.request_drain("inject")


def cancel_run(ctl: Run, action: str | None = None) -> None:
    """Cancels a run this worker runs (action: a REST cancel's interrupt or rollback)."""
    ctl.cancelled = True
    if action:
        ctl.cancel_action = action
    if ctl.task is not None:
        ctl.task.cancel()
