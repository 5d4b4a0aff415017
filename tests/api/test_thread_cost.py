"""A condition over `thread.cost` sees the running figure (docs/design.md section 2): the calls
of a batch or of one group commit, and the charges another process committed before the
transaction, count as they would had every call come alone, in log order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractContextManager
from decimal import Decimal
from typing import Any

import httpx
import pytest

from api import commands as c
from api.http.app import create_app
from api.service.calls import Call
from api.service.core import Service
from api.service.decide import decide_calls, prepare
from api.service.decisionlog import draft
from api.service.groupcommit import GroupCommit
from api.service.logrows import expand
from api.service.threads import threads_create
from api.service.tokens import Principal
from tests.api.conftest import BOTH, POLICY, Harness, LiveServer, counting_transactions
from tests.store.tables import sound

STORES = BOTH  # each test on SQLite and on PostgreSQL (tests/api/conftest.py)

SHOP = """
toolset shop {
  tool refund(order: str, amount: decimal)
  tool note(order: str, text: str)
}
role thread-capped {
  allow shop.refund where thread.cost < 1
  allow shop.note where thread.depth <= 3
}
hook approve-big-shop on shop.refund where args.amount > 50 {
  pause "a human approves big refunds"
}
profile tc {
  roles thread-capped
  hooks none
}
profile tc-careful {
  roles thread-capped
  hooks approve-big-shop
}
"""

EFFECTS = ["allow", "allow"] + ["deny"] * 10  # 0.6 USD a call, under 1 USD spent: two


@pytest.fixture
def shop(harness: Harness) -> Harness:
    with harness.service.store.atomic():
        harness.service.upload([("policy.charter", POLICY + SHOP)], "shop")
    harness.add_agent("buyer", "tc")
    harness.add_agent("careful", "tc-careful")
    return harness


def new_thread(service: Service, agent: str = "buyer") -> str:
    thread: str = threads_create(
        service, Principal("t", "admin"), c.CreateThread(agent=agent)
    ).body.id
    return thread


def refund(thread: str, amount: int = 1, agent: str = "buyer") -> Call:
    args = {"order": "o", "amount": amount}
    return Call(agent, "shop.refund", args, thread=thread, expected_cost=Decimal("0.6"))


def body(thread: str) -> dict[str, Any]:
    args = {"order": "o", "amount": 1}
    return {"agent": "buyer", "tool": "shop.refund", "args": args, "thread": thread,
            "expected_cost": "0.6"}  # fmt: skip


def spent(service: Service, thread: str) -> int:
    return service.store.spent(f"thread:{thread}", 0)


def logged(service: Service) -> list[tuple[int, str, str]]:
    """(seq, decision id, effect) of every row of the log."""
    rows = sound(service.store.read_decisions(0, 1000))
    return [(seq, expand(row)["id"], expand(row)["effect"]) for seq, row in rows]


def test_a_batch_sees_what_its_earlier_calls_charged_the_thread(client: Any, shop: Harness) -> None:
    service, auth = shop.service, shop.auth()
    alone = new_thread(service)
    one_by_one = [client.post("/v1/decisions", json=body(alone), headers=auth) for _ in range(4)]
    assert [r.json()["effect"] for r in one_by_one] == EFFECTS[:4]
    batched = new_thread(service)
    answer = client.post("/v1/decisions/batch", json={"calls": [body(batched)] * 4}, headers=auth)
    assert answer.status_code == 200
    decisions = answer.json()["decisions"]
    assert [d["effect"] for d in decisions] == EFFECTS[:4]  # as if they came one at a time
    assert [d["reasons"] for d in decisions] == [r.json()["reasons"] for r in one_by_one]
    assert spent(service, batched) == spent(service, alone) == 1_200_000
    assert logged(service)[4:] == [(d["seq"], d["id"], d["effect"]) for d in decisions]


def test_calls_of_one_group_commit_see_each_others_charges(shop: Harness) -> None:
    service = shop.service
    commit = GroupCommit(service)
    thread = new_thread(service)

    async def run() -> list[list[dict[str, Any]]]:
        return await asyncio.gather(*(commit.decide([refund(thread)]) for _ in range(12)))

    with counting_transactions(shop) as transactions:
        answers = asyncio.run(run())
    assert transactions[0] == 1  # one group: the calls were decided in one transaction
    decisions = sorted((a[0] for a in answers), key=lambda d: d["seq"])
    assert [d["effect"] for d in decisions] == EFFECTS  # in log order, as one at a time
    assert spent(service, thread) == 1_200_000
    assert logged(service) == [(d["seq"], d["id"], d["effect"]) for d in decisions]


def test_concurrent_requests_to_a_server_are_decided_on_the_running_cost(shop: Harness) -> None:
    """12 requests at once to uvicorn (grouped however they arrive): two allowed, the
    first two of the log, whichever way the group commit gathered them."""
    service = shop.service
    thread = new_thread(service)

    async def run(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            posts = [
                http.post("/v1/decisions", json=body(thread), headers=shop.auth())
                for _ in range(12)
            ]
            return await asyncio.gather(*posts)

    with LiveServer(create_app(service)) as url:
        responses = asyncio.run(run(url))
    assert all(r.status_code == 200 for r in responses)
    decisions = sorted((r.json() for r in responses), key=lambda d: d["seq"])
    assert [d["effect"] for d in decisions] == EFFECTS
    assert spent(service, thread) == 1_200_000
    assert logged(service) == [(d["seq"], d["id"], d["effect"]) for d in decisions]


def _commits_first(service: Service, elsewhere: Callable[[], object]) -> Callable[[], Any]:
    """`service.store.atomic`, running `elsewhere` (another process's commit) just before
    the first transaction `service` opens: after its calls were prepared, before BEGIN."""
    real = service.store.atomic
    pending = [elsewhere]

    def atomic() -> AbstractContextManager[None]:
        if pending:
            pending.pop()()
        return real()

    return atomic


@pytest.mark.parametrize("way", ["group commit", "decide_calls"])
def test_a_charge_another_process_committed_before_the_transaction_counts(
    shop: Harness, other: Service, way: str
) -> None:
    mine = shop.service
    thread = new_thread(mine)
    assert decide_calls(other, [refund(thread)])[0]["effect"] == "allow"  # 0.6 spent
    prepare(mine, [refund(thread)], {})  # this process's caches are warm: nothing to catch up

    def elsewhere() -> None:  # 0.6 < 1: allowed there, and 1.2 spent
        assert decide_calls(other, [refund(thread)])[0]["effect"] == "allow"

    mine.store.atomic = _commits_first(mine, elsewhere)  # type: ignore[method-assign]
    if way == "group commit":
        answer = asyncio.run(GroupCommit(mine).decide([refund(thread)]))
    else:
        answer = decide_calls(mine, [refund(thread)])
    assert answer[0]["effect"] == "deny" and answer[0]["seq"] == 3
    assert spent(mine, thread) == 1_200_000  # nothing charged past the condition
    assert [effect for _, _, effect in logged(mine)] == ["allow", "allow", "deny"]


def test_an_approval_recheck_sees_the_thread_cost_at_approval(client: Any, shop: Harness) -> None:
    """A big refund paused at 0 spent; two small ones spend 1.2 meanwhile; approving re-checks
    the roles on the running cost: the condition no longer holds, so the call is denied."""
    service, auth = shop.service, shop.auth()
    thread = new_thread(service, "careful")
    call = {**body(thread), "agent": "careful"}
    paused = client.post("/v1/decisions", json={**call, "args": {"order": "o", "amount": 99}},
                         headers=auth).json()  # fmt: skip
    assert paused["effect"] == "pause"
    small = [client.post("/v1/decisions", json=call, headers=auth).json() for _ in range(2)]
    assert [d["effect"] for d in small] == ["allow", "allow"]
    approved = client.post(f"/v1/approvals/{paused['approval_id']}/approve", headers=auth)
    final = approved.json()["decision"]
    assert final["effect"] == "deny" and final["reasons"][0]["kind"] == "not-granted"
    assert spent(service, thread) == 1_200_000
    assert logged(service)[-1] == (final["seq"], final["id"], "deny")


def test_only_calls_that_read_the_thread_cost_wait_for_the_transaction(shop: Harness) -> None:
    """Rows are drafted before the write transaction unless a call's outcome may depend on
    the thread's running cost (or step 6 reads a budget): a call without a thread, or one
    whose conditions never read `thread.cost`, does not pay for it."""
    service = shop.service
    thread = new_thread(service)
    note = Call("buyer", "shop.note", {"order": "o", "text": "t"}, thread=thread)
    reads_cost = Call("buyer", "shop.refund", {"order": "o", "amount": 1}, thread=thread)
    no_thread = Call("buyer", "shop.refund", {"order": "o", "amount": 1})
    for calls, outside in (([note], True), ([no_thread], True), ([note, reads_cost], False)):
        drafted = draft(service, prepare(service, calls, {}))
        assert (drafted is not None) is outside, calls
    drafted = draft(service, prepare(service, [note, no_thread], {}))
    assert drafted is not None
    # no thread: `thread.cost` cannot be read, the condition fails closed
    assert [b["effect"] for b in drafted.bodies] == ["allow", "deny"]
