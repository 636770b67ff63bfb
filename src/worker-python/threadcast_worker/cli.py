"""threadcast-worker-python: serves a LangGraph project's Python graphs to threadcast.

    threadcast-worker-python --config langgraph.json [--redis-url URL] [--name NAME]
        [--redis-tls-ca FILE] [--redis-tls-cert FILE --redis-tls-key FILE]
        [--ttl SECONDS] [--heartbeat-ms MS] [--claim-idle-ms MS] [--lock-ms MS]

The takeover's timing, as the JavaScript worker's: a heartbeat a second; a worker silent for
three is dead, its runs claimed after --claim-idle-ms and taken over once its threads' locks
(--lock-ms) lapsed. SIGTERM/SIGINT: stop taking commands, let the runs in hand finish (up to
10 s; what is left is taken over by other workers). Exit status 2: bad arguments or a project
that cannot be read; 3: the project has no Python graph to serve.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

import uvloop

from threadcast_worker.graphs import GraphLoadError, load_project
from threadcast_worker.logger import install_logging, json_log


def _ms(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 100 <= n <= 600000:
        raise argparse.ArgumentTypeError(
            f"a whole number of milliseconds from 100 to 600000, got {text!r}"
        )
    return n


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="threadcast-worker-python",
        description="Serves a LangGraph project's Python graphs to threadcast.",
    )
    p.add_argument("--config", required=True, help="the project's langgraph.json")
    p.add_argument(
        "--redis-url",
        default=os.environ.get("THREADCAST_REDIS_URL", "redis://127.0.0.1:6379"),
        help="redis://[[user]:password@]host[:port][/db], or rediss:// ($THREADCAST_REDIS_URL)",
    )
    p.add_argument("--redis-tls-ca", default=os.environ.get("THREADCAST_REDIS_TLS_CA"))
    p.add_argument("--redis-tls-cert", default=os.environ.get("THREADCAST_REDIS_TLS_CERT"))
    p.add_argument("--redis-tls-key", default=os.environ.get("THREADCAST_REDIS_TLS_KEY"))
    p.add_argument("--name", help="the consumer name (default <host>-<pid>-<random>)")
    p.add_argument(
        "--ttl", type=int, help="checkpoints expire this many seconds after a thread's last write"
    )
    p.add_argument("--heartbeat-ms", type=_ms, default=1000)
    p.add_argument("--claim-idle-ms", type=_ms, default=3000)
    p.add_argument("--lock-ms", type=_ms, default=3000)
    return p


async def _main(args: argparse.Namespace) -> int:
    from threadcast_worker.worker import serve

    try:
        project = load_project(args.config)
    except GraphLoadError as e:
        print(f"threadcast-worker-python: {e}", file=sys.stderr)
        return 2
    if not project.graphs:
        print(
            f"threadcast-worker-python: {args.config} has no Python graph to serve", file=sys.stderr
        )
        return 3
    worker = await serve(
        redis=args.redis_url,
        project=project,
        name=args.name,
        heartbeat_ms=args.heartbeat_ms,
        claim_idle_ms=args.claim_idle_ms,
        lock_ms=args.lock_ms,
        ttl_seconds=args.ttl,
        tls={"ca": args.redis_tls_ca, "cert": args.redis_tls_cert, "key": args.redis_tls_key},
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    json_log("info", "stopping: the runs in hand may finish", name=worker.name)
    await worker.close()
    return 0


def main() -> None:
    args = _parser().parse_args()
    if args.claim_idle_ms <= args.heartbeat_ms:
        print(
            "threadcast-worker-python: --claim-idle-ms must be longer than --heartbeat-ms "
            "(a live worker would look dead)",
            file=sys.stderr,
        )
        sys.exit(2)
    install_logging()
    try:
        # uvloop (in the worker's lock): the same asyncio, 14–32% less of the worker's CPU a
        # token in scripts/bench's tokens-py cells (tests/bench/README.md).
        sys.exit(uvloop.run(_main(args)))
    except RuntimeError as e:  # no graph could be served, Redis refused the setup, …
        json_log("error", "threadcast-worker-python cannot start", error=str(e))
        sys.exit(1)


if __name__ == "__main__":
    main()
