"""LangGraph's Python server (``langgraph dev``) as a test peer: a copy of a project directory
served on a free loopback port, its log kept beside the copy (outside the repository), stopped
by the PID it was started with. Any test module can use ``served(project_dir, tmp_dir)``."""

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

_API_LINE = re.compile(r"API:\s*(?:\x1b\[[0-9;]*m)*(http://[0-9.:]+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ok", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    # Its own session (start_new_session): the group is the server and whatever it started.
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(STOP_TIMEOUT)


@contextmanager
def served(project: Path, tmp: Path) -> Iterator[str]:
    """Runs ``langgraph dev`` on a copy of ``project`` (its ``langgraph.json``) under ``tmp``;
    yields the API's URL once it answers ``/ok``."""
    work = tmp / "project"
    shutil.copytree(project, work, ignore=shutil.ignore_patterns(".langgraph_api", "__pycache__"))
    log_path = tmp / "langgraph-dev.log"
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
        url = None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"langgraph dev exited: {log_path.read_text()[-3000:]}")
            # It may take another port than asked when that one is busy: its log says which.
            found = _API_LINE.search(log_path.read_text(errors="replace"))
            if found:
                url = found.group(1)
                if _ready(url):
                    break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"langgraph dev did not answer: {log_path.read_text()[-3000:]}")
        yield url
    finally:
        _stop(proc)
