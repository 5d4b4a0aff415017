"""Generators of syntax trees for the formatter round trip, and of broken text.

Unlike `strategies.py`, nothing here needs to type-check: these trees only need to be
what the parser can build (every declaration kind, every expression form, strings with
escapes and unicode, decimals, negative and huge numbers), so that `parse(fmt(tree))`
can be compared with the tree itself.
"""

from __future__ import annotations

from hypothesis import strategies as st

from policy import ast

# Characters that have tripped up hand-written scanners: quotes, escapes, `#`, and the
# line breaks that `str.splitlines` knows but the grammar does not.
AWKWARD = '"\\#\n\r\t\x00\x0b\x0c\x1c\x85\u2028\u2029é☃𝄞 '
# Words the grammar uses as keywords somewhere; names may still be any of them where
# the contextual lexer expects a name.
KEYWORDS = (
    "allow", "deny", "where", "pause", "invalid", "rewrite", "roles", "hooks", "budget", "usd",
    "per", "url", "connection", "required", "runs", "code", "tool", "toolset", "role", "hook",
    "profile", "test", "expect", "context", "rewritten", "default", "none", "on", "list",
    "agent", "thread", "spent", "cost", "because", "rate", "calls", "called", "times",
    "str", "int", "decimal", "bool", "map", "true", "false", "null", "not", "and", "or", "in",
    "enum", "secret",
)  # fmt: skip

names = st.one_of(st.from_regex(r"[a-z][a-z0-9_-]{0,7}", fullmatch=True), st.sampled_from(KEYWORDS))
# Known limitation (docs/properties.md): a role named `roles`, `hooks` or `budget`
# cannot be the first role a profile lists, since the keyword wins there.
PROFILE_WORDS = ("roles", "hooks", "budget", "rate")
texts = st.one_of(st.text(max_size=12), st.text(st.sampled_from(AWKWARD), max_size=6))
# A tool's, an argument's or a field's name: a NAME (lowercase, mixed case or a keyword),
# or any text but an empty one (quoted then: `"x.y"`, `"_meta"`); never one ending in `*`,
# which a tool's name cannot (E0022) and a pattern would read as its wildcard.
member_names = st.one_of(
    names,
    st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,7}", fullmatch=True),
    texts.filter(lambda t: t != "" and not t.endswith("*")),
)
ints = st.one_of(st.integers(-1000, 1000), st.integers())
decimals = st.decimals(min_value=-(10**12), max_value=10**12, allow_nan=False, allow_infinity=False)


def lit(kind: ast.LiteralKind) -> st.SearchStrategy[ast.Lit]:
    values: dict[ast.LiteralKind, st.SearchStrategy[ast.LiteralValue]] = {
        "str": texts,
        "int": ints,
        "decimal": decimals,
        "bool": st.booleans(),
        "null": st.none(),
    }
    return values[kind].map(lambda v: ast.Lit(kind, v))


scalars: st.SearchStrategy[ast.Expr] = st.one_of(
    lit("str"), lit("int"), lit("decimal"), lit("bool"), lit("null")
)


def _map(entries: list[tuple[str, ast.Expr]]) -> ast.MapLit:
    return ast.MapLit(tuple(dict(entries).items()))  # the parser rejects duplicate keys


map_keys = st.one_of(names, texts)
# Values: parameter defaults and test arguments (no paths, maps allowed).
values: st.SearchStrategy[ast.Expr] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: ast.ListLit(tuple(xs))),
        st.lists(st.tuples(map_keys, inner), max_size=3).map(_map),
    ),
    max_leaves=8,
)
maps = st.lists(st.tuples(map_keys, values), max_size=3).map(_map)

paths = st.builds(
    ast.Path, st.sampled_from(ast.PATH_ROOTS), st.lists(member_names, max_size=3).map(tuple)
)


def _extend(inner: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.builds(ast.Not, inner),
        st.builds(ast.BoolOp, st.sampled_from(("and", "or")), inner, inner),
        st.builds(ast.Compare, st.sampled_from(ast.COMPARE_OPS), inner, inner),
        st.builds(
            ast.Call,
            st.one_of(st.sampled_from(ast.FUNCTIONS), names.filter(_free_function_name)),
            st.lists(inner, max_size=2).map(tuple),
        ),
        st.lists(inner, max_size=3).map(lambda xs: ast.ListLit(tuple(xs))),
        st.builds(  # (its body reads the item, so the parser has a path to bind)
            lambda kind, var, source, body, parts: ast.Quantifier(
                kind, var, source, ast.BoolOp("or", ast.Path(var, parts), body)
            ),
            st.sampled_from(ast.QUANTIFIERS),
            names.filter(_item_name),
            inner,
            inner,
            st.lists(names, max_size=2).map(tuple),
        ),
    )


def _free_function_name(name: str) -> bool:
    """A name a call may have that the parser reads as a call (`all` and `any` are
    quantifiers)."""
    return name not in KEYWORDS and name not in ast.QUANTIFIERS


def _item_name(name: str) -> bool:
    return _free_function_name(name) and name not in ast.PATH_ROOTS


# Conditions: every expression form the grammar has.
exprs: st.SearchStrategy[ast.Expr] = st.recursive(st.one_of(scalars, paths), _extend, max_leaves=12)

pattern_texts = st.one_of(
    st.just("*"),
    names.map(lambda n: n + ".*"),
    st.builds(lambda n, ms: ".".join((n, *ms)), names, st.lists(member_names, max_size=2)),
)
patterns = st.lists(pattern_texts.map(ast.Pattern), min_size=1, max_size=3).map(tuple)

