"""The worker's log lines: one JSON object per line on stderr, ``{ts, level, msg, …fields}``,
as the gateway and the JavaScript worker write theirs. Graphs' own ``logging`` records go
through the same lines (``source: "graph"``) once ``install_logging()`` ran."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson


class Log(Protocol):
    def __call__(self, level: str, msg: str, **fields: Any) -> None: ...


def _ts() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_log(level: str, msg: str, **fields: Any) -> None:
    """Writes one log line to stderr; a field that is not JSON is written as its str()."""
    line = orjson.dumps({"ts": _ts(), "level": level, "msg": msg, **fields}, default=str)
    sys.stderr.buffer.write(line + b"\n")
    sys.stderr.buffer.flush()


_LEVELS = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warn",
    logging.ERROR: "error",
    logging.CRITICAL: "error",
}


class _Handler(logging.Handler):
    def __init__(self, log: Log) -> None:
        super().__init__()
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {"source": "graph", "logger": record.name}
            if record.exc_info:
                fields["error"] = logging.Formatter().formatException(record.exc_info)
            self._log(_LEVELS.get(record.levelno, "info"), record.getMessage(), **fields)
        except Exception:  # noqa: BLE001 — logging must never raise into the graph
            self.handleError(record)


def install_logging(log: Log = json_log, level: int = logging.INFO) -> None:
    """Routes the root logger (graphs' ``logging`` calls) to the worker's log lines."""
    root = logging.getLogger()
    if not any(isinstance(h, _Handler) for h in root.handlers):
        root.addHandler(_Handler(log))
    root.setLevel(level)
