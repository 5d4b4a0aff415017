"""The z3 vocabulary of the fit check: values, three-valued terms and their kinds.

Typed arguments become plain z3 sorts (String, Int, Real, Bool, Seq). Values the checker
could not type (`context`, `agent`, `thread`, map members) and lists of maps or lists
become `Val`, an algebraic datatype with one constructor per run-time kind, so a value of
the wrong kind makes an operation *error* (as `engine.runtime` does) instead of silently
being false.

A list or map inside a `Val` is named by an identity (an `Int`): equal identities are
equal values, and the contents hang from the identity through functions: `ITEMS(id)` is
the list's items (a `Seq` of `Val`), `MAP_HAS(id, key)` / `MAP_GET(id, key)` a map's
members and `MAP_SIZE(id)` its number of members. Every real value has such an image (a
numbering of lists and of maps, injective up to `runtime.eq`), so `==` on `Val` is
`runtime.eq` on the values, and two paths may hold two lists of one length that differ.
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
    val.declare("vlist", ("list_id", z3.IntSort()))
    val.declare("vmap", ("map_id", z3.IntSort()))
    return val.create()


VAL: Any = _make_val()
VAL_SEQ = z3.SeqSort(VAL)

# The contents of lists and maps, by identity (see the module's docstring).
ITEMS = z3.Function("charter_items", z3.IntSort(), VAL_SEQ)
LIST_OF = z3.Function("charter_list_of", VAL_SEQ, z3.IntSort())  # ITEMS's inverse
MAP_HAS = z3.Function("charter_map_has", z3.IntSort(), z3.StringSort(), z3.BoolSort())
MAP_GET = z3.Function("charter_map_get", z3.IntSort(), z3.StringSort(), VAL)
MAP_SIZE = z3.Function("charter_map_size", z3.IntSort(), z3.IntSort())

# Uninterpreted functions: sound over-approximations; a model that relies on a value the
# real function would not return fails confirmation and is reported as "unsupported".
LOWER = z3.Function("charter_lower", z3.StringSort(), z3.StringSort())
HOST = z3.Function("charter_host", z3.StringSort(), z3.StringSort())
HOST_FAILS = z3.Function("charter_host_fails", z3.StringSort(), z3.BoolSort())


@dataclass
class Facts:
    """What the encoding notes: for `Encoder.axioms`, the item sequences put into `VAL`
    (`boxed`) and the pairs of unchecked values compared (`compared`); for the bounds and
    preferences of `model`, the unchecked values read as strings (`texts`), the lists
    whose items a membership reads (`searched`) and the values whose length or items
    another read takes (`sized`): z3 is slow on bounds and preferences about the strings
    and lists of every unchecked value."""

    boxed: list[Any] = field(default_factory=list)
    compared: list[tuple[Any, Any]] = field(default_factory=list)
    texts: list[Any] = field(default_factory=list)
    searched: list[Any] = field(default_factory=list)
    sized: list[Any] = field(default_factory=list)

    def read(self) -> set[int]:
        """The z3 ids of the unchecked values whose strings or lists are read."""
        pairs = [v for pair in self.compared for v in pair]
        return {v.get_id() for v in (*self.texts, *self.searched, *self.sized, *pairs)}


def items_of(v: Any) -> Any:
    """The items of a list `Val` (meaningful when `v` is a `vlist`)."""
    return ITEMS(VAL.list_id(v))


# The identity of the empty map (a numbering gives equal maps one identity).
EMPTY_MAP = z3.Int("charter_empty_map")


def canonical(v: Any) -> list[Any]:
    """Facts of the image of every real value `v`: a list's identity is the one of its
    items (`LIST_OF` inverts `ITEMS`), an empty map's is `EMPTY_MAP`."""
    ident = VAL.map_id(v)
    return [
        z3.Implies(VAL.is_vlist(v), LIST_OF(items_of(v)) == VAL.list_id(v)),
        z3.Implies(z3.And(VAL.is_vmap(v), MAP_SIZE(ident) == 0), ident == EMPTY_MAP),
    ]


def list_val(items: Any) -> Any:
    """The list `Val` holding `items` (a `Seq` of `Val`); `Encoder.axioms` ties the two
    with `ITEMS(LIST_OF(items)) == items`."""
    return VAL.vlist(LIST_OF(items))


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
    T, for a scalar T) or `listlit` (a literal list; `items` holds its members). `decl` is
    the declared type of an `any` that is an argument (`list:map`, `list:list:str`): the
    kind of its items is known."""

    ty: str
    expr: Any
    err: Any = FALSE
    items: list[Term] = field(default_factory=list)
    decl: str | None = None

    @property
    def kind(self) -> str:
        """The run-time kind when it is static (`number` for int and real)."""
        if self.ty in ("int", "real"):
            return "number"
        if self.ty.startswith("list:") or self.ty == "listlit":
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
