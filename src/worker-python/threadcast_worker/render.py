"""A REST run's stream as LangGraph's Python server renders it (``langgraph_api/stream.py``
``astream_state``, ``worker.py``): from the graph's raw stream chunks ``(namespace, mode,
payload)`` — observed once with every mode and ``subgraphs=True`` — the SSE events the server
would send after its ``metadata`` event, for the run's ``stream_mode`` and ``stream_subgraphs``.

What the server does, and so ``Renderer`` does:
- a chunk of a mode the run asked for is sent as ``<mode>`` (``<mode>|<ns1>|<ns2>`` from a
  subgraph, with ``stream_subgraphs``; without it, subgraphs' chunks are not sent at all); its
  payload as LangGraph gave it (``values`` at an interrupt: the state with ``__interrupt__``);
- ``debug`` checkpoint chunks get ``checkpoint`` / ``parent_checkpoint`` (``{thread_id,
  checkpoint_ns, checkpoint_id, checkpoint_map}``) and their tasks' ``state`` configs become
  ``checkpoint``;
- ``messages-tuple``: each ``(message chunk, metadata)`` as ``messages[|ns]``;
- ``messages``: ``messages/metadata`` ``{id: {metadata}}`` the first time a message id is seen,
  then ``messages/partial`` ``[the message so far]`` for a chunk or ``messages/complete``
  ``[message]`` for a whole message (never with a namespace suffix);
- ``events`` (observed through ``astream_events(version="v2")``): every callback event but the
  root run's ``on_chain_stream`` and those tagged ``langsmith:hidden``;
- a failed run ends with ``error`` ``{error: <class name>, message}`` (the message hidden for
  classes the server does not show); a cancelled run ends with nothing more.

Without ``stream_subgraphs`` the server's messages handler streams only the root graph's model
calls, and a message a subgraph streamed is sent whole when the root node that ran the subgraph
returns it; ``RootMessages`` (a callback handler put in the run's callbacks for such runs) sees
what that handler would see, and the renderer sends those messages before the node's update.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, BaseMessageChunk, message_chunk_to_message
from langgraph.constants import TAG_HIDDEN
from langgraph.types import Command
from pydantic import BaseModel

from threadcast_worker import serde

# Stream modes a REST run may ask for (the server refuses `tools` and `lifecycle` on its legacy
# routes).
REST_MODES = frozenset(
    {
        "values",
        "updates",
        "messages",
        "messages-tuple",
        "custom",
        "events",
        "debug",
        "tasks",
        "checkpoints",
    }
)

Rendered = tuple[tuple[str, ...], str, Any]  # (namespace, SSE event name, JSON value)


def checkpoint_ref(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The checkpoint a config names, as the server writes it (None without a thread and a
    checkpoint id; ``checkpoint_ns`` and ``checkpoint_map`` only when the config has them)."""
    c = (config or {}).get("configurable")
    if not c or not c.get("thread_id") or not c.get("checkpoint_id"):
        return None
    out = {"checkpoint_id": c["checkpoint_id"], "thread_id": c["thread_id"]}
    if "checkpoint_ns" in c:
        out["checkpoint_ns"] = c["checkpoint_ns"] or ""
    if "checkpoint_map" in c:
        out["checkpoint_map"] = c["checkpoint_map"]
    return out


def _debug_task(task: Mapping[str, Any]) -> Mapping[str, Any]:
    state = task.get("state")
    if not state or not isinstance(state, Mapping) or not state.get("configurable"):
        return task
    # A copy: the task dict is shared with the run's `checkpoints` chunk, already rendered.
    out = {k: v for k, v in task.items() if k != "state"}
    out["checkpoint"] = state["configurable"]
    return out


def debug_chunk(chunk: Mapping[str, Any]) -> Mapping[str, Any]:
    """A debug chunk as the server streams it (checkpoints get their refs)."""
    if chunk.get("type") != "checkpoint":
        return chunk
    payload = chunk.get("payload")
    if not payload:
        return {**chunk, "payload": None}
    return {
        **chunk,
        "payload": {
            **payload,
            "checkpoint": checkpoint_ref(payload["config"]),
            "parent_checkpoint": checkpoint_ref(payload.get("parent_config")),
            "tasks": [_debug_task(t) for t in payload["tasks"]],
        },
    }


def _values_of(obj: Any) -> Sequence[Any]:
    """The top-level values of a state (a dict, a pydantic model, a dataclass)."""
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, BaseModel):
        return [getattr(obj, k) for k in type(obj).model_fields]
    if is_dataclass(obj) and not isinstance(obj, type):
        return [getattr(obj, f.name) for f in fields(obj)]
    return ()


