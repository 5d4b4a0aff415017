"""Equality, membership and `like` over encoded terms, as `engine.runtime` defines them.

`equal` and `member` follow `runtime.eq` and `in` kind by kind: values of different
kinds are unequal (never an error); `in` on a right side that is not a list is the
error. Where a side is an unchecked value (a `VAL`), the other side is put into `VAL`
too (`boxed`) and the two compared as `VAL`s, whose equality is `runtime.eq` (see
`terms`). `glob_match` is `runtime.glob` (`*` any run of characters, the rest literal).
"""

from __future__ import annotations

from typing import Any

import z3

from engine.fit.terms import (
    FALSE,
    TRUE,
    VAL,
    VAL_SEQ,
    Facts,
    Term,
    Unsupported,
    all_and,
    any_or,
    items_of,
    list_val,
    text_val,
    to_real,
)

# The bound variables of the functions that put a typed list's items into `VAL`.
_ITEM = {
    "str": z3.String("charter_item_str"),
    "int": z3.Int("charter_item_int"),
    "real": z3.Real("charter_item_real"),
    "bool": z3.Bool("charter_item_bool"),
}
_BOX_ITEM = {
    "str": z3.Lambda([_ITEM["str"]], VAL.vstr(_ITEM["str"])),
    "int": z3.Lambda([_ITEM["int"]], VAL.vnum(z3.ToReal(_ITEM["int"]))),
    "real": z3.Lambda([_ITEM["real"]], VAL.vnum(_ITEM["real"])),
    "bool": z3.Lambda([_ITEM["bool"]], VAL.vbool(_ITEM["bool"])),
}


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


def boxed(term: Term, facts: Facts) -> Any:
    """The term as a `VAL` (its value's image; errors are the term's own). A list is
    `list_val` of its items, each boxed; the item sequences are noted in `facts`, for
    the axiom `ITEMS(LIST_OF(items)) == items` (`Encoder.axioms`)."""
    ty = term.ty
    if ty == "any":
        return term.expr
    if ty == "str":
        return VAL.vstr(term.expr)
    if ty in ("int", "real"):
        return VAL.vnum(to_real(term))
    if ty == "bool":
        return VAL.vbool(term.expr)
    if ty == "null":
        return VAL.vnull
    if ty == "listlit":
        units = [z3.Unit(boxed(item, facts)) for item in term.items]
        items = (
            z3.Empty(VAL_SEQ) if not units else units[0] if len(units) == 1 else z3.Concat(*units)
        )
    elif ty.startswith("list:") and ty[5:] in _BOX_ITEM:
        items = z3.SeqMap(_BOX_ITEM[ty[5:]], term.expr)
    else:  # (every type the encoder makes is handled above)
        raise Unsupported(f"a value of type `{ty}`")
    facts.boxed.append(items)
    return list_val(items)


def _static_eq(a: Term, b: Term, facts: Facts) -> Any:
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
        return all_and(*(equal(x, y, facts) for x, y in zip(a.items, b.items, strict=True)))
    if a.ty == "listlit":
        a, b = b, a
    if b.ty == "listlit":
        item = a.ty[5:]
        parts = [z3.Length(a.expr) == len(b.items)]
        for index, lit in enumerate(b.items):
            parts.append(equal(Term(item, a.expr[index]), lit, facts))
        return all_and(*parts)
    if a.ty == b.ty:
        return a.expr == b.expr
    return boxed(a, facts) == boxed(b, facts)  # (`list[int]` with `list[decimal]`)


def _any_eq(a: Term, b: Term, facts: Facts) -> Any:
    """`runtime.eq` when `a` is an unchecked value."""
    v = a.expr
    kind = b.kind
    if kind == "str":
        facts.texts.append(v)
        return z3.And(VAL.is_vstr(v), VAL.str_of(v) == b.expr)
    if kind == "number":
        return z3.And(VAL.is_vnum(v), VAL.num_of(v) == to_real(b))
    if kind == "bool":
        return z3.And(VAL.is_vbool(v), VAL.bool_of(v) == b.expr)
    if kind == "null":
        return VAL.is_vnull(v)
    if b.ty == "any":
        facts.compared.append((v, b.expr))
    else:
        facts.sized.append(v)
    return v == boxed(b, facts)  # another `VAL`, or a list


def equal(a: Term, b: Term, facts: Facts) -> Any:
    """`runtime.eq`: values of different kinds are unequal, never an error."""
    if a.ty == "any":
        return _any_eq(a, b, facts)
    if b.ty == "any":
        return _any_eq(b, a, facts)
    if a.kind != b.kind:
        return FALSE
    return _static_eq(a, b, facts)


def _item_kind(value: Any, decl: str | None) -> Any:
    """Whether a `VAL` has the kind of the items of a list argument of type `decl`."""
    if decl == "list:map":
        return VAL.is_vmap(value)
    if decl is not None and decl.startswith("list:list:"):
        return VAL.is_vlist(value)
    return TRUE


def member(item: Term, items: Term, facts: Facts) -> tuple[Any, Any]:
    """(`item in items`, error): the right side must be a list."""
    if items.ty == "listlit":
        return any_or(*(equal(item, i, facts) for i in items.items)), FALSE
    if items.ty.startswith("list:"):
        elem = items.ty[5:]
        seq = items.expr
        if item.ty == "any":
            v = item.expr
            if elem == "str":
                facts.texts.append(v)
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
        x = boxed(item, facts)
        facts.searched.append(v)
        found = z3.And(
            VAL.is_vlist(v), _item_kind(x, items.decl), z3.Contains(items_of(v), z3.Unit(x))
        )
        return found, z3.Not(VAL.is_vlist(v))
    return FALSE, TRUE
