"""The thread lock and the run record (protocol/README.md, "The LangGraph worker"): runs of one
thread never overlap, on any number of workers, in either language.

- ``tc:{T}:lg:lock`` holds the name of the worker running the thread's run, with a PX lease
  (``lock_ms``) that worker renews while the run goes on (keepalive.py); a dead worker's lock
  lapses, and a worker taking its run over (takeover.py) waits for that. Only the owner renews or
  releases it (the scripts below), so a late release never frees another worker's lock. A lease that
  lapsed while nobody could renew it (Redis itself stalled past it) is taken again by its worker on
  its next renewal, as long as the run's record still names that worker.
- ``tc:{T}:lg:run`` records the run holding the lock (its command's entry, id, input, the
  checkpoint it started from, a REST run's options, the worker running it), so that a worker
  taking it over can go on with it, and a REST cancel that finds no worker running it (the
  cancel mark) is applied by the one that takes it over.
- Inject and cancel for a run another worker holds go to the lock's owner on its control
  channel (``tc:worker:<name>``; loops.py listens).

The scripts are the JavaScript worker's (src/worker/lock.js), word for word in behaviour.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langgraph.types import Command

from threadcast_worker import keys, serde
from threadcast_worker.answers import ProtocolError

if TYPE_CHECKING:
    from threadcast_worker.worker import Worker

# KEYS[1] a lock, KEYS[2] its run record, ARGV[1] a worker, ARGV[2] ms, ARGV[3] the worker's
# run: extends the lease if the worker holds the lock (1); takes a lapsed lock again if the
# record still says the worker runs that run (1); else 0.
LOCK_RENEW = """local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if held then return 0 end
local r = redis.call('HMGET', KEYS[2], 'worker', 'run_id', 'status')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[3] or r[3] ~= 'running' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1"""

# KEYS[1] a run record, ARGV[1] a run id, ARGV[2] a cancel action: marks the record's run
# cancelled if it is that run and still running (the HSET's answer), else -1.
MARK_CANCEL = """if redis.call('HGET', KEYS[1], 'run_id') == ARGV[1] and
  redis.call('HGET', KEYS[1], 'status') == 'running' then
  return redis.call('HSET', KEYS[1], 'cancel', ARGV[2]) end return -1"""

# KEYS[1] a run record, ARGV[1] a run id, ARGV[2] the worker it was, ARGV[3] the worker it is
# now: sets `worker` if the record is that run, still running, run by ARGV[2] or by nobody
# (1), else 0.
RECORD_WORKER = """local r = redis.call('HMGET', KEYS[1], 'run_id', 'status', 'worker')
local was = r[3] or ''
if r[1] ~= ARGV[1] or r[2] ~= 'running' or (was ~= ARGV[2] and was ~= '') then return 0 end
redis.call('HSET', KEYS[1], 'worker', ARGV[3])
return 1"""

# KEYS[1] a lock, ARGV[1] a worker: deletes the lock if the worker holds it (1), else 0.
LOCK_RELEASE = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)

# KEYS[1] a live-workers set, ARGV[1] a worker: 1 if it counts as live now (Redis' clock).
WORKER_LIVE = """local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s then return 0 end
local t = redis.call('TIME')
return tonumber(s) > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) and 1 or 0"""


class Scripts:
    """The scripts, registered on the command connection (EVALSHA, loaded when missing)."""

    def __init__(self, redis: Any) -> None:
        self.lock_renew = redis.register_script(LOCK_RENEW)
        self.mark_cancel = redis.register_script(MARK_CANCEL)
        self.record_worker = redis.register_script(RECORD_WORKER)
        self.lock_release = redis.register_script(LOCK_RELEASE)
        self.worker_live = redis.register_script(WORKER_LIVE)


# ---- the lock -------------------------------------------------------------------------------


async def acquire(w: Worker, thread: str, wait_ms: int = 0) -> bool:
    """Takes the thread's lock, trying every 250 ms for up to wait_ms; False when another
    worker keeps it."""
    until = time.monotonic() + wait_ms / 1000
    while True:
        if await w.cmd.set(keys.lock(thread), w.name, px=w.lock_ms, nx=True):
            return True
        if time.monotonic() >= until:
            return False
        await asyncio.sleep(0.25)


async def renew_lock(w: Worker, thread: str, run_id: str) -> bool:
    """Renews the thread's lease for run run_id (takes it again if it lapsed while the record
    still names this worker's run): True while this worker holds it."""
    got = await w.scripts.lock_renew(
        keys=[keys.lock(thread), keys.run(thread)], args=[w.name, w.lock_ms, run_id]
    )
    return int(got) == 1


