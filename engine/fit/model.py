"""From a z3 model back to a concrete call: the counterexample the evaluator confirms.

A model only fixes the paths the conditions read; everything else is filled in to make
a valid call (required arguments get a value of their declared type). `preferences`
are extra constraints tried first so that counterexamples read naturally (printable
strings, `lower` on text it leaves unchanged, agent fields of their documented kinds);
they never decide soundness, only which of several real counterexamples is shown.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import z3

from engine import valuefit
from engine.fit.encode import Encoder
from engine.fit.terms import (
    HOST,
    HOST_FAILS,
    ITEMS,
    LOWER,
    MAP_GET,
    MAP_HAS,
    MAP_SIZE,
    VAL,
    canonical,
    items_of,
)
from engine.reference import _fits
from engine.types import from_ref, item_of

_PRINTABLE = z3.Star(z3.Range(" ", "~"))
_NOT_UPPER = z3.Star(z3.Union(z3.Range(" ", "@"), z3.Range("[", "~")))
_HOSTNAME = z3.Concat(
    z3.Range("a", "z"), z3.Star(z3.Union(z3.Range("a", "z"), z3.Range("0", "9"), z3.Re(".")))
)


# Largest list or map a counterexample is built with, and largest string read back from
# z3; a model asking for more is not turned into a call (the solver is asked again with
# sizes bounded first). A string read only through `len` is built directly, up to
# MAX_TEXT characters. MAX_NODES bounds the values of one unchecked value, all nested
# lists and maps counted.
MAX_SIZE = 4096
MAX_TEXT = 1_000_000
MAX_NODES = 4096
_SMALL = 16
# The items of a list-of-maps-or-lists argument whose kind the bounded models fix.
_SHAPED = 4


def _shape(value: Any, ty: str, bound: int) -> list[Any]:
    """A `VAL` holds a value of declared type `ty`, its first `bound` items (at every
    depth) checked. The solver leaves the items of a list argument of maps or lists free
    (any kind); a call needs them of their type."""
    if ty == "map":
        return [VAL.is_vmap(value)]
    if ty == "str":
        return [VAL.is_vstr(value)]
    if ty == "int":
        return [VAL.is_vnum(value), z3.IsInt(VAL.num_of(value))]
    if ty == "decimal":
        return [VAL.is_vnum(value)]
    if ty == "bool":
        return [VAL.is_vbool(value)]
    items = items_of(value)
    out = [VAL.is_vlist(value), z3.Length(items) <= bound]
    for index in range(bound):
        out.append(
            z3.Implies(index < z3.Length(items), z3.And(*_shape(items[index], item_of(ty), bound)))
        )
    return out


def size_bounds(enc: Encoder, limit: int = _SMALL) -> list[Any]:
    """Prefer small values: a model may pick a list of a million items (of the strings
    and lists of unchecked values, those a condition reads: z3 is slow on the others and
    picks them small); their first `_SHAPED` items are `canonical`, as the values in
    play are by the axioms. Lists of maps or lists are of their declared type (checked
    to `_SHAPED` items)."""
    out: list[Any] = []
    read = enc.facts.read()
    for var in enc.paths.values():
        if var.ty == "str" or var.ty.startswith("list:"):
            out.append(z3.Length(var.value) <= limit)
        elif var.ty == "any":
            v = var.value
            out.append(z3.Implies(VAL.is_vmap(v), MAP_SIZE(VAL.map_id(v)) <= limit))
            if v.get_id() in read or var.decl:  # (z3 is slow on these: only where read)
                out.append(z3.Implies(VAL.is_vstr(v), z3.Length(VAL.str_of(v)) <= limit))
                out.append(z3.Implies(VAL.is_vlist(v), z3.Length(items_of(v)) <= limit))
                items = items_of(v)
                for index in range(min(limit, _SHAPED)):
                    inside = z3.And(VAL.is_vlist(v), index < z3.Length(items))
                    out.append(z3.Implies(inside, z3.And(*canonical(items[index]))))
            if var.decl is not None:
                shape = _shape(v, var.decl, min(limit, _SHAPED))
                out.append(z3.Implies(var.present, z3.And(*shape)))
    return out


class TooLarge(Exception):
    """The model's values are too large to build a call from (or, for a list of maps or
    lists, not of its declared type)."""


def _size(value: Any, limit: int = MAX_SIZE) -> int:
    size = int(value.as_long())
    if size > limit:
        raise TooLarge(size)
    return size


def preferences(enc: Encoder) -> list[Any]:
    out: list[Any] = []
    for var in enc.paths.values():
        if var.ty == "str":
            out.append(z3.InRe(var.value, _PRINTABLE))
        elif var.ty == "list:str":
            for i in range(4):
                inside = i < z3.Length(var.value)
                out.append(z3.Implies(inside, z3.InRe(var.value[i], _PRINTABLE)))
        elif var.ty == "any":
            v = var.value
            if var.key[:1] == ("agent",) and len(var.key) == 2 and var.key[1] != "metadata":
                out.append(z3.Implies(var.present, VAL.is_vstr(v)))
            if var.key[:1] == ("thread",) and len(var.key) == 2:
                if var.key[1] == "id":
                    out.append(z3.Implies(var.present, VAL.is_vstr(v)))
                else:
                    out.append(z3.Implies(var.present, VAL.is_vnum(v)))
    # (z3 is slow on these: only for the unchecked values read as strings)
    for v in {v.get_id(): v for v in enc.facts.texts}.values():
        out.append(z3.Implies(VAL.is_vstr(v), z3.InRe(VAL.str_of(v), _PRINTABLE)))
    for s in enc.lowered:
        out.append(z3.InRe(s, _NOT_UPPER))
        out.append(LOWER(s) == s)
    for s in enc.hosted:
        out.append(z3.Not(HOST_FAILS(s)))
        out.append(z3.InRe(HOST(s), _HOSTNAME))
        out.append(s == z3.Concat(z3.StringVal("https://"), HOST(s), z3.StringVal("/")))
    return out


# How `as_string` writes a character it does not show as itself (a backslash before
# `u` included, as `\\u{5c}`): the inverse of `terms.text_val`.
_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]{1,5})\}")


def _text(value: Any) -> str:
    """A z3 string value's characters."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), value.as_string())


