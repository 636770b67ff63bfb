"""The JavaScript SDK (@langchain/langgraph-sdk 1.15.0) against both servers: js/sdk-stream.mjs
streams a run with messages-tuple + values + updates and joins a background run's stream; what it
received is compared as the Python SDK's results are.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import expected
from sbs import API_VERSION, SSE_IDS, Server, both

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "js" / "sdk-stream.mjs"
SDK = HERE.parent / "integration" / "node_modules" / "@langchain" / "langgraph-sdk"


async def run_script(server: Server) -> dict:
    assert SDK.is_dir(), "the JavaScript SDK is not installed: (cd tests/integration && npm ci)"
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(SCRIPT),
        server.url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, f"sdk-stream.mjs exited {proc.returncode}: {err.decode()}"
    got = json.loads(out)
    # The SDK's chunks carry the SSE event id as "id": named as sbs.parts names it.
    for key in ("streamed", "joined"):
        for chunk in got[key]:
            if "id" in chunk:
                chunk["sse_id"] = chunk.pop("id")
    # Ids must be there to resume a resumable run's stream, whatever they are.
    got["joined_has_ids"] = all("sse_id" in c for c in got["joined"])
    return got


def collapsed(names: list[str]) -> list[str]:
    """names with each run of one name written once."""
    return [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]


def texts(chunks: list[dict]) -> str:
    return "".join(
        c["data"][0]["content"]
        for c in chunks
        if c["event"] == "messages" and c["data"][0]["type"] == "AIMessageChunk"
    )


async def test_js_sdk_stream_and_join_stream(servers: list[Server]) -> None:
    r = await both(servers, lambda c, s: run_script(s), [API_VERSION, SSE_IDS])
    names = [c["event"] for c in r["streamed"]]
    assert names[0] == "metadata"
    assert set(names[1:]) == {"messages", "values", "updates"}
    assert names.count("values") == 5 and names.count("updates") == 5
    assert texts(r["streamed"]) == "".join(expected.tokens("what is redis"))
    joined_names = [c["event"] for c in r["joined"]]
    # The joined run is the same kind of turn: the same events in the same order, but for the
    # number of tokens (its question is shorter).
    assert collapsed(joined_names) == collapsed(names)
    assert joined_names.count("values") == 5 and joined_names.count("updates") == 5
    assert texts(r["joined"]) == "".join(expected.tokens("and valkey?"))
    assert r["joined_has_ids"], "a resumable run's events carry ids"
    final = [(m["type"], m["content"]) for m in r["state"]["values"]["messages"]]
    assert final == [*expected.transcript("what is redis"), *expected.transcript("and valkey?")]
    assert r["thread"]["status"] == "idle"
