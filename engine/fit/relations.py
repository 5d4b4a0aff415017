"""Equality, membership and `like` over encoded terms, as `engine.runtime` defines them.

`equal` and `member` follow `runtime.eq` and `in` kind by kind: values of different
kinds are unequal (never an error); `in` on a right side that is not a list is the
error. `glob_match` is `runtime.glob` (`*` any run of characters, the rest literal).
"""

from __future__ import annotations

from typing import Any

import z3

from engine.fit.terms import (
    ANY_EQ,
    ANY_MEMBER,
    FALSE,
    TRUE,
    VAL,
    Term,
    Unsupported,
    all_and,
    any_or,
    text_val,
    to_real,
)


def glob_match(text: Any, pattern: str) -> Any:
    """`text like pattern`. Globs with at most one inner piece become prefix, suffix and
    substring constraints (z3 is much faster on those than on a regex next to a
    `startswith`); the rest become a regular expression. Both equal `runtime.glob`."""
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return text == text_val(pattern)
    if len(pieces) > 3:
        return z3.InRe(text, glob_regex(pattern))
    first, last = pieces[0], pieces[-1]
    if len(pieces) == 3 and not first and not last:  # `*x*`
        return z3.Contains(text, text_val(pieces[1]))
    parts = [
        z3.Length(text) >= len(first) + len(last),
        z3.PrefixOf(text_val(first), text),
        z3.SuffixOf(text_val(last), text),
    ]
    if len(pieces) == 3 and pieces[1]:
        middle = z3.SubString(text, len(first), z3.Length(text) - len(first) - len(last))
        parts.append(z3.Contains(middle, text_val(pieces[1])))
    return z3.And(*parts)


def glob_regex(pattern: str) -> Any:
    """`*` is any run of characters; everything else is literal (runtime.glob)."""
    pieces = [z3.Re(text_val(p)) for p in pattern.split("*")]
    anything = z3.Full(z3.ReSort(z3.StringSort()))
    out: list[Any] = []
    for index, piece in enumerate(pieces):
        if index:
            out.append(anything)
        out.append(piece)
    return out[0] if len(out) == 1 else z3.Concat(*out)


def _static_eq(a: Term, b: Term) -> Any:
    """`runtime.eq` for two terms whose kinds are known and equal."""
    kind = a.kind
    if kind == "null":
        return TRUE
    if kind == "number":
        if a.ty == b.ty:
            return a.expr == b.expr
        return to_real(a) == to_real(b)
    if kind in ("str", "bool"):
        return a.expr == b.expr
    # lists
    if a.ty == "listlit" and b.ty == "listlit":
        if len(a.items) != len(b.items):
            return FALSE
        return all_and(*(equal(x, y) for x, y in zip(a.items, b.items, strict=True)))
    if a.ty == "listlit":
        a, b = b, a
    if b.ty == "listlit":
        item = a.ty[5:]
        parts = [z3.Length(a.expr) == len(b.items)]
        for index, lit in enumerate(b.items):
            parts.append(equal(Term(item, a.expr[index]), lit))
        return all_and(*parts)
    if a.ty == b.ty:
        return a.expr == b.expr
    raise Unsupported(f"comparing a `{a.ty}` list with a `{b.ty}` list")


def _any_eq(a: Term, b: Term) -> Any:
    """`runtime.eq` when `a` is an unchecked value."""
    v = a.expr
    kind = b.kind
    if kind == "str":
        return z3.And(VAL.is_vstr(v), VAL.str_of(v) == b.expr)
    if kind == "number":
        return z3.And(VAL.is_vnum(v), VAL.num_of(v) == to_real(b))
    if kind == "bool":
        return z3.And(VAL.is_vbool(v), VAL.bool_of(v) == b.expr)
    if kind == "null":
        return VAL.is_vnull(v)
    if kind == "any":
        w = b.expr
        return z3.Or(
            z3.And(VAL.is_vstr(v), VAL.is_vstr(w), VAL.str_of(v) == VAL.str_of(w)),
            z3.And(VAL.is_vnum(v), VAL.is_vnum(w), VAL.num_of(v) == VAL.num_of(w)),
            z3.And(VAL.is_vbool(v), VAL.is_vbool(w), VAL.bool_of(v) == VAL.bool_of(w)),
            z3.And(VAL.is_vnull(v), VAL.is_vnull(w)),
            z3.And(
                z3.Or(
                    z3.And(VAL.is_vlist(v), VAL.is_vlist(w)),
                    z3.And(VAL.is_vmap(v), VAL.is_vmap(w)),
                ),
                ANY_EQ(v, w),
            ),
        )
    raise Unsupported("comparing an unchecked value with a list")


def _opaque(*terms: Term) -> None:
    if any(t.ty.startswith("opaque:") for t in terms):
        raise Unsupported("the items of a list of maps or lists are outside the fit fragment")


def equal(a: Term, b: Term) -> Any:
    """`runtime.eq`: values of different kinds are unequal, never an error."""
    _opaque(a, b)
    if a.ty == "any":
        return _any_eq(a, b)
    if b.ty == "any":
        return _any_eq(b, a)
    if a.kind != b.kind:
        return FALSE
    return _static_eq(a, b)


def member(item: Term, items: Term) -> tuple[Any, Any]:
    """(`item in items`, error): the right side must be a list."""
    _opaque(item, items)
    if items.ty == "listlit":
        return any_or(*(equal(item, i) for i in items.items)), FALSE
    if items.ty.startswith("list:"):
        elem = items.ty[5:]
        seq = items.expr
        if item.ty == "any":
            v = item.expr
            if elem == "str":
                return z3.And(VAL.is_vstr(v), z3.Contains(seq, z3.Unit(VAL.str_of(v)))), FALSE
            if elem == "bool":
                return z3.And(VAL.is_vbool(v), z3.Contains(seq, z3.Unit(VAL.bool_of(v)))), FALSE
            n = VAL.num_of(v)
            if elem == "int":
                return (
                    z3.And(VAL.is_vnum(v), z3.IsInt(n), z3.Contains(seq, z3.Unit(z3.ToInt(n)))),
                    FALSE,
                )
            return z3.And(VAL.is_vnum(v), z3.Contains(seq, z3.Unit(n))), FALSE
        kind = "number" if elem in ("int", "real") else elem
        if item.kind != kind:
            return FALSE, FALSE
        if elem == item.ty or kind != "number":
            return z3.Contains(seq, z3.Unit(item.expr)), FALSE
        if elem == "real":
            return z3.Contains(seq, z3.Unit(to_real(item))), FALSE
        n = item.expr
        return z3.And(z3.IsInt(n), z3.Contains(seq, z3.Unit(z3.ToInt(n)))), FALSE
    if items.ty == "any":
        v = items.expr
        return z3.And(VAL.is_vlist(v), ANY_MEMBER(v, _boxed(item))), z3.Not(VAL.is_vlist(v))
    return FALSE, TRUE


def _boxed(term: Term) -> Any:
    """A term as a `VAL`, for the opaque-list membership function."""
    if term.ty == "any":
        return term.expr
    if term.ty == "str":
        return VAL.vstr(term.expr)
    if term.ty in ("int", "real"):
        return VAL.vnum(to_real(term))
    if term.ty == "bool":
        return VAL.vbool(term.expr)
    if term.ty == "null":
        return VAL.vnull
    raise Unsupported("a list inside an unchecked list")
