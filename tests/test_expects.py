"""A test's calls are checked against their tools' signatures (engine/expects.py): each
error's message and caret, `expect invalid` in the checker, the runner, the CLI and
`charter fmt`, and every boundary of the value types against the engine's own verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.cli import main
from engine.check import check_sources
from engine.compile import compile_workspace
from engine.testing import run_expect, run_tests
from grammar.fmt import format_file
from grammar.parser import parse
from policy import ast
from policy.diagnostics import CharterError, Diagnostic, render_all

HEAD = """toolset mail {
  tool send(to: str, subject: str, body: str, cc: list[str] = [], tags?: list[list[int]])
}

role mailer {
  allow mail.send where args.to endswith "@example.com"
  allow search
}

profile support {
  roles mailer
}
"""
LINES = HEAD.count("\n")


def _test(*expects: str) -> str:
    return HEAD + '\ntest "t" {\n  profile support\n' + "".join(f"  {e}\n" for e in expects) + "}\n"


def _errors(text: str) -> list[Diagnostic]:
    with pytest.raises(CharterError) as info:
        check_sources([("m.charter", text)])
    return info.value.diagnostics


def _rendered(text: str) -> str:
    return render_all(_errors(text), {"m.charter": text})


def _caret(text: str, diag: Diagnostic) -> str:
    """The text a diagnostic's span covers (on one line)."""
    assert diag.span.line == diag.span.end_line
    return text.split("\n")[diag.span.line - 1][diag.span.col - 1 : diag.span.end_col - 1]


def test_a_misspelt_argument_is_refused_with_did_you_mean_not_as_missing_too() -> None:
    text = _test('expect deny mail.send { too: "eve@elsewhere.net", subject: "hi", body: "x" }')
    line = LINES + 4
    assert _rendered(text) == (
        f"m.charter:{line}:27: error[E0121]: tool `mail.send` has no argument `too`\n"
        "   |\n"
        f'{line} |   expect deny mail.send {{ too: "eve@elsewhere.net", subject: "hi", body: "x" }}\n'
        "   |                           ^^^\n"
        "   = help: did you mean `to`?\n"
        "\n"
        "1 error"
    )


def test_an_unknown_argument_far_from_any_lists_the_arguments() -> None:
    text = _test('expect allow search { query: "q", "page size": 3 }')
    [diag] = _errors(text)
    assert (diag.code, _caret(text, diag)) == ("E0121", '"page size"')
    assert diag.message == "tool `search` has no argument `page size`"
    assert diag.help == "its arguments: `query`, `limit`"


def test_a_missing_argument_is_refused_once_per_argument_at_the_call() -> None:
    text = _test('expect deny mail.send { to: "bob@example.com" }')
    found = _errors(text)
    assert [d.code for d in found] == ["E0122", "E0122"]
    assert [d.message for d in found] == [
        "call of `mail.send` misses required argument `subject`",
        "call of `mail.send` misses required argument `body`",
    ]
    assert {_caret(text, d) for d in found} == {'{ to: "bob@example.com" }'}
    assert found[0].help is not None and "`expect invalid`" in found[0].help


def test_a_value_of_the_wrong_type_is_refused_at_the_value_or_the_item() -> None:
    text = _test(
        'expect deny mail.send { to: "a@example.com", subject: 1, body: "x", cc: ["a", null] }',
        'expect deny mail.send { to: "a@example.com", subject: "s", body: "x", tags: [[1], [2, 2.5]] }',
        'expect deny mail.send { to: "a@example.com", subject: "s", body: "x", tags: [1] }',
        'expect allow search { query: "q", limit: true }',
    )
    found = _errors(text)
    assert [(d.code, _caret(text, d)) for d in found] == [
        ("E0211", "1"),
        ("E0211", "null"),
        ("E0211", "2.5"),
        ("E0211", "1"),
        ("E0211", "true"),
    ]
    assert [d.message for d in found] == [
        "argument `subject` of `mail.send` must be a `str`, and the call gives an `int`",
        "an item of argument `cc` of `mail.send` must be a `str`, and the call gives `null`",
        "an item of argument `tags` of `mail.send` must be an `int`, and the call gives a `decimal`",
        "an item of argument `tags` of `mail.send` must be a `list[int]`, and the call gives an `int`",
        "argument `limit` of `search` must be an `int`, and the call gives a `bool`",
    ]


def test_rewritten_keys_and_values_are_checked_context_is_not() -> None:
    text = _test(
        'expect allow search { query: "q" } context { any: [1] } rewritten { limt: 10, query: 3 }'
    )
    found = _errors(text)
    assert [(d.code, _caret(text, d)) for d in found] == [("E0121", "limt"), ("E0211", "3")]
    assert found[1].message.endswith("and `rewritten` gives an `int`")
    assert found[1].help == "write a `str`"


def test_every_problem_of_every_expect_is_reported_in_order() -> None:
    text = _test(
        'expect deny mail.send { to: 1, subjet: "hi", body: "x", bcc: "y" }',
        "expect allow search {}",
        'expect deny mail.sned { to: "x" }',
    )
    found = [(d.code, d.span.line, _caret(text, d)) for d in _errors(text)]
    line = LINES + 4
    assert found == [
        ("E0211", line, "1"),
        ("E0121", line, "subjet"),  # (did you mean `subject`: not missing as well)
        ("E0121", line, "bcc"),
        ("E0122", line + 1, "{}"),
        ("E0114", line + 2, "mail.sned"),
    ]


