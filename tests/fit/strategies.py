"""Hypothesis strategies for the fit properties: small conditions over the test
toolsets (tests/fit/support.py), roles built from them, and calls to sample."""

from __future__ import annotations

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
ATOMS = {"mail.send": SEND_ATOMS, "mail.search": SEARCH_ATOMS}


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
    tool = draw(st.sampled_from(("mail.send", "mail.search")))
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


@st.composite
def call(draw: st.DrawFn, tool: str | None = None) -> dict[str, Any]:
    tool = tool or draw(st.sampled_from(("mail.send", "mail.search")))
    texts = st.sampled_from((*WORDS, "ab@x", "A", "Ab", "b@x"))
    if tool == "mail.send":
        args: dict[str, Any] = {
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