def messages_in(value: Any) -> Iterable[BaseMessage]:
    """The messages a node's output holds where the server's messages handler looks for them."""
    if isinstance(value, BaseMessage):
        yield value
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            if isinstance(item, BaseMessage):
                yield item
    else:
        for v in _values_of(value):
            if isinstance(v, BaseMessage):
                yield v
            elif isinstance(v, Sequence) and not isinstance(v, str):
                for item in v:
                    if isinstance(item, BaseMessage):
                        yield item


def output_messages(response: Any) -> Iterable[BaseMessage]:
    """The messages a node returned (a ``Command``'s update, a list of them, or its output)."""
    if isinstance(response, Command):
        yield from messages_in(response.update)
    elif isinstance(response, Sequence) and any(isinstance(v, Command) for v in response):
        for v in response:
            yield from messages_in(v.update if isinstance(v, Command) else v)
    else:
        yield from messages_in(response)


class RootMessages(BaseCallbackHandler):
    """What the server's messages handler sees of the root graph's nodes when the run does not
    stream subgraphs: each root node's input messages (it will not send those again) and the
    messages each returns (it sends those it has not sent). Callbacks of nodes only: no per-token
    work."""

    run_inline = True
    ignore_llm = True
    ignore_chat_model = True
    ignore_retriever = True
    ignore_agent = True
    ignore_custom_event = True

    def __init__(self) -> None:
        self.nodes: dict[UUID, dict[str, Any]] = {}
        self.inputs: list[BaseMessage] = []
        self.returned: list[tuple[dict[str, Any], BaseMessage]] = []

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
        if "|" in str(metadata.get("langgraph_checkpoint_ns", "")):
            return  # a subgraph's node
        self.nodes[run_id] = metadata
        self.inputs.extend(messages_in(inputs))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        meta = self.nodes.pop(run_id, None)
        if meta is not None:
            self.returned.extend((meta, m) for m in output_messages(outputs))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.nodes.pop(run_id, None)


class Renderer:
    """Turns a run's raw stream chunks (and callback events) into the server's SSE events."""

    def __init__(
        self, stream_mode: Sequence[str], subgraphs: bool, root: RootMessages | None = None
    ) -> None:
        self.modes = frozenset(stream_mode)
        self.subgraphs = subgraphs
        self.tuples = "messages-tuple" in self.modes
        self.messages = "messages" in self.modes and not self.tuples
        self.root = root if not subgraphs and (self.tuples or self.messages) else None
        self.sent: dict[str, BaseMessage] = {}  # the `messages` mode's messages so far, by id
        self.seen: set[Any] = set()  # ids the root-only messages handler has sent or been given

    def chunk(self, ns: tuple[str, ...], mode: str, payload: Any) -> list[Rendered]:
        """The SSE events of one raw chunk."""
        if ns and not self.subgraphs:
            return []
        out: list[Rendered] = []
        if self.root is not None and mode in ("updates", "values"):
            self._flush_root(out)
        if mode == "messages":
            if self.tuples or self.messages:
                self._message(out, ns, payload)
            return out
        if mode not in self.modes:
            return out
        if mode == "debug":
            payload = debug_chunk(payload)
        out.append((ns, f"{mode}|{'|'.join(ns)}" if ns else mode, payload))
        return out

    def event(self, event: Mapping[str, Any]) -> list[Rendered]:
        """The SSE events of a callback event (not the root run's stream chunks)."""
        tags = event.get("tags")
        if tags and "langsmith:hidden" in tags:
            return []
        return [((), "events", event)]

    def end(self) -> list[Rendered]:
        """What is still to send once the graph's stream ended."""
        out: list[Rendered] = []
        if self.root is not None:
            self._flush_root(out)
        return out

    def _message(self, out: list[Rendered], ns: tuple[str, ...], payload: Any) -> None:
        msg, meta = payload
        if self.root is not None:
            self.seen.add(msg.id)
        if self.tuples:
            out.append((ns, f"messages|{'|'.join(ns)}" if ns else "messages", payload))
            return
        known = self.sent.get(msg.id)
        if known is not None:
            self.sent[msg.id] = known + msg
        else:
            self.sent[msg.id] = msg
            out.append((ns, "messages/metadata", {msg.id: {"metadata": meta}}))
        name = "messages/partial" if isinstance(msg, BaseMessageChunk) else "messages/complete"
        out.append((ns, name, [message_chunk_to_message(self.sent[msg.id])]))

    def _flush_root(self, out: list[Rendered]) -> None:
        root = self.root
        assert root is not None
        if root.inputs:
            self.seen.update(m.id for m in root.inputs if m.id is not None)
            root.inputs.clear()
        if not root.returned:
            return
        returned = root.returned[:]
        root.returned.clear()
        for meta, m in returned:
            if m.id not in self.seen:
                self._message(out, (), (m, meta))


def error_event(exc: BaseException) -> Rendered:
    """The ``error`` event a failed run's stream ends with."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return ((), "error", serde.error_payload(exc))
