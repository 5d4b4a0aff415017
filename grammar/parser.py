"""Text -> AST. Lark parses (LALR, strict); a Transformer builds frozen nodes with spans.

No lark exception leaves this module: every failure becomes a `CharterSyntaxError`
carrying diagnostics with a stable code, a span and, where we can tell, a help line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from importlib import resources
from typing import Any

import lark
from lark import Lark, Token, Transformer, Tree, v_args
from lark.tree import Meta

from grammar.tokens import character_help, describe_expected, describe_token, token_help
from policy import ast
from policy.diagnostics import CharterSyntaxError, Diagnostic, did_you_mean


@dataclass(frozen=True, slots=True)
class ParseOptions:
    """Limits are options, not afterthoughts (cel-go): all are checked before transforming."""

    max_file_bytes: int = 1 << 20
    max_depth: int = 48
    max_expr_nodes: int = 2_000


DEFAULT_OPTIONS = ParseOptions()


_WORD_CHAR = re.compile(r"[a-z0-9_-]")
_KEYWORD_WORDS = frozenset(
    [
        "toolset",
        "url",
        "connection",
        "required",
        "runs",
        "code",
        "tool",
        "list",
        "role",
        "allow",
        "deny",
        "where",
        "hook",
        "on",
        "pause",
        "rewrite",
        "profile",
        "roles",
        "hooks",
        "default",
        "none",
        "budget",
        "usd",
        "per",
        "test",
        "expect",
        "context",
        "rewritten",
        "and",
        "or",
        "not",
        "in",
        "startswith",
        "endswith",
        "contains",
        "like",
        "true",
        "false",
        "null",
        "str",
        "int",
        "decimal",
        "bool",
        "map",
    ]
)


class _GluedWord(Exception):
    def __init__(self, first: Token, second: Token) -> None:
        super().__init__(f"{first}{second}")
        self.first = first
        self.second = second


class _WholeWords:
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
                and _WORD_CHAR.match(token[:1])
            ):
                raise _GluedWord(previous, token)
            yield token
            previous = token


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
        postlex=_WholeWords(),
    )


def _span(file: str, meta: Meta | Token) -> ast.Span:
    line = getattr(meta, "line", 0) or 0
    col = getattr(meta, "column", 0) or 0
    end_line = getattr(meta, "end_line", line) or line
    end_col = getattr(meta, "end_column", col) or col
    return ast.Span(file, line, col, end_line, end_col)


def unquote(token: str) -> str:
    """Decode a string literal; its escapes are JSON's (\\n, \\t, \\", \\\\, \\uXXXX)."""
    value = json.loads(token)
    if not isinstance(value, str):  # pragma: no cover - the lexer only passes strings
        raise ValueError("not a string")
    return value


