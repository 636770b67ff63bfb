"""A graph run observed once (protocol/README.md, "The LangGraph worker"): ``observe()`` runs the
graph and yields, in the order the graph made them, the events the worker appends — the protocol
events threadcast stores for every run, the side events (``custom:threadcast.modes``) of LangGraph's
own interrupt chunks, and, for a REST run, its stream rendered as the Python server renders it
(``render.py``), each as a side event ``{mode: "sse", data: {event, data}}``.

How the run is observed: ``graph.astream(input, config, stream_mode=[every mode],
subgraphs=True)`` — LangGraph's classic stream, whose messages handler gives each model token as
an ``(AIMessageChunk, metadata)`` pair — or, when the REST run asked for the ``events`` mode,
``graph.astream_events(..., version="v2")`` over the same stream, as the Python server does (it
costs an event per callback, so only then). Not LangGraph's v3 stream (``astream_events(
version="v3")``): its messages handler (``CONFIG_KEY_STREAM_MESSAGES_V2``) routes chat models
through the content-block event generator, and the model's answer then reaches the graph's state
as content blocks (``[{"type": "text", "text": "…", "index": 0}]`` where ``invoke()``, the
Python server's REST runs and this stream leave ``"…"``).

Whether the models stream is the Python server's rule (``streams_models``): a chat model streams
when a streaming callback handler is on its call, and the server puts one there only for a REST
run asking for ``messages``, ``messages-tuple`` or ``events``. Such a run, and every run started
over the protocol (whose clients want each token), is observed with LangGraph's ``messages`` and
``tools`` modes (both streaming handlers). Any other REST run is observed without them, so its
models are called as the server calls them — not streamed, their messages named
``lc_run--<id>-0`` as there, what the graph does and the state it ends in the same —; a handler
that does not stream (``WholeMessages``) gives its protocol clients the same events but whole:
each model call's message when the call ends, each message a node returns when the node does,
and the tool events, at the place among the graph's chunks where LangGraph's handlers would have
put them (relayed through the run's custom stream writer, which feeds the same queue).

What the protocol events are (the JavaScript worker's shapes, ``src/worker/observe.js`` and
``relay.js``, in 0.0.21's snake_case; ``type`` and ``seq`` are left to threadcast):
- ``messages``: each model call is one message — ``message-start`` (``role: "ai"``, id: the
  model's, else LangChain's ``lc_run--<callback run id>``), ``content-block-start`` / ``-delta``
  / ``-finish`` for its text and tool call chunks, ``message-finish`` — made from its chunks by
  langchain_core's converter (``achunks_to_events``), ``node`` the node that called it; a message
  a node returns that nobody streamed (a model that does not stream, a message a node builds) is
  replayed whole (``message_to_events``, ``role`` its author's); tool messages are left to the
  ``tools`` channel. No ``run_id`` in their data (the JavaScript worker adds the callback run's).
  Messages of one namespace and node never interleave (the protocol tells messages apart by
  namespace and node, and a Python graph's parallel tasks of one node share both): a message
  that starts while another is open there is held, and given once that one finishes (``_Slots``).
- ``tools``: LangGraph's (``tool-started`` / ``tool-output-delta`` / ``tool-finished`` /
  ``tool-error``); a delta that is not text is given as its JSON text.
- ``values``, ``updates`` (``{node, values}``, ``node`` also in params), ``custom`` (``{payload}``,
  or the chunk itself when it is a dict with a ``name``), ``tasks`` (LangGraph's payloads).
- ``checkpoints``: each checkpoint's envelope ``{id, parent_id, step, source}``, sent just before
  the ``values`` event of the state it saved (LangGraph streams it just after).
- ``lifecycle`` of subgraphs only (LangGraph's ``LifecycleTransformer``: ``started`` before the
  first event at the subgraph's namespace, ``completed`` / ``failed`` / ``interrupted`` when the
  node that ran it ends), data ``{event, graph_name, cause?, error?}`` at the subgraph's
  namespace. No lifecycle for plain nodes nor for the root (the caller appends the root's).
- each interrupt: the side events of LangGraph's own chunks — ``updates`` ``{"__interrupt__":
  [...]}`` and ``values`` (the state with ``__interrupt__``, as LangGraph streams it: the chunk the
  Python server's ``runs/wait`` answers with) — then ``input.requested {interrupt_id, payload}``
  at its namespace, once per interrupt id (a subgraph's interrupt is seen again at the root).

Namespaces are LangGraph's Python ones: a message or tool event is at the namespace of the graph
its node runs in (a root model node's messages are at ``[]``; the JavaScript worker puts them at
``["model:<task id>"]``), with ``node`` naming the node.

What observe adds to the run: its ``config["run_id"]`` (a REST run's id: the root run id of its
callbacks, as the server gives it), for a REST run streaming messages without subgraphs a
callback handler (``render.RootMessages``) that sees the root nodes' inputs and outputs, and for
a REST run whose models do not stream ``WholeMessages``.
Cancelling the task that iterates ``observe()`` (or closing it) stops the graph: LangGraph's stream
is closed, its tasks cancelled. Events hold the graph's own objects: write each (``serde.dumps``)
before asking for the next, as the server writes each chunk before it reads the next.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.language_models._compat_bridge import achunks_to_events, message_to_events
from langchain_core.messages import AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langgraph.config import get_stream_writer
from langgraph.constants import TAG_HIDDEN, TAG_NOSTREAM
from langgraph.pregel._messages import graph_namespace
from langgraph.pregel._tools import StreamToolCallHandler
from langgraph.stream import LifecycleTransformer
from langgraph.types import Interrupt

from threadcast_worker import serde
from threadcast_worker.render import (
    Renderer,
    RootMessages,
    error_event,
    messages_in,
    output_messages,
)

SIDE = "custom:threadcast.modes"
"""The method of side events (a named custom channel: nobody subscribed to ``custom`` gets them)."""

# The modes every run is observed with; a REST run asking for `debug` adds it, one whose models do
# not stream leaves STREAMING out.
MODES = ("values", "updates", "messages", "custom", "tasks", "checkpoints", "tools")

# LangGraph's modes whose callback handlers are streaming ones (a model streams under them).
STREAMING = frozenset({"messages", "tools"})

# The REST stream modes for which the Python server has a streaming handler on a run.
STREAMED_FOR = frozenset({"messages", "messages-tuple", "events"})

INTERRUPT = "__interrupt__"


@dataclass
class RestStream:
    """A REST run's stream options."""

    stream_mode: list[str] = field(default_factory=lambda: ["values"])
    subgraphs: bool = False
    run_id: str = ""


