"""Hypothesis strategies for the fit properties: small conditions over the test
toolsets (tests/fit/support.py), roles built from them, and calls to sample.

`data.put` reads lists and maps everywhere: arguments of every type, `context`,
`agent.metadata`, `thread` and map members two deep. Its calls draw lists from a small
pool so that two paths often hold lists of one length that differ, or equal ones,
with empty and repeated members, numbers equal across int and decimal, and nested
lists and maps."""

from __future__ import annotations

from decimal import Decimal
from functools import cache
from typing import Any

from hypothesis import strategies as st

WORDS = ("a", "b", "ab", "@x", "")
NUMS = (0, 1, 2, 3, 5)


def _q(text: str) -> str:
    return '"' + text + '"'


word = st.sampled_from(WORDS)
num = st.sampled_from(NUMS)

SEND_ATOMS = st.one_of(
    st.builds(
        lambda op, w: f"args.to {op} {_q(w)}",
        st.sampled_from(("endswith", "startswith", "contains", "==", "!=")),
        word,
    ),
    st.builds(lambda w: f"args.to like {_q('*' + w + '*')}", word),
    st.builds(lambda op, n: f"len(args.cc) {op} {n}", st.sampled_from(("<=", "==", ">")), num),
    st.builds(lambda w: f"{_q(w)} in args.cc", word),
    st.builds(lambda op, n: f"args.priority {op} {n}", st.sampled_from(("<", ">=")), num),
    st.just("has(args.priority)"),
    st.builds(lambda w: f"lower(args.subject) == {_q(w)}", word),
    st.builds(lambda op, n: f"context.level {op} {n}", st.sampled_from(("<", ">", "==")), num),
    st.builds(lambda w: f"context.team == {_q(w)}", word),
)
SEARCH_ATOMS = st.one_of(
    st.builds(lambda op, n: f"args.limit {op} {n}", st.sampled_from(("<=", ">", "!=")), num),
    st.builds(lambda n: f"args.ratio > {n}.5", num),
    st.builds(lambda w: f"args.query startswith {_q(w)}", word),
    st.builds(lambda w: f"{_q(w)} in args.tags", word),
    st.builds(lambda w: f'args.query in [{_q(w)}, "b"]', word),
    st.builds(lambda op, n: f"context.level {op} {n}", st.sampled_from(("<=", ">=")), num),
    st.just("has(context.team)"),
)
STATES = ("open", "closed", "ab")
# `issues.get`: enum arguments (a string among its values) and a camelCase one.
GET_ATOMS = st.one_of(
    st.builds(
        lambda op, w: f"args.state {op} {_q(w)}",
        st.sampled_from(("==", "!=")),
        st.sampled_from((*STATES, *WORDS)),
    ),
    st.builds(lambda w: f'args.state in ["open", {_q(w)}]', word),
    st.builds(
        lambda op, w: f"args.state {op} {_q(w)}",
        st.sampled_from(("startswith", "endswith", "contains")),
        word,
    ),
    st.builds(lambda w: f"args.tag == {_q(w)}", word),
    st.just("has(args.tag)"),
    st.builds(
        lambda op, w: f"args.repoName {op} {_q(w)}", st.sampled_from(("==", "endswith")), word
    ),
    st.builds(lambda op, n: f"context.level {op} {n}", st.sampled_from(("<", ">=")), num),
)
# Paths of `data.put` conditions, by what they usually hold (the unchecked ones may
# hold anything at run time).
LISTY = ("context.a", "context.b", "args.a.l", "args.b.l", "agent.metadata.l", "context.m.l")
MAPPY = ("args.a", "args.b", "context.m", "agent.metadata", "args.a.l")
SCALARY = ("context.n", "context.s", "args.a.k", "args.b.k", "context.m.k", "agent.metadata.k")
OPTIONAL = ("args.name", "args.size", "args.share", "args.on", "args.b.k", "thread.depth")
# A typed list argument and literals of its item type.
TYPED = {
    "args.tags": ('"x"', '"y"'),
    "args.nums": ("1", "2"),
    "args.ratios": ("1", "1.5"),
    "args.flags": ("true", "false"),
}
ANY_LITS = ('"x"', '"y"', "1", "1.0", "true", "null", "[]", '["x"]', '["x", "y"]', "[1]")
CMP = st.sampled_from(("==", "!=", "<", ">="))
LEN_CMP = st.sampled_from(("==", "<=", ">"))
listy, mappy, scalary = st.sampled_from(LISTY), st.sampled_from(MAPPY), st.sampled_from(SCALARY)
typed = st.sampled_from(sorted(TYPED))


