"""The forms of graph the Python server serves, and what a graph reaches: the store (a graph puts,
the SDK reads; the SDK puts, the graph reads), factories of the config, of the server runtime and
of both (sync and async; a StateGraph the server compiles), langgraph.json's env.
"""

from __future__ import annotations

import uuid

import pytest

from sbs import API_VERSION, SSE_IDS, Exempt, Server, both, parts

# The store is shared by both languages' graphs and keeps one order (protocol/README.md, "The
# store: records in Redis"): a search's items are compared as a set, their order apart.
STORE_ORDER = Exempt(
    "search_order",
    "a search without a query answers the items in no order the Store API promises: langgraph "
    "dev's in-memory store in the order they were first put (LangGraph's Postgres store: newest "
    "update first); threadcast's store, which JavaScript and Python graphs share, in the byte "
    "order of namespace and key",
)


async def test_the_store_from_a_graph(servers: list[Server]) -> None:
    async def scenario(client, server):
        user = str(uuid.uuid4())
        namespace = ["memories", user]
        await client.store.put_item(namespace, "preference", {"likes": "tea"})
        tid = (await client.threads.create())["thread_id"]
        streamed = await parts(
            client.runs.stream(
                tid, "memory", input={"user": user, "fact": "likes seals"}, stream_mode="updates"
            )
        )
        found = await client.store.search_items(namespace)
        return {
            "streamed": streamed,
            "item": await client.store.get_item(namespace, "fact"),
            "search": {**found, "items": sorted(found["items"], key=lambda i: i["key"])},
            "search_order": [i["key"] for i in found["items"]],
            "namespaces": await client.store.list_namespaces(prefix=namespace),
        }

    r = await both(servers, scenario, [API_VERSION, SSE_IDS, STORE_ORDER])
    assert [(p["event"], p["data"]) for p in r["streamed"][1:]] == [
        ("updates", {"remember": None}),
        (
            "updates",
            {
                "recall": {
                    "remembered": {
                        "namespace": ["memories", r["item"]["namespace"][1]],
                        "key": "fact",
                        "value": {"text": "likes seals"},
                    },
                    "found": ["fact", "preference"],
                }
            },
        ),
    ]
    assert r["item"]["key"] == "fact" and r["item"]["value"] == {"text": "likes seals"}
    assert r["item"]["namespace"][0] == "memories" and r["item"]["namespace"][1].startswith("<id:")
    assert [(i["key"], i["value"], i["score"]) for i in r["search"]["items"]] == [
        ("fact", {"text": "likes seals"}, None),
        ("preference", {"likes": "tea"}, None),
    ]
    assert r["namespaces"] == {"namespaces": [r["item"]["namespace"]]}


@pytest.mark.parametrize(
    "graph,built_with",
    [
        (
            "from_config",
            {"form": "config", "persona": "plain", "greeting": "hello from langgraph.json"},
        ),
        (
            "from_runtime",
            {
                "form": "runtime",
                "access_context": "threads.create_run",
                "executing": True,
                "has_store": True,
            },
        ),
        (
            "from_both",
            {
                "form": "config and runtime",
                "persona": "plain",
                "access_context": "threads.create_run",
            },
        ),
    ],
)
async def test_graph_factories(servers: list[Server], graph: str, built_with: dict) -> None:
    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        waited = await client.runs.wait(tid, graph, input={"question": "why"})
        return {"waited": waited, "state": await client.threads.get_state(tid)}

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    assert r["waited"] == {"question": "why", "built_with": built_with, "answer": "why: answered"}
    assert r["state"]["values"] == r["waited"]
    assert r["state"]["next"] == []


async def test_a_factory_is_given_the_assistants_config(servers: list[Server]) -> None:
    """An assistant's configurable reaches the factory of the config, per run."""

    async def scenario(client, server):
        assistant = await client.assistants.create(
            "from_both", config={"configurable": {"persona": "pirate"}}, name="pirate"
        )
        tid = (await client.threads.create())["thread_id"]
        by_assistant = await client.runs.wait(
            tid, assistant["assistant_id"], input={"question": "ahoy"}
        )
        by_run = await client.runs.wait(
            tid,
            "from_config",
            input={"question": "hello"},
            config={"configurable": {"persona": "poet"}},
        )
        return {"assistant": assistant, "by_assistant": by_assistant, "by_run": by_run}

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    assert r["by_assistant"]["built_with"] == {
        "form": "config and runtime",
        "persona": "pirate",
        "access_context": "threads.create_run",
    }
    assert r["by_run"]["built_with"] == {
        "form": "config",
        "persona": "poet",
        "greeting": "hello from langgraph.json",
    }
    assert r["assistant"]["graph_id"] == "from_both"
    assert r["assistant"]["config"] == {"configurable": {"persona": "pirate"}}


async def test_a_state_graph_compiled_by_the_server(servers: list[Server]) -> None:
    """counter is exported as a StateGraph; its nodes alternate async (tick) and sync (tock)."""

    async def scenario(client, server):
        tid = (await client.threads.create())["thread_id"]
        streamed = await parts(
            client.runs.stream(
                tid, "counter", input={"until": 4, "delay_ms": 1}, stream_mode="updates"
            )
        )
        return {"streamed": streamed, "graph": await client.assistants.get_graph("counter")}

    r = await both(servers, scenario, [API_VERSION, SSE_IDS])
    assert [p["data"] for p in r["streamed"][1:]] == [
        {"tick": {"count": 1, "trail": ["tick"]}},
        {"tock": {"count": 2, "trail": ["tock"]}},
        {"tick": {"count": 3, "trail": ["tick"]}},
        {"tock": {"count": 4, "trail": ["tock"]}},
    ]
    assert sorted(n["id"] for n in r["graph"]["nodes"]) == ["__end__", "__start__", "tick", "tock"]
