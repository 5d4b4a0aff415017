"""`POST /v1/decisions/{id}/cost`: an allowed call's cost, reported once it ran, charged to
its agent's (and ancestors' and thread's) budgets, once, even past a cap; on a real
server, on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx

from api import commands as c
from api.service.resources import create_agent
from api.service.tokens import Principal
from tests.api.conftest import BOTH, Harness, expect

STORES = BOTH


def decide(live: httpx.Client, harness: Harness, tool: str, **args: Any) -> dict[str, Any]:
    answer = live.post(
        "/v1/decisions",
        headers=harness.auth(harness.decide),
        json={"agent": "a1", "tool": tool, "args": args},
    )
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def report(
    live: httpx.Client, harness: Harness, decision: dict[str, Any], amount: Any, token: str = ""
) -> httpx.Response:
    return live.post(
        f"/v1/decisions/{decision['id']}/cost",
        headers=harness.auth(token or harness.decide),
        json={"seq": decision["seq"], "amount": amount},
    )


def test_a_reported_cost_is_charged_once_and_past_the_cap(
    harness: Harness, live: httpx.Client
) -> None:
    # (profile `support`: budget 10 USD per 24h; a child's spending counts against it)
    made = c.CreateAgent.model_validate(
        {"name": "kid", "profile": "support-child", "identity": harness.identity}
    )
    create_agent(harness.service, Principal("t", "agent", "a1"), made, "kid")  # (a1's child)
    # a child's cost is charged to its ancestors too
    kid = live.post(
        "/v1/decisions",
        headers=harness.auth(harness.decide),
        json={"agent": "kid", "tool": "mail.send",
              "args": {"to": "x@example.com", "subject": "s", "body": "b"}},
    ).json()  # fmt: skip
    assert kid["effect"] == "allow"
    assert report(live, harness, kid, "0.25").json()["charged"] == ["agent:kid", "agent:a1"]
    expect(report(live, harness, kid, "0.5"), 409, "cost-already-reported")
    first = decide(live, harness, "billing.refund", amount=10)
    assert first["effect"] == "allow"
    charged = report(live, harness, first, "9.5000001")
    assert charged.status_code == 201, charged.text
    record = charged.json()
    assert record["micros"] == 9_500_001 and record["charged"] == ["agent:a1"]
    assert record["amount"] == "9.5000001" and record["agent"] == "a1"
    assert record["decision"] == first["id"] and record["by"]
    # within the cap still: allowed, and its cost takes the spending past it
    second = decide(live, harness, "billing.refund", amount=5)
    assert second["effect"] == "allow"
    assert report(live, harness, second, 2, harness.agent_token).status_code == 201
    assert harness.service.store.spent("agent:a1", 0) == 11_750_001
    assert harness.service.store.spent("agent:kid", 0) == 250_000
    # over the cap: the next call is denied by the budget
    third = decide(live, harness, "billing.refund", amount=1)
    assert third["effect"] == "deny"
    assert [r["kind"] for r in third["reasons"]][-1] == "budget"
    assert "profile `support` budget 10 USD per 24h" in third["reasons"][-1]["message"]
    # a second report of one decision is refused and charges nothing
    expect(report(live, harness, first, 1), 409, "cost-already-reported")
    assert harness.service.store.spent("agent:a1", 0) == 11_750_001


def test_what_is_refused(harness: Harness, live: httpx.Client) -> None:
    allowed = decide(live, harness, "billing.refund", amount=10)
    denied = decide(live, harness, "mail.send", to="x@evil.test", subject="s", body="b")
    paused = decide(live, harness, "billing.refund", amount=80)
    assert (denied["effect"], paused["effect"]) == ("deny", "pause")
    unknown = {"id": str(uuid.uuid4()), "seq": allowed["seq"]}
    expect(report(live, harness, unknown, 1), 404, "decision-not-found")
    expect(report(live, harness, {**allowed, "seq": 99}, 1), 404, "decision-not-found")
    expect(report(live, harness, {**allowed, "seq": denied["seq"]}, 1), 404, "decision-not-found")
    expect(report(live, harness, denied, 1), 409, "decision-not-allowed")
    expect(report(live, harness, paused, 1), 409, "decision-not-allowed")
    for amount in (-1, "-0.5", "1e10", "abc", " 5", None, True, "NaN"):
        expect(report(live, harness, allowed, amount), 422, "invalid-body")
    bad_seq = live.post(
        f"/v1/decisions/{allowed['id']}/cost",
        headers=harness.auth(harness.decide),
        json={"seq": 0, "amount": 1},
    )
    expect(bad_seq, 422, "invalid-body")
    other = harness.token_for(harness.add_agent("a2", "support"))
    expect(report(live, harness, allowed, 1, other), 403, "insufficient-scope")
    unauthorized = live.post(f"/v1/decisions/{allowed['id']}/cost", json={"seq": 1, "amount": 1})
    expect(unauthorized, 401, "unauthorized")
    # nothing was charged by any of them
    assert harness.service.store.spent("agent:a1", 0) == 0
    # a cost of 0 is recorded (a second report is refused), and charges nothing
    assert report(live, harness, allowed, 0, harness.admin).json()["micros"] == 0
    expect(report(live, harness, allowed, 1), 409, "cost-already-reported")
    assert harness.service.store.spent("agent:a1", 0) == 0


def test_reports_sent_together_charge_once(harness: Harness, live: httpx.Client) -> None:
    """Eight reports of one decision at once, each on a connection of its own: one is
    charged, seven refused."""
    allowed = decide(live, harness, "billing.refund", amount=10)
    url = str(live.base_url)
    statuses: list[int] = []

    def send() -> None:
        with httpx.Client(base_url=url, timeout=30) as own:
            statuses.append(report(own, harness, allowed, "0.3").status_code)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201] + [409] * 7
    assert harness.service.store.spent("agent:a1", 0) == 300_000