def _number(value: Any) -> int | Decimal:
    frac = value.as_fraction() if z3.is_rational_value(value) else Fraction(0)
    if frac.denominator == 1:
        return int(frac.numerator)
    return Decimal(frac.numerator) / Decimal(frac.denominator)


def _plain(model: Any, var_value: Any, ty: str) -> Any:
    value = model.eval(var_value, model_completion=True)
    if ty == "str":
        text = _text(value)
        if len(text) > MAX_SIZE:
            raise TooLarge(len(text))
        return text
    if ty == "int":
        return value.as_long()
    if ty == "real":
        return _number(value)
    if ty == "bool":
        return z3.is_true(value)
    if ty == "strlen":
        return "x" * _size(value, MAX_TEXT)
    if ty.startswith("list:"):
        size = _size(model.eval(z3.Length(var_value), model_completion=True))
        item = ty[5:]
        return [_plain(model, var_value[i], item) for i in range(size)]
    raise AssertionError(ty)


class CallBuilder:
    """Reads one model into the request parts: args, context, agent and thread.

    A list or map is built from its identity (the same identity, the same value): a
    list's items from `ITEMS`; a map's members are the keys that paths name on a map of
    its identity and `MAP_HAS` holds (no condition reads another), then keys no
    condition can name (`~0`, `~1`, ...; `~` is not an identifier) up to `MAP_SIZE`, the
    first holding the identity so that maps the model tells apart differ."""

    def __init__(self, enc: Encoder, model: Any) -> None:
        self.enc = enc
        self.model = model
        self.built: dict[tuple[str, int], Any] = {}
        self.building: set[tuple[str, int]] = set()
        self.nodes = 0
        self.named: dict[int, list[str]] = {}
        for var in enc.paths.values():
            if var.children and self._true(VAL.is_vmap(var.value)):
                keys = self.named.setdefault(self._int(VAL.map_id(var.value)), [])
                keys.extend(k[-1] for k in var.children if k[-1] not in keys)

    def _true(self, cond: Any) -> bool:
        return bool(z3.is_true(self.model.eval(cond, model_completion=True)))

    def _int(self, term: Any) -> int:
        return int(self.model.eval(term, model_completion=True).as_long())

    def value(self, v: Any) -> Any:
        """The JSON value of a `VAL` term."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise TooLarge(self.nodes)
        if self._true(VAL.is_vstr(v)):
            return _plain(self.model, VAL.str_of(v), "str")
        if self._true(VAL.is_vnum(v)):
            return _number(self.model.eval(VAL.num_of(v), model_completion=True))
        if self._true(VAL.is_vbool(v)):
            return self._true(VAL.bool_of(v))
        if self._true(VAL.is_vnull(v)):
            return None
        is_list = self._true(VAL.is_vlist(v))
        ident = self._int(VAL.list_id(v) if is_list else VAL.map_id(v))
        key = ("list" if is_list else "map", ident)
        if key in self.built:
            return self.built[key]
        if key in self.building:  # (a list holding itself: no real value)
            raise TooLarge(key)
        self.building.add(key)
        out = self._list(ident) if is_list else self._map(ident)
        self.building.discard(key)
        self.built[key] = out
        return out

    def _list(self, ident: int) -> list[Any]:
        items = ITEMS(z3.IntVal(ident))
        size = _size(self.model.eval(z3.Length(items), model_completion=True))
        return [self.value(items[index]) for index in range(size)]

    def _map(self, ident: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        at = z3.IntVal(ident)
        for name in self.named.get(ident, ()):
            key = z3.StringVal(name)
            if self._true(MAP_HAS(at, key)):
                out[name] = self.value(MAP_GET(at, key))
        size = max(len(out), _size(self.model.eval(MAP_SIZE(at), model_completion=True)))
        filler = 0
        while len(out) < size:
            out[f"~{filler}"] = ident if filler == 0 else None
            filler += 1
        return out

    def args(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for param in self.enc.tool.params:
            var = self.enc.paths.get(("args", param.name))
            if var is None:
                if param.required and not param.type.plain:
                    out[param.name] = valuefit.sample(param.type)
                elif param.required:
                    out[param.name] = _filler(from_ref(param.type))
                continue
            if not self._true(var.present):
                continue
            if var.ty != "any":
                out[param.name] = _plain(self.model, var.value, var.ty)
                continue
            value = self.value(var.value)
            if not _fits(from_ref(param.type), value):
                raise TooLarge(param.name)  # (a list's items of another kind)
            out[param.name] = value
        return out

    def root(self, name: str) -> dict[str, Any] | None:
        var = self.enc.paths.get((name,))
        if var is None or not self._true(var.present):
            return None
        value = self.value(var.value)
        return value if isinstance(value, dict) else None

    def call(self) -> dict[str, Any]:
        return {
            "tool": self.enc.tool.name,
            "args": self.args(),
            "context": self.root("context"),
            "agent": self.root("agent"),
            "thread": self.root("thread"),
        }


def _filler(ty: str) -> Any:
    """A value of a declared type for an argument no condition reads."""
    return {"str": "x", "int": 0, "decimal": 0, "bool": False, "map": {}}.get(ty, [])
