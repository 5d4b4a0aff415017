"""Generators of random but *checked* workspaces, built as ASTs.

A generated workspace is a handful of toolsets with typed tools, roles with allow and
deny rules, hooks of all three kinds and profiles. Every `where` is drawn from the
documented condition fragment and typed against the tools its pattern matches, so the
checker accepts what is generated (tests/property/test_generators.py holds that); the
workspace is then rendered with the canonical formatter and fed to `check_sources`,
so the whole pipeline runs on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

from hypothesis import strategies as st

from engine.builtins import builtin_tools
from engine.types import from_ref, join
from engine.workspace import match_tools
from grammar.fmt import format_file
from policy import ast
from policy.catalogue import ToolSpec

# ---- vocabulary ----------------------------------------------------------------------

# `gmail` and `drive` make the default approval hooks apply to generated tools too.
TOOLSET_NAMES = ("gmail", "drive", "crm", "web2", "code")
TOOL_NAMES = ("send", "read", "write", "create", "run", "fetch")


def _ref(kind: ast.ScalarKind | Literal["list"], item: ast.ScalarKind | None = None) -> ast.TypeRef:
    return ast.TypeRef(kind, ast.TypeRef(item) if item else None)


# One type per argument name across all toolsets, so conditions over `ns.*` type-check
# when every matched tool has the argument. `limit` and `url` agree with the built-ins.
PARAM_TYPES: dict[str, ast.TypeRef] = {
    "to": _ref("str"),
    "subject": _ref("str"),
    "url": _ref("str"),
    "limit": _ref("int"),
    "count": _ref("int"),
    "amount": _ref("decimal"),
    "urgent": _ref("bool"),
    "tags": _ref("list", "str"),
    "ids": _ref("list", "int"),
    "meta": _ref("map"),
}

# Strings shared by conditions and requests, so string predicates are often true.
STRINGS = (
    "",
    "a",
    "A",
    "team-x",
    "team-",
    "bob@example.com",
    "eve@elsewhere.net",
    "https://example.com/x",
    "http://evil.test:8080/p",
    "ftp://",
    "x*y",
    "ünï",
    'q"\\\n',
)
# Prefixes, suffixes and infixes of the pool, so `startswith` and friends are often true.
AFFIXES = ("team-", "https://", "http", "bob", "@example.com", ".net", "x", "e", "ü")
GLOBS = ("*", "a*", "*@example.com", "team-*", "*x*", "h*://*")
CONTEXT_KEYS = ("team", "level", "flag", "ip", "tags")
STR_KEYS = ("team", "team", "ip", "ip", "level")
NUM_KEYS = ("level", "level", "team")
# Built-in tools the rules and hooks talk about (denies may name only built-ins).
BUILTIN_TARGETS = (
    "agents.delete",
    "agents.list",
    "roles.create",
    "memory.write",
    "memory.read",
    "toolsets.create",
    "threads.create",
    "search",
    "execute",
)
BUILTIN_NAMESPACE_TARGETS = ("memory", "agents", "roles", "threads")


def one_in(draw: st.DrawFn, n: int) -> bool:
    """True about once in `n` draws. Hypothesis favours the ends of an integer range,
    so the rare value is one from the middle."""
    return bool(draw(st.integers(0, n - 1)) == n // 2)


# Mostly the shared pool (so string predicates hit), now and then anything.
strings = st.one_of(st.sampled_from(STRINGS), st.sampled_from(STRINGS), st.text(max_size=4))
# A few landmark numbers shared by conditions and requests, so `<` vs `<=` matters.
small_ints = st.one_of(st.sampled_from((0, 1, 5, 20, 50)), st.integers(-3, 60))
decimals = st.decimals(-100, 100, places=2, allow_nan=False, allow_infinity=False)


# ---- toolsets ------------------------------------------------------------------------


def default_for(ref: ast.TypeRef) -> st.SearchStrategy[ast.Expr]:
    """A literal default that the checker accepts for an argument of this type."""
    kind = from_ref(ref)
    if kind == "str":
        return strings.map(lambda s: ast.Lit("str", s))
    if kind == "int":
        return small_ints.map(lambda n: ast.Lit("int", n))
    if kind == "decimal":
        return decimals.map(lambda d: ast.Lit("decimal", d))
    if kind == "bool":
        return st.booleans().map(lambda b: ast.Lit("bool", b))
    if kind == "map":
        return st.just(ast.MapLit(()))
    item = default_for(ref.item) if ref.item else st.nothing()
    return st.lists(item, max_size=2).map(lambda xs: ast.ListLit(tuple(xs)))


def param_type(toolset: str, name: str) -> ast.TypeRef:
    """`price` is an `int` in some toolsets and a `decimal` in others: a condition over
    `ns.*`-wide patterns then sees the joined type (`decimal`)."""
    if name == "price":
        return _ref("int" if toolset in ("gmail", "crm") else "decimal")
    return PARAM_TYPES[name]


@st.composite
def params(draw: st.DrawFn, toolset: str) -> tuple[ast.Param, ...]:
    pool = sorted((*PARAM_TYPES, "price"))
    names = draw(st.lists(st.sampled_from(pool), max_size=4, unique=True))
    out = []
    for name in names:
        ref = param_type(toolset, name)
        mode = draw(st.sampled_from(("required", "optional", "default")))
        default = draw(default_for(ref)) if mode == "default" else None
        out.append(ast.Param(name, ref, default, optional=mode == "optional"))
    return tuple(out)


@st.composite
def toolsets(draw: st.DrawFn) -> tuple[ast.Toolset, ...]:
    names = draw(st.lists(st.sampled_from(TOOLSET_NAMES), min_size=1, max_size=3, unique=True))
    out = []
    for name in names:
        tool_names = draw(
            st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=3, unique=True)
        )
        tools = tuple(ast.ToolDecl(t, draw(params(name))) for t in tool_names)
        url = draw(st.sampled_from((None, f"https://tools.example.com/{name}")))
        runs_code = one_in(draw, 5)
        out.append(ast.Toolset(name, url, draw(st.booleans()), runs_code, tools))
    return tuple(out)


def tool_specs(sets: Sequence[ast.Toolset]) -> dict[str, ToolSpec]:
    """Every tool of the workspace (built-ins first), as the checker will see them."""
    specs = dict(builtin_tools())
    for ts in sets:
        for tool in ts.tools:
            full = f"{ts.name}.{tool.name}"
            specs[full] = ToolSpec(full, tool.params, ts.name, ts.runs_code, ts.connection_required)
    return specs


# ---- typed conditions ----------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """An argument that every tool a pattern matches declares, with one type."""

    name: str
    type: str


def common_slots(tools: Sequence[ToolSpec]) -> tuple[Slot, ...]:
    if not tools:
        return ()
    out = []
    for param in tools[0].params:
        ty: str | None = from_ref(param.type)
        for other in tools[1:]:
            found = other.param(param.name)
            ty = join(ty, from_ref(found.type)) if found is not None and ty else None
        if ty is not None:
            out.append(Slot(param.name, ty))
    return tuple(out)


def _arg(name: str) -> ast.Path:
    return ast.Path("args", (name,))


def _lit_str(s: str) -> ast.Lit:
    return ast.Lit("str", s)


def _of(slots: Sequence[Slot], *types: str) -> list[Slot]:
    return [s for s in slots if s.type in types]


def str_operands(slots: Sequence[Slot]) -> st.SearchStrategy[ast.Expr]:
    options: list[st.SearchStrategy[ast.Expr]] = [
        strings.map(_lit_str),
        # Mostly the keys that hold strings in a typical context; others make errors.
        st.sampled_from(STR_KEYS).map(lambda k: ast.Path("context", (k,))),
        st.sampled_from(
            (
                ast.Path("agent", ("name",)),
                ast.Path("agent", ("id",)),
                ast.Path("agent", ("metadata", "team")),
            )
        ),
    ]
    names = [s.name for s in _of(slots, "str")]
    if names:
        paths = st.sampled_from(names).map(_arg)
        options.append(paths)
        options.append(paths.map(lambda p: ast.Call("lower", (p,))))
        options.append(paths.map(lambda p: ast.Call("host", (p,))))
    maps = [s.name for s in _of(slots, "map")]
    if maps:
        options.append(st.sampled_from(maps).map(lambda n: ast.Path("args", (n, "team"))))
    return st.one_of(options)


def num_operands(slots: Sequence[Slot]) -> st.SearchStrategy[ast.Expr]:
    options: list[st.SearchStrategy[ast.Expr]] = [
        small_ints.map(lambda n: ast.Lit("int", n)),
        decimals.map(lambda d: ast.Lit("decimal", d)),
        st.sampled_from(
            (
                ast.Path("thread", ("cost",)),
                ast.Path("thread", ("depth",)),
                ast.Call("len", (ast.Path("context", ("tags",)),)),
            )
        ),
        st.sampled_from(NUM_KEYS).map(lambda k: ast.Path("context", (k,))),
    ]
    numeric = [s.name for s in _of(slots, "int", "decimal")]
    if numeric:
        options.append(st.sampled_from(numeric).map(_arg))
    sized = [s.name for s in slots if s.type in ("str", "map") or s.type.startswith("list:")]
    if sized:
        options.append(st.sampled_from(sized).map(lambda n: ast.Call("len", (_arg(n),))))
    return st.one_of(options)


FAMILIES = ("str", "str", "str", "num", "num", "in", "in", "bool", "has", "null", "list", "time")


@st.composite
def atoms(draw: st.DrawFn, slots: Sequence[Slot]) -> ast.Expr:
    # Weighted towards comparisons, where compiled fast paths and the reference differ most.
    family = draw(st.sampled_from(FAMILIES))
    if family == "str":
        op = draw(st.sampled_from(("==", "!=", "startswith", "endswith", "contains", "like")))
        left = draw(str_operands(slots))
        right: ast.Expr | None = _lit_str(draw(st.sampled_from(GLOBS))) if op == "like" else None
        if op in ("startswith", "endswith", "contains") and draw(st.booleans()):
            right = _lit_str(draw(st.sampled_from(AFFIXES)))
        return ast.Compare(op, left, right or draw(str_operands(slots)))
    if family == "num":
        op = draw(st.sampled_from(("==", "!=", "<", "<=", ">", ">=")))
        return ast.Compare(op, draw(num_operands(slots)), draw(num_operands(slots)))
    if family == "bool":
        bools: list[ast.Expr] = [_arg(s.name) for s in _of(slots, "bool")]
        operand = draw(
            st.sampled_from(
                (*bools, ast.Path("context", ("flag",)), ast.Lit("bool", draw(st.booleans())))
            )
        )
        if draw(st.booleans()):
            return operand
        return ast.Compare(draw(st.sampled_from(("==", "!="))), operand, ast.Lit("bool", True))
    if family == "in":
        op = draw(st.sampled_from(("in", "not in")))
        lists = [s.name for s in _of(slots, "list:str")]
        if bool(lists) and draw(st.booleans()):  # bool(): else mypy infers the draw as a list[str]
            return ast.Compare(op, _lit_str(draw(strings)), _arg(draw(st.sampled_from(lists))))
        if draw(st.booleans()):
            items = draw(st.lists(strings, max_size=3))
            left = draw(str_operands(slots))
            return ast.Compare(op, left, ast.ListLit(tuple(map(_lit_str, items))))
        ints = draw(st.lists(small_ints, max_size=3))
        right = ast.ListLit(tuple(ast.Lit("int", n) for n in ints))
        if one_in(draw, 4):
            right = ast.Path("context", ("tags",))
        return ast.Compare(op, draw(num_operands(slots)), right)
    if family == "has":
        paths = [_arg(s.name) for s in slots]
        paths += [ast.Path("context", (k,)) for k in CONTEXT_KEYS]
        paths += [ast.Path("agent", ("metadata", "team")), ast.Path("thread", ("cost",))]
        return ast.Call("has", (draw(st.sampled_from(paths)),))
    if family == "time":  # (the clock: fixed for each example by the properties)
        field = draw(st.sampled_from(("hour", "minute", "date", "weekday", "month")))
        if field == "weekday":
            days = draw(st.lists(st.sampled_from(("mon", "tue", "sat", "sun")), max_size=3))
            return ast.Compare(
                "in", ast.Path("time", ("weekday",)), ast.ListLit(tuple(map(_lit_str, days)))
            )
        bound = {"hour": 24, "minute": 60, "month": 13}.get(field)
        value = (
            draw(st.integers(0, bound)) if bound else draw(st.sampled_from((20261204, 20270101)))
        )
        op = draw(st.sampled_from(("<", ">=", "==", "!=")))
        return ast.Compare(op, ast.Path("time", (field,)), ast.Lit("int", value))
    if family == "null":
        subjects = [_arg(s.name) for s in slots] + [ast.Path("context", ("team",))]
        op = draw(st.sampled_from(("==", "!=")))
        return ast.Compare(op, draw(st.sampled_from(subjects)), ast.Lit("null", None))
    lists = [s.name for s in _of(slots, "list:str")]
    if not lists:
        return ast.Lit("bool", draw(st.booleans()))
    listed = tuple(map(_lit_str, draw(st.lists(strings, max_size=2))))
    op = draw(st.sampled_from(("==", "!=")))
    return ast.Compare(op, _arg(draw(st.sampled_from(lists))), ast.ListLit(listed))


@st.composite
def conditions(draw: st.DrawFn, tools: Sequence[ToolSpec], depth: int = 2) -> ast.Expr:
    """A `where` that type-checks against every tool in `tools`."""
    slots = common_slots(tools)
    if depth > 0 and one_in(draw, 6):
        return draw(quantifiers(tools, depth - 1))
    if depth > 0 and one_in(draw, 3):
        op: Literal["not", "and", "or"] = draw(st.sampled_from(("not", "and", "or")))
        if op == "not":
            return ast.Not(draw(conditions(tools, depth - 1)))
        left = draw(conditions(tools, depth - 1))
        return ast.BoolOp(op, left, draw(conditions(tools, depth - 1)))
    return draw(atoms(slots))


@st.composite
def quantifiers(draw: st.DrawFn, tools: Sequence[ToolSpec], depth: int) -> ast.Quantifier:
    """`all`/`any` over a typed list argument, the unchecked `context.tags` (strings,
    numbers or not a list at all), or a list literal; the body reads the item (as a
    string, a number, a map member: wrong at run time for some items) and, at times,
    the rest of the call through a nested condition."""
    kind: Literal["all", "any"] = draw(st.sampled_from(("all", "any")))
    var = draw(st.sampled_from(("x", "item")))
    lists = [s.name for s in _of(common_slots(tools), "list:str")]
    sources: list[ast.Expr] = [ast.Path("context", ("tags",)), *(_arg(n) for n in lists)]
    sources.append(ast.ListLit(tuple(map(_lit_str, draw(st.lists(strings, max_size=3))))))
    source = draw(st.sampled_from(sources))
    item = ast.Path(var, ())
    bodies: list[ast.Expr] = [
        ast.Compare("endswith", item, _lit_str(draw(st.sampled_from(AFFIXES)))),
        ast.Compare("==", item, _lit_str(draw(strings))),
        ast.Compare("in", item, ast.Path("context", ("tags",))),
    ]
    if source == ast.Path("context", ("tags",)):  # (unchecked: items of any kind)
        bodies += [
            ast.Compare("<", item, ast.Lit("int", draw(small_ints))),
            ast.Call("has", (ast.Path(var, ("k",)),)),
            ast.Compare("!=", item, ast.Lit("null", None)),
        ]
    body: ast.Expr = draw(st.sampled_from(bodies))
    if depth > 0 and one_in(draw, 3):
        op: Literal["and", "or"] = draw(st.sampled_from(("and", "or")))
        body = ast.BoolOp(op, body, draw(conditions(tools, depth - 1)))
    return ast.Quantifier(kind, var, source, body)


def _is_context_path(expr: ast.Expr) -> bool:
    return isinstance(expr, ast.Path) and expr.root == "context"


def rewrite_values(slot: Slot, slots: Sequence[Slot]) -> st.SearchStrategy[ast.Expr]:
    """Expressions whose type fits an argument of `slot`'s type."""
    same = [_arg(s.name) for s in slots if s.type == slot.type]
    options: list[st.SearchStrategy[ast.Expr]] = [st.sampled_from(same)] if same else []
    if slot.type == "str":
        options.append(strings.map(_lit_str))
        options += [st.just(ast.Call("lower", (_arg(s.name),))) for s in _of(slots, "str")]
    elif slot.type in ("int", "decimal"):
        options.append(small_ints.map(lambda n: ast.Lit("int", n)))
        if slot.type == "decimal":
            options.append(decimals.map(lambda d: ast.Lit("decimal", d)))
        options += [st.just(ast.Call("len", (_arg(s.name),))) for s in _of(slots, "str")]
    elif slot.type == "bool":
        options.append(st.booleans().map(lambda b: ast.Lit("bool", b)))
        # A condition's atom, but not a bare `context.flag`: a condition tests it for
        # truth, while a rewrite's value must have the argument's type, and `context.*`
        # is `any` (E0207).
        options.append(atoms(slots).filter(lambda e: not _is_context_path(e)))
    elif slot.type.startswith("list:"):
        options.append(
            default_for(PARAM_TYPES[slot.name] if slot.name in PARAM_TYPES else _ref("list", "str"))
        )
    return st.one_of(options) if options else st.nothing()