def _unchecked_atoms(
    listy: tuple[str, ...], mappy: tuple[str, ...], scalary: tuple[str, ...]
) -> st.SearchStrategy[str]:
    """Conditions on unchecked values: lists, maps and scalars at the paths given."""
    lists, maps, scalars = st.sampled_from(listy), st.sampled_from(mappy), st.sampled_from(scalary)
    return st.one_of(
        # membership in unchecked lists, of literals and of paths (lists among them)
        st.builds(lambda x, p: f"{x} in {p}", st.sampled_from(ANY_LITS), lists),
        st.builds(lambda x, p: f"{x} in {p}", st.one_of(scalars, lists), lists),
        # equality of two unchecked values, lists or maps
        st.builds(lambda p, q, op: f"{p} {op} {q}", lists, lists, st.sampled_from(("==", "!="))),
        st.builds(lambda p, q: f"{p} == {q}", maps, maps),
        st.builds(lambda p, x: f"{p} == {x}", st.one_of(lists, scalars), st.sampled_from(ANY_LITS)),
        st.builds(lambda p, q: f"{p} == {q}", scalars, scalars),
        # lengths, presence
        st.builds(
            lambda p, op, n: f"len({p}) {op} {n}",
            st.one_of(lists, maps),
            LEN_CMP,
            st.sampled_from((0, 1, 2)),
        ),
        st.builds(lambda p, q: f"len({p}) == len({q})", lists, lists),
        st.builds(lambda p: f"has({p})", st.one_of(lists, scalars)),
    )


PUT_ATOMS = st.one_of(
    _unchecked_atoms(LISTY, MAPPY, SCALARY),
    st.builds(
        lambda p, op, n: f"len({p}) {op} {n}",
        st.sampled_from((*TYPED, "args.rows", "args.grid", "args.name")),
        LEN_CMP,
        st.sampled_from((0, 1, 2)),
    ),
    st.builds(lambda p: f"has({p})", st.sampled_from(OPTIONAL)),
    # typed lists: members, against unchecked lists, against each other and literals
    typed.flatmap(lambda p: st.sampled_from(TYPED[p]).map(lambda x: f"{x} in {p}")),
    st.builds(lambda x, p: f"{x} in {p}", scalary, typed),
    st.builds(lambda p, q: f"{p} == {q}", typed, listy),
    st.builds(lambda p, q: f"{p} in {q}", typed, listy),
    st.just("args.nums == args.ratios"),
    st.sampled_from(('args.tags == ["x"]', "args.tags == []", "args.nums == [1, 1]")),
    # lists of lists and of maps
    st.sampled_from(
        (
            '["x"] in args.grid',
            "args.tags in args.grid",
            'args.grid == [["x"]]',
            "args.a in args.rows",
            "context.m in args.rows",
            "args.rows == context.b",
            "[] in args.grid",
        )
    ),
    # scalars, unchecked and typed
    st.builds(
        lambda p, op, n: f"{p} {op} {n}",
        st.sampled_from(("context.n", "args.a.k", "thread.depth")),
        CMP,
        num,
    ),
    st.builds(
        lambda p, w: f"{p} startswith {_q(w)}", st.sampled_from((*SCALARY, "agent.id")), word
    ),
    st.builds(lambda w: f"lower(context.s) == {_q(w)}", word),
    st.sampled_from(
        (
            "args.size < 2",
            "args.share > 0.5",
            "args.on",
            "args.name == context.s",
            "agent.id == context.s",
            "len(args.name) > 1",
            "thread.cost <= 1.5",
        )
    ),
)
# `agents.update`, a built-in tool (deny rules match only those) with two map arguments.
UPDATE_ATOMS = _unchecked_atoms(
    ("args.budget.l", "args.metadata.l", "context.a", "agent.metadata.l"),
    ("args.budget", "args.metadata", "context.m"),
    ("args.budget.k", "args.metadata.k", "context.n"),
)
ATOMS = {
    "mail.send": SEND_ATOMS,
    "mail.search": SEARCH_ATOMS,
    "data.put": PUT_ATOMS,
    "agents.update": UPDATE_ATOMS,
    "issues.get": GET_ATOMS,
}
TOOLS = ("mail.send", "mail.search", "data.put", "issues.get")


@cache  # one strategy object per tool: hypothesis caches work per strategy
def conditions(tool: str) -> st.SearchStrategy[str]:
    return st.recursive(
        ATOMS[tool],
        lambda inner: st.one_of(
            st.builds(lambda a, b: f"({a} and {b})", inner, inner),
            st.builds(lambda a, b: f"({a} or {b})", inner, inner),
            st.builds(lambda a: f"not ({a})", inner),
        ),
        max_leaves=3,
    )


Rule = tuple[str, str | None]  # (tool pattern, condition text or None)


@st.composite
def rule(draw: st.DrawFn) -> Rule:
    tool = draw(st.sampled_from(TOOLS))
    if draw(st.integers(0, 5)) == 0:
        return (tool, None)
    return (tool, draw(conditions(tool)))


rules = st.lists(rule(), min_size=1, max_size=3)


def render(name: str, parts: list[Rule]) -> str:
    lines = [f"allow {t}" + (f" where {c}" if c else "") for t, c in parts]
    return f"role {name} {{\n  " + "\n  ".join(lines) + "\n}\n"


DENY_ROLE = st.builds(
    lambda w: (
        f'role guard {{\n  allow roles.create\n  deny roles.create where args.name startswith "{w}x"\n}}\n'
    ),
    word,
)

