"""The operations as requests (charter.client.operations): the long polls a wait (of an
approval, of a thread) is made of, for any timeout and any time the server holds each,
and the bodies as sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.commands import MAX_ID
from api.records import Approval, Thread
from charter.client import operations as op
from charter.client.ask import Ask, Plan

PENDING: dict[str, object] = {
    "id": "ap-1", "status": "pending", "agent": "a1", "tool": "billing.refund", "args": {},
    "thread": None, "turn": None, "connection": None, "revision": 1, "reasons": [],
    "management": False, "created_at": 1, "decided_at": None, "decided_by": None,
    "final": None,
}  # fmt: skip


RUNNING: dict[str, object] = {
    "id": "th-1", "agent": "a1", "prompt": "", "max_cost": None, "depth": 0,
    "status": "running", "created_at": 1, "updated_at": 1,
}  # fmt: skip


def _approval_wait(ask: Ask[Any]) -> int:
    assert (ask.method, ask.path) == ("GET", "/v1/approvals/ap%2F1")
    return int(dict(ask.query).get("wait", "0"))


def _thread_wait(ask: Ask[Any]) -> int:
    assert (ask.method, ask.path) == ("POST", "/v1/threads/th%2F1/wait")
    found: int = json.loads(ask.body or b"{}")["timeout"]
    return found


# What is waited on: its plan, how a poll says its wait, and its answer before and at
# its end.
WAITS: dict[str, tuple[Callable[..., Plan[Any]], Callable[[Ask[Any]], int], Callable[[bool], Any]]] = {
    "approval": (
        partial(op.wait_for_approval, "ap/1"), _approval_wait,
        lambda ended: Approval.model_validate({**PENDING, "status": "approved" if ended else "pending"}),
    ),
    "thread": (
        partial(op.wait_for_thread, "th/1"), _thread_wait,
        lambda ended: Thread.model_validate({**RUNNING, "status": "done" if ended else "running"}),
    ),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(WAITS))
@given(
    timeout=st.floats(min_value=0, max_value=500, allow_nan=False),
    held=st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=30),
    ended_at=st.integers(min_value=0, max_value=40),
)
def test_a_wait_is_long_polls_up_to_its_timeout(
    kind: str, timeout: float, held: list[float], ended_at: int
) -> None:
    """Each poll waits 1 to 60 s (0 only once no time is left), never past the timeout by
    a second or more; the plan ends when what it waits on is decided or ended, or as it
    is once the time is up."""
    waiting, wait_of, answer = WAITS[kind]
    now = [0.0]
    plan = waiting(timeout, clock=lambda: now[0])
    ask = next(plan)
    polls = 0
    while True:
        wait = wait_of(ask)
        assert ask.waits == wait and 0 <= wait <= op.MAX_WAIT
        left = timeout - now[0]
        assert wait == 0 if left <= 0 else wait >= 1 and wait - 1 < left
        # The server holds it for part of its wait (or all of it)
        now[0] += wait * held[polls % len(held)] if polls != 3 else wait
        polls += 1
        try:
            ask = plan.send(answer(polls - 1 == ended_at))
        except StopIteration as done:
            found = done.value
            break
        assert polls < 10_000
    assert found == answer(True) or now[0] >= timeout


def test_a_body_keeps_exact_numbers_and_leaves_out_what_is_not_given() -> None:
    call = op.call("a1", "billing.refund", {"amount": Decimal("0.1"), "big": 2**70},
                   expected_cost="0.25")  # fmt: skip
    sent = op.decide(call, receipt=True)
    assert sent.body is not None
    assert sent.body.decode() == (
        '{"agent":"a1","tool":"billing.refund","args":{"amount":0.1,"big":1180591620717411303424},'
        '"expected_cost":0.25}'
    )
    assert (sent.method, sent.path, sent.query) == ("POST", "/v1/decisions", (("receipt", "true"),))
    assert json.loads(op.reject("a b", None).body or b"") == {}
    assert op.reject("a b", "why").path == "/v1/approvals/a%20b/reject"


def test_a_call_is_checked_as_the_server_checks_it() -> None:
    with pytest.raises(ValueError, match="expected_cost"):
        op.call("a1", "mail.send", expected_cost=-1)
    with pytest.raises(ValueError, match="agent"):
        op.call("x" * (MAX_ID + 1), "mail.send")