def streams_models(rest: RestStream | None) -> bool:
    """Whether a run's chat models stream: a REST run's only when it asked for a mode the Python
    server streams them for (``STREAMED_FOR``), a run over the protocol always."""
    return rest is None or not STREAMED_FOR.isdisjoint(rest.stream_mode)


def writes_late(graph: Any, rest: RestStream | None) -> bool:
    """Whether the Python server writes a REST run's chunks late: LangGraph streams eagerly (each
    chunk as it is made) only for a run with subgraphs, ``messages`` or ``custom`` (or a graph
    compiled ``stream_eager``); otherwise a step's chunks reach the server once the step is over,
    after its writes were applied to the state — so a message a reducer names in place then (a
    ToolNode's id-less results) shows its name in the node's update, task result and debug
    chunk, where an eager stream shows ``null``. ``events`` runs stream through
    ``astream_events`` as they come (their tokens live)."""
    if rest is None or rest.subgraphs or getattr(graph, "stream_eager", False):
        return False
    return STREAMED_FOR.isdisjoint(rest.stream_mode) and "custom" not in rest.stream_mode


def now_ms() -> int:
    return int(time.time() * 1000)


def side_event(ns: Sequence[str], mode: str, data: Any) -> dict[str, Any]:
    """A side event ``{mode, data}`` at namespace ns."""
    return {
        "method": SIDE,
        "params": {
            "namespace": list(ns),
            "timestamp": now_ms(),
            "data": {"mode": mode, "data": data},
        },
    }


