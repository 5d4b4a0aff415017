"""The image of a concrete call in the fit encoding: the assignment docs/fit.md's
soundness argument describes ("The encoding"), as z3 constraints.

Each typed argument is its value; each unchecked value is its `VAL`, a list or map by
an identity numbered per value up to `runtime.eq` (`1` and `1.0` are one number, equal
lists one identity), with its items (`ITEMS`, `LIST_OF`), members (`MAP_HAS`,
`MAP_GET`, and no other named key) and size (`MAP_SIZE`); `lower` and `host` are the
real functions on every string of the call. The encoding of a condition under these
constraints must give exactly the evaluator's outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import z3

from engine import runtime as R
from engine.decision import Request
from engine.fit.encode import Encoder, PathVar
from engine.fit.terms import (
    HOST,
    HOST_FAILS,
    ITEMS,
    LIST_OF,
    LOWER,
    MAP_GET,
    MAP_HAS,
    MAP_SIZE,
    VAL,
    VAL_SEQ,
    seq_sort,
    text_val,
)


def _canon(value: Any) -> Any:
    """A key equal for two values exactly when `runtime.eq` holds of them."""
    kind = R.kind(value)
    if kind == "number":
        return ("number", Fraction(value))
    if kind == "list":
        return ("list", tuple(_canon(v) for v in value))
    if kind == "map":
        return ("map", frozenset((k, _canon(v)) for k, v in value.items()))
    return (kind, value)


def _real(value: Any) -> Any:
    frac = Fraction(value)
    return z3.RealVal(f"{frac.numerator}/{frac.denominator}")


class _Image:
    def __init__(self, named: list[str]) -> None:
        self.named = named
        self.ids: dict[Any, int] = {}
        self.facts: list[Any] = []
        self.texts: set[str] = set()

    def _ident(self, value: Any) -> tuple[int, bool]:
        key = _canon(value)
        if key in self.ids:
            return self.ids[key], False
        self.ids[key] = len(self.ids)
        return self.ids[key], True

    def val(self, value: Any) -> Any:
        kind = R.kind(value)
        if kind == "str":
            self.texts.add(value)
            return VAL.vstr(text_val(value))
        if kind == "number":
            return VAL.vnum(_real(value))
        if kind == "bool":
            return VAL.vbool(z3.BoolVal(value))
        if kind == "null":
            return VAL.vnull
        ident, new = self._ident(value)
        at = z3.IntVal(ident)
        if kind == "list":
            if new:
                units = [z3.Unit(self.val(v)) for v in value]
                items = (
                    z3.Empty(VAL_SEQ)
                    if not units
                    else units[0]
                    if len(units) == 1
                    else z3.Concat(*units)
                )
                self.facts += [ITEMS(at) == items, LIST_OF(items) == at]
            return VAL.vlist(at)
        assert kind == "map", value
        if new:
            self.facts.append(MAP_SIZE(at) == len(value))
            for key, member in value.items():
                name = text_val(key)
                self.facts += [MAP_HAS(at, name), MAP_GET(at, name) == self.val(member)]
            for key in self.named:
                if key not in value:
                    self.facts.append(z3.Not(MAP_HAS(at, z3.StringVal(key))))
        return VAL.vmap(at)

    def typed(self, var: PathVar, value: Any) -> Any:
        ty = var.ty
        if ty == "any":
            return var.value == self.val(value)
        if ty == "strlen":
            return var.value == len(value)
        if ty.startswith("list:"):
            item = ty[5:]
            units = [z3.Unit(self._scalar(item, v)) for v in value]
            if not units:
                return var.value == z3.Empty(seq_sort(item))
            return var.value == (units[0] if len(units) == 1 else z3.Concat(*units))
        return var.value == self._scalar(ty, value)

    def _scalar(self, ty: str, value: Any) -> Any:
        if ty == "str":
            self.texts.add(value)
            return text_val(value)
        if ty == "int":
            return z3.IntVal(value)
        if ty == "real":
            return _real(value)
        assert ty == "bool", ty
        return z3.BoolVal(value)

    def functions(self) -> list[Any]:
        """`lower` and `host` as they are, on every string of the call."""
        out = []
        for text in self.texts:
            out.append(LOWER(text_val(text)) == text_val(text.lower()))
            try:
                host = R.host(text)
            except R.EvalError:
                out.append(HOST_FAILS(text_val(text)))
            else:
                out += [z3.Not(HOST_FAILS(text_val(text))), HOST(text_val(text)) == text_val(host)]
        return out


def image(enc: Encoder, args: Mapping[str, Any], request: Request) -> list[Any]:
    """Constraints fixing every path of `enc` to the call's value (`args` with defaults
    applied)."""
    out: list[Any] = []
    made = _Image(enc.named_keys())
    for key, var in enc.paths.items():
        if var.parent is not None:  # a member is a term over its map
            continue
        if key[0] == "args":
            present = key[1] in args
            out.append(var.present == z3.BoolVal(present))
            if present:
                out.append(made.typed(var, args[key[1]]))
            continue
        root = getattr(request, key[0])
        out.append(var.present == z3.BoolVal(root is not None))
        if root is not None:
            out.append(var.value == made.val(root))
    return [*out, *made.facts, *made.functions()]