scalar_types: st.SearchStrategy[ast.ScalarKind] = st.sampled_from(
    ("str", "int", "decimal", "bool", "map")
)
enum_types = st.lists(texts, min_size=1, max_size=3, unique=True).map(
    lambda vs: ast.TypeRef("enum", values=tuple(vs))
)


def _record(fields: list[tuple[str, ast.TypeRef, bool]]) -> ast.TypeRef:
    unique = {name: (ty, optional) for name, ty, optional in fields}  # (E0023 refuses twins)
    made = tuple(ast.Field(n, ty, optional) for n, (ty, optional) in unique.items())
    return ast.TypeRef("record", fields=made)


def _nullable(ref: ast.TypeRef) -> ast.TypeRef:
    return ast.TypeRef(ref.kind, ref.item, values=ref.values, fields=ref.fields, nullable=True)


# Every type form: scalars, enums, lists, records (lists of records among them), `| null`.
type_refs: st.SearchStrategy[ast.TypeRef] = st.recursive(
    st.one_of(scalar_types.map(lambda k: ast.TypeRef(k)), enum_types),
    lambda inner: st.one_of(
        inner.map(lambda t: ast.TypeRef("list", t)),
        st.lists(st.tuples(member_names, inner, st.booleans()), max_size=3).map(_record),
        inner.map(_nullable),
    ),
    max_leaves=5,
)


@st.composite
def params(draw: st.DrawFn) -> ast.Param:
    mode = draw(st.sampled_from(("required", "optional", "default")))
    default = draw(values) if mode == "default" else None
    type_ = draw(type_refs)
    # (`secret` on a `str` without a default: E0020 and E0021 refuse the others)
    secret = type_.kind == "str" and mode != "default" and draw(st.booleans())
    return ast.Param(draw(member_names), type_, default, optional=mode == "optional", secret=secret)


tool_decls = st.builds(ast.ToolDecl, member_names, st.lists(params(), max_size=3).map(tuple))
toolsets = st.builds(
    ast.Toolset,
    names,
    st.one_of(st.none(), texts),
    st.booleans(),
    st.booleans(),
    st.lists(tool_decls, max_size=3).map(tuple),
)
rules = st.builds(
    ast.Rule, st.sampled_from(("allow", "deny")), patterns, st.one_of(st.none(), exprs)
)
roles = st.builds(ast.Role, names, st.lists(rules, max_size=3).map(tuple))


@st.composite
def hooks(draw: st.DrawFn) -> ast.Hook:
    name, pats = draw(names), draw(patterns)
    where = draw(st.one_of(st.none(), exprs))
    kind: ast.HookKind = draw(st.sampled_from(("pause", "deny", "rewrite")))
    if kind == "rewrite":
        rewrites = draw(st.lists(st.builds(ast.Rewrite, paths, exprs), min_size=1, max_size=3))
        return ast.Hook(name, pats, where, "rewrite", None, tuple(rewrites))
    message = draw(st.one_of(st.none(), texts))
    return ast.Hook(name, pats, where, kind, message)


@st.composite
def profiles(draw: st.DrawFn) -> ast.Profile:
    name = draw(names)
    role_names = tuple(draw(st.lists(names.filter(lambda n: n not in PROFILE_WORDS), max_size=3)))
    budget = None
    if draw(st.booleans()):
        amount = draw(st.decimals(min_value=0, max_value=10**9, allow_nan=False, places=3))
        budget = ast.Budget(amount, draw(periods))
    rate = None
    if draw(st.booleans()):
        rate = ast.Rate(draw(st.integers(0, 10**9)), draw(periods))
    mode = draw(st.sampled_from(("unwritten", "none", "list")))
    if mode == "unwritten":
        return ast.Profile(name, role_names, budget=budget, rate=rate)
    hook_refs: tuple[str, ...] = ("none",)
    if mode == "list":
        hook_refs = tuple(draw(st.lists(st.one_of(names, st.just("default")), min_size=1)))
        hook_refs = tuple(h for h in hook_refs if h != "none") or ("default",)
    return ast.Profile(name, role_names, hook_refs, budget, hooks_written=True, rate=rate)


periods: st.SearchStrategy[ast.Period] = st.sampled_from(("1m", "1h", "24h", "7d", "total"))


amounts = st.one_of(st.none(), st.decimals(min_value=0, max_value=10**9, allow_nan=False, places=3))
expects = st.builds(
    ast.Expect,
    st.sampled_from(("allow", "deny", "pause", "invalid")),
    st.builds(lambda n, ms: ".".join((n, *ms)), names, st.lists(member_names, max_size=2)),
    maps,
    st.one_of(st.none(), maps),
    st.one_of(st.none(), maps),
    amounts,
    st.one_of(st.none(), texts.filter(bool)),
)
tests = st.builds(
    ast.Test,
    texts,
    names,
    st.lists(expects, max_size=3).map(tuple),
    st.one_of(st.none(), maps),
    st.one_of(st.none(), maps),
    st.one_of(st.none(), maps),
    amounts,
    st.one_of(st.none(), st.integers(0, 4_102_444_800_000)),
    st.one_of(st.none(), st.integers(0, 10**9)),
)

declarations = st.one_of(toolsets, roles, hooks(), profiles(), tests)
source_files = st.lists(declarations, max_size=5).map(
    lambda ds: ast.SourceFile("gen.charter", tuple(ds))
)
