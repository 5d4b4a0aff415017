"""The parser: every construct, positions, equality without spans, errors and limits."""

from __future__ import annotations

import random
from dataclasses import fields, is_dataclass
from decimal import Decimal
from pathlib import Path

import pytest
from lark import Token
from lark.exceptions import LarkError

from grammar.parser import DEFAULT_OPTIONS, ParseOptions, _diagnose, parse
from grammar.syntax_errors import GluedWord
from grammar.tables import lark_parser
from policy import ast
from policy.diagnostics import CharterSyntaxError, render

EVERYTHING = """
toolset gmail {
  url "https://tools.example.com/gmail"
  connection required
  tool send(to: str, cc: list[str] = [], meta?: map, ratio: decimal = 0.5, ok: bool = true)
}
toolset scripts {
  runs code
  tool run(source: str)
}
role r {
  allow gmail.send, gmail.*, *, tool:* where args.to endswith "@x.com" and not (len(args.cc) > 2)
  deny agents.delete where args.id in ["a", "b"] or args.id not in ["c"]
  allow search where context.ip like "10.*" and has(context.ip) and lower(agent.name) != "x"
  allow navigate where host(args.url) == "example.com" and thread.depth <= 3 and thread.cost < 1.5
}
hook h on gmail.send where args.to contains "@" { pause "ok" }
hook d on agents.delete { deny }
hook w on search { rewrite args.limit = 5 rewrite args.query = "x" }
profile p {
  roles r
  hooks default, h
  budget 5 usd per 24h
}
profile q {
  roles
  hooks none
}
test "t" {
  profile p
  expect allow gmail.send { to: "a@x.com", "odd key": [1, 2.5, null, false] } context { ip: "10.0.0.1" } rewritten { to: "a@x.com" }
}
"""


def test_every_construct_parses() -> None:
    tree = parse(EVERYTHING, "all.charter")
    kinds = [type(d).__name__ for d in tree.declarations]
    assert kinds == [
        "Toolset",
        "Toolset",
        "Role",
        "Hook",
        "Hook",
        "Hook",
        "Profile",
        "Profile",
        "Test",
    ]
    gmail, scripts, role, pause, deny, rewrite, p, q, test = tree.declarations
    assert isinstance(gmail, ast.Toolset) and gmail.connection_required and not gmail.runs_code
    assert gmail.url == "https://tools.example.com/gmail"
    send = gmail.tools[0]
    assert [(x.name, str(x.type), x.optional) for x in send.params] == [
        ("to", "str", False),
        ("cc", "list[str]", False),
        ("meta", "map", True),
        ("ratio", "decimal", False),
        ("ok", "bool", False),
    ]
    assert send.params[3].default == ast.Lit("decimal", Decimal("0.5"))
    assert isinstance(scripts, ast.Toolset) and scripts.runs_code
    assert isinstance(role, ast.Role)
    assert [p.kind for p in role.rules[0].patterns] == ["exact", "namespace", "all", "all"]
    assert [r.effect for r in role.rules] == ["allow", "deny", "allow", "allow"]
    ops = {
        n.op
        for r in role.rules
        if r.where
        for n in ast.walk_expr(r.where)
        if isinstance(n, ast.Compare)
    }
    assert ops == {"endswith", ">", "in", "not in", "like", "!=", "==", "<=", "<"}
    assert isinstance(pause, ast.Hook) and pause.kind == "pause" and pause.message == "ok"
    assert isinstance(deny, ast.Hook) and deny.kind == "deny" and deny.message is None
    assert isinstance(rewrite, ast.Hook) and [str(r.target) for r in rewrite.rewrites] == [
        "args.limit",
        "args.query",
    ]
    assert isinstance(p, ast.Profile) and p.hooks == ("default", "h") and p.hooks_written
    assert p.budget == ast.Budget(Decimal(5), "24h")
    assert isinstance(q, ast.Profile) and q.roles == () and q.hooks == ("none",)
    assert isinstance(test, ast.Test) and test.profile == "p"
    expect = test.expects[0]
    assert expect.context is not None and expect.rewritten is not None
    assert [k for k, _ in expect.args.entries] == ["to", "odd key"]


def test_hooks_absent_means_default() -> None:
    profile = parse("profile p { roles }").declarations[0]
    assert isinstance(profile, ast.Profile)
    assert profile.hooks == ("default",) and not profile.hooks_written


def test_a_deny_rule_may_follow_a_condition() -> None:
    # Regression: the hook action `deny` once stole the token after a condition.
    role = parse(
        'role a {\n allow search where args.query == "x"\n deny agents.delete\n}'
    ).declarations[0]
    assert isinstance(role, ast.Role) and [r.effect for r in role.rules] == ["allow", "deny"]


