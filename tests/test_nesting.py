"""The nesting limit (E0013) counts exactly what docs/errors.md says: one level for each
`not`, `and`, `or`, comparison, function call, list and map; parentheses, paths and
literals add none, and neither do the declaration and rule around a condition. The fast
path (`grammar.parser._run`) and lark's tree check (`_check_shape`) agree at every depth."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grammar.parser import DEFAULT_OPTIONS, _check_shape, _diagnose, parse
from grammar.tables import lark_parser
from policy.diagnostics import CharterSyntaxError

LIMIT = DEFAULT_OPTIONS.max_depth

# Each wraps a condition in exactly one more level.
WRAPPERS = (
    "not ({})",
    "args.b and ({})",
    "({}) and args.b",
    "({}) or true",
    "false or ({})",
    "({}) == 1",
    "args.a != ({})",
    "({}) not in args.l",
    "len({})",
    "f(1, {})",
    "[{}]",
    "[1, {}, 2]",
)
# Where a condition may stand.
PLACES = (
    "role a {{\n  allow search where {}\n}}\n",
    "hook h on search where {} {{\n  pause\n}}\n",
    "hook h on search {{\n  rewrite args.limit = {}\n}}\n",
)


@st.composite
def nested(draw: st.DrawFn) -> tuple[int, str]:
    """(levels, a file whose deepest condition has exactly that many levels)."""
    levels = draw(st.integers(0, LIMIT + 12))
    compare = levels > 0 and draw(st.booleans())
    text = "args.limit < 3" if compare else draw(st.sampled_from(["true", "args.x", '"s"']))
    for _ in range(levels - compare):
        text = draw(st.sampled_from(WRAPPERS)).format(text)
        if draw(st.integers(0, 4)) == 0:
            text = f"({text})"  # parentheses add no level
    place = draw(st.sampled_from(PLACES)).format(text)
    shallow = "role z {\n  allow search where not (args.q == 1)\n}\n"
    return levels, draw(st.sampled_from(["", shallow])) + place


def accepted(text: str) -> bool:
    try:
        parse(text, "f.charter")
    except CharterSyntaxError as exc:
        assert [d.code for d in exc.diagnostics] == ["E0013"], exc.diagnostics
        assert f"limit of {LIMIT} levels" in exc.diagnostics[0].message
        # what the fast path reports is what lark's tree check finds
        assert exc.diagnostics == _diagnose(text, "f.charter", DEFAULT_OPTIONS)
        return False
    return True


@given(nested())
def test_a_condition_is_accepted_iff_it_is_within_the_limit(case: tuple[int, str]) -> None:
    levels, text = case
    assert accepted(text) == (levels <= LIMIT), text
    shape = _check_shape(lark_parser().parse(text), "f.charter", DEFAULT_OPTIONS)
    assert (shape == []) == (levels <= LIMIT)


def test_the_reported_case_45_nots_and_a_comparison_is_accepted() -> None:
    for nots in (44, 45, LIMIT - 1):
        assert accepted(f"role a {{ allow search where {'not ' * nots}args.limit < 3 }}")
    assert not accepted(f"role a {{ allow search where {'not ' * LIMIT}args.limit < 3 }}")


@pytest.mark.parametrize(
    ("place", "wrapper", "leaf"),
    [
        # test arguments and defaults: each map and list is a level, keys are not
        ('test "t" {{\n  profile p\n  expect allow search {}\n}}\n', "{{a: {}}}", "1"),
        ("toolset t {{\n  tool f(a: map = {})\n}}\n", "{{a: {}}}", "1"),
        ("toolset t {{\n  tool f(a: list[int] = {})\n}}\n", "[1, {}]", "1"),
        # types: each `list[...]` is a level
        ("toolset t {{\n  tool f(a: {})\n}}\n", "list[{}]", "str"),
    ],
    ids=["test-args", "default-map", "default-list", "list-type"],
)
def test_values_and_types_count_a_level_per_list_and_map(
    place: str, wrapper: str, leaf: str
) -> None:
    for levels in (1, LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 5):
        text = leaf
        for _ in range(levels):
            text = wrapper.format(text)
        assert accepted(place.format(text)) == (levels <= LIMIT), levels