# ---- roles, hooks, profiles ----------------------------------------------------------


def allow_patterns(specs: Mapping[str, ToolSpec]) -> st.SearchStrategy[ast.Pattern]:
    authored = sorted(n for n, t in specs.items() if not t.builtin)
    namespaces = sorted({specs[n].namespace for n in authored})
    texts = st.one_of(
        st.sampled_from(authored),
        st.sampled_from([f"{ns}.*" for ns in namespaces]),
        st.sampled_from(BUILTIN_TARGETS),
        st.sampled_from([f"{ns}.*" for ns in BUILTIN_NAMESPACE_TARGETS]),
        st.just("*"),
    )
    return texts.map(ast.Pattern)


def deny_patterns() -> st.SearchStrategy[ast.Pattern]:
    exact = st.sampled_from(BUILTIN_TARGETS)
    spaces = st.sampled_from([f"{ns}.*" for ns in BUILTIN_NAMESPACE_TARGETS])
    return st.one_of(exact, spaces).map(ast.Pattern)


@st.composite
def rules(
    draw: st.DrawFn, specs: Mapping[str, ToolSpec], wanted: ast.Effect | None = None
) -> ast.Rule:
    effect: ast.Effect = (
        draw(st.sampled_from(("allow", "allow", "allow", "deny"))) if wanted is None else wanted
    )
    pool = allow_patterns(specs) if effect == "allow" else deny_patterns()
    patterns = tuple(dict.fromkeys(draw(st.lists(pool, min_size=1, max_size=2))))
    where = None
    if not one_in(draw, 3):
        where = draw(conditions(match_tools(specs, patterns)))
    return ast.Rule(effect, patterns, where)


