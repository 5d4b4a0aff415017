"""What an agent and a thread have spent per budget window (`GET /v1/agents/{id}/spending`,
`GET /v1/threads/{id}/spending`), over a real server: the ledger's sums, the tightest cap
of each window and what is left; read by an admin, and by an agent as the built-in tools
`agents.spending` and `threads.spending`, decided by its policy."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.conftest import BOTH, Harness, expect

STORES = BOTH
MAIL = {"to": "b@example.com", "subject": "s", "body": "b"}


def _spend(live: httpx.Client, harness: Harness, thread: str, cost: str) -> None:
    call = {"agent": "a1", "tool": "mail.send", "args": MAIL, "thread": thread,
            "expected_cost": cost}  # fmt: skip
    decided = live.post("/v1/decisions", json=call, headers=harness.auth(harness.decide))
    assert decided.status_code == 200 and decided.json()["effect"] == "allow", decided.text


def _windows(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    windows: dict[str, Any] = response.json()["windows"]
    return windows


def test_spending_per_window_with_caps_and_what_is_left(
    live: httpx.Client, harness: Harness
) -> None:
    admin = harness.auth()
    thread = live.post("/v1/threads", json={"agent": "a1", "max_cost": "5"}, headers=admin)
    thread_id = thread.json()["id"]
    before = _windows(live.get("/v1/agents/a1/spending", headers=admin))
    assert before["24h"] == {"spent": "0", "cap": "10", "remaining": "10"}  # (the profile's)
    assert before["7d"] == before["total"] == {"spent": "0", "cap": None, "remaining": None}
    _spend(live, harness, thread_id, "0.6")
    _spend(live, harness, thread_id, "0.000001")
    agent = _windows(live.get("/v1/agents/a1/spending", headers=admin))
    assert agent["24h"] == {"spent": "0.600001", "cap": "10", "remaining": "9.399999"}
    assert agent["total"]["spent"] == agent["7d"]["spent"] == "0.600001"
    spent = _windows(live.get(f"/v1/threads/{thread_id}/spending", headers=admin))
    assert spent["total"] == {"spent": "0.600001", "cap": "5", "remaining": "4.399999"}
    assert spent["24h"]["cap"] is None
    # the agent's own budget, tighter than its profile's in its window; spent past it: 0 left
    patched = live.patch("/v1/agents/a1", json={"budget": {"amount": "0.5", "period": "24h"}},
                         headers=admin)  # fmt: skip
    assert patched.status_code == 200, patched.text
    agent = _windows(live.get("/v1/agents/a1/spending", headers=admin))
    assert agent["24h"] == {"spent": "0.600001", "cap": "0.5", "remaining": "0"}


def test_who_reads_spending(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    thread_id = live.post("/v1/threads", json={"agent": "a1"}, headers=admin).json()["id"]
    # an agent's own, as its policy allows (`support` grants `agents.*`, `threads.*`)
    own = harness.auth(harness.agent_token)
    assert _windows(live.get("/v1/agents/a1/spending", headers=own))["24h"]["cap"] == "10"
    assert _windows(live.get(f"/v1/threads/{thread_id}/spending", headers=own))
    logged = live.get("/v1/decisions", params={"after_seq": "0"}, headers=admin).json()
    assert {"agents.spending", "threads.spending"} <= {d["tool"] for d in logged["decisions"]}
    # an agent whose policy grants neither, and a thread out of its reach
    harness.add_agent("n1", "narrow")
    narrow = harness.auth(harness.token_for("n1"))
    expect(live.get("/v1/agents/a1/spending", headers=narrow), 403, "denied-by-policy")
    other = live.post("/v1/threads", json={"agent": "n1"}, headers=admin).json()["id"]
    expect(live.get(f"/v1/threads/{other}/spending", headers=own), 403, "not-managed-agent")
    # not there, or not a token that manages
    expect(live.get("/v1/agents/nope/spending", headers=admin), 404, "agent-not-found")
    expect(live.get("/v1/threads/nope/spending", headers=admin), 404, "thread-not-found")
    expect(live.get("/v1/agents/a1/spending", headers=harness.auth(harness.decide)), 403,
           "insufficient-scope")  # fmt: skip
    expect(live.get("/v1/agents/a1/spending"), 401, "unauthorized")
