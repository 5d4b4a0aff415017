"""The outline of a file (grammar/outline.py) and the declarations parsed at its ranges
(grammar/parser.py `parse_ranges`) are the parser's own: for every text that parses,
however it is laid out (declarations on one line, blank lines, comments holding braces,
quotes and `#`), the outline splits it, and each range parses to the declaration the
whole parse finds there, every nested span the same."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from grammar.fmt import format_file
from grammar.outline import outline
from grammar.parser import parse, parse_ranges
from policy import ast
from policy.diagnostics import CharterSyntaxError
from tests.property.syntax import source_files

ROOT = Path(__file__).resolve().parents[2]
KINDS = {ast.Toolset: "toolset", ast.Role: "role", ast.Hook: "hook", ast.Profile: "profile"}

# What a comment may say: the characters a hand-written scanner trips on.
comments = st.text(st.sampled_from('{}"#\\ ab'), max_size=8).map(lambda t: "# " + t)
# What may stand where the formatter puts a line break (the grammar ignores white space).
breaks = st.sampled_from(("\n", "\n", " ", "\n\n", "\t\n  ", "\n  \n"))


def spanned(node: Any) -> Any:
    """`node` as nested tuples with every field, spans included (equality ignores them)."""
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        fields = (spanned(getattr(node, f.name)) for f in dataclasses.fields(node))
        return (type(node).__name__, *fields)
    if isinstance(node, tuple | list):
        return tuple(spanned(item) for item in node)
    return node


def laid_out(text: str, data: st.DataObject) -> str:
    """`text` with its line breaks redrawn and comments added at line ends."""
    out = []
    for line in text.split("\n"):
        if data.draw(st.booleans()):
            line += " " + data.draw(comments)
            out.append(line + "\n")
        else:
            out.append(line + data.draw(breaks))
    return data.draw(st.sampled_from(("", "# top {\n", "\n\n"))) + "".join(out)


def assert_outline_agrees(text: str, path: str = "gen.charter") -> None:
    whole = parse(text, path)
    entries = outline(text)
    assert entries is not None, text
    named = [(KINDS[type(d)], d.name) for d in whole.declarations if not isinstance(d, ast.Test)]
    assert [(e.kind, e.name) for e in entries if e.kind != "test"] == named, text
    assert len(entries) == len(whole.declarations)
    part = parse_ranges(text, path, [(e.start, e.end) for e in entries])
    assert spanned(part.declarations) == spanned(whole.declarations), text


@given(source_files, st.data())
def test_the_outline_of_any_file_that_parses_is_the_parser_s(
    source: ast.SourceFile, data: st.DataObject
) -> None:
    text = laid_out(format_file(source), data)
    try:
        parse(text, "gen.charter")
    except CharterSyntaxError:
        event("the layout does not parse")
        return  # (a comment at the end of the line of a keyword glued to it, say)
    assert_outline_agrees(text)


def _fixtures() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "*.charter"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return sorted(listed.stdout.split())


@pytest.mark.parametrize("path", _fixtures())
def test_the_outline_of_each_fixture_that_parses_is_the_parser_s(path: str) -> None:
    try:
        text = (ROOT / path).read_text(encoding="utf-8")
        parse(text, path)
    except (UnicodeDecodeError, CharterSyntaxError):
        return  # (the fixtures of what does not parse)
    assert_outline_agrees(text, path)


@pytest.mark.parametrize(
    "text",
    [
        "role r { allow a.b",  # no closing brace
        'role r { allow a.b where args.x == "} }',  # an open string
        "role r { allow a.b } stray",  # not a declaration
        "rolex r { }",  # a keyword glued to a word
        "role R { }",  # not a name
    ],
)
def test_a_text_not_laid_out_as_a_file_is_no_outline(text: str) -> None:
    assert outline(text) is None
