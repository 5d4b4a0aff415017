"""Delegation chains (the semantic diff: test_diff.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from engine.check import load
from engine.compile import compile_workspace
from engine.delegation import DelegationRefused, Principal, check_child, create_child, delegate_role
from policy import ast

FIXTURE = "fixtures/fit"


def _root() -> Principal:
    return Principal("acct-1", compile_workspace(load([FIXTURE])), "support")


def test_a_child_inherits_identity_and_a_chain_only_shrinks() -> None:
    root = _root()
    child = create_child(root, "helper", budget=ast.Budget(Decimal(1), "24h"))
    grandchild = create_child(child, "helper", budget=ast.Budget(Decimal("0.5"), "24h"))
    great = create_child(grandchild, "helper", budget=ast.Budget(Decimal("0.25"), "7d"))
    assert {p.identity for p in great.chain()} == {"acct-1"}
    assert len(great.chain()) == 4
    with pytest.raises(DelegationRefused) as info:
        create_child(great, "helper", budget=ast.Budget(Decimal(1), "24h"))  # looser
    assert {v.kind for v in info.value.result.violations} == {"budget"}


def test_a_child_may_not_take_another_identity_or_widen() -> None:
    root = _root()
    result = check_child(root, "helper", identity="acct-2")
    assert [v.kind for v in result.violations] == ["identity"]
    loose = check_child(root, "loose")
    assert {"drops-deny", "drops-hook", "budget"} <= {v.kind for v in loose.violations}


def test_delegating_a_role() -> None:
    root = _root()
    narrow = 'role t { allow mail.send where args.to == "a@example.com" and len(args.cc) == 0 }'
    assert delegate_role(root, narrow).fits
    assert not delegate_role(root, "role t { allow mail.send }").fits