def sse_event(ns: Sequence[str], name: str, data: Any) -> dict[str, Any]:
    """A REST run's rendered SSE event, as a side event."""
    return side_event(ns, "sse", {"event": name, "data": data})


def _event(method: str, ns: Sequence[str], data: Any, node: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"namespace": list(ns), "timestamp": now_ms()}
    if node is not None:
        params["node"] = node
    params["data"] = data
    return {"method": method, "params": params}


def failure_events(exc: BaseException, rest: RestStream | None) -> list[dict[str, Any]]:
    """What a failed run appends before its root ``failed``: the side event ``{mode: "error",
    data: {error: <class name>, message}}`` and, for a REST run, its rendered ``error`` event (the
    server's payload: the message hidden for classes it does not show)."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    out = [side_event([], "error", {"error": type(exc).__name__, "message": str(exc)})]
    if rest is not None:
        ns, name, data = error_event(exc)
        out.append(sse_event(ns, name, data))
    return out


def cancel_events(action: str, rest: RestStream | None) -> list[dict[str, Any]]:
    """What a cancelled REST run's rendered stream shows at its end: nothing — the Python server
    ends the stream of an interrupted or rolled back run without an event (its ``error`` event is
    only for runs that fail)."""
    return []


class _Wait:
    """Awaited by the converter's source when it has no chunk: hands control back to the
    driver (``_Feed``), which resumes it once a chunk is there."""

    __slots__ = ()

    def __await__(self):  # noqa: ANN204
        yield self


_WAIT = _Wait()


class _Gen:
    """What the converter reads of a chunk (a ChatGenerationChunk costs a pydantic model)."""

    __slots__ = ("message", "generation_info")

    def __init__(self, message: AIMessageChunk) -> None:
        self.message = message
        self.generation_info = None


class _TextChunk(AIMessageChunk):
    """A plain text chunk as the converter reads it: its content blocks known without
    ``AIMessageChunk.content_blocks``' parsing passes (most of the converter's cost per token)."""

    @property
    def content_blocks(self) -> list[Any]:  # type: ignore[override]
        return [{"type": "text", "text": self.content}]


def _plain_text(message: AIMessageChunk) -> bool:
    """Whether a chunk's content blocks are just its text: string content, and nothing that
    makes LangChain read them otherwise (a provider's translator, tool call chunks, reasoning in
    additional_kwargs)."""
    content = message.content
    return (
        type(content) is str
        and bool(content)
        and not message.response_metadata
        and not message.tool_call_chunks
        and not message.additional_kwargs
    )


class _Feed:
    """langchain_core's chunk → protocol event converter for one model call, driven one chunk at
    a time without a task: ``push`` returns what a chunk makes, ``close`` the message's end."""

    def __init__(self, fast: bool = True) -> None:
        self.fast = fast
        self.pending: deque[_Gen] = deque()
        self.closed = False
        self.events = achunks_to_events(self)
        self.step: Any = None  # the converter's suspended __anext__, waiting for a chunk

    def __aiter__(self) -> _Feed:
        return self

    async def __anext__(self) -> _Gen:
        while not self.pending:
            if self.closed:
                raise StopAsyncIteration
            await _WAIT
        return self.pending.popleft()

    def _run(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            if self.step is None:
                self.step = self.events.__anext__()
            try:
                self.step.send(None)
            except StopIteration as made:
                self.step = None
                out.append(made.value)
                continue
            except StopAsyncIteration:
                self.step = None
                return out
            return out  # waiting for the next chunk

    def push(self, message: AIMessageChunk) -> list[dict[str, Any]]:
        if self.fast and _plain_text(message):
            message = _TextChunk.model_construct(**message.__dict__)
        self.pending.append(_Gen(message))
        return self._run()

    def close(self) -> list[dict[str, Any]]:
        self.closed = True
        return self._run()

    def abandon(self) -> None:
        """Drops the converter without finishing its message."""
        step, self.step = self.step, None
        if step is not None:
            try:
                step.throw(GeneratorExit)
            except (GeneratorExit, StopIteration, StopAsyncIteration, RuntimeError):
                pass


_ROLES = {"human": "human", "system": "system", "tool": "tool", "ai": "ai"}


def whole_message(message: BaseMessage) -> list[dict[str, Any]]:
    """The protocol events of a message given whole, with its author's role."""
    events = list(message_to_events(message))
    role = _ROLES.get(message.type, "ai")
    if role != "ai" and events and events[0].get("event") == "message-start":
        events[0] = {**events[0], "role": role}
    return events


def checkpoint_envelope(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's checkpoint envelope ``{id, parent_id, step, source}`` of a LangGraph
    ``checkpoints`` chunk."""
    out: dict[str, Any] = {"id": payload["config"]["configurable"]["checkpoint_id"]}
    parent = payload.get("parent_config")
    if parent:
        out["parent_id"] = parent["configurable"]["checkpoint_id"]
    meta = payload.get("metadata") or {}
    out["step"] = meta.get("step")
    out["source"] = meta.get("source")
    return out


class _Lifecycle(LifecycleTransformer):
    """LangGraph's lifecycle transformer, its events made at the subgraph's namespace as the
    protocol (and the JavaScript worker) has them."""

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self.made: list[dict[str, Any]] = []
        self.started: set[tuple[str, ...]] = set()

    def _on_started(
        self, ns: tuple[str, ...], graph_name: str | None, trigger_call_id: str | None
    ) -> None:
        self.started.add(ns)
        if trigger_call_id is None:
            return
        data: dict[str, Any] = {"event": "started", "graph_name": graph_name or ns[-1]}
        if self._pending_cause is not None:
            data["cause"] = self._pending_cause
        self.made.append(_event("lifecycle", ns, data))

    def _on_terminal(self, ns: tuple[str, ...], status: str, error: str | None) -> None:
        name = ns[-1].partition(":")[0]
        data: dict[str, Any] = {"event": status, "graph_name": name}
        if error is not None:
            data["error"] = error
        self.made.append(_event("lifecycle", ns, data))

    def ensure_started(self, ns: tuple[str, ...]) -> None:
        """Starts ns (and the namespaces above it) before its first event, whatever it is:
        LangGraph's transformer would start it on its first task, after its input values."""
        for depth in range(1, len(ns) + 1):
            prefix = ns[:depth]
            if prefix not in self.started:
                self.process(
                    {
                        "type": "event",
                        "method": "tasks",
                        "params": {"namespace": list(prefix), "timestamp": 0, "data": {}},
                    }
                )
                self.started.add(prefix)

    def take(self) -> list[dict[str, Any]]:
        made, self.made = self.made, []
        return made


class _Slots:
    """Keeps messages of one namespace and node from interleaving.

    The protocol identifies an open message by its namespace and node; LangGraph's Python
    namespaces give two parallel tasks of one node (``Send``) the same, so their model calls
    would stream into each other. Each (namespace, node) is a slot: the first message to start
    there owns it until it finishes; another one's events wait, in the order their messages
    started, and are given as soon as the slot is theirs.
    """

    def __init__(self) -> None:
        self.owner: dict[tuple[Any, ...], object] = {}
        # slot → [[message key, its events so far, finished], ...], oldest first
        self.waiting: dict[tuple[Any, ...], list[list[Any]]] = {}

    def give(
        self, slot: tuple[Any, ...], key: object, events: list[dict[str, Any]], finished: bool
    ) -> list[dict[str, Any]]:
        """The events to append now of a message's events (key: the message), finished
        when they end it."""
        owner = self.owner.get(slot)
        if owner is None:
            if not finished and events:
                self.owner[slot] = key
            return events
        if owner is not key:
            queue = self.waiting.setdefault(slot, [])
            for entry in queue:
                if entry[0] is key:
                    entry[1].extend(events)
                    entry[2] = finished
                    break
            else:
                queue.append([key, list(events), finished])
            return []
        if not finished:
            return events
        del self.owner[slot]
        out = list(events)
        queue = self.waiting.get(slot, [])
        while queue:
            key, held, done = queue.pop(0)
            out.extend(held)
            if not done:
                self.owner[slot] = key
                break
        if not queue:
            self.waiting.pop(slot, None)
        return out

    def flush(self) -> list[dict[str, Any]]:
        """Whatever is still held, slot by slot (nothing is, once every message finished)."""
        out = [ev for queue in self.waiting.values() for entry in queue for ev in entry[1]]
        self.waiting.clear()
        self.owner.clear()
        return out

    def drop(self) -> None:
        """Forgets what is held: a failed run's messages queued behind one it left open (the
        caller closes that one; theirs was the failed step)."""
        self.waiting.clear()
        self.owner.clear()


class _Relayed:
    """A chunk ``(namespace, mode, payload)`` a callback hands to the run's stream through
    LangGraph's custom stream writer: it takes its place among the graph's own chunks, as the
    chunks of LangGraph's streaming handlers do (they feed the same queue)."""

    __slots__ = ("chunk",)

    def __init__(self, chunk: tuple[tuple[str, ...], str, Any]) -> None:
        self.chunk = chunk


def _relay(chunk: tuple[tuple[str, ...], str, Any]) -> None:
    try:
        writer = get_stream_writer()
    except (RuntimeError, KeyError):
        return  # called outside a graph's task: no stream to put it in
    writer(_Relayed(chunk))


class WholeMessages(BaseCallbackHandler):
    """What LangGraph's ``messages`` and ``tools`` handlers give of a run whose models do not
    stream, from a handler that is not a streaming one (its presence leaves the models as they
    are): each model call's message, whole, when the call ends (``on_llm_end``, as LangGraph's
    messages handler gives a call that did not stream) and the tool events (LangGraph's own
    ``StreamToolCallHandler``, driven from here: its shapes, and ``tool-output-delta`` from the
    tools that emit it), both relayed into the run's stream; and the ids of the messages the
    nodes were given, so that ``_Run`` gives the messages a node returns (from its update) only
    when nobody gave them before, as LangGraph's messages handler does."""

    run_inline = True
    ignore_retriever = True
    ignore_custom_event = True

    def __init__(self) -> None:
        self.models: dict[UUID, dict[str, Any]] = {}
        self.seen: set[str] = set()
        self.unnamed: set[int] = set()  # identities of the id-less messages given
        self.kept: list[BaseMessage] = []
        # LangGraph's private handler (no public API makes its events): fed its callbacks from
        # here, it is no handler of the run's, so the models do not see a streaming handler.
        self.tools = StreamToolCallHandler(_relay, True)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: Any,
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not metadata or "langgraph_checkpoint_ns" not in metadata:
            return
        if tags and TAG_NOSTREAM in tags:
            return
        self.models[run_id] = metadata

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        meta = self.models.pop(run_id, None)
        if meta is None or not response.generations or not response.generations[0]:
            return
        gen = response.generations[0][0]
        if not isinstance(gen, ChatGeneration):
            return
        message = gen.message
        if message.id is not None:
            if message.id in self.seen:
                return
            self.seen.add(message.id)
        _relay((graph_namespace(meta), "messages", (message, meta)))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.models.pop(run_id, None)

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not metadata or kwargs.get("name") != metadata.get("langgraph_node"):
            return
        if tags and TAG_HIDDEN in tags:
            return
        self.seen.update(m.id for m in messages_in(inputs) if m.id is not None)

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kwargs: Any) -> None:
        self.tools.on_tool_start(serialized, input_str, **kwargs)

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        self.tools.on_tool_end(output, **kwargs)

    def on_tool_error(self, error: BaseException, **kwargs: Any) -> None:
        self.tools.on_tool_error(error, **kwargs)

    def returned(self, values: Any) -> list[BaseMessage]:
        """The messages of a node's update nobody gave before (each given once; an id-less one
        as a copy under an id of its own — the state's reducer names the original later, and
        the original, met again under that name, is known by its identity)."""
        out: list[BaseMessage] = []
        for m in messages_in(values):
            if isinstance(m, ToolMessage) or id(m) in self.unnamed:
                continue  # the tools channel's; given already
            if m.id is None:
                self.unnamed.add(id(m))
                self.kept.append(m)  # alive, so its identity is not another's
                out.append(m.model_copy(update={"id": str(uuid4())}))
            elif m.id not in self.seen:
                self.seen.add(m.id)
                out.append(m)
        return out


class _Run:
    """The conversion of one run's raw chunks into the events to append."""

    def __init__(
        self,
        rest: RestStream | None,
        root: RootMessages | None,
        whole: WholeMessages | None = None,
        late: bool = False,
    ) -> None:
        self.rest = rest
        self.whole = whole
        self.late = late
        self.held_sse: list[dict[str, Any]] = []  # a late run's rendered events of this step
        self.renderer = (
            Renderer(rest.stream_mode, rest.subgraphs, root) if rest is not None else None
        )
        self.lifecycle = _Lifecycle()
        # the model calls streaming: id of their metadata → (namespace, metadata, converter)
        self.feeds: dict[int, tuple[tuple[str, ...], dict[str, Any], _Feed]] = {}
        self.slots = _Slots()
        self.requested: set[str] = set()
        self.pending_interrupts: list[tuple[tuple[str, ...], Interrupt]] = []
        self.held: dict[str, Any] | None = None  # a values event waiting for its checkpoint
        self.held_ns: tuple[str, ...] = ()

    def chunk(self, ns: tuple[str, ...], mode: str, payload: Any) -> list[dict[str, Any]]:
        if mode == "custom" and isinstance(payload, _Relayed):
            ns, mode, payload = payload.chunk
        out: list[dict[str, Any]] = []
        if self.held is not None and not (mode == "checkpoints" and ns == self.held_ns):
            out.append(self.held)
            self.held = None
        if ns and ns not in self.lifecycle.started:
            self.lifecycle.ensure_started(ns)
            out.extend(self.lifecycle.take())
        convert = getattr(self, "_" + mode, None)
        if convert is not None:
            convert(out, ns, payload)
        if self.renderer is not None:
            rendered = [sse_event(r, n, d) for r, n, d in self.renderer.chunk(ns, mode, payload)]
            if not self.late:
                out.extend(rendered)
            elif not ns and mode in ("values", "checkpoints"):
                # Made once the step's writes were applied: what it held is as the server
                # would write it now.
                out.extend(self.held_sse)
                self.held_sse.clear()
                out.extend(rendered)
            else:
                self.held_sse.extend(rendered)
        return out

    def _messages(self, out: list[dict[str, Any]], ns: tuple[str, ...], payload: Any) -> None:
        message, meta = payload
        node = meta.get("langgraph_node")
        if isinstance(message, AIMessageChunk):
            entry = self.feeds.get(id(meta))
            if entry is None:
                entry = self.feeds[id(meta)] = (ns, meta, _Feed())
            key: object = entry[2]
            made = entry[2].push(message)
            finished = message.chunk_position == "last"
            if finished:
                made.extend(entry[2].close())
                del self.feeds[id(meta)]
        elif isinstance(message, ToolMessage):
            return
        else:
            key, made, finished = object(), whole_message(message), True
        events = [_event("messages", ns, data, node) for data in made]
        out.extend(self.slots.give((ns, node), key, events, finished))

    def _values(self, out: list[dict[str, Any]], ns: tuple[str, ...], payload: Any) -> None:
        if isinstance(payload, dict) and INTERRUPT in payload:
            out.append(side_event(ns, "values", payload))
            for it in payload[INTERRUPT]:
                self._request(out, ns, it)
            return
        self.held = _event("values", ns, payload)
        self.held_ns = ns

    def _updates(self, out: list[dict[str, Any]], ns: tuple[str, ...], payload: Any) -> None:
        for node, values in payload.items():
            if node == INTERRUPT:
                out.append(side_event(ns, "updates", {INTERRUPT: values}))
                self.pending_interrupts.extend((ns, it) for it in values)
                continue
            if self.whole is not None:
                for message in self.whole.returned(values):
                    for data in whole_message(message):
                        out.append(_event("messages", ns, data, node))
            data = {
                "node": node,
                "values": values if isinstance(values, dict) else {"value": values},
            }
            out.append(_event("updates", ns, data, node))

    def _request(self, out: list[dict[str, Any]], ns: tuple[str, ...], it: Any) -> None:
        iid = getattr(it, "id", None)
        if iid is None or iid in self.requested:
            return
        self.requested.add(iid)
        out.append(_event("input.requested", ns, {"interrupt_id": iid, "payload": it.value}))

    def _custom(self, out: list[dict[str, Any]], ns: tuple[str, ...], payload: Any) -> None:
        data = payload if isinstance(payload, dict) and "name" in payload else {"payload": payload}
        out.append(_event("custom", ns, data))

    def _tools(self, out: list[dict[str, Any]], ns: tuple[str, ...], payload: Any) -> None:
        if payload.get("event") == "tool-output-delta" and not isinstance(
            payload.get("delta"), str
        ):
            payload = {**payload, "delta": serde.dumps(payload.get("delta")).decode()}
        out.append(_event("tools", ns, payload))

    def _tasks(self, out: list[dict[str, Any]], ns: tuple[str, ...], payload: Any) -> None:
        event = _event("tasks", ns, payload)
        self.lifecycle.process(event)
        out.extend(self.lifecycle.take())
        out.append(event)

    def _checkpoints(self, out: list[dict[str, Any]], ns: tuple[str, ...], payload: Any) -> None:
        out.append(_event("checkpoints", ns, checkpoint_envelope(payload)))
        if self.held is not None:
            out.append(self.held)
            self.held = None

    def event(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        if self.renderer is None:
            return []
        if event["event"] == "on_tool_end":
            _name_tool_output(event["data"].get("output"))
        return [sse_event(ns, name, data) for ns, name, data in self.renderer.event(event)]

    def end(self) -> list[dict[str, Any]]:
        """What is left once the graph's stream ended without an error."""
        out: list[dict[str, Any]] = []
        if self.held is not None:
            out.append(self.held)
            self.held = None
        for ns, it in self.pending_interrupts:
            self._request(out, ns, it)
        self.pending_interrupts.clear()
        for ns, meta, feed in self.feeds.values():
            # A model call that stopped without its last chunk (it failed, and its node went on).
            feed.abandon()
            node = meta.get("langgraph_node")
            data = {"event": "error", "message": "the model call ended before its message did"}
            error = _event("messages", ns, {**data, "code": "incomplete"}, node)
            out.extend(self.slots.give((ns, node), feed, [error], True))
        self.feeds.clear()
        out.extend(self.slots.flush())
        self.lifecycle.finalize()
        out.extend(self.lifecycle.take())
        if self.renderer is not None:
            out.extend(self.held_sse)
            self.held_sse.clear()
            out.extend(sse_event(ns, name, data) for ns, name, data in self.renderer.end())
        return out

    def abandon(self) -> None:
        """Drops the converters of the messages still open (their events are not made), and
        the messages held behind them."""
        for *_, feed in self.feeds.values():
            feed.abandon()
        self.feeds.clear()
        self.slots.drop()

    def fail(self, exc: BaseException) -> list[dict[str, Any]]:
        """What is left once the graph's stream raised exc."""
        out: list[dict[str, Any]] = []
        if self.held is not None:
            out.append(self.held)
            self.held = None
        self.abandon()  # the caller closes the run's open messages
        out.extend(self.held_sse)  # the server writes a failed step's output before its error
        self.held_sse.clear()
        self.lifecycle.fail(exc)
        out.extend(self.lifecycle.take())
        return out


def _name_tool_output(output: Any) -> None:
    """Names (in place) the id-less messages a tool returned, as the state's reducer will.

    An ``events`` run's graph runs in a task of its own while the Python server writes its
    events, and the server's writer is behind it: by the time it writes a tool's ``on_tool_end``
    (and the tools node's stream and end events) the node's writes were applied and the reducer
    had named the tool's message, so the server's events show the id the state keeps. The worker
    writes each event at once; naming the message here (the reducer keeps an id it finds) shows
    the same: the id the state will hold, in every event that holds the message."""
    for message in output_messages(output):
        if message.id is None:
            message.id = str(uuid4())


def _with_callback(callbacks: Any, handler: BaseCallbackHandler) -> Any:
    if callbacks is None:
        return [handler]
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.add_handler(handler, inherit=True)
        return manager
    return [*callbacks, handler]


async def observe(
    graph: Any,
    input: Any,
    config: Mapping[str, Any],
    *,
    rest: RestStream | None = None,
    context: Any = None,
    interrupt_before: Any = None,
    interrupt_after: Any = None,
    durability: str | None = "sync",
    control: Any = None,
) -> AsyncIterator[dict[str, Any]]:
    """Runs the graph once; yields, in order, the events to append (dicts ``serde.dumps`` can
    write), no root lifecycle; raises what the run raises (after yielding everything it made).
    control: LangGraph's RunControl, through which the caller drains the run at a step boundary
    (an injected message)."""
    config = dict(config)
    modes = list(MODES)
    root: RootMessages | None = None
    whole: WholeMessages | None = None
    if not streams_models(rest):
        modes = [m for m in modes if m not in STREAMING]
        whole = WholeMessages()
        config["callbacks"] = _with_callback(config.get("callbacks"), whole)
    if rest is not None:
        if "debug" in rest.stream_mode:
            modes.append("debug")
        if rest.run_id and "run_id" not in config:
            config["run_id"] = UUID(str(rest.run_id))
        asked = set(rest.stream_mode)
        if not rest.subgraphs and asked & {"messages", "messages-tuple"}:
            root = RootMessages()
            config["callbacks"] = _with_callback(config.get("callbacks"), root)
    run = _Run(rest, root, whole, writes_late(graph, rest))
    options: dict[str, Any] = {
        "stream_mode": modes,
        "subgraphs": True,
        "interrupt_before": interrupt_before,
        "interrupt_after": interrupt_after,
    }
    if durability is not None:
        options["durability"] = durability
    if context is not None:
        options["context"] = context
    if control is not None:
        options["control"] = control
    try:
        if rest is not None and "events" in rest.stream_mode:
            root_id = str(config.get("run_id", ""))
            stream = graph.astream_events(input, config, version="v2", **options)
            async with aclosing(stream) as events:
                async for ev in events:
                    if ev["event"] == "on_chain_stream" and ev["run_id"] == root_id:
                        ns, mode, payload = ev["data"]["chunk"]
                        made = run.chunk(ns, mode, payload)
                    else:
                        made = run.event(ev)
                    for out in made:
                        yield out
        else:
            async with aclosing(graph.astream(input, config, **options)) as chunks:
                async for ns, mode, payload in chunks:
                    for out in run.chunk(ns, mode, payload):
                        yield out
    except Exception as exc:
        for out in run.fail(exc):
            yield out
        raise
    except BaseException:
        # Cancelled or closed mid-message (run.cancel, a lost lock, the worker closing): the
        # converters of the messages still open are dropped here, or each would be left
        # suspended inside its __anext__ and the loop's finalizer would fail to close it
        # ("aclose(): asynchronous generator is already running").
        run.abandon()
        raise
    for out in run.end():
        yield out
