"""The log's guarantee as a property: whatever requests arrive together, each answered
call is logged exactly once, as answered, with a gap-free sequence number, and a refused
request writes nothing (the group commit, drafted before BEGIN or inside it)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.http.errors import status_of
from api.service.calls import Call
from api.service.errors import ServiceError
from api.service.groupcommit import GroupCommit
from api.service.logrows import expand
from tests.api.conftest import Harness
from tests.store.tables import sound

MAIL = {"to": "bob@example.com", "subject": "hi", "body": "hello"}
# a1's profile has a budget (its calls are drafted inside the transaction), `plain`'s none
# (drafted before BEGIN); a1's hook pauses refunds over 50; `nobody` and a missing thread
# refuse the whole request.
AGENTS = st.sampled_from(["a1", "a1", "plain", "plain", "nobody"])
ARGS = st.sampled_from(
    [
        ("mail.send", MAIL),
        ("mail.send", {**MAIL, "to": "eve@elsewhere.net"}),
        ("billing.refund", {"amount": 5}),
        ("billing.refund", {"amount": 80}),
        ("billing.refund", {"amount": "not a number"}),
    ]
)


def _call(agent: str, tool_args: tuple[str, dict[str, Any]], cost: Decimal | None) -> Call:
    tool, args = tool_args
    return Call(agent, tool, args, expected_cost=cost)


CALLS = st.builds(_call, AGENTS, ARGS, st.sampled_from([None, None, Decimal("0.25")]))
LOST = CALLS.map(lambda call: call._replace(thread="t-missing"))  # an unknown thread
REQUESTS = st.lists(
    st.lists(st.one_of(CALLS, CALLS, CALLS, LOST), min_size=1, max_size=4),
    min_size=1, max_size=12,
)  # fmt: skip


def _refused(request: list[Call]) -> bool:
    return any(call.agent == "nobody" or call.thread is not None for call in request)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_every_answered_call_is_logged_once_in_order_and_refusals_write_nothing(
    harness: Harness, loop: str
) -> None:
    harness.add_agent("plain", "wide")
    commit = GroupCommit(harness.service)
    store = harness.service.store

    @settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
    @given(requests=REQUESTS)
    def check(requests: list[list[Call]]) -> None:
        before = store.last_seq()

        async def arrive_together() -> list[Any]:
            return await asyncio.gather(
                *(commit.decide(request) for request in requests), return_exceptions=True
            )

        if loop == "uvloop":
            results = pytest.importorskip("uvloop").run(arrive_together())
        else:
            results = asyncio.run(arrive_together())
        answered: list[dict[str, Any]] = []
        for request, result in zip(requests, results, strict=True):
            if _refused(request):
                assert isinstance(result, ServiceError) and status_of(result.code) == 404, result
                continue
            assert isinstance(result, list), result
            assert len(result) == len(request)
            answered += result
        logged = sound(store.read_decisions(before, 10_000))
        assert [seq for seq, _ in logged] == list(range(before + 1, before + 1 + len(answered)))
        by_seq = {seq: expand(row) for seq, row in logged}
        assert sorted(body["seq"] for body in answered) == sorted(by_seq)  # each once
        for body in answered:
            row = by_seq[body["seq"]]
            assert (row["id"], row["effect"], row["revision"]) == (
                body["id"], body["effect"], body["revision"],
            )  # fmt: skip
            if body["effect"] == "pause":
                approval = store.get("approvals", body["approval_id"])
                assert approval is not None and approval["status"] == "pending"
                assert row["approval"] == body["approval_id"]

    check()
