"""Side by side: the same client calls against LangGraph's Python server and threadcast, and what
they answered compared after ids and times are normalised.

A test writes its calls once, as a *scenario*: an async function of a ``langgraph_sdk`` client
that returns what the server answered (stream parts, states, runs, …). ``both()`` runs it against
every server the suite started — the reference first, then threadcast — normalises each result
on its own (``Normaliser``) and asserts they are equal, but for the fields the test exempts, each
with its reason (``Exempt``). It returns the reference's normalised result, on which the test
then states its exact expectations: they hold for threadcast too, since its result is the same.
"""

from __future__ import annotations

import asyncio
import difflib
import fnmatch
import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

# ---- servers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """One server under test: ``reference`` (langgraph dev) or ``threadcast``."""

    name: str
    url: str

    def client(self) -> LangGraphClient:
        # api_key None: no key from the environment is sent to either.
        return get_client(url=self.url, api_key=None)

    @property
    def address(self) -> str:
        return self.url.removeprefix("http://")


# ---- normalising ----------------------------------------------------------------------------

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Interrupt ids: LangGraph's xxh3-128 hex of the interrupt's namespace.
HEX32 = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
# Channel versions of LangGraph's savers: a zero-padded counter, then a random fraction.
VERSION = re.compile(r"(?<![0-9a-f])(\d{32})\.\d+\.\d+")
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


class Normaliser:
    """Replaces what differs between two correct servers by names that do not.

    uuids (run, thread, checkpoint, task, message ids, wherever they are, in keys and inside
    strings such as ``lc_run--<uuid>`` or ``researcher:<task id>``) become ``<id:P>`` and
    interrupt ids ``<hex:P>``, P the path where the id first appears (a traversal with each
    object's keys sorted; ``[key]`` when it is a member's name), e.g. ``<id:parts.0.data.run_id>``:
    an id that recurs keeps its name, so a result that links the wrong checkpoint or run still
    differs, and an id one side lacks renames no other. ISO times, and numbers under a key that
    says ``time`` (LangGraph's ``__request_start_time_ms__``), become ``<time>``; the server's own
    address ``<server>``; channel versions keep their counter and lose their random fraction.
    ``langgraph_request_id`` becomes ``<request id>``: it names the HTTP request a run came
    from, and which request's id a queued run, its checkpoints and its record carry is each
    server's own business (the reference's in-memory queue gives a queued run's checkpoints
    another request's id than its record; threadcast one per run).
    """

    def __init__(self, server: Server) -> None:
        self.address = server.address
        self.ids: dict[str, str] = {}

    def _id(self, kind: str, value: str, where: str) -> str:
        return self.ids.setdefault(value, f"<{kind}:{where or '$'}>")

    def text(self, s: str, where: str = "") -> str:
        s = s.replace(self.address, "<server>")
        s = ISO_TIME.sub("<time>", s)
        s = VERSION.sub(lambda m: f"{m.group(1)}.<random>", s)
        s = UUID.sub(lambda m: self._id("id", m[0], where), s)
        # A version's zero-padded counter is 32 digits too: only hex with a letter is an id.
        return HEX32.sub(lambda m: m[0] if m[0].isdigit() else self._id("hex", m[0], where), s)

    def __call__(self, value: Any, where: str = "") -> Any:
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, dict):
            out = {}
            for k in sorted(value, key=str):
                name = self.text(k, f"{where}[key]")
                v = value[k]
                here = f"{where}.{name}" if where else name
                if k == "langgraph_request_id" and isinstance(v, str):
                    out[name] = "<request id>"
                    continue
                out[name] = (
                    "<time>" if "time" in k and isinstance(v, int | float) else self(v, here)
                )
            return out
        if isinstance(value, list | tuple):
            return [self(v, f"{where}.{i}" if where else str(i)) for i, v in enumerate(value)]
        return value


# ---- comparing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Exempt:
    """A field left out of the comparison, and why (every test names its exceptions).

    ``path`` is a dotted path into the result with ``*`` for one step (a key or a list index)
    and ``**`` for any number of them, e.g. ``"**.created_at"`` or ``"runs.*.kwargs"``. The
    field is left out on both sides, whether one side has it or both.
    """

    path: str
    reason: str


# Exceptions most tests name.
API_VERSION = Exempt("**.langgraph_api_version", "each server names its own release")
SSE_IDS = Exempt(
    "**.sse_id",
    "a run stream's event ids are opaque resume tokens: threadcast numbers every stream's "
    "events (0 the metadata, then 1, 2, …: protocol/README.md, 'Run streams') so it resumes on "
    "any instance; the reference sends ids only for a resumable run, made from times",
)


