"""Reduce actions: turn the children of one grammar rule into a frozen AST node with a span.

`grammar.parser` drives lark's LALR tables itself and calls one method per rule (named
after the rule's alias or name, like a lark Transformer) as soon as the rule is reduced,
so no parse tree is built. Each method gets the rule's children as lark would pass them
to a transformer (anonymous punctuation dropped, `[x]` as None, repetitions spliced in)
and the half-open character range the rule covers, `start` to `end`.

Tokens arrive as plain `str`, except string literals, which arrive as `StrToken` (a `str`
that knows its offset) so that a bad escape can be pointed at.

Problems the grammar cannot express (a `*` in the middle of a pattern, a hook mixing
actions, bad string escapes, ...) are collected in `errors` rather than raised, so a
file reports all of them at once.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from datetime import datetime
from decimal import Decimal, InvalidOperation
from sys import intern
from typing import Any

from grammar import literals
from policy import ast
from policy.diagnostics import Diagnostic

# `expect`, then white space and comments (as the grammar ignores them), then the effect.
_EFFECT_AFTER = re.compile(r"expect(?:[ \t\f\r\n]|#[^\n]*)*([a-z]+)")


class StrToken(str):
    """A string-literal token (quotes and escapes as written) and its offset in the text."""

    start: int


Items = list[Any]
Offset = int  # a position in the text (not `int`: a method below is called `int`)


class _Setting:
    """One of a test's settings (`agent { ... }`, `thread`, `context`, `spent`) as the
    test's reducer receives it."""

    __slots__ = ("kind", "span", "value")

    def __init__(self, kind: str, value: Any, span: ast.Span) -> None:
        self.kind, self.value, self.span = kind, value, span


