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

from engine.fit.encode import Encoder, PathVar
from engine.fit.terms import HOST, HOST_FAILS, LOWER, VAL
from engine.types import from_ref

_PRINTABLE = z3.Star(z3.Range(" ", "~"))
_NOT_UPPER = z3.Star(z3.Union(z3.Range(" ", "@"), z3.Range("[", "~")))
_HOSTNAME = z3.Concat(
    z3.Range("a", "z"), z3.Star(z3.Union(z3.Range("a", "z"), z3.Range("0", "9"), z3.Re(".")))
)


# Largest list or map a counterexample is built with, and largest string read back from
# z3; a model asking for more is not turned into a call (the solver is asked again with
# sizes bounded first). A string read only through `len` is built directly, up to
# MAX_TEXT characters.
MAX_SIZE = 4096
MAX_TEXT = 1_000_000
_SMALL = 16


def size_bounds(enc: Encoder, limit: int = _SMALL) -> list[Any]:
    """Prefer small values: a model may pick a list of a million items."""
    out: list[Any] = []
    for var in enc.paths.values():
        if var.ty == "str" or var.ty.startswith("list:"):
            out.append(z3.Length(var.value) <= limit)
        elif var.ty.startswith("opaque:"):
            out.append(var.value <= limit)
        elif var.ty == "any":
            v = var.value
            out.append(z3.Implies(VAL.is_vstr(v), z3.Length(VAL.str_of(v)) <= limit))
            out.append(z3.Implies(VAL.is_vlist(v), VAL.list_len(v) <= limit))
            out.append(z3.Implies(VAL.is_vmap(v), VAL.map_len(v) <= limit))
    return out


class TooLarge(Exception):
    """The model's values are too large to build a call from."""


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
            out.append(z3.Implies(VAL.is_vstr(v), z3.InRe(VAL.str_of(v), _PRINTABLE)))
            out.append(z3.Implies(VAL.is_vlist(v), VAL.list_len(v) == 0))
            if var.key[:1] == ("agent",) and len(var.key) == 2 and var.key[1] != "metadata":
                out.append(z3.Implies(var.present, VAL.is_vstr(v)))
            if var.key[:1] == ("thread",) and len(var.key) == 2:
                if var.key[1] == "id":
                    out.append(z3.Implies(var.present, VAL.is_vstr(v)))
                else:
                    out.append(z3.Implies(var.present, VAL.is_vnum(v)))
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
    if ty.startswith("opaque:"):
        size = _size(value)
        return [{} if ty == "opaque:list:map" else [] for _ in range(size)]
    if ty.startswith("list:"):
        size = _size(model.eval(z3.Length(var_value), model_completion=True))
        item = ty[5:]
        return [_plain(model, var_value[i], item) for i in range(size)]
    raise AssertionError(ty)


class CallBuilder:
    """Reads one model into the request parts: args, context, agent and thread."""

    def __init__(self, enc: Encoder, model: Any) -> None:
        self.enc = enc
        self.model = model

    def _true(self, cond: Any) -> bool:
        return bool(z3.is_true(self.model.eval(cond, model_completion=True)))

    def _any(self, var: PathVar) -> Any:
        v = var.value
        if self._true(VAL.is_vstr(v)):
            return _plain(self.model, VAL.str_of(v), "str")
        if self._true(VAL.is_vnum(v)):
            return _number(self.model.eval(VAL.num_of(v), model_completion=True))
        if self._true(VAL.is_vbool(v)):
            return self._true(VAL.bool_of(v))
        if self._true(VAL.is_vnull(v)):
            return None
        if self._true(VAL.is_vlist(v)):
            size = _size(self.model.eval(VAL.list_len(v), model_completion=True))
            return [None] * size
        out: dict[str, Any] = {}
        for key in var.children:
            child = self.enc.paths[key]
            if self._true(child.present):
                out[key[-1]] = self._any(child)
        size = _size(self.model.eval(VAL.map_len(v), model_completion=True))
        filler = 0
        while len(out) < size:  # keys no condition can name (`~` is not an identifier)
            out[f"~{filler}"] = None
            filler += 1
        return out

    def args(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for param in self.enc.tool.params:
            var = self.enc.paths.get(("args", param.name))
            if var is None:
                if param.required:
                    out[param.name] = _filler(from_ref(param.type))
                continue
            if not self._true(var.present):
                continue
            out[param.name] = (
                self._any(var) if var.ty == "any" else _plain(self.model, var.value, var.ty)
            )
        return out

    def root(self, name: str) -> dict[str, Any] | None:
        var = self.enc.paths.get((name,))
        if var is None or not self._true(var.present):
            return None
        value = self._any(var)
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