@st.composite
def roles(draw: st.DrawFn, specs: Mapping[str, ToolSpec], name: str) -> ast.Role:
    return ast.Role(name, tuple(draw(st.lists(rules(specs), min_size=1, max_size=5))))


@st.composite
def hooks(draw: st.DrawFn, specs: Mapping[str, ToolSpec], name: str) -> ast.Hook:
    patterns = tuple(dict.fromkeys(draw(st.lists(allow_patterns(specs), min_size=1, max_size=2))))
    tools = match_tools(specs, patterns)
    where = draw(conditions(tools)) if draw(st.booleans()) else None
    kind: ast.HookKind = draw(st.sampled_from(("pause", "deny", "rewrite", "rewrite")))
    slots = common_slots(tools)
    if kind == "rewrite" and slots:
        targets = draw(st.lists(st.sampled_from(slots), min_size=1, max_size=2))
        rewrites = tuple(ast.Rewrite(_arg(t.name), draw(rewrite_values(t, slots))) for t in targets)
        return ast.Hook(name, patterns, where, "rewrite", None, rewrites)
    kind = "deny" if kind == "deny" else "pause"
    message = draw(st.sampled_from((None, "a human approves", "no")))
    return ast.Hook(name, patterns, where, kind, message)


@st.composite
def profiles(
    draw: st.DrawFn, name: str, role_names: Sequence[str], hook_names: Sequence[str]
) -> ast.Profile:
    least = 0 if one_in(draw, 8) else 1  # a profile with no roles now and then
    chosen = tuple(draw(st.lists(st.sampled_from(role_names), min_size=least, unique=True)))
    mode = draw(st.sampled_from(("default", "none", "list")))
    if mode == "default":
        return ast.Profile(name, chosen)
    if mode == "none":
        return ast.Profile(name, chosen, ("none",), hooks_written=True)
    pool = [*hook_names, "default"]
    listed = tuple(draw(st.lists(st.sampled_from(pool), min_size=1, unique=True)))
    return ast.Profile(name, chosen, listed, hooks_written=True)


