"""State: history (limit, before, metadata), update_state, a fork from a checkpoint (a run from
checkpoint_id), the state at a checkpoint, a thread's copy.
"""

from __future__ import annotations

import expected
from sbs import API_VERSION, SSE_IDS, Exempt, Server, both, parts, question, transcript

# How each saver names a checkpoint read by its id.
CHECKPOINT_READ_BY_ID = Exempt(
    "at_start.checkpoint.checkpoint_ns",
    "the reference's in-memory saver answers a checkpoint read by its id with the config it was "
    "asked with (thread and checkpoint id, no checkpoint_ns); threadcast's saver names the "
    "checkpoint in full, as LangGraph's Postgres saver (a production Python server's) does",
)


def steps(history: list[dict]) -> list[tuple[int, str, list[str]]]:
    return [(s["metadata"]["step"], s["metadata"]["source"], s["next"]) for s in history]


async def test_history_update_state_fork_and_copy(servers: list[Server]) -> None:
    q = "no tools, just answer"

    async def scenario(client, server):
        tid = (await client.threads.create(metadata={"purpose": "sbs"}))["thread_id"]
        waited = await client.runs.wait(tid, "agent", input=question(q), metadata={"tag": "first"})
        history = await client.threads.get_history(tid, limit=20)
        newest_two = await client.threads.get_history(tid, limit=2)
        before = await client.threads.get_history(
            tid, limit=2, before={"configurable": {"checkpoint_id": history[1]["checkpoint_id"]}}
        )
        tagged = await client.threads.get_history(tid, metadata={"tag": "first"})
        updated = await client.threads.update_state(
            tid,
            {"messages": [{"role": "user", "content": "an edit", "id": "edit-1"}]},
            as_node="approve",
        )
        after_update = await client.threads.get_state(tid)
        by_update = await client.threads.get_history(tid, metadata={"source": "update"})
        # Fork: run again from the checkpoint that was about to call the model.
        start = next(s for s in history if s["metadata"]["step"] == 0)
        at_start = await client.threads.get_state(tid, checkpoint_id=start["checkpoint_id"])
        forked = await parts(
            client.runs.stream(
                tid,
                "agent",
                input=None,
                checkpoint_id=start["checkpoint_id"],
                stream_mode="updates",
            )
        )
        after_fork = await client.threads.get_state(tid)
        full = await client.threads.get_history(tid, limit=50)
        copy = await client.threads.copy(tid)
        return {
            "waited": waited,
            "history": history,
            "newest_two": newest_two,
            "before": before,
            "tagged": tagged,
            "updated": updated,
            "after_update": after_update,
            "by_update": by_update,
            "at_start": at_start,
            "forked": forked,
            "after_fork": after_fork,
            "full": full,
            "copy": copy,
            "copy_state": await client.threads.get_state(copy["thread_id"]),
            "thread": await client.threads.get(tid),
        }

    r = await both(servers, scenario, [API_VERSION, SSE_IDS, CHECKPOINT_READ_BY_ID])
    answered = [("human", q), ("ai", expected.answer(q)), ("ai", expected.SUMMARY)]
    assert transcript(r["waited"]) == answered
    assert steps(r["history"]) == [
        (3, "loop", []),
        (2, "loop", ["approve"]),
        (1, "loop", ["researcher"]),
        (0, "loop", ["model"]),
        (-1, "input", ["__start__"]),
    ]
    # The run's metadata, and the thread's, are in every checkpoint it wrote.
    assert all(
        s["metadata"]["tag"] == "first" and s["metadata"]["purpose"] == "sbs" for s in r["history"]
    )
    assert r["newest_two"] == r["history"][:2]
    assert r["before"] == r["history"][2:4]
    assert r["tagged"] == r["history"]
    assert r["history"][0]["values"] == r["waited"]

    assert r["updated"]["checkpoint"]["thread_id"] == r["thread"]["thread_id"]
    assert r["after_update"]["checkpoint_id"] == r["updated"]["checkpoint_id"]
    assert r["after_update"]["next"] == []
    assert transcript(r["after_update"]["values"]) == [*answered, ("human", "an edit")]
    assert r["after_update"]["metadata"]["source"] == "update"
    assert r["after_update"]["parent_checkpoint"] == r["history"][0]["checkpoint"]
    assert steps(r["by_update"]) == [(4, "update", [])]

    assert r["at_start"]["next"] == ["model"]
    assert transcript(r["at_start"]["values"]) == [("human", q)]
    assert [list(p["data"]) for p in r["forked"][1:]] == [["model"], ["researcher"], ["approve"]]
    # The fork goes on from the old checkpoint: the edit made after it is not in its branch.
    assert transcript(r["after_fork"]["values"]) == answered
    assert steps(r["full"]) == [
        (4, "loop", []),
        (3, "loop", ["approve"]),
        (2, "loop", ["researcher"]),
        (1, "fork", ["model"]),
        (4, "update", []),
        (3, "loop", []),
        (2, "loop", ["approve"]),
        (1, "loop", ["researcher"]),
        (0, "loop", ["model"]),
        (-1, "input", ["__start__"]),
    ]
    assert r["full"][3]["parent_checkpoint_id"] == r["at_start"]["checkpoint_id"]

    assert r["copy"]["thread_id"] != r["thread"]["thread_id"]
    assert r["copy"]["metadata"]["purpose"] == "sbs"
    assert r["copy_state"]["values"] == r["after_fork"]["values"]
    assert r["thread"]["status"] == "idle"
    assert r["thread"]["values"] == r["after_fork"]["values"]
