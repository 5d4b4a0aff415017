"""The answers a snapshot keeps for tool names it does not have (engine.unknowntools):
the same answer as one made afresh, kept for later calls under any profile, and never
more than the bound, whatever names a caller sends."""

from __future__ import annotations

import random
import string

from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Request
from engine.plan import make_unknown_tool
from engine.unknowntools import LIMIT, UnknownTools
from grammar.source import MAX_NAME_CHARS

SOURCE = """
toolset shop {
  tool refund(order: str)
}
role clerk {
  allow shop.*
}
profile a {
  roles clerk
}
profile b {
  roles clerk
}
"""


def test_an_unknown_name_is_denied_with_one_answer_kept_for_every_profile() -> None:
    snapshot = compile_workspace(check_sources([("p.charter", SOURCE)]))
    first = snapshot.decide(Request("a", "shop.nope", {"order": "o"}))
    assert first == make_unknown_tool("shop.nope")
    assert snapshot.decide(Request("b", "shop.nope", {"order": 7})) is first
    assert snapshot.decide(Request("ghost", "shop.nope", {})).reasons[0].message == (
        "unknown profile `ghost`"
    )
    assert len(snapshot._unknown) == 1
    assert snapshot.profiles["a"].plans.get("shop.nope") is None  # the index is unchanged


def test_random_names_never_keep_more_than_the_bound() -> None:
    snapshot = compile_workspace(check_sources([("p.charter", SOURCE)]))
    built = {name: len(plans.plans) for name, plans in snapshot.profiles.items()}
    rng = random.Random(7)
    for _ in range(LIMIT + 500):
        name = "".join(rng.choices(string.ascii_letters, k=12))
        decision = snapshot.decide(Request(rng.choice("ab"), name, {}))
        assert decision == make_unknown_tool(name)
    assert len(snapshot._unknown) == LIMIT
    assert {name: len(plans.plans) for name, plans in snapshot.profiles.items()} == built
    assert snapshot.decide(Request("a", "shop.refund", {"order": "o"})).effect == "allow"


def test_the_oldest_name_goes_first_and_long_names_are_not_kept() -> None:
    unknown = UnknownTools(limit=2)
    kept = unknown.answer("x")
    assert unknown.answer("x") is kept
    unknown.answer("y")
    unknown.answer("z")  # drops "x"
    assert len(unknown) == 2
    assert unknown.answer("x") is not kept
    assert unknown.answer("x") == kept
    long = "t" * (MAX_NAME_CHARS + 1)
    assert unknown.answer(long) == make_unknown_tool(long)
    assert unknown.answer(long) is not unknown.answer(long)
    assert len(unknown) == 2
