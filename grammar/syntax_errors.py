"""Syntax errors a person can act on: lark's exceptions turned into diagnostics.

The accepted tokens are folded into phrases (`grammar.tokens`), a word the lexer split
is reported whole, and a keyword glued to the next word (`allowed`) is caught by a
post-lexer and reported with a "did you mean".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import lark
from lark import Token

from grammar.tokens import character_help, describe_expected, describe_token, token_help
from policy import ast
from policy.diagnostics import Diagnostic, did_you_mean

# A character that continues a word: a keyword followed by one is glued to it (WholeWords,
# and the parser's own loop, which applies the same rule).
WORD_CHAR = re.compile(r"[a-z0-9_-]")
_KEYWORD_WORDS = frozenset((
    "toolset", "url", "connection", "required", "runs", "code", "tool", "list", "role", "allow",
    "deny", "where", "hook", "on", "pause", "rewrite", "profile", "roles", "hooks", "default",
    "none", "budget", "usd", "per", "test", "expect", "invalid", "context", "rewritten", "and",
    "or", "not", "in", "startswith", "endswith", "contains", "like", "true", "false", "null",
    "str", "int", "decimal", "bool", "map", "secret",
))  # fmt: skip


class GluedWord(Exception):
    def __init__(self, first: Token, second: Token) -> None:
        super().__init__(f"{first}{second}")
        self.first = first
        self.second = second


class WholeWords:
    """Post-lexer: a keyword glued to the word after it (`allowed` lexes as `allow` + `ed`
    because the contextual lexer only looks for keywords where they fit) is one word the
    author mistyped; stop there and report the whole word instead of a confusing error
    further on."""

    always_accept: tuple[str, ...] = ()

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        previous: Token | None = None
        for token in stream:
            if (
                previous is not None
                and previous.type != "NAME"
                and previous.end_pos == token.start_pos
                and previous[-1:].isalpha()
                and WORD_CHAR.match(token[:1])
            ):
                raise GluedWord(previous, token)
            yield token
            previous = token


def _accepted(exc: lark.exceptions.UnexpectedToken) -> set[str]:
    """The tokens the parser really accepts here (the raw set includes merged states')."""
    try:
        accepted = set(exc.interactive_parser.accepts())  # type: ignore[no-untyped-call]
    except Exception:  # pragma: no cover - fall back to lark's own list
        return set(exc.expected)
    return accepted or set(exc.expected)


def _word_at(text: str, line: int, col: int) -> tuple[int, str]:
    """(start column, word) of the identifier-like word around a position, if any."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return col, ""
    source = lines[line - 1]
    start = end = col - 1
    while start > 0 and (source[start - 1].isalnum() or source[start - 1] in "_-"):
        start -= 1
    while end < len(source) and (source[end].isalnum() or source[end] in "_-"):
        end += 1
    return start + 1, source[start:end]


_TYPES = ("str", "int", "decimal", "bool", "map", "list", "enum")


def glued_diagnostic(glued: GluedWord, file: str) -> Diagnostic:
    first, second = glued.first, glued.second
    word = f"{first}{second}"
    line, col = first.line or 1, first.column or 1
    span = ast.Span(file, line, col, line, col + len(word))
    return Diagnostic(
        "E0002",
        f"unexpected `{word}`",
        span,
        did_you_mean(word, _KEYWORD_WORDS)
        or f"put a space after `{first}` if two words were meant",
    )


# What the parser accepts inside a tool's parameter: after its name, in its type, after it.
_IN_A_PARAMETER = frozenset(
    {"COLON", "OPTIONAL", "LIST", "ENUM", "LBRACE", "SCALAR_TYPE", "VBAR", "COMMA", "EQUAL", "RPAR"}
)
SECRET_HELP = "`secret` stands after the parameter's `:`, before its type: `api_key: secret str`"


def _misplaced_secret(
    text: str, line: int, start: int, word: str, accepted: set[str]
) -> tuple[int, str] | None:
    """(column, message) when the parse stopped at a `secret` where no type follows it,
    or right after a `secret` written before a parameter's name (`secret api_key: str`,
    where `secret` is read as the name)."""
    if "SECRET" in accepted or not accepted <= _IN_A_PARAMETER:
        return None
    if word == "secret":
        return start, "`secret` is misplaced here"
    before = text.split("\n")[line - 1][: start - 1] if 1 <= line <= text.count("\n") + 1 else ""
    if before.rstrip().endswith("secret") and accepted <= {"COLON", "OPTIONAL"}:
        at = len(before.rstrip()) - len("secret") + 1
        return at, "`secret` goes after the parameter's name and `:`, not before them"
    return None


def syntax_diagnostic(
    exc: lark.exceptions.UnexpectedInput, file: str, text: str = ""
) -> Diagnostic:
    line = getattr(exc, "line", 1) or 1
    col = getattr(exc, "column", 1) or 1
    if isinstance(exc, lark.exceptions.UnexpectedToken):
        token = exc.token
        accepted = _accepted(exc)
        expected = describe_expected(accepted)
        if token.type == "$END":
            # (lark places it on the last token: the caret goes right after that token)
            line = getattr(token, "end_line", None) or line
            col = getattr(token, "end_column", None) or col
            span = ast.Span(file, line, col, line, col + 1)
            help = "a block opened with `{` is not closed" if "RBRACE" in accepted else None
            return Diagnostic("E0002", f"unexpected end of file, expected {expected}", span, help)
        start, word = _word_at(text, line, col)
        misplaced = _misplaced_secret(text, line, start, word, accepted)
        if misplaced is not None:
            span = ast.Span(file, line, misplaced[0], line, misplaced[0] + len("secret"))
            return Diagnostic("E0002", misplaced[1], span, SECRET_HELP)
        if token.type == "NAME" and start < col and word:
            # The lexer split a word (`string` -> `str` `ing`): report the whole word.
            span = ast.Span(file, line, start, line, start + len(word))
            if accepted <= {"COMMA", "EQUAL", "RPAR", "RSQB", "RBRACE", "VBAR"}:
                return Diagnostic(
                    "E0002",
                    f"unknown type `{word}`",
                    span,
                    (did_you_mean(word, _TYPES) or "")
                    + " types are `str`, `int`, `decimal`, `bool`, `map`, `list[T]`, "
                    '`enum["a", "b"]`, records `{ name: T }` and `T | null`',
                )
            return Diagnostic("E0002", f"unexpected `{word}`, expected {expected}", span)
        width = max(1, len(str(token)))
        span = ast.Span(file, line, col, line, col + width)
        return Diagnostic(
            "E0002",
            f"unexpected {describe_token(token)}, expected {expected}",
            span,
            token_help(token, accepted),
        )
    if isinstance(exc, lark.exceptions.UnexpectedCharacters):
        message, help = character_help(exc.char)
        return Diagnostic("E0001", message, ast.Span(file, line, col, line, col + 1), help)
    if isinstance(exc, lark.exceptions.UnexpectedEOF):  # pragma: no cover - LALR raises $END
        return Diagnostic(
            "E0002",
            f"unexpected end of file, expected {describe_expected(set(exc.expected))}",
            ast.Span(file, line, col, line, col),
        )
    return Diagnostic(
        "E0001", "cannot parse this input", ast.Span(file, line, col, line, col)
    )  # pragma: no cover
