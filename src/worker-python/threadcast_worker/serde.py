"""JSON as LangGraph's Python server writes it (its stream events, its error events).

orjson with the same options (numpy arrays, non-string keys) and the same fallbacks for what
orjson does not write itself: LangChain messages and pydantic models as their ``model_dump()``,
pydantic v1 models and named things as their ``dict()`` / ``_asdict()``, ``Send`` as ``{node,
args}``, exceptions as ``{error, message}``, sets and deques as lists, timedeltas as seconds,
decimals as numbers, UUIDs, addresses, paths and patterns as text, bytes as base64. orjson itself
writes dicts in insertion order, dataclasses (``Command``, ``Interrupt``), datetimes, enums and
UUIDs. Strings with lone surrogates are written with ``?`` in their place and NUL characters as
U+FFFD, as the server does.

One difference: where the server writes ``null`` for a value it has no rule for (a function, an
arbitrary object), ``dumps`` raises ``TypeError`` naming the type, so a run whose state cannot be
written fails visibly instead of streaming nulls.
"""

from __future__ import annotations

import re
import uuid
from base64 import b64encode
from collections import deque
from collections.abc import Mapping
from datetime import timedelta, timezone
from decimal import Decimal
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
)
from pathlib import PurePath
from typing import Any
from zoneinfo import ZoneInfo

import orjson
from langgraph.errors import EmptyInputError, GraphBubbleUp, InvalidUpdateError, TaskNotFound
from langgraph.types import Send

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS

# Exceptions whose message the server shows; any other's is hidden behind a fixed sentence.
_SHOWN_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    RuntimeError,
    RecursionError,
    TimeoutError,
    InvalidUpdateError,
    GraphBubbleUp,
    EmptyInputError,
    TaskNotFound,
)
HIDDEN_MESSAGE = "An internal error occurred"


class ThreadcastError(Exception):
    """An error threadcast itself fails a run with — not the graph's: input it cannot run with,
    an event it cannot carry. The server never raises these, and a client can only act on
    them by their message, so it is shown."""


_TEXT_TYPES = (
    uuid.UUID,
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
    PurePath,
)


def _shown_errors() -> tuple[type[BaseException], ...]:
    # The server also shows its HTTP errors and its own cancellation's message; neither can
    # come from a graph run here, but a graph importing starlette may raise HTTPException.
    extra: list[type[BaseException]] = []
    try:
        from starlette.exceptions import HTTPException

        extra.append(HTTPException)
    except ImportError:
        pass
    return (*_SHOWN_ERRORS, *extra)


_SHOWN = _shown_errors()


def error_payload(exc: BaseException) -> dict[str, str]:
    """An exception as the server writes it: ``{error: <class name>, message}``, the message
    hidden (``"An internal error occurred"``) unless the class is one the server shows (or
    threadcast's own, ``ThreadcastError``)."""
    message = str(exc) if isinstance(exc, (*_SHOWN, ThreadcastError)) else HIDDEN_MESSAGE
    return {"error": type(exc).__name__, "message": message}


def _decimal(value: Decimal) -> int | float:
    # An integral decimal stays an integer (ids stored as NUMERIC(x, 0)); the rest are floats.
    exponent = value.as_tuple().exponent
    if not value.is_finite() or (isinstance(exponent, int) and exponent < 0):
        return float(value)
    return int(value)


def _default(obj: Any) -> Any:
    if isinstance(obj, Send):
        return {"node": obj.node, "args": obj.arg}
    if not isinstance(obj, type):
        dump = getattr(obj, "model_dump", None)
        if callable(dump):
            return dump()
        legacy = getattr(obj, "dict", None)
        if callable(legacy):
            return legacy()
        named = getattr(obj, "_asdict", None)
        if callable(named):
            return named()
    if isinstance(obj, BaseException):
        return error_payload(obj)
    if isinstance(obj, set | frozenset | deque):
        return list(obj)
    if isinstance(obj, timezone | ZoneInfo):
        return obj.tzname(None)
    if isinstance(obj, timedelta):
        return obj.total_seconds()
    if isinstance(obj, Decimal):
        return _decimal(obj)
    if isinstance(obj, _TEXT_TYPES):
        return str(obj)
    if isinstance(obj, re.Pattern):
        return obj.pattern
    if isinstance(obj, bytes | bytearray):
        return b64encode(obj).decode()
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _without_surrogates(value: Any) -> Any:
    """A copy of value whose strings have their lone surrogates replaced with ``?``."""
    if isinstance(value, str):
        return _SURROGATE.sub("?", value)
    if isinstance(value, Mapping):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {f: _without_surrogates(v) for f, v in zip(value._fields, value, strict=True)}
    if isinstance(value, list | tuple | set):
        items = [_without_surrogates(v) for v in value]
        return items if isinstance(value, list) else type(value)(items)
    return value


def dumps(value: Any) -> bytes:
    """JSON bytes of value as the server writes them; TypeError for a value it cannot write."""
    try:
        out = orjson.dumps(value, default=_default, option=_OPTIONS)
    except TypeError as e:
        if "surrogates not allowed" not in str(e):
            raise
        out = orjson.dumps(_without_surrogates(value), default=_default, option=_OPTIONS)
    if b"\\u0000" not in out:
        return out
    # A NUL in a key or string becomes U+FFFD (not dropped: "key\0" must not become "key").
    return out.replace(b"\\\\u0000", b"\\\\ufffd").replace(b"\\u0000", b"\\ufffd")


def loads(data: bytes | str) -> Any:
    """The value of JSON text."""
    return orjson.loads(data)
