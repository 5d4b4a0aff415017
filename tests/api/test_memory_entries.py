"""An agent's memory over a real server (`/v1/memory`, `/v1/memory/entry`): written, read,
listed by page and deleted by an admin and by an agent's token as the built-in tools
`memory.*`, decided by its policy and logged; one agent's entries are its threads' own
and no other agent's."""

from __future__ import annotations

import httpx

from tests.api.conftest import BOTH, POLICY, Harness, expect

STORES = BOTH
KEEPER = """
role memory-user {
  allow memory.*
}
profile keeper {
  roles memory-user
  hooks none
}
"""
ENTRY = "/v1/memory/entry"


def _keepers(harness: Harness) -> tuple[dict[str, str], dict[str, str]]:
    """Two agents whose policy grants `memory.*`: each one's token."""
    with harness.service.store.atomic():
        harness.service.upload([("policy.charter", POLICY), ("keeper.charter", KEEPER)], "test")
    harness.add_agent("m1", "keeper")
    harness.add_agent("m2", "keeper")
    return harness.auth(harness.token_for("m1")), harness.auth(harness.token_for("m2"))


def test_write_read_list_delete(live: httpx.Client, harness: Harness) -> None:
    m1, m2 = _keepers(harness)
    admin = harness.auth()
    made = live.put(ENTRY, json={"path": "/notes/today", "content": "ticket 12"}, headers=m1)
    assert made.status_code == 201, made.text
    assert made.json()["agent"] == "m1" and made.json()["content"] == "ticket 12"
    again = live.put(ENTRY, json={"path": "/notes/today", "content": "ticket 13"}, headers=m1)
    assert again.status_code == 200 and again.json()["created_at"] == made.json()["created_at"]
    # the admin reads the agent's entry by naming it; the agent's own token, without
    read = live.get(ENTRY, params={"agent": "m1", "path": "/notes/today"}, headers=admin)
    assert read.status_code == 200 and read.json()["content"] == "ticket 13", read.text
    assert live.get(ENTRY, params={"path": "/notes/today"}, headers=m1).json() == read.json()
    # another agent's entries are not its own: it sees none, and may not name them
    expect(live.get(ENTRY, params={"path": "/notes/today"}, headers=m2), 404,
           "memory-entry-not-found")  # fmt: skip
    expect(live.get(ENTRY, params={"agent": "m1", "path": "/notes/today"}, headers=m2), 403,
           "not-own-agent")  # fmt: skip
    assert live.get("/v1/memory", headers=m2).json() == {"items": [], "next_cursor": None}
    # a list by prefix of whole segments, by pages
    for path in ("/notes/a", "/notesx", "/other", "/notes/b/c", "/notes/d"):
        put = live.put(ENTRY, json={"agent": "m1", "path": path, "content": "x"}, headers=admin)
        assert put.status_code == 201, put.text
    seen: list[str] = []
    cursor = None
    while True:
        params = {"path": "/notes", "limit": "2", **({"cursor": cursor} if cursor else {})}
        page = live.get("/v1/memory", params=params, headers=m1)
        assert page.status_code == 200, page.text
        seen += [item["path"] for item in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
        # the cursor is this list's: another prefix's is refused
        expect(live.get("/v1/memory", params={"path": "/other", "cursor": cursor}, headers=m1),
               400, "bad-cursor")  # fmt: skip
    assert seen == ["/notes/today", "/notes/a", "/notes/b/c", "/notes/d"]
    everything = live.get("/v1/memory", params={"agent": "m1"}, headers=admin).json()["items"]
    assert len(everything) == 6 and everything[0]["chars"] == len("ticket 13")
    # deleted: gone, and a second delete is a 404
    gone = live.delete(ENTRY, params={"path": "/notes/today"}, headers=m1)
    assert gone.status_code == 204, gone.text
    expect(live.delete(ENTRY, params={"path": "/notes/today"}, headers=m1), 404,
           "memory-entry-not-found")  # fmt: skip
    logged = live.get("/v1/decisions", params={"after_seq": "0"}, headers=admin).json()
    tools = [(d["agent"], d["tool"], d["effect"]) for d in logged["decisions"]]
    assert ("m1", "memory.write", "allow") in tools and ("m1", "memory.delete", "allow") in tools
    assert not any(agent == "m2" and tool == "memory.read" for agent, tool, _ in tools)


def test_threads_of_one_agent_share_its_memory(live: httpx.Client, harness: Harness) -> None:
    """An agent's entries are keyed by the agent, not by a thread: what one thread's
    request writes, another thread's request of the same agent reads."""
    m1, _ = _keepers(harness)
    first = live.post("/v1/threads", json={"agent": "m1"}, headers=harness.auth()).json()["id"]
    second = live.post("/v1/threads", json={"agent": "m1"}, headers=harness.auth()).json()["id"]
    assert first != second
    put = live.put(ENTRY, json={"path": "/plan", "content": "step 1"}, headers=m1)
    assert put.status_code == 201, put.text
    read = live.get(ENTRY, params={"path": "/plan"}, headers=m1)
    assert read.json()["content"] == "step 1"


def test_denied_by_policy_is_logged(live: httpx.Client, harness: Harness) -> None:
    own = harness.auth(harness.agent_token)  # `a1`: its profile grants no `memory.*`
    denied = live.put(ENTRY, json={"path": "/x", "content": "secret plans"}, headers=own)
    expect(denied, 403, "denied-by-policy")
    expect(live.get("/v1/memory", headers=own), 403, "denied-by-policy")
    logged = live.get("/v1/decisions", params={"after_seq": "0"}, headers=harness.auth()).json()
    effects = [(d["tool"], d["effect"]) for d in logged["decisions"]]
    assert effects == [("memory.write", "deny"), ("memory.list", "deny")]
    # nothing was written
    expect(live.get(ENTRY, params={"agent": "a1", "path": "/x"}, headers=harness.auth()), 404,
           "memory-entry-not-found")  # fmt: skip


def test_refusals(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    for bad in ("", "x", "/", "/a//b", "/a/", "/a\x01b", "/" + "a" * 257, "/a" * 33,
                "/" + "a/" * 600):  # fmt: skip
        put = live.put(ENTRY, json={"agent": "a1", "path": bad, "content": "x"}, headers=admin)
        expect(put, 400, "bad-memory-path")
        assert "a" * 300 not in put.text
        expect(live.get(ENTRY, params={"agent": "a1", "path": bad}, headers=admin), 400,
               "bad-memory-path")  # fmt: skip
    expect(live.get("/v1/memory", params={"agent": "a1", "path": "x"}, headers=admin), 400,
           "bad-memory-path")  # fmt: skip
    expect(live.get(ENTRY, params={"path": "/a"}, headers=admin), 400, "agent-required")
    expect(live.get(ENTRY, params={"agent": "nope", "path": "/a"}, headers=admin), 404,
           "agent-not-found")  # fmt: skip
    expect(live.get(ENTRY, params={"agent": "a1", "path": "/a"}, headers=admin), 404,
           "memory-entry-not-found")  # fmt: skip
    big = {"agent": "a1", "path": "/a", "content": "x" * 65_537}
    expect(live.put(ENTRY, json=big, headers=admin), 422, "invalid-body")
    expect(live.get(ENTRY, params={"agent": "a" * 300, "path": "/a"}, headers=admin), 400,
           "id-too-long")  # fmt: skip
    # nothing was written or logged
    assert live.get("/v1/memory", params={"agent": "a1"}, headers=admin).json()["items"] == []
    assert live.get("/v1/decisions", headers=admin).json()["decisions"] == []


def test_an_agents_entries_go_with_it(live: httpx.Client, harness: Harness) -> None:
    """An agent made later under a deleted agent's id is another agent: it finds none of
    the deleted one's entries."""
    admin = harness.auth()
    harness.add_agent("gone", "narrow")
    put = live.put(ENTRY, json={"agent": "gone", "path": "/a", "content": "x"}, headers=admin)
    assert put.status_code == 201, put.text
    assert live.delete("/v1/agents/gone", headers=admin).status_code == 204
    harness.add_agent("gone", "narrow")
    expect(live.get(ENTRY, params={"agent": "gone", "path": "/a"}, headers=admin), 404,
           "memory-entry-not-found")  # fmt: skip
    assert live.get("/v1/memory", params={"agent": "gone"}, headers=admin).json()["items"] == []