def test_spans_point_at_the_source() -> None:
    tree = parse('role a {\n  allow search where args.query == "x"\n}\n', "f.charter")
    role = tree.declarations[0]
    assert isinstance(role, ast.Role)
    rule = role.rules[0]
    assert (rule.span.file, rule.span.line, rule.span.col) == ("f.charter", 2, 3)
    assert rule.where is not None and (rule.where.span.line, rule.where.span.col) == (2, 22)
    assert str(rule.patterns[0].span) == "f.charter:2:9"


def test_equality_ignores_spans_and_layout() -> None:
    a = parse('role a { allow search where args.query == "x" }', "one.charter")
    b = parse(
        '\n\n# a comment\nrole a {\n    allow   search\n  where args.query=="x"\n}', "two.charter"
    )
    assert a.declarations == b.declarations
    c = parse('role a { allow search where args.query == "y" }')
    assert a.declarations != c.declarations


def test_literal_kinds_stay_apart() -> None:
    one = parse("role a { allow search where args.limit == 1 }").declarations
    true = parse("role a { allow search where args.limit == true }").declarations
    assert one != true


def test_precedence_and_binds_tighter_than_or() -> None:
    role = parse(
        "role a { allow search where args.a == 1 or args.b == 2 and not args.c == 3 }"
    ).declarations[0]
    assert isinstance(role, ast.Role)
    where = role.rules[0].where
    assert isinstance(where, ast.BoolOp) and where.op == "or"
    assert isinstance(where.right, ast.BoolOp) and where.right.op == "and"
    assert isinstance(where.right.right, ast.Not)


def test_string_escapes_are_json() -> None:
    role = parse(r'role a { allow search where args.q == "a\"b\\c\n\u00e9" }').declarations[0]
    assert isinstance(role, ast.Role) and role.rules[0].where is not None
    cmp = role.rules[0].where
    assert isinstance(cmp, ast.Compare) and cmp.right == ast.Lit("str", 'a"b\\c\né')


@pytest.mark.parametrize(
    ("text", "code", "fragment"),
    [
        ("role a { allow x.y where args.a = 1 }", "E0002", "compare with `==`"),
        ("role a { allow x.y where }", "E0002", "expected a condition"),
        ("role a {", "E0002", "unexpected end of file"),
        ("role A {}", "E0024", "declarations are named in lowercase"),
        ("toolset t { tool f(a: string) }", "E0002", "unknown type `string`"),
        ('role a { allow search where args.q == "\\q" }', "E0003", "invalid escape"),
        ('toolset t { url "https://a.b" url "https://c.d" }', "E0004", "more than one `url`"),
        (
            "toolset t { connection required\n connection required }",
            "E0004",
            "more than one `connection required` line",
        ),
        ("toolset t { runs code\n runs code }", "E0004", "more than one `runs code` line"),
        ("toolset t { tool f(a?: int = 1) }", "E0005", "optional and also has a default"),
        ("role a { allow a.*.b }", "E0006", "not a tool pattern"),
        ('hook h on x.y { pause "a" deny "b" }', "E0007", "mixes actions"),
        ("profile p { hooks none, default }", "E0008", "`hooks none` cannot be combined"),
        ("profile p { budget -1 usd per 7d }", "E0009", "cannot be negative"),
        ('test "t" { }', "E0010", "names no profile"),
        ('test "t" { profile p expect deny x.y { a: 1, a: 2 } }', "E0011", "appears twice"),
        ("role a { allow x.y where user.id == 1 }", "E0012", "not a place a condition can read"),
    ],
)
def test_syntax_errors_have_codes(text: str, code: str, fragment: str) -> None:
    with pytest.raises(CharterSyntaxError) as info:
        parse(text, "bad.charter")
    diag = info.value.diagnostics[0]
    assert diag.code == code
    assert fragment in diag.message + " " + (diag.help or "")
    assert diag.span.file == "bad.charter" and diag.span.line >= 1


def test_expected_tokens_are_short_for_a_single_equals() -> None:
    with pytest.raises(CharterSyntaxError) as info:
        parse("role a { allow x.y where args.a = 1 }")
    message = info.value.diagnostics[0].message
    assert message == (
        "unexpected `=`, expected a comparison (`==`, `<`, `in`, `startswith`, ...), "
        "`and`, `or` or the end of the rule"
    )
    assert "rewrite" not in message and "`]`" not in message


