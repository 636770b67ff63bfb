"""LangGraph's Python server (``langgraph dev``) as a test peer: serves a copy of a project (its
``langgraph.json``; it resolves graph paths from its working directory) on a free loopback port
from a scratch directory (its ``.langgraph_api`` and log stay there, outside the repository), and
is stopped by the PID it was started with."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 120.0  # seconds: importing langgraph-api and the graphs on a busy 2-core machine
STOP_TIMEOUT = 15.0
_API = re.compile(r"API:\s*(?:\x1b\[[0-9;]*m)*(http://127\.0\.0\.1:\d+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ok", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@contextmanager
def langgraph_dev(project: Path, scratch: Path) -> Iterator[str]:
    """Yields the URL of ``langgraph dev`` serving ``project`` once it answers ``/ok``."""
    work = scratch / "project"
    shutil.copytree(project, work, ignore=shutil.ignore_patterns(".langgraph_api", "__pycache__"))
    log_path = scratch / "langgraph-dev.log"
    cli = Path(sys.executable).parent / "langgraph"
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_NO_VERSION_CHECK": "true"}
    cmd = [str(cli), "dev", "--no-browser", "--no-reload", "--port", str(_free_port())]
    cmd += ["--config", "langgraph.json"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        url = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"langgraph dev exited: {log_path.read_text()[-3000:]}")
            found = _API.search(log_path.read_text(errors="replace"))
            if found and _answers(found.group(1)):
                url = found.group(1)
                break
            time.sleep(0.3)
        if url is None:
            raise TimeoutError(f"langgraph dev did not answer in {START_TIMEOUT} s")
        yield url
    finally:
        if proc.poll() is None:
            # Its own session: the group is the server and whatever it started.
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(STOP_TIMEOUT)
