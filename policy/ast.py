"""The Charter AST: frozen nodes, each with a source span that equality ignores.

Every later phase (checker, compiler, formatter, fit check) reads these nodes; none of
them mutates one. Two trees parsed from differently laid-out text compare equal when
they mean the same thing, because `span` is excluded from `__eq__` and `__hash__`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from decimal import Decimal
from typing import Literal as TypingLiteral
from typing import TypeAlias

from policy.quickinit import quick_init


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open region of one source file; lines and columns count from 1."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<builtin>", 0, 0, 0, 0)


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, hash=False, repr=False, kw_only=True)


# Where a block's items are, kind by kind (`("url", span)`, `("roles", span)`, ...): the
# items a declaration keeps as plain fields (a `url`, a profile's `roles` line) rather
# than as nodes with spans. The formatter keeps each comment with the item it was written
# at (it prints the items in its own order); the checker and the parser point at them.
ItemSpans: TypeAlias = tuple[tuple[str, Span], ...]


def _item_spans() -> ItemSpans:
    return field(default=(), compare=False, hash=False, repr=False, kw_only=True)


def _name_spans() -> tuple[Span, ...]:
    """The span of each name of a list kept as plain strings (a profile's `roles`), in
    the list's order; ignored by equality, as `span` is. A tree built by hand (or
    changed with `replace`) may hold fewer spans than names: the reader falls back on
    the declaration's span (`name_span`)."""
    return field(default=(), compare=False, hash=False, repr=False, kw_only=True)


def name_span(spans: tuple[Span, ...], index: int, fallback: Span) -> Span:
    """The span of the `index`th name of a list (`_name_spans`), else `fallback`."""
    return spans[index] if index < len(spans) else fallback


def item_span(spans: ItemSpans, kind: str, fallback: Span) -> Span:
    """The span of a block's first `kind` item (`ItemSpans`), else `fallback`."""
    return next((span for key, span in spans if key == kind), fallback)


# ---------------------------------------------------------------------------------------
# Types of tool arguments
# ---------------------------------------------------------------------------------------

ScalarKind: TypeAlias = TypingLiteral["str", "int", "decimal", "bool", "map"]
TypeKind: TypeAlias = TypingLiteral[
    "str", "int", "decimal", "bool", "map", "list", "enum", "record"
]


@dataclass(frozen=True, slots=True)
class TypeRef:
    """`str`, `int`, `decimal`, `bool`, `map`, `list[T]` (then `item` is T), an enum of
    strings `enum["open", "closed"]` (its `values`) or a record `{ owner: str, tags?:
    list[str] }` (its `fields`); `nullable` (`T | null`) when `null` is a value too."""

    kind: TypeKind
    item: TypeRef | None = None
    span: Span = _span()
    values: tuple[str, ...] = ()
    fields: tuple[Field, ...] = ()
    nullable: bool = False

    @property
    def plain(self) -> bool:
        """A type of the first forms (a scalar, or a list of them): no enum, record or
        `null` at any depth. Validation and the fit check keep their fast paths for it."""
        if self.nullable or self.kind in ("enum", "record"):
            return False
        return self.item is None or self.item.plain

    def __str__(self) -> str:
        if self.kind == "list":
            text = f"list[{self.item}]"
        elif self.kind == "enum":
            text = "enum[" + ", ".join(json.dumps(v) for v in self.values) + "]"
        elif self.kind == "record":
            text = "{ " + ", ".join(str(f) for f in self.fields) + " }" if self.fields else "{}"
        else:
            text = self.kind
        return f"{text} | null" if self.nullable else text


@dataclass(frozen=True, slots=True)
class Field:
    """A record's member: `owner: str`, or `tags?: list[str]` when it may be left out."""

    name: str
    type: TypeRef
    optional: bool = False
    span: Span = _span()

    def __str__(self) -> str:
        return f"{name_text(self.name)}{'?' if self.optional else ''}: {self.type}"


_BARE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")  # a name written without quotes


def name_text(name: str) -> str:
    """A member's name as messages show it: bare when it is a NAME, else quoted (`"x.y"`;
    grammar.fmt prints it for the parser, with its escapes)."""
    return name if _BARE.match(name) else json.dumps(name, ensure_ascii=False)


# ---------------------------------------------------------------------------------------
# Expressions (the `where` language)
# ---------------------------------------------------------------------------------------

LiteralValue: TypeAlias = str | int | Decimal | bool | None
LiteralKind: TypeAlias = TypingLiteral["str", "int", "decimal", "bool", "null"]


