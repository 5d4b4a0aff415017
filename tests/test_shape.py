"""Argument validation as generated into the run functions (engine.shape, engine.runfns):
list checks on both sides of the short-list cut, and defaults filled in a copy only when
missing. The property tests draw lists of at most three items; these cover long ones."""

from __future__ import annotations

from typing import Any

import pytest

from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.decision import Decision, Request
from engine.shape import _SHORT_LIST

SOURCE = """
toolset box {
  tool put(names: list[str], counts: list[int] = [], flags?: list[bool], tag: str = "t")
  tool note(text: str, level: int = 1, extra?: str)
}
role user {
  allow box.*
}
profile p {
  roles user
  hooks none
}
"""


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    return compile_workspace(check_sources([("box.charter", SOURCE)]))


def decide(snapshot: Snapshot, tool: str, args: Any) -> Decision:
    return snapshot.decide(Request("p", tool, args))


@pytest.mark.parametrize("size", [0, 1, _SHORT_LIST - 1, _SHORT_LIST, 50])
def test_lists_of_any_length_pass(snapshot: Snapshot, size: int) -> None:
    args = {"names": [f"n{i}" for i in range(size)], "counts": list(range(size))}
    decision = decide(snapshot, "box.put", args)
    assert decision.effect == "allow"
    assert decision.args == {**args, "tag": "t"}


@pytest.mark.parametrize("size", [1, _SHORT_LIST - 1, _SHORT_LIST, 50])
@pytest.mark.parametrize(
    ("name", "bad", "shown"),
    [("names", 7, "list[str]"), ("counts", True, "list[int]"), ("flags", 1, "list[bool]")],
)
def test_one_wrong_item_anywhere_denies(
    snapshot: Snapshot, size: int, name: str, bad: Any, shown: str
) -> None:
    good = {"names": "x", "counts": 1, "flags": False}[name]
    items = [good] * (size - 1) + [bad]  # the wrong item last: every item is looked at
    args: dict[str, Any] = {"names": ["a"], name: items}
    decision = decide(snapshot, "box.put", args)
    assert decision.effect == "deny"
    assert decision.reasons[0].kind == "shape"
    assert f"argument `{name}` of `box.put` must be `{shown}`" in decision.reasons[0].message


def test_not_a_list_denies(snapshot: Snapshot) -> None:
    decision = decide(snapshot, "box.put", {"names": ("a", "b")})
    assert decision.effect == "deny"
    assert "must be `list[str]`, got a" in decision.reasons[0].message


def test_defaults_fill_a_copy_only_when_missing(snapshot: Snapshot) -> None:
    given = {"text": "hi"}
    decision = decide(snapshot, "box.note", given)
    assert decision.args == {"text": "hi", "level": 1}
    assert given == {"text": "hi"}  # the caller's dict is never changed
    # A missing optional argument without a default never overwrites a given one.
    decision = decide(snapshot, "box.note", {"text": "hi", "level": 5})
    assert decision.args == {"text": "hi", "level": 5}
    full = {"text": "hi", "level": 5, "extra": "e"}
    assert decide(snapshot, "box.note", full).args is full  # nothing to fill: no copy


def test_mutable_defaults_are_fresh_per_call(snapshot: Snapshot) -> None:
    first = decide(snapshot, "box.put", {"names": []}).args
    assert first is not None
    first["counts"].append(99)
    second = decide(snapshot, "box.put", {"names": []}).args
    assert second is not None and second["counts"] == []
