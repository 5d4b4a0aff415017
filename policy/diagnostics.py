"""Diagnostics: the one shape every Charter error takes, and how it is rendered.

A diagnostic has a stable code (documented in docs/errors.md), a lowercase message
that puts user input in backticks, a span, and an optional `help:` line. Phases collect
diagnostics instead of stopping at the first, and the CLI and HTTP API render them.
"""

from __future__ import annotations

import difflib
import json
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from policy.ast import NO_SPAN, Span

Severity = Literal["error", "warning"]

# Source lines longer than this are shown as a window around the reported span.
MAX_SOURCE_WIDTH = 100

# The Unicode bidirectional controls (ALM, LRM, RLM, the embeddings and overrides, the
# isolates): they reorder what a reader sees, so neither a diagnostic's source line nor
# `charter fmt` (`grammar.fmt`) ever shows one as itself.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    message: str
    span: Span = NO_SPAN
    help: str | None = None
    severity: Severity = "error"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.span.file, self.span.line, self.span.col, self.code)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": self.span.file,
            "line": self.span.line,
            "column": self.span.col,
            "end_line": self.span.end_line,
            "end_column": self.span.end_col,
            "help": self.help,
        }


class CharterError(Exception):
    """Raised when a phase cannot produce its output; carries every diagnostic found."""

    def __init__(
        self, diagnostics: Iterable[Diagnostic], sources: Mapping[str, str] | None = None
    ) -> None:
        self.diagnostics = sorted(diagnostics, key=Diagnostic.sort_key)
        self.sources: dict[str, str] = dict(sources or {})
        first = self.diagnostics[0] if self.diagnostics else None
        super().__init__(f"{first.span}: {first.message}" if first else "charter error")


class CharterSyntaxError(CharterError):
    """The only exception the parser lets out, whatever text it is given."""


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """A `help:` line suggesting the closest known name, if one is close enough."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


def _shown(char: str, marked: bool = False) -> tuple[str, int]:
    """How a character of a source line is shown, and how many terminal cells it takes:
    2 for an East Asian wide or fullwidth character, 0 for a combining mark, 1 for the
    rest. A tab is one space (`␉` under the caret); a control character, a line
    or paragraph separator, a bidirectional control or a lone surrogate is shown as a
    visible symbol, never as itself (it would move the cursor or reorder the line)."""
    point = ord(char)
    if char == "\t" and not marked:
        return " ", 1
    if point < 0x20:
        return chr(0x2400 + point), 1  # the Control Pictures block: `␍`, `␌`, ...
    if point == 0x7F:
        return "\u2421", 1
    category = unicodedata.category(char)
    if category in ("Cc", "Zl", "Zp", "Cs") or char in BIDI_CONTROLS:
        return "\ufffd", 1
    if unicodedata.combining(char) or category in ("Mn", "Me", "Cf"):
        return char, 0
    if unicodedata.east_asian_width(char) in ("W", "F"):
        return char, 2
    return char, 1


def _cells(text: str, marked: bool = False) -> tuple[str, int]:
    shown = [_shown(c, marked) for c in text]
    return "".join(s for s, _ in shown), sum(w for _, w in shown)


def source_lines(text: str) -> list[str]:
    """The lines of a source text as the parser numbers them: only `\n` ends one (a
    `\r` before it is part of the line end). `str.splitlines` would also break at form
    feeds, `\x85`, `\u2028`, ..., and show the wrong line."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def render(diag: Diagnostic, sources: Mapping[str, str]) -> str:
    """`file:line:col: error[CODE]: message`, the source line, a caret, and help.

    `line:col` counts code points; the caret line counts terminal cells, so the caret sits
    under the span whatever wide or combining characters come before it."""
    span = diag.span
    lines = [f"{span.file}:{span.line}:{span.col}: {diag.severity}[{diag.code}]: {diag.message}"]
    text = sources.get(span.file)
    pad = " "  # the gutter's width: `=` of the help line stands under its `|`
    if text is not None and span.line >= 1:
        all_lines = source_lines(text)
        if span.line <= len(all_lines):
            source_line = all_lines[span.line - 1]
            gutter = str(span.line)
            pad = " " * len(gutter)
            width = 1
            if span.end_line == span.line and span.end_col > span.col:
                width = span.end_col - span.col
            width = max(1, min(width, len(source_line) - span.col + 1))
            offset = span.col - 1
            if len(source_line) > MAX_SOURCE_WIDTH:
                # A very long line is shown as a window around the span, marked with `...`.
                start = max(0, offset - MAX_SOURCE_WIDTH // 4)
                shown = source_line[start : start + MAX_SOURCE_WIDTH]
                prefix = "..." if start else ""
                suffix = "..." if start + MAX_SOURCE_WIDTH < len(source_line) else ""
                source_line = prefix + shown + suffix
                offset = offset - start + len(prefix)
                width = max(1, min(width, len(prefix) + len(shown) - offset))
            head, before = _cells(source_line[:offset])
            before += max(0, offset - len(source_line))  # a span past the end of the line
            body, marked = _cells(source_line[offset : offset + width], marked=True)
            tail, _ = _cells(source_line[offset + width :])
            display = head + body + tail
            lines.append(f"{pad} |")
            lines.append(f"{gutter} | {display}")
            lines.append(f"{pad} | {' ' * before}{'^' * max(1, marked)}")
    if diag.help:
        lines.append(f"{pad} = help: {diag.help}")
    return "\n".join(lines)


def error_count(diags: Iterable[Diagnostic]) -> int:
    """How many are errors: a failed check carries its warnings too."""
    return sum(d.severity == "error" for d in diags)


def render_all(
    diags: Iterable[Diagnostic], sources: Mapping[str, str], per_code: int | None = None
) -> str:
    """Every diagnostic rendered, in file order, and the count of each severity. With
    `per_code`, the warnings of one code past the first `per_code` are counted instead,
    on one line each code (a large workspace can have thousands of one lint's): every
    error is always shown."""
    ordered = sorted(diags, key=Diagnostic.sort_key)
    shown: list[Diagnostic] = []
    left: dict[str, int] = {}
    for d in ordered:
        if per_code is not None and d.severity != "error":
            seen = left.get(d.code, 0) + 1
            left[d.code] = seen
            if seen > per_code:
                continue
        shown.append(d)
    body = "\n\n".join(render(d, sources) for d in shown)
    more = [
        f"... and {count - per_code:,} more warning[{code}]"
        for code, count in sorted(left.items())
        if per_code is not None and count > per_code
    ]
    if more:
        body += "\n\n" + "\n".join(more)
    errors = error_count(ordered)
    warnings = len(ordered) - errors
    summary = f"{errors} error{'s' if errors != 1 else ''}"
    if warnings:
        summary += f", {warnings} warning{'s' if warnings != 1 else ''}"
    return f"{body}\n\n{summary}" if body else summary


def to_json(diags: Iterable[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in sorted(diags, key=Diagnostic.sort_key)], indent=2)
