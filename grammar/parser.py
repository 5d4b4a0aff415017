"""Text -> AST. Lark compiles the grammar (LALR, strict); we run its tables ourselves.

`grammar.tables` flattens lark's LALR(1) tables and contextual lexer once; `_run` drives
them in one loop that lexes, shifts and reduces, calling `grammar.build.Builder` as each
rule is reduced: no lark `Token` objects, no parse tree, no second pass, and only the
nodes the AST keeps are ever built. It accepts exactly the language lark's own parser
accepts, with the same tokens and the same positions (`tests/test_parser.py` compares
the two on the fixtures).

Valid input never touches lark's parser. When `_run` rejects the input (or it is nested
too deep), the text is parsed again with lark's parser, whose exceptions become the
diagnostics (`grammar.syntax_errors`): errors are rare, and this keeps their messages
exactly what lark reports. No lark exception leaves this module: every failure becomes a
`CharterSyntaxError` carrying diagnostics with a stable code, a span and, where we can
tell, a help line.
"""

from __future__ import annotations

from dataclasses import dataclass
from sys import intern
from typing import Any

import lark
from lark import Token, Tree
from lark.tree import Meta

from grammar.build import Builder, StrToken
from grammar.source import MAX_FILE_BYTES, MAX_NAME_CHARS, text_problems, too_large
from grammar.syntax_errors import WORD_CHAR, GluedWord, glued_diagnostic, syntax_diagnostic
from grammar.tables import (
    APPEND,
    CALL,
    LEVELS,
    LIST,
    PASS,
    Tables,
    lark_parser,
    parse_tables,
)
from policy import ast
from policy.diagnostics import CharterSyntaxError, Diagnostic


@dataclass(frozen=True, slots=True)
class ParseOptions:
    """Limits are options, not afterthoughts (cel-go). The file size is checked before
    parsing, the nesting depth once the file is parsed (and, as the parse goes, the
    parser's stack, so a file nested far too deep is refused where it gets so, without
    parsing the rest), the expression size and the length of a declared name by the
    checker (engine.check)."""

    max_file_bytes: int = MAX_FILE_BYTES
    max_depth: int = 48
    max_expr_nodes: int = 2_000
    max_name_chars: int = MAX_NAME_CHARS

    @property
    def max_stack(self) -> int:
        """The parser's stack holds a level for each rule still open: one per open
        bracket or `not` for the deepest inputs, at most six per nesting level otherwise
        (`f(1, 2, (` is one level); a file within `max_depth` never comes near this, and
        past it the parse stops at once. (Parentheses alone add no nesting level: this is
        what limits them.)"""
        return 8 * self.max_depth + 64


DEFAULT_OPTIONS = ParseOptions()


# ---- the parse loop ---------------------------------------------------------------------


class _Rejected(Exception):
    """The input is not in the language (or a word is glued): lark will say why, from
    `after` on (the end of the last whole declaration: lark's first error is in the
    declaration that follows, and its parse of the rest is what costs)."""

    def __init__(self, after: int) -> None:
        self.after = after


class _TooDeep(Exception):
    """The parser's stack passed `ParseOptions.max_stack` at the token starting at
    offset `at`: nested too deep, said without parsing further (or running lark, which
    took seconds on a megabyte of `not` or `[`)."""

    def __init__(self, at: int) -> None:
        self.at = at


