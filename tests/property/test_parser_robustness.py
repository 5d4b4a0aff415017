"""(f, continued) Whatever the text, `grammar.parser.parse` either returns a tree or
raises `CharterSyntaxError`: never another exception, never a hang, however deep."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grammar.fmt import format_file
from grammar.parser import parse
from policy import ast
from policy.diagnostics import CharterSyntaxError
from tests.property.syntax import AWKWARD, source_files

# Pieces of the language, so random sequences get past the lexer into the parser.
TOKENS = (
    "toolset", "role", "hook", "profile", "test", "tool", "url", "connection", "required",
    "runs", "code", "allow", "deny", "where", "on", "pause", "rewrite", "roles", "hooks",
    "default", "none", "budget", "usd", "per", "24h", "expect", "context", "rewritten",
    "and", "or", "not", "in", "==", "<", ">=", "startswith", "like", "has", "len", "true",
    "null", "args.to", "context.ip", "x", "a.b", "a.*", "*", "tool:*", "{", "}", "(", ")",
    "[", "]", ",", ":", ".", "=", "?", "-1", "2.50", '"s"', '"\\u00e9"', '"\\q"', "# c\n",
    "\n", "list[str]", "str", "int", "map",
)  # fmt: skip
_LEXEME = re.compile(r'\s+|"(?:[^"\\\n]|\\.)*"?|[A-Za-z0-9_.:*-]+|.', re.DOTALL)


def parses_or_fails_cleanly(text: str) -> None:
    try:
        result = parse(text, "fuzz.charter")
    except CharterSyntaxError as exc:
        assert exc.diagnostics, "a syntax error carries at least one diagnostic"
        for diag in exc.diagnostics:
            assert re.fullmatch(r"E\d{4}", diag.code), diag
    else:
        assert isinstance(result, ast.SourceFile)


@given(st.one_of(st.text(), st.text(st.sampled_from(AWKWARD + "{}()[]=<>.,:*?-#0aZ"))))
def test_random_text_raises_only_syntax_errors(text: str) -> None:
    """Random characters: a tree or a CharterSyntaxError, nothing else."""
    parses_or_fails_cleanly(text)


@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_random_token_sequences_raise_only_syntax_errors(tokens: list[str]) -> None:
    """Random sequences of the language's own tokens reach deep into the parser."""
    parses_or_fails_cleanly(" ".join(tokens))


@given(source_files, st.data())
def test_mutated_files_raise_only_syntax_errors(
    source: ast.SourceFile, data: st.DataObject
) -> None:
    """Valid files with tokens deleted, inserted, duplicated or swapped."""
    pieces = _LEXEME.findall(format_file(source))
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(("delete", "insert", "swap", "duplicate")))
        if not pieces:
            pieces = [data.draw(st.sampled_from(TOKENS))]
            continue
        at = data.draw(st.integers(0, len(pieces) - 1))
        if how == "delete":
            del pieces[at]
        elif how == "insert":
            pieces.insert(at, data.draw(st.sampled_from(TOKENS)))
        elif how == "duplicate":
            pieces.insert(at, pieces[at])
        else:
            other = data.draw(st.integers(0, len(pieces) - 1))
            pieces[at], pieces[other] = pieces[other], pieces[at]
    parses_or_fails_cleanly("".join(pieces))


DEEP = 10_000


@pytest.mark.parametrize(
    "condition",
    [
        "not " * DEEP + "true",
        "(" * DEEP + "true" + ")" * DEEP,
        "[" * DEEP + "]" * DEEP + " == []",
        "(" * DEEP,
        "len(" * DEEP + "args.x" + ")" * DEEP + " > 1",
        " and ".join(["true"] * DEEP),
    ],
    ids=["nots", "parens", "lists", "unclosed", "calls", "long-and"],
)
def test_deep_nesting_never_crashes(condition: str) -> None:
    """10,000 levels of nesting: a tree (redundant parentheses leave no trace in it) or a
    clean syntax error (the depth limit), quickly, and never a RecursionError."""
    started = time.monotonic()
    parses_or_fails_cleanly(f"role r {{\n  allow a.b where {condition}\n}}\n")
    assert time.monotonic() - started < 10