def test_keyword_typos_get_did_you_mean() -> None:
    with pytest.raises(CharterSyntaxError) as info:
        parse("rol a {}")
    assert info.value.diagnostics[0].help == "did you mean `role`?"


def test_nesting_limit_without_recursion_error() -> None:
    deep = "role a { allow search where " + "not (" * 5000 + "true" + ")" * 5000 + " }"
    with pytest.raises(CharterSyntaxError) as info:
        parse(deep)
    assert info.value.diagnostics[0].code == "E0013"
    shallow = "role a { allow search where " + "not (" * 10 + "true" + ")" * 10 + " }"
    with pytest.raises(CharterSyntaxError):
        parse(shallow, options=ParseOptions(max_depth=5))
    parse(shallow)


@pytest.mark.parametrize(
    ("where", "opening", "closing"),
    [("", "not ", ""), ("args.x in ", "[", "]"), ("", "(", ")"), ("", "not (", ")"),
     ("", "(", "")],
    ids=["not", "lists", "parens", "not-parens", "unclosed"],
)  # fmt: skip
def test_a_file_nested_far_too_deep_is_refused_where_it_gets_so(
    where: str, opening: str, closing: str
) -> None:
    """Nesting by the hundred thousand (a megabyte of `not`, `[` or `(`) is refused at the
    token where the parser's stack passes its limit, without parsing the rest (lark's
    diagnosis of such a file took seconds): E0013, with a line, a column and a caret."""
    n = 150_000  # (the file stays under the 1 MiB limit)
    head = "role a {\n  allow search where " + where
    text = head + opening * n + "true" + closing * n + "\n}\n"
    with pytest.raises(CharterSyntaxError) as info:
        parse(text, "deep.charter")
    (found,) = info.value.diagnostics
    assert found.code == "E0013"
    assert (found.span.file, found.span.line) == ("deep.charter", 2)
    limit = DEFAULT_OPTIONS.max_stack
    assert len(head) - 9 < found.span.col < len(head) - 9 + len(opening) * limit
    shown = render(found, {"deep.charter": text})
    assert "deep.charter:2:" in shown and "^" in shown


def test_the_stack_limit_leaves_room_for_everything_within_the_depth_limit() -> None:
    """The deepest nesting the depth limit lets through still parses on the fast path
    (at most six stack levels per nesting level), and brackets that add no depth to the tree
    are limited by the stack alone."""
    limit = DEFAULT_OPTIONS.max_depth
    # the most stack a level takes: each of these is one level and a parenthesis
    for level, close in (("args.b and (", ")"), ("args.a not in (", ")"), ("f(1, 2, (", "))"),
                         ("[1, 2, (", ")]")):  # fmt: skip
        deepest = "role a { allow search where " + level * limit + "true" + close * limit + " }"
        parse(deepest)
    parse("role a { allow search where " + "(" * 400 + "true" + ")" * 400 + " }")
    with pytest.raises(CharterSyntaxError) as info:
        parse("role a { allow search where " + "(" * 500 + "true" + ")" * 500 + " }")
    assert info.value.diagnostics[0].code == "E0013"


def test_only_charter_syntax_errors_escape_on_garbage() -> None:
    rng = random.Random(7)
    alphabet = (
        'role{}()[],.:=<>!"\\#*?-_ az09\n\tallow deny where and or not in hook on pause é\x00'
    )
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        try:
            parse(text)
        except CharterSyntaxError as exc:
            assert exc.diagnostics and all(d.code.startswith("E00") for d in exc.diagnostics)


@pytest.mark.parametrize(
    ("text", "word", "suggestion"),
    [
        ('test "x" {\n  profile p\n  expect allowed a.b {}\n}\n', "allowed", "allow"),
        ("role r {\n  allowed x\n}\n", "allowed", "allow"),
        ("hook h onx {\n  pause\n}\n", "onx", None),
    ],
)
def test_a_keyword_glued_to_a_word_is_reported_as_one_word(
    text: str, word: str, suggestion: str | None
) -> None:
    with pytest.raises(CharterSyntaxError) as info:
        parse(text, "glued.charter")
    [diag] = info.value.diagnostics
    assert diag.code == "E0002"
    assert f"`{word}`" in diag.message
    assert diag.span.end_col - diag.span.col == len(word)
    if suggestion is not None:
        assert diag.help == f"did you mean `{suggestion}`?"


# ---- the parser runs lark's tables itself: it must agree with lark --------------------

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _fixture_texts() -> list[str]:
    texts = [EVERYTHING]
    for path in sorted(FIXTURES.rglob("*.charter")):
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            continue
    return texts