def test_expect_invalid_is_exempt_but_must_be_able_to_pass() -> None:
    invalid = 'expect invalid mail.send { too: "x", subject: 1 }'
    ws = check_sources([("m.charter", _test(invalid))])
    [result] = run_tests(compile_workspace(ws))
    assert result.passed and result.decision.effect == "deny"
    assert [r.kind for r in result.decision.reasons] == ["shape"]
    assert result.to_json()["expected"] == "invalid" and result.to_json()["actual"] == "deny"
    text = _test(
        'expect invalid mail.send { to: "bob@example.com", subject: "hi", body: "x" }',
        'expect invalid search { query: 1 } rewritten { query: "q" }',
        "expect invalid web.serch {}",
    )
    found = _errors(text)
    assert [(d.code, _caret(text, d)) for d in found] == [
        ("E0123", "invalid"),
        ("E0123", '{ query: "q" }'),
        ("E0114", "web.serch"),
    ]
    assert found[0].message == (
        "`expect invalid` can never pass: this call fits the signature of `mail.send`"
    )
    assert found[2].help == "did you mean `web_search`?"


def test_the_runner_fails_an_expect_invalid_of_a_call_decided_by_the_rules() -> None:
    """The checker refuses such an `expect invalid` (E0123); built by hand past it, the
    runner still holds it to a shape denial, and says what it got."""
    ws = check_sources([("m.charter", HEAD)])
    snapshot = compile_workspace(ws)
    test = ast.Test("t", "support", ())

    def call(**args: str) -> ast.MapLit:
        return ast.MapLit(tuple((k, ast.Lit("str", v)) for k, v in args.items()))

    fits = {"subject": "hi", "body": "x"}
    allowed = ast.Expect("invalid", "mail.send", call(to="bob@example.com", **fits))
    denied = ast.Expect("invalid", "mail.send", call(to="eve@elsewhere.net", **fits))
    assert [run_expect(snapshot, test, e).failure for e in (allowed, denied)] == [
        "expected `invalid` (a deny for the call's shape), got `allow`",
        "expected `invalid` (a deny for the call's shape), got `deny` for another reason",
    ]


def test_fmt_prints_and_round_trips_expect_invalid() -> None:
    text = HEAD + '\ntest "t" {\n  profile support\n  expect   invalid mail.send{too:"x"}\n}\n'
    tree = parse(text, "m.charter")
    out = format_file(tree)
    assert '  expect invalid mail.send { too: "x" }\n' in out
    assert parse(out, "m.charter") == tree and format_file(parse(out, "m.charter")) == out


def test_the_cli_shows_expect_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.charter"
    path.write_text(_test('expect invalid mail.send { to: "bob@example.com" }'), encoding="utf-8")
    capsys.readouterr()
    assert main(["test", "--format", "json", str(path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(r["expected"], r["actual"], r["passed"]) for r in document["results"]] == [
        ("invalid", "deny", True)
    ]
    path.write_text(_test('expect deny mail.send { to: "bob@example.com" }'), encoding="utf-8")
    assert main(["check", str(path)]) == 1
    assert capsys.readouterr().err.count("error[E0122]") == 2
    assert main(["test", str(path)]) == 1  # (the workspace does not check: nothing runs)


# Every declared type against every kind of literal, at the boundaries a run-time check
# may blur: the two kinds of number, `bool` and `int`, `null`, maps and lists, empty
# lists, items and items of items.
DECLARED = (
    "str", "int", "decimal", "bool", "map", "list[str]", "list[int]", "list[decimal]",
    "list[map]", "list[list[int]]", "list[list[decimal]]",
)  # fmt: skip
VALUES = (
    '"s"', '""', "1", "-1", "1.5", "0.0", "true", "null", "{}", "{ k: 1 }", "[]", '["s"]',
    "[1]", "[1.5]", "[1, 1.5]", "[true]", "[null]", "[{}]", "[[]]", "[[1]]", "[[1.5]]",
    '[[1], ["s"]]', "[[[1]]]", '[1, "s"]',
)  # fmt: skip


def test_the_checker_and_the_engine_agree_on_every_type_and_value() -> None:
    tools = "".join(f"  tool a{i}(v: {ty})\n" for i, ty in enumerate(DECLARED))
    head = f"toolset t {{\n{tools}}}\nrole r {{\n  allow t.*\n}}\nprofile p {{\n  roles r\n  hooks none\n}}\n"
    calls = [(f"t.a{i}", value) for i in range(len(DECLARED)) for value in VALUES]

    def workspace(effects: list[str]) -> str:
        lines = [
            f"  expect {e} {tool} {{ v: {v} }}\n"
            for e, (tool, v) in zip(effects, calls, strict=True)
        ]
        return head + 'test "t" {\n  profile p\n' + "".join(lines) + "}\n"

    text = workspace(["allow"] * len(calls))
    found = _errors(text)
    assert {d.code for d in found} == {"E0211"}
    refused = {d.span.line - head.count("\n") - 3 for d in found}
    effects = ["invalid" if i in refused else "allow" for i in range(len(calls))]
    results = run_tests(compile_workspace(check_sources([("m.charter", workspace(effects))])))
    assert [r.failure for r in results] == [None] * len(calls)
    fit = {(DECLARED[int(c[0][3:])], c[1]) for i, c in enumerate(calls) if i not in refused}
    assert ("decimal", "1") in fit and ("list[decimal]", "[1, 1.5]") in fit
    assert ("list[list[int]]", "[[]]") in fit and ("map", "{ k: 1 }") in fit
    assert not fit & {("int", "1.5"), ("int", "true"), ("bool", "1"), ("str", "null")}
    assert not fit & {("map", "[]"), ("list[int]", "[1.5]"), ("list[list[int]]", "[1]")}
