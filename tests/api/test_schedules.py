"""Schedules over a real server (`/v1/schedules`): made, read, listed by page, changed and
deleted by an admin and by an agent's token as the built-in tools `schedules.*`, decided by
its policy and logged; each answered with its next run; a bad cron changes nothing."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import httpx

from api.service import cron
from tests.api.conftest import BOTH, POLICY, Harness, expect

STORES = BOTH
PLANNER = """
role scheduler {
  allow schedules.*
}
profile planner {
  roles scheduler
  hooks none
}
"""
BASE = "/v1/schedules"


def _planners(harness: Harness) -> tuple[dict[str, str], dict[str, str]]:
    """Two agents whose policy grants `schedules.*`: each one's token."""
    with harness.service.store.atomic():
        harness.service.upload([("policy.charter", POLICY), ("planner.charter", PLANNER)], "t")
    harness.add_agent("s1", "planner")
    harness.add_agent("s2", "planner")
    return harness.auth(harness.token_for("s1")), harness.auth(harness.token_for("s2"))


def _next_run_checked(answer: dict[str, object], before_ms: int) -> None:
    """The answer's `next_run`: a minute after `before_ms` that its cron matches."""
    next_run = answer["next_run"]
    assert isinstance(next_run, int) and next_run > before_ms and next_run % 60_000 == 0
    at = datetime.fromtimestamp(next_run / 1000, UTC)
    assert cron.parse(str(answer["cron"])).matches(at)


def test_create_get_update_list_delete(live: httpx.Client, harness: Harness) -> None:
    s1, s2 = _planners(harness)
    admin = harness.auth()
    before = int(time.time() * 1000)
    body = {"name": "nightly", "cron": "0 2 * * *", "prompt": "sum up the day"}
    made = live.post(BASE, json=body, headers=s1)
    assert made.status_code == 201, made.text
    schedule = made.json()
    assert schedule["agent"] == "s1" and schedule["prompt"] == "sum up the day"
    _next_run_checked(schedule, before)
    one = f"{BASE}/{schedule['id']}"
    got = live.get(one, headers=admin)
    assert got.status_code == 200 and got.json()["cron"] == "0 2 * * *", got.text
    changed = live.patch(one, json={"cron": "*/15 9-17 * * 1-5"}, headers=s1)
    assert changed.status_code == 200, changed.text
    assert changed.json()["cron"] == "*/15 9-17 * * 1-5"
    assert changed.json()["prompt"] == "sum up the day"  # (not sent: unchanged)
    _next_run_checked(changed.json(), before)
    # another agent neither reads nor changes it, nor makes one for s1
    expect(live.get(one, headers=s2), 403, "not-managed-agent")
    expect(live.patch(one, json={"prompt": "x"}, headers=s2), 403, "not-managed-agent")
    expect(live.post(BASE, json={**body, "agent": "s1"}, headers=s2), 403, "not-own-agent")
    assert live.get(BASE, headers=s2).json() == {"items": [], "next_cursor": None}
    # an admin names the agent; a list by pages
    for n in range(4):
        more = live.post(BASE, json={**body, "name": f"n{n}", "agent": "s1"}, headers=admin)
        assert more.status_code == 201, more.text
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = live.get(BASE, params=params, headers=s1)
        assert page.status_code == 200, page.text
        seen += [item["name"] for item in page.json()["items"]]
        for item in page.json()["items"]:
            _next_run_checked(item, before)
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
        expect(live.get(BASE, params={"agent": "s2", "cursor": cursor}, headers=admin), 400,
               "bad-cursor")  # fmt: skip
    assert seen == ["nightly", "n0", "n1", "n2", "n3"]
    assert len(live.get(BASE, params={"agent": "s1"}, headers=admin).json()["items"]) == 5
    # deleted: gone, and a second delete is a 404
    assert live.delete(one, headers=s1).status_code == 204
    expect(live.delete(one, headers=s1), 404, "schedule-not-found")
    expect(live.get(one, headers=admin), 404, "schedule-not-found")
    logged = live.get("/v1/decisions", params={"after_seq": "0"}, headers=admin).json()
    tools = [(d["agent"], d["tool"], d["effect"]) for d in logged["decisions"]]
    for tool in ("create", "update", "list", "delete"):
        assert ("s1", f"schedules.{tool}", "allow") in tools
    # (s2's refusals were made before deciding: not logged)
    assert not any(agent == "s2" and tool != "schedules.list" for agent, tool, _ in tools)


