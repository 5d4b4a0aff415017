"""A declared name is at most 256 characters (E0120), the longest id the HTTP API takes:
a role, profile, hook or toolset named longer, or a tool whose `toolset.tool` is, loaded
but could never be named in a request (no call, no agent on the profile, no view)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from api.cli import main
from api.commands import MAX_ID
from engine.check import CheckOptions, check_sources
from engine.checker import DEFAULT_CHECK
from grammar.parser import DEFAULT_OPTIONS, ParseOptions
from policy.diagnostics import CharterError, Diagnostic, render_all

LIMIT = DEFAULT_OPTIONS.max_name_chars

# Each kind of name: the source declaring one of `size` characters (a tool's size is its
# full name's), and where that name starts.
KINDS: dict[str, tuple[Callable[[int], str], tuple[int, int]]] = {
    "role": (lambda n: f"role {'r' * n} {{\n  allow search\n}}\n", (1, 6)),
    "profile": (lambda n: f"profile {'p' * n} {{\n  hooks none\n}}\n", (1, 9)),
    "hook": (lambda n: f"hook {'h' * n} on search {{\n  pause\n}}\n", (1, 6)),
    "toolset": (lambda n: f"toolset {'s' * n} {{\n}}\n", (1, 9)),
    "tool": (lambda n: f"toolset crm {{\n  tool {'t' * (n - 4)}(id: str)\n}}\n", (2, 8)),
}
LETTER = {"role": "r", "profile": "p", "hook": "h", "toolset": "s", "tool": "t"}


def _diagnostics(*texts: str, options: CheckOptions = DEFAULT_CHECK) -> list[Diagnostic]:
    sources = [(f"f{i}.charter", text) for i, text in enumerate(texts)]
    with pytest.raises(CharterError) as info:
        check_sources(sources, options)
    return info.value.diagnostics


def test_the_limit_is_the_apis() -> None:
    assert LIMIT == MAX_ID == 256


@pytest.mark.parametrize("kind", KINDS)
def test_a_name_of_256_characters_is_accepted(kind: str) -> None:
    source, _ = KINDS[kind]
    workspace = check_sources([("f0.charter", source(LIMIT))])
    if kind == "tool":
        assert "crm." + "t" * (LIMIT - 4) in workspace.tools
    elif kind != "hook":  # (hooks include the default approval hooks)
        assert len(getattr(workspace, f"{kind}s")) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_name_of_257_characters_is_refused_at_the_name(kind: str) -> None:
    source, (line, col) = KINDS[kind]
    text = source(LIMIT + 1)
    with pytest.raises(CharterError) as info:
        check_sources([("f0.charter", text)])
    [diag] = info.value.diagnostics
    assert diag.code == "E0120" and diag.severity == "error"
    assert (diag.span.line, diag.span.col) == (line, col)
    shown = ("crm." + "t" * 28 if kind == "tool" else LETTER[kind] * 32) + "…"
    label = "full name of tool" if kind == "tool" else f"{kind} name"
    message = f"{label} `{shown}` is 257 characters long, over the limit of 256"
    assert diag.message == message, diag.message
    assert diag.help is not None and "the HTTP API names a" in diag.help
    assert "at most 256 characters" in diag.help
    rendered = render_all(info.value.diagnostics, info.value.sources).splitlines()
    assert rendered[0] == f"f0.charter:{line}:{col}: error[E0120]: {diag.message}"
    source_line, caret = rendered[2], rendered[3]
    assert source_line.startswith(f"{line} | ")
    # the caret starts under the name (the long line is shown as its first 100 characters)
    assert caret.index("^") == source_line.index(LETTER[kind] * 5)
    assert rendered[-1] == "1 error"


def test_every_long_name_is_reported_with_the_other_errors() -> None:
    long = "x" * 300
    found = _diagnostics(
        f"role {long} {{\n  allow nosuch.tool\n}}\nprofile {long} {{\n  roles nobody\n}}\n",
        "role b {\n  allow search where",
        f"hook {long} on search {{\n  deny\n}}\n",
    )
    assert [(d.span.file, d.span.line, d.code) for d in found] == [
        ("f0.charter", 1, "E0120"),
        ("f0.charter", 2, "E0101"),
        ("f0.charter", 4, "E0120"),
        ("f0.charter", 5, "E0104"),
        ("f1.charter", 2, "E0002"),
        ("f2.charter", 1, "E0120"),
    ]
    assert "is 300 characters long" in found[0].message


def test_a_long_toolset_name_is_reported_once_not_for_each_tool() -> None:
    found = _diagnostics(f"toolset {'s' * 300} {{\n  tool a()\n  tool b()\n}}\n")
    assert [(d.code, d.span.line, d.span.col) for d in found] == [("E0120", 1, 9)]
    assert "each of its tools" in (found[0].help or "")
    # within the limit itself, its tools' full names are checked, each at its name
    found = _diagnostics(f"toolset {'s' * 254} {{\n  tool a()\n  tool bb()\n  tool c()\n}}\n")
    assert [(d.code, d.span.line, d.span.col, d.span.end_col) for d in found] == [
        ("E0120", 3, 8, 10)
    ]


def test_the_caret_finds_a_name_after_a_comment_on_another_line() -> None:
    text = f"role # the long one\n  # still a comment\n   {'r' * 257} {{\n}}\n"
    [diag] = _diagnostics(text)
    assert (diag.span.line, diag.span.col, diag.span.end_line, diag.span.end_col) == (
        3, 4, 3, 261,
    )  # fmt: skip


def test_a_test_name_is_no_id_and_has_no_limit() -> None:
    name = "calls " * 100
    text = (
        "role r {\n  allow search\n}\nprofile p {\n  roles r\n  hooks none\n}\n"
        f'test "{name}" {{\n  profile p\n  expect allow search {{ query: "x" }}\n}}\n'
    )
    [test] = check_sources([("f0.charter", text)]).tests
    assert test.name == name


def test_the_limit_is_an_option() -> None:
    options = CheckOptions(parse=ParseOptions(max_name_chars=4))
    [diag] = _diagnostics("role abcd {\n}\nrole abcde {\n}\n", options=options)
    assert diag.code == "E0120" and diag.span.line == 3
    assert diag.message == "role name `abcde` is 5 characters long, over the limit of 4"
    [diag] = _diagnostics("toolset ab {\n  tool c()\n  tool de()\n}\n", options=options)
    assert diag.message == "full name of tool `ab.de` is 5 characters long, over the limit of 4"


def test_charter_check_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "a.charter").write_text(KINDS["profile"][0](257), encoding="utf-8")
    (tmp_path / "b.charter").write_text(KINDS["role"][0](256), encoding="utf-8")
    code = main(["check", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert f"{tmp_path / 'a.charter'}:1:9: error[E0120]: profile name `{'p' * 32}…`" in err
    assert err.rstrip().endswith("1 error")
    (tmp_path / "a.charter").write_text(KINDS["profile"][0](256), encoding="utf-8")
    assert main(["check", str(tmp_path)]) == 0