@dataclass(frozen=True, slots=True)
class Lit:
    """A scalar literal. `kind` is stored so that `1` and `true` never compare equal."""

    kind: LiteralKind
    value: LiteralValue
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class ListLit:
    items: tuple[Expr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class MapLit:
    """Only in test expectations and rewrites: `{ to: "a", limit: 3 }`. `key_spans`: the
    span of each entry's key, in order (`_name_spans`; a diagnostic about an argument of
    a test's call points at its name)."""

    entries: tuple[tuple[str, Expr], ...]
    span: Span = _span()
    key_spans: tuple[Span, ...] = _name_spans()


PathRoot: TypeAlias = TypingLiteral["args", "agent", "thread", "context", "time"]
PATH_ROOTS: tuple[str, ...] = ("args", "agent", "thread", "context", "time")


@dataclass(frozen=True, slots=True)
class Path:
    """`args.to`, `agent.metadata.team`, `context.ip`."""

    root: str
    parts: tuple[str, ...]
    span: Span = _span()

    def __str__(self) -> str:
        return ".".join((self.root, *(name_text(part) for part in self.parts)))


FUNCTIONS: tuple[str, ...] = ("has", "len", "lower", "host")


@dataclass(frozen=True, slots=True)
class Call:
    """`has(path)`, `len(x)`, `lower(x)`, `host(url)`."""

    fn: str
    args: tuple[Expr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class BoolOp:
    """`left and right` / `left or right`; evaluated left to right, short-circuiting."""

    op: TypingLiteral["and", "or"]
    left: Expr
    right: Expr
    span: Span = _span()


COMPARE_OPS: tuple[str, ...] = (
    "==", "!=", "<", "<=", ">", ">=",
    "in", "not in", "startswith", "endswith", "contains", "like",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Expr
    right: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Quantifier:
    """`all(x in args.cc, x endswith "@example.com")`, `any(...)`: whether `body` holds
    for every item (`all`) or for some item (`any`) of the list `source`, with each item
    bound to `var` (a path root inside `body`: `x`, `x.name`). Items are read in order and
    the first that settles the answer ends it, as `and` and `or` do: an empty list is
    `true` for `all` and `false` for `any`; a `source` that is not a list is an error."""

    kind: TypingLiteral["all", "any"]
    var: str
    source: Expr
    body: Expr
    span: Span = _span()


QUANTIFIERS: tuple[str, ...] = ("all", "any")

Expr: TypeAlias = Lit | ListLit | MapLit | Path | Call | Not | BoolOp | Compare | Quantifier


# ---------------------------------------------------------------------------------------
# Patterns over tool names
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pattern:
    """`gmail.send` (exact), `gmail.*` (namespace) or `*` (every tool; `tool:*` too)."""

    text: str
    span: Span = _span()

    @property
    def kind(self) -> TypingLiteral["exact", "namespace", "all"]:
        if self.text == "*":
            return "all"
        if self.text.endswith(".*"):
            return "namespace"
        return "exact"

    @property
    def namespace(self) -> str:
        return self.text[:-2] if self.kind == "namespace" else ""

    def matches(self, tool: str) -> bool:
        kind = self.kind
        if kind == "all":
            return True
        if kind == "namespace":
            return tool.startswith(self.text[:-1])
        return tool == self.text

    def __str__(self) -> str:
        return self.text


# ---------------------------------------------------------------------------------------
# Declarations
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    """A typed tool argument; optional when it has a default or is marked `name?: T`;
    `secret` (`name: secret str`) when the decision log and every answer redact it."""

    name: str
    type: TypeRef
    default: Expr | None = None
    optional: bool = False
    span: Span = _span()
    secret: bool = False

    @property
    def required(self) -> bool:
        return self.default is None and not self.optional


@dataclass(frozen=True, slots=True)
class ToolDecl:
    name: str
    params: tuple[Param, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Toolset:
    name: str
    url: str | None
    connection_required: bool
    runs_code: bool
    tools: tuple[ToolDecl, ...]
    span: Span = _span()
    item_spans: ItemSpans = _item_spans()
    url_span: Span = _span()  # the `url`'s string literal


Effect: TypeAlias = TypingLiteral["allow", "deny"]


@dataclass(frozen=True, slots=True)
class Rule:
    effect: Effect
    patterns: tuple[Pattern, ...]
    where: Expr | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    rules: tuple[Rule, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Rewrite:
    """`rewrite args.limit = 20`: set one argument to the value of an expression."""

    target: Path
    value: Expr
    span: Span = _span()


HookKind: TypeAlias = TypingLiteral["pause", "deny", "rewrite"]


@dataclass(frozen=True, slots=True)
class Hook:
    """`pause "msg"`, `deny "msg"`, or one or more `rewrite` lines."""

    name: str
    patterns: tuple[Pattern, ...]
    where: Expr | None
    kind: HookKind
    message: str | None
    rewrites: tuple[Rewrite, ...] = ()
    span: Span = _span()
    item_spans: ItemSpans = _item_spans()  # its `pause` or `deny` line


Period: TypeAlias = TypingLiteral["1m", "1h", "24h", "7d", "total"]


@dataclass(frozen=True, slots=True)
class Budget:
    amount: Decimal
    period: Period
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Rate:
    """`rate 100 calls per 1h`: each agent on the profile makes at most `calls` allowed
    calls in any window of `period` (the service counts them in its ledger)."""

    calls: int
    period: Period
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Profile:
    """`hooks` holds hook names; `default` and `none` are the two special names.

    A profile without a `hooks` line gets the default approval hooks, so `hooks` is
    `("default",)` then; `hooks_written` tells the two apart so the formatter keeps the
    author's text. `item_spans` (its `roles`, `hooks` and `budget` lines), `role_spans`
    and `hook_spans` (each listed name, in order; a profile with no `hooks` line has
    none) are ignored by equality, as `span` is.
    """

    name: str
    roles: tuple[str, ...]
    hooks: tuple[str, ...] = ("default",)
    budget: Budget | None = None
    hooks_written: bool = False
    rate: Rate | None = None
    span: Span = _span()
    item_spans: ItemSpans = _item_spans()
    role_spans: tuple[Span, ...] = _name_spans()
    hook_spans: tuple[Span, ...] = _name_spans()


ExpectEffect: TypeAlias = TypingLiteral["allow", "deny", "pause", "invalid"]


@dataclass(frozen=True, slots=True)
class Expect:
    """`expect allow gmail.send { ... } [context { ... }] [rewritten { ... }] [cost N]
    [because "..."]`.

    `invalid` expects a deny for the call's shape (an unknown or missing argument, a value
    of the wrong type); the other effects expect a call that fits the tool's signature.
    `effect_span` and `tool_span` (the effect word's, the tool name's) are ignored by
    equality, as `span` is."""

    effect: ExpectEffect
    tool: str
    args: MapLit
    context: MapLit | None = None
    rewritten: MapLit | None = None
    cost: Decimal | None = None  # `cost 2.50`: the call's expected cost, USD
    because: str | None = None  # `because "..."`: text a reason's message must hold
    span: Span = _span()
    effect_span: Span = _span()
    tool_span: Span = _span()
    item_spans: ItemSpans = _item_spans()  # its `cost` and `because` parts


@dataclass(frozen=True, slots=True)
class Test:
    """`agent`, `thread` and `context` are what each expectation's call carries (an
    expectation's own `context` replaces the test's); `spent` is what the agent has
    spent in its profile budget's window before each call."""

    name: str
    profile: str
    expects: tuple[Expect, ...]
    agent: MapLit | None = None
    thread: MapLit | None = None
    context: MapLit | None = None
    spent: Decimal | None = None
    time: int | None = None  # `time "2026-12-04T09:30:00Z"`: ms since the epoch
    called: int | None = None  # `called 3 times`: allowed calls in the rate's window
    span: Span = _span()
    item_spans: ItemSpans = _item_spans()  # its `profile`, `agent`, ... lines
    profile_span: Span = _span()  # the profile's name on that line


Declaration: TypeAlias = Toolset | Role | Hook | Profile | Test


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One parsed file: its declarations in source order, plus the text for messages."""

    path: str
    declarations: tuple[Declaration, ...]
    text: str = field(default="", compare=False, repr=False)
    comments: tuple[tuple[int, int, str], ...] = field(default=(), compare=False, repr=False)


def walk_expr(expr: Expr) -> list[Expr]:
    """Every node of an expression tree, parents before children."""
    out: list[Expr] = []
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ListLit):
            stack.extend(reversed(node.items))
        elif isinstance(node, MapLit):
            stack.extend(reversed([v for _, v in node.entries]))
        elif isinstance(node, Call):
            stack.extend(reversed(node.args))
        elif isinstance(node, Not):
            stack.append(node.operand)
        elif isinstance(node, BoolOp | Compare):
            stack.extend((node.right, node.left))
        elif isinstance(node, Quantifier):
            stack.extend((node.body, node.source))
    return out


def paths(node: object) -> Iterator[Path]:
    """Every `Path` a condition reads: in an expression, a rewrite, or a tuple or list of
    them (a hook's `(where, rewrites)`); any node's fields but its span are walked, so a
    node added later is read too."""
    stack: list[object] = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, Path):
            yield node
        elif isinstance(node, tuple | list):
            stack.extend(node)
        elif is_dataclass(node) and not isinstance(node, type) and not isinstance(node, Lit):
            stack.extend(getattr(node, f.name) for f in fields(node) if f.name != "span")


for _node in (
    Span, TypeRef, Field, Lit, ListLit, MapLit, Path, Call, Not, BoolOp, Compare, Quantifier,
    Pattern, Param,
    ToolDecl, Toolset, Rule, Role, Rewrite, Hook, Budget, Rate, Profile, Expect, Test, SourceFile,
):  # fmt: skip
    quick_init(_node)
