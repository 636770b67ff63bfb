"""serde.dumps on awkward values, side by side with the Python server's own ``json_dumpb``."""

from __future__ import annotations

import re
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from enum import Enum
from ipaddress import IPv4Address, IPv6Network
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langgraph.errors import GraphRecursionError
from langgraph.types import Command, Interrupt, Send
from langgraph_api.serde import json_dumpb
from pydantic import BaseModel

from threadcast_worker import serde


class Colour(Enum):
    RED = "red"


class Point(NamedTuple):
    x: int
    y: int


@dataclass
class Box:
    label: str
    items: list[Any]


class Model(BaseModel):
    name: str
    when: datetime


class NodeError(Exception):
    """A graph's own exception class."""


AWKWARD: dict[str, Any] = {
    "messages": [
        HumanMessage("hi", id="h"),
        AIMessage("yo", id="a", tool_calls=[{"name": "t", "args": {"x": 1}, "id": "c"}]),
        AIMessageChunk(content="partial", id="p", chunk_position="last"),
        ToolMessage("done", tool_call_id="c"),
    ],
    "send": Send("node", {"arg": 1}),
    "command": Command(resume={"a": 1}, goto=["x", Send("y", 2)], update={"k": "v"}),
    "interrupt": Interrupt(value={"question": "ok?"}, id="abc"),
    "set": {3},
    "frozenset": frozenset({"a"}),
    "deque": deque([1, 2]),
    "datetime": datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
    "naive": datetime(2024, 5, 6, 7, 8, 9),
    "timezone": timezone(timedelta(hours=2)),
    "timedelta": timedelta(minutes=1, microseconds=5),
    "decimal int": Decimal("12"),
    "decimal float": Decimal("1.25"),
    "decimal nan": Decimal("NaN"),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "ipv4": IPv4Address("10.0.0.1"),
    "ipv6 net": IPv6Network("::/64"),
    "path": Path("/a/b"),
    "pattern": re.compile(r"a+b"),
    "bytes": b"\x00\xffbytes",
    "enum": Colour.RED,
    "namedtuple": Point(1, 2),
    "dataclass": Box("b", [Point(3, 4), {5}]),
    "pydantic": Model(name="m", when=datetime(2020, 1, 1, tzinfo=UTC)),
    "shown error": ValueError("shown"),
    "recursion": GraphRecursionError("too deep"),
    "hidden error": NodeError("internal detail"),
    "int keys": {1: "one", 2.5: "x"},
    "surrogate": "bad \ud800 text",
    "nul": {"key\x00": "value\x00"},
    "nested": [[{"deep": ({"tuple": True},)}]],
}


@pytest.mark.parametrize("name", list(AWKWARD))
def test_writes_as_the_server_writes(name: str) -> None:
    value = AWKWARD[name]
    assert serde.dumps(value) == json_dumpb(value)


def test_all_at_once_as_the_server() -> None:
    assert serde.dumps(AWKWARD) == json_dumpb(AWKWARD)


def test_message_field_order_is_the_servers() -> None:
    text = serde.dumps(AIMessageChunk(content="x", id="i")).decode()
    keys = re.findall(r'"(\w+)":', text)
    assert keys[:6] == ["content", "additional_kwargs", "response_metadata", "type", "name", "id"]
    assert serde.loads(serde.dumps({"b": 1, "a": 2})) == {"b": 1, "a": 2}


def test_errors_name_the_class_and_hide_unknown_messages() -> None:
    assert serde.error_payload(ValueError("v")) == {"error": "ValueError", "message": "v"}
    assert serde.error_payload(NodeError("x")) == {
        "error": "NodeError",
        "message": serde.HIDDEN_MESSAGE,
    }


def test_threadcasts_own_errors_show_their_message() -> None:
    from threadcast_worker.relay import EventTooLargeError
    from threadcast_worker.rest_runs import InputError

    big = EventTooLargeError("values", 16777300)
    assert serde.error_payload(big) == {"error": "EventTooLargeError", "message": str(big)}
    assert "16777300 bytes, over threadcast's limit" in str(big)
    assert serde.error_payload(InputError("config must be an object")) == {
        "error": "InputError",
        "message": "config must be an object",
    }


def test_what_it_cannot_write_fails_naming_the_type() -> None:
    class Opaque:
        pass

    with pytest.raises(TypeError, match="Opaque"):
        serde.dumps({"state": [Opaque()]})
    with pytest.raises(TypeError, match="function"):
        serde.dumps({"callback": lambda: None})
