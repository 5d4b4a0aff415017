"""engine.decision: the fast constructors build the same values as the readable ones."""

from __future__ import annotations

import dataclasses

import pytest

from engine.decision import Decision, Reason, Request, make_decision


def test_the_quick_init_keeps_request_a_frozen_dataclass() -> None:
    fields = ("p", "mail.send", {"to": "a"}, {"k": 1}, {"id": "ag"}, {"id": "th"})
    fast = Request(*fields)  # through policy.quickinit's __init__
    assert type(fast) is Request
    assert fast == Request(profile="p", tool="mail.send", args={"to": "a"}, context={"k": 1},
                           agent={"id": "ag"}, thread={"id": "th"})  # fmt: skip
    assert Request("p", "t").args == {} and Request("p", "t").args is not Request("p", "t").args
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.tool = "other"  # type: ignore[misc]
    assert dataclasses.replace(fast, tool="x").tool == "x"


def test_decision_fields_by_name_and_position() -> None:
    reason = Reason("deny", "denied by role `r`", role="r")
    decision = make_decision("deny", None, (reason,))
    assert decision == Decision(("deny", None, (reason,), (), ()))
    assert (decision.effect, decision.args, decision.reasons) == ("deny", None, (reason,))
    assert decision.errors == () and decision.near_misses == () and not decision.allowed
    with pytest.raises(AttributeError):
        decision.effect = "allow"  # type: ignore[misc]