def _run(
    tables: Tables,
    text: str,
    builder: Builder,
    options: ParseOptions,
    pos: int = 0,
    stop: int | None = None,
) -> tuple[list[ast.Declaration], int, int]:
    """Lex, shift and reduce exactly as lark's LALR parser with its contextual lexer and
    `WholeWords` post-lexer would; returns the declarations, their deepest nesting (the
    most `LEVELS` nodes on one path of the tree lark would have built: what the depth
    limit is on) and where the first declaration past that limit starts (the end of the
    one before it).

    One entry per stack level in five parallel lists: the state, the value, where its
    text starts and ends (lark's "container" positions: a node's span runs from its
    first child's start to its last child's end, punctuation included) and its nesting.

    `pos` and `stop`: the part of the text to parse, as if it were all there is (what
    `parse_ranges` reads); positions are the whole text's all the same."""
    stop = len(text) if stop is None else stop
    actions = tables.actions
    scanners = tables.scanners
    keywords = tables.keywords
    rules = tables.rules
    word_char = WORD_CHAR.match
    state = tables.start
    states = [state]
    values: list[Any] = []
    starts: list[int] = []
    ends: list[int] = []
    heights: list[int] = []
    glue = -1  # where a token ended that the next word must not be glued to
    max_stack = options.max_stack
    limit = options.max_depth
    after = pos  # the end of the last whole top-level declaration
    deep = -1  # `after` as it was before the first declaration nested past `limit`
    while True:
        match = scanners[state](text, pos, stop)
        if match is None:
            raise _Rejected(after)
        kind: str = match.lastgroup  # type: ignore[assignment]
        start, pos = match.span(kind)
        value: Any = text[start:pos]
        words = keywords[state].get(kind)
        if words is not None:
            kind = words.get(value, kind)
        if start == glue and word_char(value):
            raise _Rejected(after)  # WholeWords: a keyword glued to the next word
        glue = pos if kind != "NAME" and value[-1:].isalpha() else -1
        if kind == "STRING":
            value = StrToken(value)
            value.start = start
        else:  # (names and words: a policy repeats them, so one copy of each is kept)
            value = intern(value)
        row = actions[state]
        while True:
            try:
                act = row[kind]
            except KeyError:
                raise _Rejected(after) from None
            if act >= 0:
                break
            size, origin, how, reducer, grows = rules[~act]
            if how == PASS:
                state = actions[states[-2]][origin]
                states[-1] = state
                row = actions[state]
                continue
            if how == CALL:
                node = reducer(builder, values[-size:], starts[-size], ends[-1])  # type: ignore[misc]
            elif how == APPEND:
                node = values[-size]
                node.append(values[-1])
            elif how == LIST:
                node = [values[-1]]
            else:  # ACCEPT
                if not size:
                    return reducer(builder, [], 0, 0), 0, 0  # type: ignore[misc]
                node = reducer(builder, values[-size:], starts[-size], ends[-1])  # type: ignore[misc]
                return node, max(heights[-size:]) + grows, deep
            if size == 1:
                values[-1] = node
                heights[-1] += grows
            else:
                height = max(heights[-size:]) + grows
                end = ends[-1]
                keep = 1 - size
                del values[keep:], states[keep:], starts[keep:], ends[keep:], heights[keep:]
                values[-1] = node
                ends[-1] = end
                heights[-1] = height
            state = actions[states[-2]][origin]
            states[-1] = state
            row = actions[state]
            if how != CALL and len(states) == 2:  # the top-level list took a declaration
                if deep < 0 and heights[-1] > limit:
                    deep = after
                after = ends[-1]
        state = act
        states.append(act)
        if len(states) > max_stack:
            raise _TooDeep(start)
        values.append(value)
        starts.append(start)
        ends.append(pos)
        heights.append(0)


# ---- parse ------------------------------------------------------------------------------


def parse(
    text: str, file: str = "<input>", options: ParseOptions = DEFAULT_OPTIONS
) -> ast.SourceFile:
    """Parse one file. Raises `CharterSyntaxError` (and nothing else) on bad input."""
    if len(text.encode("utf-8", "surrogatepass")) > options.max_file_bytes:
        raise CharterSyntaxError([too_large(file, options.max_file_bytes)])
    unreadable = text_problems(text, file)
    if unreadable:
        raise CharterSyntaxError(unreadable)
    builder = Builder(file, text)
    tables = parse_tables()  # outside the `try`: a grammar/Builder mismatch must fail loudly
    try:
        declarations, height, deep = _run(tables, text, builder, options)
    except _TooDeep as too_deep:
        span = builder._sp(too_deep.at, too_deep.at + 1)  # (the builder's own line count)
        raise CharterSyntaxError([_nested_too_deep(span, options)]) from None
    except _Rejected as rejected:
        raise CharterSyntaxError(_diagnose(text, file, options, after=rejected.after)) from None
    except Exception:  # a reduce action failed: a bug (its text is not for the user)
        raise CharterSyntaxError(_diagnose(text, file, options, failed=True)) from None
    if height > options.max_depth:
        raise CharterSyntaxError(_diagnose(text, file, options, after=deep))
    if builder.errors:
        raise CharterSyntaxError(builder.errors)
    comments = tuple(_comments(text)) if "#" in text else ()
    return ast.SourceFile(file, tuple(declarations), text, comments)


class RangeRefused(Exception):
    """`parse_ranges` could not take a range as one whole declaration."""


