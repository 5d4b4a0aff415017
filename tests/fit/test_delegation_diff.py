"""Delegation chains and the semantic diff."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from engine.check import check_sources, load
from engine.compile import compile_workspace
from engine.delegation import DelegationRefused, Principal, check_child, create_child, delegate_role
from engine.diff import diff_workspaces
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


def test_diff_reports_wider_and_narrower_with_counterexamples() -> None:
    text = Path(FIXTURE, "policy.charter").read_text(encoding="utf-8")
    old = check_sources([("p.charter", text)])
    new = check_sources(
        [("p.charter", text.replace("args.limit <= 50", "args.limit <= 60").replace(
            "deny agents.delete", "deny agents.delete, agents.update"))]
    )  # fmt: skip
    result = diff_workspaces(old, new)
    assert result.widened
    wider = {(c.profile, c.tool) for c in result.changes if c.direction == "wider"}
    narrower = {(c.profile, c.tool) for c in result.changes if c.direction == "narrower"}
    assert ("support", "mail.search") in wider
    assert ("support", "agents.update") in narrower
    for change in result.changes:
        assert change.counterexample is not None
    assert not diff_workspaces(old, old).changes
    assert not diff_workspaces(new, new).widened