def test_denied_by_policy_is_logged(live: httpx.Client, harness: Harness) -> None:
    own = harness.auth(harness.agent_token)  # `a1`: its profile grants no `schedules.*`
    body = {"name": "n", "cron": "* * * * *", "prompt": "p"}
    expect(live.post(BASE, json=body, headers=own), 403, "denied-by-policy")
    expect(live.get(BASE, headers=own), 403, "denied-by-policy")
    admin = harness.auth()
    logged = live.get("/v1/decisions", params={"after_seq": "0"}, headers=admin).json()
    effects = [(d["agent"], d["tool"], d["effect"]) for d in logged["decisions"]]
    assert effects == [("a1", "schedules.create", "deny"), ("a1", "schedules.list", "deny")]
    assert live.get(BASE, headers=admin).json()["items"] == []


def test_refusals_change_nothing(live: httpx.Client, harness: Harness) -> None:
    s1, _ = _planners(harness)
    admin = harness.auth()
    body = {"name": "n", "cron": "0 9 * * *", "prompt": "p", "agent": "s1"}
    made = live.post(BASE, json=body, headers=admin).json()
    one = f"{BASE}/{made['id']}"
    for bad in ("", "* * * *", "60 * * * *", "* * 32 * *", "5-1 * * * *", "*/0 * * * *",
                "* * * 13 *", "* * * * 8", "a b c d e", "* " * 200):  # fmt: skip
        expect(live.post(BASE, json={**body, "cron": bad}, headers=admin), 400, "invalid-cron")
        expect(live.post(BASE, json={**body, "cron": bad}, headers=s1), 400, "invalid-cron")
        expect(live.patch(one, json={"cron": bad}, headers=s1), 400, "invalid-cron")
    unknown = f"{BASE}/00000000-0000-4000-8000-000000000000"
    expect(live.get(unknown, headers=admin), 404, "schedule-not-found")
    expect(live.patch(unknown, json={"prompt": "x"}, headers=s1), 404, "schedule-not-found")
    expect(live.delete(unknown, headers=admin), 404, "schedule-not-found")
    expect(live.post(BASE, json={k: v for k, v in body.items() if k != "agent"},
                     headers=admin), 400, "agent-required")  # fmt: skip
    expect(live.post(BASE, json={**body, "agent": "nope"}, headers=admin), 404,
           "agent-not-found")  # fmt: skip
    expect(live.post(BASE, json={"name": "n", "prompt": "p"}, headers=admin), 422,
           "invalid-body")  # fmt: skip
    # nothing was changed, made or logged
    items = live.get(BASE, headers=admin).json()["items"]
    assert [(item["id"], item["cron"]) for item in items] == [(made["id"], "0 9 * * *")]
    assert live.get("/v1/decisions", headers=admin).json()["decisions"] == []


def test_a_schedule_with_no_run_within_a_year(live: httpx.Client, harness: Harness) -> None:
    body = {"name": "never", "cron": "0 0 31 2 *", "prompt": "p", "agent": "a1"}
    made = live.post(BASE, json=body, headers=harness.auth())
    assert made.status_code == 201, made.text
    assert made.json()["next_run"] is None


def test_an_agents_schedules_go_with_it(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    harness.add_agent("gone", "narrow")
    body = {"name": "n", "cron": "* * * * *", "prompt": "p", "agent": "gone"}
    made = live.post(BASE, json=body, headers=admin)
    assert made.status_code == 201, made.text
    assert live.delete("/v1/agents/gone", headers=admin).status_code == 204
    expect(live.get(f"{BASE}/{made.json()['id']}", headers=admin), 404, "schedule-not-found")
    assert live.get(BASE, params={"agent": "gone"}, headers=admin).json()["items"] == []