class _Builder(Transformer[Token, list[ast.Declaration]]):
    """Builds AST nodes. Problems that the grammar cannot express go to `errors`."""

    def __init__(self, file: str) -> None:
        super().__init__(visit_tokens=False)
        self.file = file
        self.errors: list[Diagnostic] = []

    def _sp(self, meta: Meta | Token) -> ast.Span:
        return _span(self.file, meta)

    def _error(self, code: str, message: str, where: Meta | Token, help: str | None = None) -> None:
        self.errors.append(Diagnostic(code, message, self._sp(where), help))

    def _string(self, token: Token) -> str:
        try:
            return unquote(str(token))
        except ValueError:
            self._error(
                "E0003",
                f"invalid escape in string literal `{token}`",
                token,
                'strings use JSON escapes: \\", \\\\, \\n, \\t, \\uXXXX',
            )
            return str(token)[1:-1]

    # ---- top level ----------------------------------------------------------------
    def start(self, items: list[ast.Declaration]) -> list[ast.Declaration]:
        return items

    # ---- toolsets -----------------------------------------------------------------
    @v_args(meta=True)
    def toolset(self, meta: Meta, items: list[Any]) -> ast.Toolset:
        name, *body = items
        url: str | None = None
        connection = runs_code = False
        tools: list[ast.ToolDecl] = []
        lines: list[tuple[str, int]] = []
        for item in body:
            if isinstance(item, ast.ToolDecl):
                tools.append(item)
                continue
            lines.append((item[0], item[-1].line))
            if item[0] == "url":
                if url is not None:
                    self._error(
                        "E0004",
                        f"toolset `{name}` has more than one `url`",
                        item[2],
                        "a toolset has one address: keep one `url` line",
                    )
                url = item[1]
            elif item[0] == "connection":
                connection = True
            elif item[0] == "runs":
                runs_code = True
        return ast.Toolset(
            str(name),
            url,
            connection,
            runs_code,
            tuple(tools),
            span=self._sp(meta),
            item_lines=tuple(lines),
        )

    @v_args(meta=True)
    def url_item(self, meta: Meta, items: list[Token]) -> tuple[str, str, Meta]:
        return ("url", self._string(items[0]), meta)

    @v_args(meta=True)
    def connection_item(self, meta: Meta, _: list[Any]) -> tuple[str, Meta]:
        return ("connection", meta)

    @v_args(meta=True)
    def runs_code_item(self, meta: Meta, _: list[Any]) -> tuple[str, Meta]:
        return ("runs", meta)

    @v_args(meta=True)
    def tool_decl(self, meta: Meta, items: list[Any]) -> ast.ToolDecl:
        name, *params = items
        clean = tuple(p for p in params if p is not None)
        return ast.ToolDecl(str(name), clean, span=self._sp(meta))

    @v_args(meta=True)
    def param(self, meta: Meta, items: list[Any]) -> ast.Param:
        name, optional, type_, default = items
        if optional is not None and default is not None:
            self._error(
                "E0005",
                f"parameter `{name}` is marked optional and also has a default",
                meta,
                "a default already makes a parameter optional: drop the `?`",
            )
        return ast.Param(str(name), type_, default, optional is not None, span=self._sp(meta))

    @v_args(meta=True)
    def scalar_type(self, meta: Meta, items: list[Token]) -> ast.TypeRef:
        return ast.TypeRef(str(items[0]), span=self._sp(meta))  # type: ignore[arg-type]

    @v_args(meta=True)
    def list_type(self, meta: Meta, items: list[ast.TypeRef]) -> ast.TypeRef:
        return ast.TypeRef("list", items[0], span=self._sp(meta))

    # ---- roles --------------------------------------------------------------------
    @v_args(meta=True)
    def role(self, meta: Meta, items: list[Any]) -> ast.Role:
        name, *rules = items
        return ast.Role(str(name), tuple(rules), span=self._sp(meta))

    @v_args(meta=True)
    def rule(self, meta: Meta, items: list[Any]) -> ast.Rule:
        effect, patterns, where = items
        return ast.Rule(str(effect), patterns, where, span=self._sp(meta))  # type: ignore[arg-type]

    def patterns(self, items: list[ast.Pattern]) -> tuple[ast.Pattern, ...]:
        return tuple(items)

    @v_args(meta=True)
    def all_pattern(self, meta: Meta, _: list[Token]) -> ast.Pattern:
        return ast.Pattern("*", span=self._sp(meta))

    @v_args(meta=True)
    def name_pattern(self, meta: Meta, items: list[Token]) -> ast.Pattern:
        parts = [str(t) for t in items]
        if "*" in parts[:-1] or (parts[-1] == "*" and len(parts) != 2):
            self._error(
                "E0006",
                f"`{'.'.join(parts)}` is not a tool pattern",
                meta,
                "a pattern is an exact name (`gmail.send`), a namespace (`gmail.*`) or `*`",
            )
        return ast.Pattern(".".join(parts), span=self._sp(meta))

    # ---- hooks --------------------------------------------------------------------
    @v_args(meta=True)
    def hook(self, meta: Meta, items: list[Any]) -> ast.Hook:
        name, patterns, where, *actions = items
        kinds = {a[0] for a in actions}
        kind = actions[0][0]
        message: str | None = None
        rewrites: tuple[ast.Rewrite, ...] = ()
        if len(kinds) > 1 or (kind != "rewrite" and len(actions) > 1):
            self._error(
                "E0007",
                f"hook `{name}` mixes actions; a hook does one thing",
                meta,
                "split it into one hook per action: `pause`, `deny`, or `rewrite` lines",
            )
        if kind == "rewrite":
            rewrites = tuple(a[1] for a in actions if a[0] == "rewrite")
        else:
            message = actions[0][1]
        return ast.Hook(
            str(name),
            patterns,
            where,
            kind,
            message,
            rewrites,
            span=self._sp(meta),
            item_lines=tuple((a[0], a[2]) for a in actions if a[0] != "rewrite"),
        )

    @v_args(meta=True)
    def pause_action(self, meta: Meta, items: list[Token | None]) -> tuple[str, str | None, int]:
        return ("pause", self._string(items[0]) if items[0] is not None else None, meta.line)

    @v_args(meta=True)
    def deny_action(self, meta: Meta, items: list[Token | None]) -> tuple[str, str | None, int]:
        message = items[-1]  # items[0] is the kept `deny` token
        return (
            "deny",
            self._string(message) if message and message.type == "STRING" else None,
            meta.line,
        )

    @v_args(meta=True)
    def rewrite_action(self, meta: Meta, items: list[Any]) -> tuple[str, ast.Rewrite]:
        target, value = items
        return ("rewrite", ast.Rewrite(target, value, span=self._sp(meta)))

    # ---- profiles -----------------------------------------------------------------
    @v_args(meta=True)
    def profile(self, meta: Meta, items: list[Any]) -> ast.Profile:
        name, *body = items
        roles: tuple[str, ...] = ()
        hooks: tuple[str, ...] = ("default",)
        written = False
        budget: ast.Budget | None = None
        seen: set[str] = set()
        lines = tuple((kind, where.line) for kind, _, where in body)
        for kind, value, where in body:
            if kind in seen:
                self._error(
                    "E0004",
                    f"profile `{name}` has more than one `{kind}` line",
                    where,
                    f"merge them into one `{kind}` line",
                )
            seen.add(kind)
            if kind == "roles":
                roles = value
            elif kind == "hooks":
                hooks, written = value, True
            else:
                budget = value
        return ast.Profile(
            str(name), roles, hooks, budget, written, span=self._sp(meta), item_lines=lines
        )

    @v_args(meta=True)
    def roles_item(self, meta: Meta, items: list[Token | None]) -> tuple[str, Any, Meta]:
        return ("roles", tuple(str(t) for t in items if t is not None), meta)

    @v_args(meta=True)
    def hooks_item(self, meta: Meta, items: list[Token]) -> tuple[str, Any, Meta]:
        names = tuple(str(t) for t in items)
        if "none" in names and len(names) > 1:
            self._error(
                "E0008",
                "`hooks none` cannot be combined with other hooks",
                meta,
                "write `hooks none` alone, or list the hooks you want",
            )
        return ("hooks", names, meta)

    def hook_ref(self, items: list[Token]) -> Token:
        return items[0]

    @v_args(meta=True)
    def budget_item(self, meta: Meta, items: list[Any]) -> tuple[str, Any, Meta]:
        amount, period = items
        value = amount.value
        if value < 0:
            self._error(
                "E0009",
                "a budget cannot be negative",
                meta,
                "write an amount of 0 or more, or leave out `budget` for no cap",
            )
        return ("budget", ast.Budget(Decimal(value), str(period), span=self._sp(meta)), meta)  # type: ignore[arg-type]

    # ---- tests --------------------------------------------------------------------
    @v_args(meta=True)
    def test(self, meta: Meta, items: list[Any]) -> ast.Test:
        name, *body = items
        profiles = [b for b in body if isinstance(b, tuple)]
        expects = tuple(b for b in body if isinstance(b, ast.Expect))
        profile = profiles[0][0] if profiles else ""
        if not profiles:
            self._error(
                "E0010",
                f"test {name} names no profile",
                meta,
                "add a `profile NAME` line to the test",
            )
        elif len(profiles) > 1:
            self._error(
                "E0004",
                f"test {name} has more than one `profile` line",
                profiles[1][1],
                "a test runs against one profile: write one test per profile",
            )
        return ast.Test(
            self._string(name),
            profile,
            expects,
            span=self._sp(meta),
            item_lines=tuple(("profile", p[1].line) for p in profiles[:1]),
        )

    @v_args(meta=True)
    def test_profile(self, meta: Meta, items: list[Token]) -> tuple[str, Meta]:
        return (str(items[0]), meta)

    @v_args(meta=True)
    def expect(self, meta: Meta, items: list[Any]) -> ast.Expect:
        effect, tool, args, *rest = items
        context = next((r[1] for r in rest if r is not None and r[0] == "context"), None)
        rewritten = next((r[1] for r in rest if r is not None and r[0] == "rewritten"), None)
        return ast.Expect(str(effect), tool, args, context, rewritten, span=self._sp(meta))  # type: ignore[arg-type]

    def expect_context(self, items: list[ast.MapLit]) -> tuple[str, ast.MapLit]:
        return ("context", items[0])

    def expect_rewritten(self, items: list[ast.MapLit]) -> tuple[str, ast.MapLit]:
        return ("rewritten", items[0])

    def tool_name(self, items: list[Token]) -> str:
        return ".".join(str(t) for t in items)

    # ---- values and expressions ---------------------------------------------------
    @v_args(meta=True)
    def list_value(self, meta: Meta, items: list[Any]) -> ast.ListLit:
        return ast.ListLit(tuple(i for i in items if i is not None), span=self._sp(meta))

    list_expr = list_value

    @v_args(meta=True)
    def map_value(self, meta: Meta, items: list[Any]) -> ast.MapLit:
        entries = tuple(i for i in items if i is not None)
        seen: set[str] = set()
        for key, _value in entries:
            if key in seen:
                self._error(
                    "E0011",
                    f"key `{key}` appears twice in this map",
                    meta,
                    "keep one of the two entries",
                )
            seen.add(key)
        return ast.MapLit(entries, span=self._sp(meta))

    def map_entry(self, items: list[Any]) -> tuple[str, ast.Expr]:
        key, value = items
        name = self._string(key) if key.type == "STRING" else str(key)
        return (name, value)

    @v_args(meta=True)
    def or_expr(self, meta: Meta, items: list[ast.Expr]) -> ast.BoolOp:
        return ast.BoolOp("or", items[0], items[1], span=self._sp(meta))

    @v_args(meta=True)
    def and_expr(self, meta: Meta, items: list[ast.Expr]) -> ast.BoolOp:
        return ast.BoolOp("and", items[0], items[1], span=self._sp(meta))

    @v_args(meta=True)
    def not_expr(self, meta: Meta, items: list[ast.Expr]) -> ast.Not:
        return ast.Not(items[0], span=self._sp(meta))

    @v_args(meta=True)
    def compare(self, meta: Meta, items: list[Any]) -> ast.Compare:
        left, op, right = items
        return ast.Compare(str(op), left, right, span=self._sp(meta))

    @v_args(meta=True)
    def not_in(self, meta: Meta, items: list[Any]) -> ast.Compare:
        left, _not, right = items
        return ast.Compare("not in", left, right, span=self._sp(meta))

    @v_args(meta=True)
    def call(self, meta: Meta, items: list[Any]) -> ast.Call:
        name, *args = items
        return ast.Call(str(name), tuple(a for a in args if a is not None), span=self._sp(meta))

    @v_args(meta=True)
    def path(self, meta: Meta, items: list[Token]) -> ast.Path:
        root, *parts = (str(t) for t in items)
        if root not in ast.PATH_ROOTS:
            self._error(
                "E0012",
                f"`{root}` is not a place a condition can read",
                meta,
                "paths start at `args`, `agent`, `thread` or `context`",
            )
        return ast.Path(root, tuple(parts), span=self._sp(meta))

    @v_args(meta=True)
    def string(self, meta: Meta, items: list[Token]) -> ast.Lit:
        return ast.Lit("str", self._string(items[0]), span=self._sp(meta))

    @v_args(meta=True)
    def int(self, meta: Meta, items: list[Token]) -> ast.Lit:
        return ast.Lit("int", int(items[0]), span=self._sp(meta))

    @v_args(meta=True)
    def decimal(self, meta: Meta, items: list[Token]) -> ast.Lit:
        try:
            value = Decimal(str(items[0]))
        except InvalidOperation:  # pragma: no cover - the lexer only passes digits
            value = Decimal(0)
        return ast.Lit("decimal", value, span=self._sp(meta))

    @v_args(meta=True)
    def true(self, meta: Meta, _: list[Token]) -> ast.Lit:
        return ast.Lit("bool", True, span=self._sp(meta))

    @v_args(meta=True)
    def false(self, meta: Meta, _: list[Token]) -> ast.Lit:
        return ast.Lit("bool", False, span=self._sp(meta))

    @v_args(meta=True)
    def null(self, meta: Meta, _: list[Token]) -> ast.Lit:
        return ast.Lit("null", None, span=self._sp(meta))


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
                    _span(file, node.meta),
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
    except _GluedWord as glued:
        raise CharterSyntaxError([_glued_diagnostic(glued, file)]) from None
    except lark.exceptions.LarkError as exc:  # pragma: no cover - defensive
        raise CharterSyntaxError(
            [Diagnostic("E0001", f"cannot parse: {exc}", ast.Span(file, 1, 1, 1, 1))]
        ) from None
    problems = _check_shape(tree, file, options)
    if problems:
        raise CharterSyntaxError(problems)
    builder = _Builder(file)
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


_TYPES = ("str", "int", "decimal", "bool", "map", "list")


def _glued_diagnostic(glued: _GluedWord, file: str) -> Diagnostic:
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
            span = ast.Span(file, line, col, line, col + 1)
            help = "a block opened with `{` is not closed" if "RBRACE" in accepted else None
            return Diagnostic("E0002", f"unexpected end of file, expected {expected}", span, help)
        start, word = _word_at(text, line, col)
        if token.type == "NAME" and start < col and word:
            # The lexer split a word (`string` -> `str` `ing`): report the whole word.
            span = ast.Span(file, line, start, line, start + len(word))
            if accepted <= {"COMMA", "EQUAL", "RPAR", "RSQB"}:
                return Diagnostic(
                    "E0002",
                    f"unknown type `{word}`",
                    span,
                    (did_you_mean(word, _TYPES) or "")
                    + " types are `str`, `int`, `decimal`, `bool`, `map` and `list[T]`",
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
