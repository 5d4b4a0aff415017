"""The canonical formatter: one layout, idempotent, comments kept, same tree back."""

from __future__ import annotations

from pathlib import Path

import pytest

from grammar.fmt import expr_text, format_file
from grammar.parser import parse
from policy import ast

WORKSPACE = Path(__file__).resolve().parent.parent / "fixtures" / "workspace"
FIXTURES = sorted(WORKSPACE.glob("*.charter"))


def fmt(text: str) -> str:
    return format_file(parse(text, "f.charter"))


def test_canonical_layout() -> None:
    messy = (
        'role   a{allow search,web_search   where args.query=="x"and(args.limit<3 or not args.limit>9)\n'
        "deny agents.delete}\n"
        "profile p{roles a,b hooks default,h budget 5.50 usd per 7d}\n"
        'test "t"{profile p expect allow search{query:"x","a b":[1,2]}context{ip:"1"}}'
    )
    assert fmt(messy) == (
        "role a {\n"
        '  allow search, web_search where args.query == "x" and (args.limit < 3 or not (args.limit > 9))\n'
        "  deny agents.delete\n"
        "}\n"
        "\n"
        "profile p {\n"
        "  roles a, b\n"
        "  hooks default, h\n"
        "  budget 5.50 usd per 7d\n"
        "}\n"
        "\n"
        'test "t" {\n'
        "  profile p\n"
        '  expect allow search { query: "x", "a b": [1, 2] } context { ip: "1" }\n'
        "}\n"
    )


def test_canonical_spellings() -> None:
    assert fmt("role a { allow tool:* }") == "role a {\n  allow *\n}\n"
    assert fmt("toolset t { tool f(a: decimal = 1.50) }") == (
        "toolset t {\n  tool f(a: decimal = 1.50)\n}\n"
    )
    assert fmt("role a {}") == "role a {}\n"


def test_comments_are_kept() -> None:
    text = (
        "# header\n"
        "\n"
        "role a {  # trailing on the head\n"
        "  # before a rule\n"
        "  allow search  # after a rule\n"
        "}\n"
        "# at the end\n"
    )
    out = fmt(text)
    for comment in (
        "# header",
        "# trailing on the head",
        "# before a rule",
        "# after a rule",
        "# at the end",
    ):
        assert comment in out
    assert out.startswith("# header\n\nrole a {")
    assert fmt(out) == out


def test_a_hash_inside_a_string_is_not_a_comment() -> None:
    text = 'role a {\n  allow search where args.query == "#1"\n}\n'
    assert fmt(text) == text


def test_parentheses_only_where_needed() -> None:
    role = parse(
        "role a { allow search where (args.a == 1 or args.b == 2) and args.c == 3 }"
    ).declarations[0]
    assert isinstance(role, ast.Role) and role.rules[0].where is not None
    assert expr_text(role.rules[0].where) == "(args.a == 1 or args.b == 2) and args.c == 3"
    role = parse(
        "role a { allow search where args.a == 1 or (args.b == 2 or args.c == 3) }"
    ).declarations[0]
    assert isinstance(role, ast.Role) and role.rules[0].where is not None
    assert expr_text(role.rules[0].where) == "args.a == 1 or (args.b == 2 or args.c == 3)"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixtures_are_canonical_and_round_trip(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    tree = parse(text, str(path))
    formatted = format_file(tree)
    assert formatted == text, f"{path.name} is not in canonical form: run `charter fmt --write`"
    again = parse(formatted, str(path))
    assert again.declarations == tree.declarations
    assert format_file(again) == formatted


@pytest.mark.parametrize(
    "text",
    [
        "# a\n\n# b\n",
        "# a\n# b\n\n# c\n",
        "role a {}\n# end\n\n# really the end\n",
        "role a {\n  allow search\n  # x\n\n  # y\n}\n",
        "role a {\n  allow search\n}  # the end of a\n\nrole b {}\n",
    ],
)
def test_blank_lines_after_comments_are_kept(text: str) -> None:
    assert fmt(text) == text
    assert fmt("# a\n\n\n# b\n\n") == "# a\n\n# b\n"