# ---- whole workspaces ----------------------------------------------------------------


@dataclass(frozen=True)
class GenWorkspace:
    """A generated workspace as ASTs; `text` is what the checker is fed."""

    toolsets: tuple[ast.Toolset, ...]
    roles: tuple[ast.Role, ...]
    hooks: tuple[ast.Hook, ...]
    profiles: tuple[ast.Profile, ...]

    @property
    def declarations(self) -> tuple[ast.Declaration, ...]:
        return (*self.toolsets, *self.roles, *self.hooks, *self.profiles)

    @cached_property
    def text(self) -> str:
        return format_file(ast.SourceFile("gen.charter", self.declarations))

    @cached_property
    def specs(self) -> dict[str, ToolSpec]:
        return tool_specs(self.toolsets)

    def role(self, name: str) -> ast.Role:
        return next(r for r in self.roles if r.name == name)

    def profile(self, name: str) -> ast.Profile:
        return next(p for p in self.profiles if p.name == name)

    def with_role(self, role: ast.Role) -> GenWorkspace:
        """The workspace with `role` replacing the role of that name, or added."""
        others = tuple(r for r in self.roles if r.name != role.name)
        return replace(self, roles=(*others, role))

    def with_hook(self, hook: ast.Hook) -> GenWorkspace:
        others = tuple(h for h in self.hooks if h.name != hook.name)
        return replace(self, hooks=(*others, hook))

    def with_profile(self, profile: ast.Profile) -> GenWorkspace:
        others = tuple(p for p in self.profiles if p.name != profile.name)
        return replace(self, profiles=(*others, profile))


@st.composite
def workspaces(draw: st.DrawFn) -> GenWorkspace:
    sets = draw(toolsets())
    specs = tool_specs(sets)
    role_names = [f"r{i}" for i in range(draw(st.integers(1, 4)))]
    hook_names = [f"h{i}" for i in range(draw(st.integers(0, 3)))]
    made_roles = tuple(draw(roles(specs, n)) for n in role_names)
    made_hooks = tuple(draw(hooks(specs, n)) for n in hook_names)
    count = draw(st.integers(1, 3))
    made_profiles = tuple(draw(profiles(f"p{i}", role_names, hook_names)) for i in range(count))
    return GenWorkspace(sets, made_roles, made_hooks, made_profiles)