async def release(w: Worker, thread: str) -> None:
    """Releases the thread's lock if this worker holds it; never raises."""
    try:
        await w.scripts.lock_release(keys=[keys.lock(thread)], args=[w.name])
    except Exception:  # noqa: BLE001
        pass


CLAIM_WAIT_MS = 2000
"""How long a claim waits for another worker's lock: a client that answers a run's end at once
(input.respond on "interrupted", state.fork) can reach the thread while the worker that
appended the end has not released the lock yet."""


async def claim_thread(w: Worker, thread: str) -> None:
    """Takes the thread for a new run, or explains why it cannot. A run of this worker whose
    end is out is waited for (it is only tidying up); another worker's lock, for up to
    CLAIM_WAIT_MS."""
    local = w.running.get(thread)
    if local is not None and local.over:
        await local.settled.wait()
    if thread in w.running or not await acquire(w, thread, CLAIM_WAIT_MS):
        raise ProtocolError(
            "invalid_argument", f'a run is active on thread "{thread}"; wait for it to end'
        )


async def forward(w: Worker, thread: str, op: dict[str, Any]) -> bool:
    """Sends inject/cancel to the worker running the thread; False when none is."""
    owner = await w.cmd.get(keys.lock(thread))
    if not owner:
        return False
    owner = owner.decode() if isinstance(owner, bytes) else owner
    if owner == w.name:
        return False
    got = await w.cmd.publish(keys.control(owner), serde.dumps({"thread": thread, **op}))
    return int(got) > 0


# ---- the run record -------------------------------------------------------------------------


def save_input(value: Any) -> bytes:
    """How a run's input is kept in its record, to run it again after a crash."""
    if isinstance(value, Command):
        return serde.dumps(
            {"command": {"resume": value.resume, "update": value.update, "goto": value.goto}}
        )
    return serde.dumps({"input": value})


def load_input(text: bytes | str) -> Any:
    from threadcast_worker.rest import to_command

    o = serde.loads(text)
    if "command" in o:
        c = {k: v for k, v in o["command"].items() if v not in (None, [], ())}
        return to_command(c)
    return o.get("input")


async def head_of(w: Worker, thread: str) -> str:
    """The id of the thread's newest root checkpoint ('' when it has none)."""
    got = await w.saver.aget_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    return got.config["configurable"]["checkpoint_id"] if got else ""


async def record_run(
    w: Worker,
    *,
    thread: str,
    entry_key: str,
    run_id: str,
    assistant: str,
    input: Any,
    configurable: dict[str, Any],
    rest: dict[str, Any] | None = None,
) -> None:
    """Records the run starting on the thread, whose lock this worker holds."""
    base = await head_of(w, thread)
    fields: dict[str, Any] = {
        "entry": entry_key,
        "run_id": run_id,
        "status": "running",
        "worker": w.name,
        "recorded": "0",
        "assistant": assistant,
        "base": base,
        "input": save_input(input),
        "configurable": serde.dumps(configurable),
    }
    if rest is not None:
        fields["rest"] = serde.dumps(rest)
    await w.cmd.hset(keys.run(thread), mapping=fields)


async def move_run(w: Worker, thread: str, run_id: str, was: str, now: str) -> bool:
    """Moves the thread's running run from worker `was` (or from nobody) to `now` ('' to give
    it up); False when the record is another run, over, or run by a third worker."""
    got = await w.scripts.record_worker(keys=[keys.run(thread)], args=[run_id, was, now])
    return int(got) == 1


async def worker_live(w: Worker, assistant: str, name: str) -> bool:
    """Whether worker `name` counts as live for the assistant's commands (Redis' clock)."""
    got = await w.scripts.worker_live(keys=[keys.workers(assistant)], args=[name])
    return int(got) == 1


async def record_done(w: Worker, thread: str) -> None:
    await w.cmd.hset(keys.run(thread), "status", "done")


async def mark_cancel(w: Worker, thread: str, run_id: str, action: str) -> int:
    """Keeps a REST cancel in the record of the thread's run run_id if it is running (for a
    worker taking it over); < 0 if not."""
    return int(await w.scripts.mark_cancel(keys=[keys.run(thread)], args=[run_id, action]))


Regain = Callable[[], Awaitable[bool]]