def _lark_positions(text: str) -> set[tuple[int, int, int, int]] | None:
    """Every position lark's own tree gives a node or a token, or None if it rejects."""
    try:
        tree = lark_parser().parse(text)
    except (LarkError, GluedWord):
        return None
    out: set[tuple[int, int, int, int]] = set()
    for node in tree.iter_subtrees():
        if not node.meta.empty:
            meta = node.meta
            out.add((meta.line, meta.column, meta.end_line, meta.end_column))
        for child in node.children:
            if isinstance(child, Token):
                # lark types a token's positions as optional (a token made by hand has none)
                out.add((child.line, child.column, child.end_line, child.end_column))  # type: ignore[arg-type]
    return out


def _spans(node: object) -> list[ast.Span]:
    """The spans of every node below `node` (walking dataclass fields and tuples)."""
    out: list[ast.Span] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Span):
            if item is not ast.NO_SPAN:
                out.append(item)
        elif isinstance(item, tuple | list):
            stack.extend(item)
        elif is_dataclass(item) and not isinstance(item, ast.SourceFile | type):
            stack.extend(getattr(item, f.name) for f in fields(item))
    return out


def _mutants(texts: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces = [*'(){}[],.:*?="\\# \n', "allow", "deny", "where", " and ", " or ", "not ", " in "]
    pieces += ["tool:*", '"x"', "24h", "list[", '"\\q"', "1.5", "-3", "allowx", "x.*"]
    out = []
    for _ in range(count):
        text = rng.choice(texts)
        at = rng.randrange(len(text) + 1)
        roll = rng.random()
        if roll < 0.4:
            out.append(text[:at] + text[at + rng.randrange(1, 6) :])
        elif roll < 0.8:
            out.append(text[:at] + rng.choice(pieces) + text[at:])
        else:
            other = rng.randrange(len(text) + 1)
            out.append(text[:at] + text[other : other + 20] + text[at:])
    return out


def test_lark_diagnoses_from_the_failing_declaration_as_from_the_whole_text() -> None:
    """A refused file is diagnosed by lark from the end of its last whole declaration
    (what comes before is blanked, lines kept): the same diagnostics, at the same
    positions, as lark's parse of the whole text gives."""
    texts = _fixture_texts()
    deep = "not (" * 30 + "true" + ")" * 30
    texts += [t + f"\nrole late {{\n  allow search where {deep}\n}}\n" for t in texts[:3]]
    texts += _mutants(texts, 400, seed=5)
    compared = 0
    for text in texts:
        try:
            parse(text, "f.charter")
        except CharterSyntaxError as exc:
            if {d.code for d in exc.diagnostics} <= {"E0001", "E0002", "E0013"}:  # (not the
                # builder's: those come from the fast path's own tree, as they always did)
                assert exc.diagnostics == _diagnose(text, "f.charter", DEFAULT_OPTIONS), text
                compared += 1
    assert compared > 150


def test_the_parser_accepts_what_lark_accepts_with_lark_positions() -> None:
    texts = _fixture_texts()
    texts += _mutants([t for t in texts if len(t) < 3000], 600, seed=11)
    accepted = rejected = 0
    for text in texts:
        positions = _lark_positions(text)
        try:
            tree = parse(text, "f.charter")
        except CharterSyntaxError as exc:
            codes = {d.code for d in exc.diagnostics}
            syntax = bool(codes & {"E0001", "E0002"})
            assert syntax == (positions is None), (text, exc.diagnostics)
            rejected += syntax
            continue
        assert positions is not None, text
        accepted += 1
        for span in _spans(tree.declarations):
            assert (span.line, span.col, span.end_line, span.end_col) in positions, (text, span)
    assert accepted > 100 and rejected > 100


@pytest.mark.parametrize(
    ("text", "line", "col"),
    [
        ("role a {\n  allow search\n", 2, 15),
        ("role a {\n  allow search where  # why\n\n", 2, 21),
        ('role a { allow search where args.query == "x"', 1, 46),
        ("role a {", 1, 9),
    ],
)
def test_an_unexpected_end_of_file_is_shown_after_the_last_token(
    text: str, line: int, col: int
) -> None:
    """The caret was on the last token's first character (`search`), as if that token were
    the trouble: it goes right after it, where the text stops."""
    with pytest.raises(CharterSyntaxError) as info:
        parse(text, "f.charter")
    (diag,) = info.value.diagnostics
    assert "unexpected end of file" in diag.message
    assert (diag.span.line, diag.span.col, diag.span.end_col) == (line, col, col + 1)
