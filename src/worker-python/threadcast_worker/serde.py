"""JSON as LangGraph's Python server writes it.

A placeholder until render.py's author fills it in (issue 37): ``dumps`` turns a value into
JSON bytes, LangChain messages and pydantic models as their ``model_dump()``."""

from __future__ import annotations

from typing import Any

import orjson


def _default(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    if isinstance(obj, set | frozenset):
        return list(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """JSON bytes of value."""
    return orjson.dumps(value, default=_default)


def loads(data: bytes | str) -> Any:
    """The value of JSON text."""
    return orjson.loads(data)
