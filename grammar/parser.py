"""Text -> AST. Lark parses (LALR, strict); `grammar.build` makes frozen nodes with spans.

No lark exception leaves this module: every failure becomes a `CharterSyntaxError`
carrying diagnostics with a stable code, a span and, where we can tell, a help line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import lark
from lark import Lark, Token, Tree

from grammar.build import Builder, span_of
from grammar.syntax_errors import GluedWord, WholeWords, glued_diagnostic, syntax_diagnostic
from policy import ast
from policy.diagnostics import CharterSyntaxError, Diagnostic


@dataclass(frozen=True, slots=True)
class ParseOptions:
    """Limits are options, not afterthoughts (cel-go): all are checked before transforming."""

    max_file_bytes: int = 1 << 20
    max_depth: int = 48
    max_expr_nodes: int = 2_000


DEFAULT_OPTIONS = ParseOptions()


@lru_cache(maxsize=1)
def _lark() -> Lark:
    text = resources.files("grammar").joinpath("charter.lark").read_text(encoding="utf-8")
    # No cache=True: it loads a pickle from a predictable temp path.
    return Lark(
        text,
        parser="lalr",
        strict=True,
        propagate_positions=True,
        maybe_placeholders=True,
        postlex=WholeWords(),
    )


def _check_shape(tree: Tree[Token], file: str, options: ParseOptions) -> list[Diagnostic]:
    """Depth and size limits, checked iteratively so a deep input cannot blow the stack."""
    stack: list[tuple[Tree[Token], int]] = [(tree, 0)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > options.max_depth:
            return [
                Diagnostic(
                    "E0013",
                    f"nesting is deeper than the limit of {options.max_depth}",
                    span_of(file, node.meta),
                    "split the condition into simpler rules",
                )
            ]
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, depth + 1))
    return []


def parse(
    text: str, file: str = "<input>", options: ParseOptions = DEFAULT_OPTIONS
) -> ast.SourceFile:
    """Parse one file. Raises `CharterSyntaxError` (and nothing else) on bad input."""
    if len(text.encode("utf-8", "surrogatepass")) > options.max_file_bytes:
        raise CharterSyntaxError(
            [
                Diagnostic(
                    "E0014",
                    f"file is larger than the limit of {options.max_file_bytes} bytes",
                    ast.Span(file, 1, 1, 1, 1),
                    "split the workspace into several files",
                )
            ]
        )
    try:
        tree = _lark().parse(text)
    except lark.exceptions.UnexpectedInput as exc:
        raise CharterSyntaxError([syntax_diagnostic(exc, file, text)]) from None
    except GluedWord as glued:
        raise CharterSyntaxError([glued_diagnostic(glued, file)]) from None
    except lark.exceptions.LarkError as exc:  # pragma: no cover - defensive
        raise CharterSyntaxError(
            [Diagnostic("E0001", f"cannot parse: {exc}", ast.Span(file, 1, 1, 1, 1))]
        ) from None
    problems = _check_shape(tree, file, options)
    if problems:
        raise CharterSyntaxError(problems)
    builder = Builder(file)
    try:
        declarations = builder.transform(tree)
    except lark.exceptions.VisitError as exc:  # pragma: no cover - a bug, reported as one
        raise CharterSyntaxError(
            [
                Diagnostic(
                    "E0001", f"cannot build the tree: {exc.orig_exc}", ast.Span(file, 1, 1, 1, 1)
                )
            ]
        ) from None
    if builder.errors:
        raise CharterSyntaxError(builder.errors)
    return ast.SourceFile(file, tuple(declarations), text, tuple(_comments(text)))


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
