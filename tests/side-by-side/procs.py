"""The processes the side-by-side suite runs: a private redis-server, threadcast's gateway, its
Python worker, and LangGraph's Python server (``langgraph dev``), each on a free loopback port.

Every process starts in a session of its own with its output in a log file of the suite's log
directory; it is stopped by its PID (its process group, which only it and its children are in),
and every wait is bounded. ``stop_all()`` stops whatever is still running (the fixtures call it,
and so does ``atexit``).
"""

from __future__ import annotations

import atexit
import json
import os
import random
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The project both servers serve, and its graphs' ids.
PROJECT = Path(__file__).resolve().parent / "project"
GRAPHS = list(json.loads((PROJECT / "langgraph.json").read_text())["graphs"])

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_running: list[Proc] = []
_started: list[Proc] = []


def _port_span() -> tuple[int, int]:
    """Where to pick ports: outside the kernel's ephemeral range, as tests/integration does.

    A port from inside it can become the local port of some outgoing connection between being
    picked and being bound.
    """
    lo, hi = 32768, 60999
    try:
        lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        pass
    return (10000, lo - 10000) if lo > 11024 else (hi + 1, 65535 - hi)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing is bound to."""
    base, span = _port_span()
    for _ in range(200):
        port = base + random.randrange(span)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found")


def wait_until(what: str, fn: Callable[[], object], timeout: float, proc: Proc | None = None):
    """Polls fn until it returns something truthy; fails after timeout or when proc exits."""
    end = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if proc is not None and not proc.alive():
            raise RuntimeError(
                f"{proc.name} exited ({proc.popen.returncode}) before {what}:\n{proc.tail()}"
            )
        if time.monotonic() > end:
            detail = f":\n{proc.tail()}" if proc is not None else ""
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}{detail}")
        time.sleep(0.05)


def http_status(url: str, method: str = "GET", timeout: float = 2) -> int | None:
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, method=method), timeout=timeout
        ) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, urllib.error.URLError):
        return None


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(_ANSI.sub("", self.text()).splitlines()[-lines:])

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM to its process group, SIGKILL after timeout; waits for it either way."""
        if self.alive():
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.popen.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.popen.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self in _running:
            _running.remove(self)


def spawn(
    name: str, argv: list[str], logdir: Path, *, env: dict | None = None, cwd: Path | None = None
) -> Proc:
    log = logdir / f"{name}.log"
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    proc = Proc(name, popen, log)
    _running.append(proc)
    _started.append(proc)
    return proc


def started() -> list[Proc]:
    """Every process the suite started, stopped or not (their logs go with a failure)."""
    return list(_started)


def stop_all() -> None:
    for proc in reversed(list(_running)):
        proc.stop()


atexit.register(stop_all)


# ---- the processes -------------------------------------------------------------------------


def start_redis(logdir: Path) -> tuple[Proc, str]:
    """redis-server on a free port, no persistence; returns it and its URL."""
    for attempt in range(5):
        port = free_port()
        workdir = logdir / f"redis-{port}"
        workdir.mkdir()
        proc = spawn(
            "redis",
            [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(workdir),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            logdir,
        )
        try:
            wait_until(
                "redis-server to accept connections",
                lambda p=proc: "Ready to accept connections" in p.text(),
                30,
                proc,
            )
            return proc, f"redis://127.0.0.1:{port}"
        except RuntimeError:
            # The port was taken meanwhile: another one.
            if attempt == 4 or "Address already in use" not in proc.text():
                raise
            proc.stop()
    raise AssertionError("unreachable")


def gateway_bin() -> Path:
    return Path(os.environ.get("TC_SBS_GATEWAY") or REPO / "build-asan" / "threadcast")


def start_gateway(logdir: Path, redis_url: str) -> tuple[Proc, str]:
    """threadcast's gateway with --port 0, auth off; returns it and its base URL once /readyz.

    ``--rest-flavor python``: the project's graphs are all Python, so the REST API answers as
    LangGraph's Python server also where no graph decides (new threads, the store, errors of
    routes of no graph), as ``scripts/run --config`` sets it for such a project.
    """
    env = {
        **os.environ,
        "THREADCAST_DRAIN_GRACE": "0",
        "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=1"),
    }
    proc = spawn(
        "gateway",
        [
            str(gateway_bin()),
            "--port",
            "0",
            "--host",
            "127.0.0.1",
            "--auth",
            "off",
            "--redis-url",
            redis_url,
            "--rest-flavor",
            "python",
        ],
        logdir,
        env=env,
    )

    def listening() -> int | None:
        for line in proc.text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("msg") == "listening":
                return entry["port"]
        return None

    port = wait_until("the gateway to listen", listening, 30, proc)
    url = f"http://127.0.0.1:{port}"
    wait_until("the gateway's /readyz", lambda: http_status(f"{url}/readyz") == 200, 15, proc)
    return proc, url


