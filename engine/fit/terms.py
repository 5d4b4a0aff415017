"""The z3 vocabulary of the fit check: values, three-valued terms and their kinds.

Typed arguments become plain z3 sorts (String, Int, Real, Bool, Seq). Values the checker
could not type (`context`, `agent`, `thread`, map members) become `Val`, an algebraic
datatype with one constructor per run-time kind, so a value of the wrong kind makes an
operation *error* (as `engine.runtime` does) instead of silently being false. Lists and
maps inside such values are opaque: only their length is modelled.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import z3

# z3's default context is not thread-safe; every solver use in engine.fit holds this,
# and engine.fit.isolated forks holding it (no other thread is inside z3 in the child).
Z3_LOCK = threading.RLock()


class Unsupported(Exception):
    """A construct outside the encoded fragment; the fit check answers "does not fit"."""


def _make_val() -> Any:
    val = z3.Datatype("CharterVal")
    val.declare("vstr", ("str_of", z3.StringSort()))
    val.declare("vnum", ("num_of", z3.RealSort()))
    val.declare("vbool", ("bool_of", z3.BoolSort()))
    val.declare("vnull")
    val.declare("vlist", ("list_len", z3.IntSort()))
    val.declare("vmap", ("map_len", z3.IntSort()))
    return val.create()


VAL: Any = _make_val()

# Uninterpreted functions: sound over-approximations; a model that relies on a value the
# real function would not return fails confirmation and is reported as "unsupported".
LOWER = z3.Function("charter_lower", z3.StringSort(), z3.StringSort())
HOST = z3.Function("charter_host", z3.StringSort(), z3.StringSort())
HOST_FAILS = z3.Function("charter_host_fails", z3.StringSort(), z3.BoolSort())
ANY_EQ = z3.Function("charter_any_eq", VAL, VAL, z3.BoolSort())
ANY_MEMBER = z3.Function("charter_any_member", VAL, VAL, z3.BoolSort())

FALSE = z3.BoolVal(False)
TRUE = z3.BoolVal(True)

SEQ_SORTS = {"str": z3.StringSort(), "int": z3.IntSort(), "real": z3.RealSort()}


# The highest character z3's strings hold (its default `unicode` encoding).
MAX_CHAR = 0x2FFFF


def text_val(text: str) -> Any:
    """The z3 string constant of `text`, character for character. `z3.StringVal` passes
    printable ASCII to z3 as it is, and z3 reads `\\u{..}` and `\\uXXXX` in it as escapes:
    the literal `"\\\\u0041"` (six characters) became "A", so a role allowing
    `args.to startswith "\\\\u0041"` fitted a caller allowing `startswith "A"`. So every
    character but printable ASCII other than the backslash is written as its escape.
    A character above MAX_CHAR has none (z3 read it as nine characters of text, equal to
    the literal spelling them): outside the fragment."""
    out = []
    for ch in text:
        code = ord(ch)
        if code > MAX_CHAR:
            raise Unsupported(f"a string literal holding the character U+{code:X}")
        out.append(ch if 32 <= code < 127 and ch != "\\" else f"\\u{{{code:x}}}")
    return z3.StringVal("".join(out))


def seq_sort(item: str) -> Any:
    if item == "bool":
        return z3.SeqSort(z3.BoolSort())
    if item not in SEQ_SORTS:
        raise Unsupported(f"lists of `{item}` are outside the fit fragment")
    return z3.SeqSort(SEQ_SORTS[item])


@dataclass
class Term:
    """One expression's meaning: a value of static type `ty`, unless `err` holds.

    `ty` is `str`, `int`, `real`, `bool`, `null`, `any` (a `VAL`), `list:T` (a z3 Seq of
    T), `opaque:list:T` (a list of maps or lists: only its length, an Int) or `listlit`
    (a literal list; `items` holds its members)."""

    ty: str
    expr: Any
    err: Any = FALSE
    items: list[Term] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """The run-time kind when it is static (`number` for int and real)."""
        if self.ty in ("int", "real"):
            return "number"
        if self.ty.startswith(("list:", "opaque:")) or self.ty == "listlit":
            return "list"
        return self.ty


def any_or(*conds: Any) -> Any:
    kept = [c for c in conds if not z3.is_false(c)]
    if not kept:
        return FALSE
    if any(z3.is_true(c) for c in kept):
        return TRUE
    return kept[0] if len(kept) == 1 else z3.Or(*kept)


def all_and(*conds: Any) -> Any:
    kept = [c for c in conds if not z3.is_true(c)]
    if not kept:
        return TRUE
    if any(z3.is_false(c) for c in kept):
        return FALSE
    return kept[0] if len(kept) == 1 else z3.And(*kept)


def negate(cond: Any) -> Any:
    if z3.is_true(cond):
        return FALSE
    if z3.is_false(cond):
        return TRUE
    return z3.Not(cond)


def to_real(term: Term) -> Any:
    return z3.ToReal(term.expr) if term.ty == "int" else term.expr