def _matches(pattern: list[str], path: tuple[str, ...]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], head) and _matches(rest, path[1:])


def _exempt(path: tuple[str, ...], exempt: list[Exempt]) -> Exempt | None:
    return next((e for e in exempt if _matches(e.path.split("."), path)), None)


def exempted(value: Any, exempt: list[Exempt], prefix: tuple[str, ...] = ()) -> Any:
    """value without the object members an Exempt names (list items: ``<exempt: reason>``)."""
    if isinstance(value, dict):
        return {
            k: exempted(v, exempt, (*prefix, str(k)))
            for k, v in value.items()
            if not _exempt((*prefix, str(k)), exempt)
        }
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            e = _exempt((*prefix, str(i)), exempt)
            out.append(f"<exempt: {e.reason}>" if e else exempted(v, exempt, (*prefix, str(i))))
        return out
    return value


def _differences(a: Any, b: Any, names: tuple[str, str], path: str = "") -> Iterator[str]:
    """Where a and b differ: one line per differing leaf, member or list length."""
    if type(a) is not type(b):
        yield f"{path or '.'}: {json.dumps(a)[:200]} != {json.dumps(b)[:200]}"
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                yield f"{path}.{k}: only in {names[0] if k in a else names[1]}"
            else:
                yield from _differences(a[k], b[k], names, f"{path}.{k}")
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            yield from _differences(x, y, names, f"{path}.{i}")
        if len(a) != len(b):
            yield f"{path}: {len(a)} items in {names[0]}, {len(b)} in {names[1]}"
    elif a != b:
        yield f"{path or '.'}: {json.dumps(a)[:200]} != {json.dumps(b)[:200]}"


def assert_same(
    expected: Any,
    got: Any,
    exempt: list[Exempt],
    names: tuple[str, str] = ("the reference", "threadcast"),
) -> None:
    """Asserts both results are equal but for the exempt fields; the message shows where not."""
    a, b = exempted(expected, exempt), exempted(got, exempt)
    if a == b:
        return
    ra = json.dumps(a, indent=1, sort_keys=True).splitlines()
    rb = json.dumps(b, indent=1, sort_keys=True).splitlines()
    diff = "\n".join(list(difflib.unified_diff(ra, rb, *names, n=2, lineterm=""))[:150])
    where = list(itertools.islice(_differences(a, b, names), 30))
    raise AssertionError(
        f"{names[1]} differs from {names[0]} at {where[0]}\n"
        + "".join(f"  and at {w}\n" for w in where[1:])
        + diff
    )


Scenario = Callable[[LangGraphClient, Server], Awaitable[Any]]


async def both(
    servers: list[Server], scenario: Scenario, exempt: list[Exempt] | tuple[Exempt, ...] = ()
) -> Any:
    """Runs scenario against each server (the reference first) and compares the results.

    Returns the reference's result, normalised (the test's exact expectations are stated on it).
    """
    results = []
    for server in servers:
        client = server.client()
        try:
            results.append(Normaliser(server)(await scenario(client, server)))
        finally:
            await client.aclose()
    for server, other in zip(servers[1:], results[1:], strict=True):
        assert_same(results[0], other, list(exempt), (servers[0].name, server.name))
    return results[0]


# ---- what scenarios collect -----------------------------------------------------------------


async def parts(stream: AsyncIterator[Any]) -> list[dict[str, Any]]:
    """A run stream's parts as sent: ``{"event", "data"}``, and ``sse_id``, the event's id, when
    the server sent one (``SSE_IDS``)."""
    out = []
    async for p in stream:
        part = {"event": p.event, "data": p.data}
        if p.id is not None:
            part["sse_id"] = p.id
        out.append(part)
    return out


def events(got: list[dict[str, Any]]) -> list[str]:
    return [p["event"] for p in got]


def transcript(values: dict[str, Any]) -> list[tuple[str, str]]:
    """The (type, text) of each message of a state's values."""
    return [(m["type"], m["content"]) for m in values.get("messages", [])]


def question(q: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": q}]}


async def attempt(awaitable: Awaitable[Any]) -> dict[str, Any]:
    """What a call answered: ``{"ok": value}``, or the HTTP error it raised (status and body)."""
    try:
        return {"ok": await awaitable}
    except httpx.HTTPStatusError as e:
        return {
            "status": e.response.status_code,
            "error": type(e).__name__,
            "body": e.response.text,
        }


async def wait_for(what: str, fn: Callable[[], Awaitable[Any]], seconds: float = 30) -> Any:
    """Polls fn until it answers something truthy; fails after that many seconds."""
    try:
        async with asyncio.timeout(seconds):
            while True:
                if value := await fn():
                    return value
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise TimeoutError(f"timed out after {seconds}s waiting for {what}") from None