def parse_ranges(
    text: str,
    file: str,
    ranges: list[tuple[int, int]],
    options: ParseOptions = DEFAULT_OPTIONS,
) -> ast.SourceFile:
    """The declarations at `ranges` of a file (each range one declaration, its text from
    its keyword to its closing brace: grammar/outline.py finds them), parsed as `parse`
    parses them, with the same spans: the file's other declarations are not parsed at
    all. For a text that `parse` accepted whole (a stored revision's, checked when it was
    uploaded); anything else (a range that is not exactly one declaration, a problem the
    builder reports, nesting past the limit) raises RangeRefused, and the caller parses
    the whole file. The file keeps its whole text; its comments are not collected."""
    tables = parse_tables()
    declarations: list[ast.Declaration] = []
    for start, end in ranges:
        builder = Builder(file, text, start, end)
        try:
            found, height, _ = _run(tables, text, builder, options, start, end)
        except Exception as exc:  # (_Rejected, _TooDeep, a failed reduce action)
            raise RangeRefused(f"{file}: no declaration at {start}-{end}") from exc
        if len(found) != 1 or height > options.max_depth or builder.errors:
            raise RangeRefused(f"{file}: not one declaration at {start}-{end}")
        declarations.append(found[0])
    return ast.SourceFile(file, tuple(declarations), text)


def _diagnose(
    text: str,
    file: str,
    options: ParseOptions,
    *,
    failed: bool = False,
    after: int = 0,
) -> list[Diagnostic]:
    """What is wrong with a text the fast path refused, in the order the checks have
    always run: lark's syntax errors, then the depth limit, then a failed build. Lark
    reads the text from `after` on: the whole declarations before it (which the fast
    path parsed, and which hold neither the first syntax error nor the nesting over the
    limit) are blanked out, lines kept, so positions stay those of the whole text and a
    typo at the end of a megabyte costs lark one declaration, not the megabyte."""
    if after > 0:
        kept = text[:after].split("\n")
        text = "\n".join(" " * len(line) for line in kept) + text[after:]
    try:
        tree = lark_parser().parse(text)
    except lark.exceptions.UnexpectedInput as exc:
        return [syntax_diagnostic(exc, file, text)]
    except GluedWord as glued:
        return [glued_diagnostic(glued, file)]
    except lark.exceptions.LarkError:  # pragma: no cover - defensive
        return [Diagnostic("E0001", "cannot parse this input", ast.Span(file, 1, 1, 1, 1))]
    problems = _check_shape(tree, file, options)
    if problems:
        return problems
    reason = "internal error: cannot build the tree" if failed else "cannot parse this input"
    return [
        Diagnostic(
            "E0001",
            reason,
            ast.Span(file, 1, 1, 1, 1),
            "this is a bug in charter: please report it",
        )
    ]


def _nested_too_deep(span: ast.Span, options: ParseOptions) -> Diagnostic:
    """E0013, wherever it is found: by the fast path's stack or in lark's tree."""
    return Diagnostic(
        "E0013",
        f"nesting is deeper than the limit of {options.max_depth} levels",
        span,
        "each `not`, `and`, `or`, comparison, function call, list and map is a level "
        "(parentheses are not); split the condition into simpler rules",
    )


def _span_of(file: str, meta: Meta) -> ast.Span:
    """The span of a node of lark's tree (the error paths run lark)."""
    line = getattr(meta, "line", 0) or 0
    col = getattr(meta, "column", 0) or 0
    end_line = getattr(meta, "end_line", line) or line
    end_col = getattr(meta, "end_column", col) or col
    return ast.Span(file, line, col, end_line, end_col)


def _check_shape(tree: Tree[Token], file: str, options: ParseOptions) -> list[Diagnostic]:
    """The nesting limit on lark's tree (the `LEVELS` nodes on a path from the root,
    counted as `_run` counts them), checked iteratively so a deep input cannot blow the
    stack."""
    stack: list[tuple[Tree[Token], int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        depth += node.data in LEVELS
        if depth > options.max_depth:
            return [_nested_too_deep(_span_of(file, node.meta), options)]
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, depth))
    return []


def _comments(text: str) -> list[tuple[int, int, str]]:
    """(line, column, text) of every `#` comment; a `#` inside a string is not one."""
    out: list[tuple[int, int, str]] = []
    # Lines as lark counts them: only "\n" ends one (splitlines also splits at \r,
    # \x85, \u2028..., which may sit inside a string or a comment).
    for number, line in enumerate(text.split("\n"), start=1):
        in_string = escaped = False
        for index, char in enumerate(line):
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "#":
                out.append((number, index + 1, line[index:].rstrip()))
                break
    return out