def worker_bin() -> Path:
    return Path(
        os.environ.get("TC_SBS_WORKER")
        or REPO / "build-py" / "venv-dev" / "bin" / "threadcast-worker-python"
    )


def start_worker(
    logdir: Path, redis_url: str, config: Path, gateway_url: str, graphs: list[str], env: dict
) -> Proc:
    """The Python worker on the project; ready once the gateway knows every graph of it.

    LANGGRAPH_API_URL is the gateway's, as a deployment sets it: the reference's runs carry its
    own URL (``langgraph_api_url`` in their metadata) and threadcast's the one the worker is given.
    """
    proc = spawn(
        "worker",
        [str(worker_bin()), "--redis-url", redis_url, "--config", str(config)],
        logdir,
        env={**os.environ, "LANGGRAPH_API_URL": gateway_url, **env},
    )
    for graph in graphs:
        wait_until(
            f"the worker to register graph {graph}",
            lambda g=graph: http_status(f"{gateway_url}/assistants/{g}") == 200,
            60,
            proc,
        )
    return proc


def langgraph_bin() -> Path:
    return REPO / "build-py" / "venv-dev" / "bin" / "langgraph"


def reference_project(project: Path, workdir: Path) -> Path:
    """The project's langgraph.json as the reference must read it, written in workdir.

    ``langgraph dev`` resolves the graphs' paths and ``dependencies`` against the directory it is
    started in (not the file's), and keeps its state in ``.langgraph_api/`` there: it runs in a
    directory of its own, on a copy whose paths are absolute. Nothing else changes.
    """
    config = json.loads((project / "langgraph.json").read_text())
    graphs = {}
    for graph_id, spec in config["graphs"].items():
        path, _, attr = spec.rpartition(":")
        graphs[graph_id] = f"{(project / path).resolve()}:{attr}"
    config["graphs"] = graphs
    config["dependencies"] = [str((project / d).resolve()) for d in config.get("dependencies", [])]
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "langgraph.json"
    out.write_text(json.dumps(config, indent=2))
    return out


def start_reference(logdir: Path, project: Path, env: dict) -> tuple[Proc, str]:
    """LangGraph's Python server (``langgraph dev``, in-memory) on the project."""
    workdir = logdir / "reference"
    config = reference_project(project, workdir)
    port = free_port()
    proc = spawn(
        "reference",
        [
            str(langgraph_bin()),
            "dev",
            "--no-browser",
            "--no-reload",
            "--port",
            str(port),
            "--config",
            str(config),
        ],
        logdir,
        cwd=workdir,
        env={**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1", **env},
    )

    def api_line() -> str | None:
        # It may take another port than the one asked for when that one is busy.
        m = re.search(r"API: (http://[0-9.:]+)", _ANSI.sub("", proc.text()))
        return m.group(1) if m else None

    url = wait_until("the reference's API line", api_line, 90, proc)
    wait_until("the reference's /ok", lambda: http_status(f"{url}/ok") == 200, 30, proc)
    return proc, url