class Builder:
    """Builds AST nodes for one file. Problems the grammar cannot express go to `errors`."""

    def __init__(self, file: str, text: str, start: int = 0, stop: int | None = None) -> None:
        """`start` and `stop`: the part of `text` whose nodes are built (what
        `grammar.parser.parse_ranges` parses); only its lines are indexed."""
        self.file = file
        self.text = text
        self.errors: list[Diagnostic] = []
        self._unbound: dict[int, Diagnostic] = {}  # id(path) -> its E0012, while unbound
        # Where each line starts, less one: the offsets of the line breaks after a -1 for
        # line 1 (for a part: the break before its first line, then those in it). Lines
        # are numbered as lark numbers them (only "\n" ends one).
        stop = len(text) if stop is None else stop
        find = text.find
        first = text.rfind("\n", 0, start) if start else -1
        breaks = [first]
        at = find("\n", start, stop)
        while at >= 0:
            breaks.append(at)
            at = find("\n", at + 1, stop)
        self._breaks = breaks
        # Line numbers as shared int objects: Python caches only the ints up to 256, and
        # a span holding a fresh pair of them costs 56 bytes more. The first one is the
        # number of the line `breaks[0]` ends.
        before = text.count("\n", 0, first + 1) if first >= 0 else 0
        self._numbers = tuple(range(before, before + len(breaks) + 1))

    # ---- positions ----------------------------------------------------------------
    def _sp(self, start: Offset, end: Offset) -> ast.Span:
        """The span of the text from offset `start` to offset `end`, in lines and columns
        as lark counts them (an end right before a line break stays on that line)."""
        breaks = self._breaks
        numbers = self._numbers
        line = bisect_left(breaks, start)
        end_line = bisect_left(breaks, end, line)
        return ast.Span(
            self.file,
            numbers[line],
            start - breaks[line - 1],
            numbers[end_line],
            end - breaks[end_line - 1],
        )

    def _error(self, code: str, message: str, where: ast.Span, help: str | None = None) -> None:
        self.errors.append(Diagnostic(code, message, where, help))

    def _string(self, token: StrToken) -> str:
        value, problem = literals.string_value(token)
        if problem is not None:
            self._problem(problem, token.start)
        return value

    def _problem(self, problem: literals.Problem, at: Offset) -> None:
        start = at + problem.offset
        self._error(
            problem.code, problem.message, self._sp(start, start + problem.length), problem.help
        )

    # ---- top level ----------------------------------------------------------------
    def start(self, items: Items, start: Offset, end: Offset) -> list[ast.Declaration]:
        return items

    # ---- toolsets -----------------------------------------------------------------
    def toolset(self, items: Items, start: Offset, end: Offset) -> ast.Toolset:
        name, *body = items
        self._lowercase(name, start + len("toolset"))
        url: str | None = None
        connection = runs_code = False
        url_span = ast.NO_SPAN
        tools: list[ast.ToolDecl] = []
        placed: list[tuple[str, ast.Span]] = []
        for item in body:  # (kind, the item's span, ...)
            if isinstance(item, ast.ToolDecl):
                tools.append(item)
                continue
            placed.append((item[0], item[1]))
            if item[0] == "url":
                if url is not None:
                    self._error(
                        "E0004",
                        f"toolset `{name}` has more than one `url`",
                        item[1],
                        "a toolset has one address: keep one `url` line",
                    )
                else:
                    url, url_span = item[2], item[3]
            elif item[0] == "connection":
                if connection:
                    self._repeated_flag(name, "connection required", item[1])
                connection = True
            elif item[0] == "runs":
                if runs_code:
                    self._repeated_flag(name, "runs code", item[1])
                runs_code = True
        return ast.Toolset(
            name,
            url,
            connection,
            runs_code,
            tuple(tools),
            span=self._sp(start, end),
            item_spans=tuple(placed),
            url_span=url_span,
        )

    def _lowercase(self, name: str, at: Offset) -> None:
        """E0024 for a capital letter in the name of a declaration (a toolset, a role, a
        hook, a profile), where one is referred to, and in a pattern's toolset: those
        are lowercase (a role's name is its file's name). `at`: where the name is
        looked for (the first occurrence from there)."""
        if name.islower():  # (a NAME starts with a letter: with no capital, it is lower)
            return
        capital = next(c for c in name if c.isupper())
        found = self.text.find(name, at)
        where = (found if found >= 0 else at) + name.index(capital)
        self._error(
            "E0024",
            f"`{name}` has the capital letter `{capital}`: declarations are named in lowercase",
            self._sp(where, where + 1),
            "names are lowercase: `[a-z][a-z0-9_-]*`; only tools, arguments and fields keep "
            "the spelling of their server",
        )

    def _repeated_flag(self, toolset: str, line: str, where: ast.Span) -> None:
        """E0004 for a toolset's `connection required` or `runs code` written twice (as
        for a second `url`): the formatter kept one, so the text said more than it."""
        self._error(
            "E0004",
            f"toolset `{toolset}` has more than one `{line}` line",
            where,
            f"keep one `{line}` line",
        )

    def url_item(
        self, items: Items, start: Offset, end: Offset
    ) -> tuple[str, ast.Span, str, ast.Span]:
        """("url", the item's span, the address, the string literal's span)."""
        token: StrToken = items[0]
        return ("url", self._sp(start, end), self._string(token), self._sp(token.start, end))

    def connection_item(self, items: Items, start: Offset, end: Offset) -> tuple[str, ast.Span]:
        return ("connection", self._sp(start, end))

    def runs_code_item(self, items: Items, start: Offset, end: Offset) -> tuple[str, ast.Span]:
        return ("runs", self._sp(start, end))

    def _member(self, name: str) -> str:
        """A tool's, an argument's or a field's name: a NAME as written, or a string's
        value (`"x.y"`), which names nothing when empty."""
        if not isinstance(name, StrToken):
            return name
        value = self._string(name)
        if not value:
            self._error(
                "E0022",
                "a name cannot be empty",
                self._sp(name.start, name.start + len(name)),
                "write the name between the quotes",
            )
        return value

    def tool_decl(self, items: Items, start: Offset, end: Offset) -> ast.ToolDecl:
        written, *params = items
        name = self._member(written)
        clean = tuple(p for p in params if p is not None)
        span = self._sp(start, end)
        if name.endswith("*"):
            self._error(
                "E0022",
                f"a tool cannot be named `{name}`: a pattern naming it would read as a wildcard",
                span,
                "a tool's name never ends in `*`",
            )
        return ast.ToolDecl(name, clean, span=span)

    def param(self, items: Items, start: Offset, end: Offset) -> ast.Param:
        written, optional, secret, type_, default = items
        name = self._member(written)
        span = self._sp(start, end)
        if optional is not None and default is not None:
            self._error(
                "E0005",
                f"parameter `{name}` is marked optional and also has a default",
                span,
                "a default already makes a parameter optional: drop the `?`",
            )
        if secret is not None:
            self._secret_param(name, optional is not None, type_, default, span)
        return ast.Param(
            name, type_, default, optional is not None, span=span, secret=secret is not None
        )

    def _secret_param(
        self, name: str, optional: bool, type_: ast.TypeRef, default: Any, span: ast.Span
    ) -> None:
        """A secret argument is a string the caller gives (or, marked `?`, leaves out):
        a default would be a secret written in the policy, which every reader of the
        workspace sees, and a list or a map would be redacted whole where its items
        are what a condition reads."""
        if type_.kind != "str":
            self._error(
                "E0021",
                f"parameter `{name}` is marked `secret` but its type is `{type_}`: only a `str` can be",
                type_.span,
                f"write `{name}{'?' if optional else ''}: secret str`, or drop `secret`",
            )
        if default is not None:
            self._error(
                "E0020",
                f"secret parameter `{name}` has a default",
                default.span,
                f"a secret comes from the call, never from the policy: drop the default, and "
                f"write `{name}?: secret str` if a call may leave it out",
            )

    def scalar_type(self, items: Items, start: Offset, end: Offset) -> ast.TypeRef:
        return ast.TypeRef(items[0], span=self._sp(start, end))

    def list_type(self, items: Items, start: Offset, end: Offset) -> ast.TypeRef:
        return ast.TypeRef("list", items[0], span=self._sp(start, end))

    def enum_type(self, items: Items, start: Offset, end: Offset) -> ast.TypeRef:
        span = self._sp(start, end)
        values = tuple(self._string(token) for token in items)
        if len(set(values)) != len(values):
            twice = next(v for i, v in enumerate(values) if v in values[:i])
            self._error(
                "E0023",
                f"enum value `{twice}` is listed twice",
                span,
                "list each value once",
            )
        return ast.TypeRef("enum", span=span, values=values)

    def record_type(self, items: Items, start: Offset, end: Offset) -> ast.TypeRef:
        span = self._sp(start, end)
        fields = tuple(f for f in items if f is not None)
        seen: set[str] = set()
        for f in fields:
            if f.name in seen:
                self._error(
                    "E0023",
                    f"field `{f.name}` is declared twice in this record",
                    f.span,
                    "keep one of the two fields",
                )
            seen.add(f.name)
        return ast.TypeRef("record", span=span, fields=fields)

    def field(self, items: Items, start: Offset, end: Offset) -> ast.Field:
        name, optional, type_ = items
        return ast.Field(self._member(name), type_, optional is not None, span=self._sp(start, end))

    def nullable_type(self, items: Items, start: Offset, end: Offset) -> ast.TypeRef:
        inner: ast.TypeRef = items[0]
        return ast.TypeRef(
            inner.kind,
            inner.item,
            span=self._sp(start, end),
            values=inner.values,
            fields=inner.fields,
            nullable=True,
        )

    # ---- roles --------------------------------------------------------------------
    def role(self, items: Items, start: Offset, end: Offset) -> ast.Role:
        name, *rules = items
        self._lowercase(name, start + len("role"))
        return ast.Role(name, tuple(rules), span=self._sp(start, end))

    def rule(self, items: Items, start: Offset, end: Offset) -> ast.Rule:
        effect, patterns, where = items
        return ast.Rule(effect, patterns, where, span=self._sp(start, end))

    def patterns(self, items: Items, start: Offset, end: Offset) -> tuple[ast.Pattern, ...]:
        return tuple(items)

    def all_pattern(self, items: Items, start: Offset, end: Offset) -> ast.Pattern:
        return ast.Pattern("*", span=self._sp(start, end))

    def name_pattern(self, items: Items, start: Offset, end: Offset) -> ast.Pattern:
        span = self._sp(start, end)
        self._lowercase(items[0], start)
        # (a quoted part arrives with its quotes, so a quoted `"*"` is no `*` here)
        if "*" in items[:-1] or (items[-1] == "*" and len(items) != 2):
            self._error(
                "E0006",
                f"`{'.'.join(items)}` is not a tool pattern",
                span,
                "a pattern is an exact name (`gmail.send`), a namespace (`gmail.*`) or `*`",
            )
        text = ".".join(items)
        if '"' in text:  # (a quoted part: its value)
            text = ".".join(self._member(i) for i in items)
            if text.endswith("*") and items[-1] != "*":
                self._error(
                    "E0006",
                    f"`{text}` is not a tool pattern: a quoted name ending in `*` reads as a "
                    "wildcard",
                    span,
                    "a tool's name never ends in `*`; write the namespace as `gmail.*`",
                )
        # Interned: a policy names the same tools in many rules (157,000 patterns of
        # 5,000 tools at 20,000 roles: 8 MiB of copies).
        return ast.Pattern(intern(text), span=span)

    # ---- hooks --------------------------------------------------------------------
    def hook(self, items: Items, start: Offset, end: Offset) -> ast.Hook:
        name, patterns, where, *actions = items
        self._lowercase(name, start + len("hook"))
        span = self._sp(start, end)
        kinds = {a[0] for a in actions}
        kind = actions[0][0]
        message: str | None = None
        rewrites: tuple[ast.Rewrite, ...] = ()
        if len(kinds) > 1 or (kind != "rewrite" and len(actions) > 1):
            self._error(
                "E0007",
                f"hook `{name}` mixes actions; a hook does one thing",
                span,
                "split it into one hook per action: `pause`, `deny`, or `rewrite` lines",
            )
        if kind == "rewrite":
            rewrites = tuple(a[1] for a in actions if a[0] == "rewrite")
        else:
            message = actions[0][1]
        return ast.Hook(
            name,
            patterns,
            where,
            kind,
            message,
            rewrites,
            span=span,
            item_spans=tuple((a[0], a[2]) for a in actions if a[0] != "rewrite"),
        )

    def pause_action(
        self, items: Items, start: Offset, end: Offset
    ) -> tuple[str, str | None, ast.Span]:
        message = items[0]
        return ("pause", None if message is None else self._string(message), self._sp(start, end))

    def deny_action(
        self, items: Items, start: Offset, end: Offset
    ) -> tuple[str, str | None, ast.Span]:
        message = items[-1]  # items[0] is the kept `deny` token
        return ("deny", None if message is None else self._string(message), self._sp(start, end))

    def rewrite_action(self, items: Items, start: Offset, end: Offset) -> tuple[str, ast.Rewrite]:
        target, value = items
        return ("rewrite", ast.Rewrite(target, value, span=self._sp(start, end)))

    # ---- profiles -----------------------------------------------------------------
    def profile(self, items: Items, start: Offset, end: Offset) -> ast.Profile:
        name, *body = items
        self._lowercase(name, start + len("profile"))
        roles: tuple[str, ...] = ()
        hooks: tuple[str, ...] = ("default",)
        role_spans: tuple[ast.Span, ...] = ()
        hook_spans: tuple[ast.Span, ...] = ()
        written = False
        budget: ast.Budget | None = None
        rate: ast.Rate | None = None
        seen: set[str] = set()
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
                roles, role_spans = value
            elif kind == "hooks":
                (hooks, hook_spans), written = value, True
            elif kind == "rate":
                rate = value
            else:
                budget = value
        return ast.Profile(
            name,
            roles,
            hooks,
            budget,
            written,
            rate,
            span=self._sp(start, end),
            item_spans=tuple((kind, where) for kind, _, where in body),
            role_spans=role_spans,
            hook_spans=hook_spans,
        )

    def rate_item(self, items: Items, start: Offset, end: Offset) -> tuple[str, Any, ast.Span]:
        calls, period = items
        span = self._sp(start, end)
        problem = literals.number_problem(calls)
        if problem is not None:
            self._problem(problem, start + len("rate "))
        count = int(calls) if problem is None else 0
        if count < 0:
            self._error(
                "E0009",
                "a rate cannot be negative",
                span,
                "write a number of calls of 0 or more, or leave out `rate` for no limit",
            )
        return ("rate", ast.Rate(count, period, span=span), span)

    def roles_item(self, items: Items, start: Offset, end: Offset) -> tuple[str, Any, ast.Span]:
        listed: list[tuple[str, ast.Span]] = [t for t in items if t is not None]
        names = tuple(n for n, _ in listed)
        return ("roles", (names, tuple(s for _, s in listed)), self._sp(start, end))

    def role_ref(self, items: Items, start: Offset, end: Offset) -> tuple[str, ast.Span]:
        self._lowercase(items[0], start)
        return (items[0], self._sp(start, end))

    def hooks_item(self, items: Items, start: Offset, end: Offset) -> tuple[str, Any, ast.Span]:
        names = tuple(n for n, _ in items)
        span = self._sp(start, end)
        if "none" in names and len(names) > 1:
            self._error(
                "E0008",
                "`hooks none` cannot be combined with other hooks",
                span,
                "write `hooks none` alone, or list the hooks you want",
            )
        return ("hooks", (names, tuple(s for _, s in items)), span)

    def hook_ref(self, items: Items, start: Offset, end: Offset) -> tuple[str, ast.Span]:
        self._lowercase(items[0], start)
        return (items[0], self._sp(start, end))

    def budget_item(self, items: Items, start: Offset, end: Offset) -> tuple[str, Any, ast.Span]:
        amount, period = items
        span = self._sp(start, end)
        value = amount.value
        if value < 0:
            self._error(
                "E0009",
                "a budget cannot be negative",
                span,
                "write an amount of 0 or more, or leave out `budget` for no cap",
            )
        return ("budget", ast.Budget(Decimal(value), period, span=span), span)

    # ---- tests --------------------------------------------------------------------
    def test(self, items: Items, start: Offset, end: Offset) -> ast.Test:
        name, *body = items
        if body and isinstance(body[-1], list):  # (`test_expects`: the lines from the first
            body[-1:] = body[-1]  # expectation on)
        span = self._sp(start, end)
        profiles = [b for b in body if isinstance(b, tuple)]
        expects = tuple(b for b in body if isinstance(b, ast.Expect))
        settings: dict[str, _Setting] = {}
        for setting in (b for b in body if isinstance(b, _Setting)):
            if setting.kind in settings:
                self._error(
                    "E0004",
                    f"test {name} has more than one `{setting.kind}` line",
                    setting.span,
                    f"a test sets its {setting.kind} once: merge the two lines",
                )
            else:
                settings[setting.kind] = setting
        profile, item, where = profiles[0] if profiles else ("", ast.NO_SPAN, ast.NO_SPAN)
        if not profiles:
            self._error(
                "E0010",
                f"test {name} names no profile",
                span,
                "add a `profile NAME` line to the test",
            )
        elif len(profiles) > 1:
            self._error(
                "E0004",
                f"test {name} has more than one `profile` line",
                profiles[1][1],
                "a test runs against one profile: write one test per profile",
            )
        spans: ast.ItemSpans = (("profile", item),) if profiles else ()
        spans += tuple((kind, s.span) for kind, s in settings.items())

        def value(kind: str) -> Any:
            found = settings.get(kind)
            return None if found is None else found.value

        return ast.Test(
            self._string(name),
            profile,
            expects,
            value("agent"),
            value("thread"),
            value("context"),
            value("spent"),
            value("time"),
            value("called"),
            span=span,
            item_spans=spans,
            profile_span=where,
        )

    def test_profile(
        self, items: Items, start: Offset, end: Offset
    ) -> tuple[str, ast.Span, ast.Span]:
        """(the name, the line's span, the name's: the line's last token)."""
        name: str = items[0]
        self._lowercase(name, end - len(name))
        return (name, self._sp(start, end), self._sp(end - len(name), end))

    def test_expects(self, items: Items, start: Offset, end: Offset) -> list[Any]:
        return list(items)

    def test_agent(self, items: Items, start: Offset, end: Offset) -> _Setting:
        return _Setting("agent", items[0], self._sp(start, end))

    def test_thread(self, items: Items, start: Offset, end: Offset) -> _Setting:
        return _Setting("thread", items[0], self._sp(start, end))

    def test_context(self, items: Items, start: Offset, end: Offset) -> _Setting:
        return _Setting("context", items[0], self._sp(start, end))

    def test_spent(self, items: Items, start: Offset, end: Offset) -> _Setting:
        span = self._sp(start, end)
        return _Setting("spent", self._amount(items[0], span, "`spent`"), span)

    def test_called(self, items: Items, start: Offset, end: Offset) -> _Setting:
        span = self._sp(start, end)
        problem = literals.number_problem(items[0])
        if problem is not None:
            self._problem(problem, start + len("called "))
            return _Setting("called", 0, span)
        count = int(items[0])
        if count < 0:
            self._error("E0009", "`called` cannot be negative", span, "write 0 or more")
        return _Setting("called", count, span)

    def test_time(self, items: Items, start: Offset, end: Offset) -> _Setting:
        span = self._sp(start, end)
        text = self._string(items[0])
        return _Setting("time", self._moment(text, span), span)

    def _moment(self, text: str, span: ast.Span) -> int:
        """An ISO 8601 time with its offset (`2026-12-04T09:30:00Z`) in ms since the epoch."""
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            self._error(
                "E0027",
                f"`{text[:40]}` is not a time with its offset",
                span,
                'write an ISO 8601 time with `Z` or an offset: `time "2026-12-04T09:30:00Z"`',
            )
            return 0
        return literals.epoch_ms(moment)

    def _amount(self, number: Any, span: ast.Span, what: str) -> Decimal:
        value = Decimal(number.value)
        if value < 0:
            self._error(
                "E0009",
                f"{what} cannot be negative",
                span,
                "write an amount of 0 or more",
            )
        return value

    def expect(self, items: Items, start: Offset, end: Offset) -> ast.Expect:
        effect, (tool, tool_span), args, *rest = items
        parts = {r[0]: r for r in rest if r is not None}
        context = parts["context"][1] if "context" in parts else None
        rewritten = parts["rewritten"][1] if "rewritten" in parts else None
        cost = parts["cost"][1] if "cost" in parts else None
        because = parts["because"][1] if "because" in parts else None
        # The effect word: the first word after `expect` (comments may come between).
        word = _EFFECT_AFTER.match(self.text, start)
        at = word.start(1) if word else start
        return ast.Expect(
            effect,
            tool,
            args,
            context,
            rewritten,
            cost,
            because,
            span=self._sp(start, end),
            effect_span=self._sp(at, at + len(effect)),
            tool_span=tool_span,
            item_spans=tuple((k, parts[k][2]) for k in ("cost", "because") if k in parts),
        )

    def expect_context(self, items: Items, start: Offset, end: Offset) -> tuple[str, ast.MapLit]:
        return ("context", items[0])

    def expect_rewritten(self, items: Items, start: Offset, end: Offset) -> tuple[str, ast.MapLit]:
        return ("rewritten", items[0])

    def expect_cost(
        self, items: Items, start: Offset, end: Offset
    ) -> tuple[str, Decimal, ast.Span]:
        span = self._sp(start, end)
        return ("cost", self._amount(items[0], span, "a `cost`"), span)

    def expect_because(self, items: Items, start: Offset, end: Offset) -> tuple[str, str, ast.Span]:
        span = self._sp(start, end)
        text = self._string(items[0])
        if not text:
            self._error(
                "E0025",
                "`because` needs some text",
                span,
                "write part of the reason's message the decision must give",
            )
        return ("because", text, span)

    def tool_name(self, items: Items, start: Offset, end: Offset) -> tuple[str, ast.Span]:
        self._lowercase(items[0], start)
        return ".".join(self._member(i) for i in items), self._sp(start, end)

    # ---- values and expressions ---------------------------------------------------
    def list_value(self, items: Items, start: Offset, end: Offset) -> ast.ListLit:
        return ast.ListLit(tuple(i for i in items if i is not None), span=self._sp(start, end))

    list_expr = list_value

    def map_value(self, items: Items, start: Offset, end: Offset) -> ast.MapLit:
        written = [i for i in items if i is not None]
        entries = tuple((key, value) for key, value, _ in written)
        span = self._sp(start, end)
        seen: set[str] = set()
        for key, _value in entries:
            if key in seen:
                self._error(
                    "E0011",
                    f"key `{key}` appears twice in this map",
                    span,
                    "keep one of the two entries",
                )
            seen.add(key)
        return ast.MapLit(entries, span=span, key_spans=tuple(where for _, _, where in written))

    def map_entry(self, items: Items, start: Offset, end: Offset) -> tuple[str, ast.Expr, ast.Span]:
        """(the key, the value, the key's span: a name, or a string with its quotes)."""
        key, value = items
        name = self._string(key) if isinstance(key, StrToken) else key
        return (name, value, self._sp(start, start + len(key)))

    def or_expr(self, items: Items, start: Offset, end: Offset) -> ast.BoolOp:
        return ast.BoolOp("or", items[0], items[1], span=self._sp(start, end))

    def and_expr(self, items: Items, start: Offset, end: Offset) -> ast.BoolOp:
        return ast.BoolOp("and", items[0], items[1], span=self._sp(start, end))

    def not_expr(self, items: Items, start: Offset, end: Offset) -> ast.Not:
        return ast.Not(items[0], span=self._sp(start, end))

    def compare(self, items: Items, start: Offset, end: Offset) -> ast.Compare:
        left, op, right = items
        return ast.Compare(op, left, right, span=self._sp(start, end))

    def not_in(self, items: Items, start: Offset, end: Offset) -> ast.Compare:
        left, _not, right = items
        return ast.Compare("not in", left, right, span=self._sp(start, end))

    def call(self, items: Items, start: Offset, end: Offset) -> ast.Call | ast.Quantifier:
        name, *given = items
        args = tuple(a for a in given if a is not None)
        span = self._sp(start, end)
        if name in ast.QUANTIFIERS:
            return self._quantifier(name, args, span)
        return ast.Call(name, args, span=span)

    def _quantifier(
        self, kind: str, args: tuple[ast.Expr, ...], span: ast.Span
    ) -> ast.Call | ast.Quantifier:
        """`all(x in LIST, CONDITION)`: the call's first argument names the item and the
        list, and the paths rooted at the item inside the condition are bound to it (their
        E0012, reported when each was read, is taken back)."""
        head = args[0] if args else None
        if not (
            len(args) == 2
            and isinstance(head, ast.Compare)
            and head.op == "in"
            and isinstance(head.left, ast.Path)
            and not head.left.parts
        ):
            self._error(
                "E0026",
                f"`{kind}` takes an item's name, a list and a condition",
                span,
                f'write `{kind}(x in args.cc, x endswith "@example.com")`',
            )
            return ast.Call(kind, args, span=span)
        var, body = head.left.root, args[1]
        self._bind(head.left, var)
        if var in ast.PATH_ROOTS:
            self._error(
                "E0026",
                f"`{var}` names a place a condition reads, not a list's item",
                head.left.span,
                f"name the item another way: `{kind}(x in ..., ...)`",
            )
        for path in ast.walk_expr(body):
            if isinstance(path, ast.Path) and path.root == var:
                self._bind(path, var)
        return ast.Quantifier(kind, var, head.right, body, span=span)  # type: ignore[arg-type]

    def _bind(self, path: ast.Path, var: str) -> None:
        diag = self._unbound.pop(id(path), None)
        if diag is not None:
            self.errors[:] = [d for d in self.errors if d is not diag]

    def path(self, items: Items, start: Offset, end: Offset) -> ast.Path:
        root, *parts = items
        if any(type(p) is StrToken for p in parts):  # (a quoted part: its value)
            parts = [self._member(p) for p in parts]
        span = self._sp(start, end)
        node = ast.Path(root, tuple(parts), span=span)
        if root not in ast.PATH_ROOTS:
            diag = Diagnostic(
                "E0012",
                f"`{root}` is not a place a condition can read",
                span,
                "paths start at `args`, `agent`, `thread`, `context` or `time`, or at the "
                "item an `all` or `any` names",
            )
            self.errors.append(diag)
            self._unbound[id(node)] = diag  # (until a quantifier around it binds it)
        return node

    def string(self, items: Items, start: Offset, end: Offset) -> ast.Lit:
        return ast.Lit("str", self._string(items[0]), span=self._sp(start, end))

    def int(self, items: Items, start: Offset, end: Offset) -> ast.Lit:
        problem = literals.number_problem(items[0])
        if problem is not None:
            self._problem(problem, start)
            return ast.Lit("int", 0, span=self._sp(start, end))
        return ast.Lit("int", int(items[0]), span=self._sp(start, end))

    def decimal(self, items: Items, start: Offset, end: Offset) -> ast.Lit:
        problem = literals.number_problem(items[0])
        if problem is not None:
            self._problem(problem, start)
        try:
            value = Decimal(items[0]) if problem is None else Decimal(0)
        except InvalidOperation:  # pragma: no cover - the lexer only passes digits
            value = Decimal(0)
        return ast.Lit("decimal", value, span=self._sp(start, end))

    def true(self, items: Items, start: Offset, end: Offset) -> ast.Lit:
        return ast.Lit("bool", True, span=self._sp(start, end))

    def false(self, items: Items, start: Offset, end: Offset) -> ast.Lit:
        return ast.Lit("bool", False, span=self._sp(start, end))

    def null(self, items: Items, start: Offset, end: Offset) -> ast.Lit:
        return ast.Lit("null", None, span=self._sp(start, end))