_CONTEXT = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "level": st.one_of(num, word, st.booleans(), st.none()),
            "team": st.one_of(word, num),
        },
    ),
)
_OPTIONAL_INT = st.one_of(st.none(), st.integers(-1, 6))


# Values of `data.put` calls: few, so that paths collide.
ITEM = st.sampled_from(("x", "y", 1, 1.0, Decimal("1.5"), True, None, "", [], ["x"], {}, {"k": 1}))
LISTS = st.one_of(
    st.sampled_from(
        (
            [],
            ["x"],
            ["y"],
            ["x", "y"],
            ["y", "x"],
            ["x", "x"],
            [1],
            [1.0],
            [True],
            [None],
            [["x"]],
            [{}],
        )
    ),
    st.lists(ITEM, max_size=3),
)
TEXTS = st.sampled_from((*WORDS, "ab@x", "A", "Ab", "b@x"))


def _mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> Any:
    """`usual` four times in five."""
    return st.integers(0, 4).flatmap(lambda n: usual if n else other)


@st.composite
def _record(
    draw: st.DrawFn, fields: dict[str, st.SearchStrategy[Any]], required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A map holding each field four times in five (the required ones always)."""
    return {
        name: draw(values)
        for name, values in fields.items()
        if name in required or draw(st.integers(0, 4))
    }


MAPS = _record({"k": ITEM, "l": _mostly(LISTS, ITEM), "z": ITEM})
_PUT_ARGS = _record(
    {
        "a": MAPS,
        "b": MAPS,
        "rows": st.lists(MAPS, max_size=2),
        "grid": st.lists(st.lists(st.sampled_from(("x", "y")), max_size=2), max_size=2),
        "nums": st.lists(st.sampled_from((1, 2, 3)), max_size=3),
        "ratios": st.lists(st.sampled_from((1, 2, Decimal("1.5"), 0.5)), max_size=3),
        "flags": st.lists(st.booleans(), max_size=2),
        "tags": st.one_of(
            st.sampled_from(([], ["x"], ["y"], ["x", "y"])), st.lists(TEXTS, max_size=2)
        ),
        "name": TEXTS,
        "size": st.integers(0, 3),
        "share": st.sampled_from((0, 1, Decimal("0.5"), 0.75)),
        "on": st.booleans(),
    },
    required=("a",),
)
_PUT_CONTEXT = _mostly(
    _record(
        {
            "a": _mostly(LISTS, ITEM),
            "b": _mostly(LISTS, ITEM),
            "m": _mostly(MAPS, ITEM),
            "n": ITEM,
            "s": TEXTS,
        }
    ),
    st.none(),
)
_AGENT = _mostly(
    _record(
        {"id": TEXTS, "name": st.just("n"), "identity": st.just("i"), "metadata": MAPS},
        required=("id", "name", "identity"),
    ),
    st.none(),
)
_THREAD = _mostly(
    _record(
        {
            "id": st.just("t"),
            "cost": st.sampled_from((0, 1, Decimal("1.5"), 2)),
            "depth": st.integers(0, 3),
        },
        required=("id",),
    ),
    st.none(),
)


@st.composite
def call(draw: st.DrawFn, tool: str | None = None) -> dict[str, Any]:
    tool = tool or draw(st.sampled_from(TOOLS))
    texts = TEXTS
    if tool == "agents.update":
        fields = {"id": TEXTS, "budget": MAPS, "metadata": MAPS}
        return {
            "tool": tool,
            "args": draw(_record(fields, required=("id",))),
            "context": draw(_PUT_CONTEXT),
            "agent": draw(_AGENT),
            "thread": None,
        }
    if tool == "data.put":
        return {
            "tool": tool,
            "args": draw(_PUT_ARGS),
            "context": draw(_PUT_CONTEXT),
            "agent": draw(_AGENT),
            "thread": draw(_THREAD),
        }
    if tool == "issues.get":
        args: dict[str, Any] = {
            "state": draw(st.sampled_from(STATES)),
            "repoName": draw(texts),
        }
        tag = draw(st.sampled_from((None, "a", "b")))
        if tag is not None:
            args["tag"] = tag
        return {
            "tool": tool,
            "args": args,
            "context": draw(_CONTEXT),
            "agent": None,
            "thread": None,
        }
    if tool == "mail.send":
        args = {
            "to": draw(texts),
            "subject": draw(texts),
            "body": "hi",
            "cc": draw(st.lists(texts, max_size=2)),
        }
        priority = draw(_OPTIONAL_INT)
        if priority is not None:
            args["priority"] = priority
    else:
        args = {"query": draw(texts), "limit": draw(st.integers(-1, 7))}
        if draw(st.booleans()):
            args["ratio"] = draw(st.sampled_from((0, 1, 2.5, 3.75, 6)))
        args["tags"] = draw(st.lists(texts, max_size=2))
    return {"tool": tool, "args": args, "context": draw(_CONTEXT), "agent": None, "thread": None}
