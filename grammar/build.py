"""The lark Transformer that turns a parse tree into frozen AST nodes with spans.

Problems the grammar cannot express (a `*` in the middle of a pattern, a hook mixing
actions, bad string escapes, ...) are collected in `errors` rather than raised, so a
file reports all of them at once.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from lark import Token, Transformer, v_args
from lark.tree import Meta

from policy import ast
from policy.diagnostics import Diagnostic


def span_of(file: str, meta: Meta | Token) -> ast.Span:
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


class Builder(Transformer[Token, list[ast.Declaration]]):
    """Builds AST nodes. Problems that the grammar cannot express go to `errors`."""

    def __init__(self, file: str) -> None:
        super().__init__(visit_tokens=False)
        self.file = file
        self.errors: list[Diagnostic] = []

    def _sp(self, meta: Meta | Token) -> ast.Span:
        return span_of(self.file, meta)

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
