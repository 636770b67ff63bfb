"""Where threadcast's Redis function library (protocol/redis/threadcast.lua) is, for a worker or a
producer that finds Redis without it (no gateway has loaded it yet)."""

from __future__ import annotations

import os
from pathlib import Path


def function_path() -> Path | None:
    """threadcast.lua: ``$THREADCAST_FUNCTION``, the repository's protocol/redis/, or beside the
    package (where the image installs it); None when none is there."""
    here = Path(__file__).resolve()
    for p in (
        os.environ.get("THREADCAST_FUNCTION"),
        here.parents[3] / "protocol" / "redis" / "threadcast.lua",
        here.parent / "threadcast.lua",
    ):
        if p and Path(p).is_file():
            return Path(p)
    return None


def function_source() -> str | None:
    """The library's text, or None."""
    path = function_path()
    return path.read_text(encoding="utf-8") if path else None
