"""Values against the declared types beyond a type string: enums, records and `null`.

A plain type (`str`, `list[int]`, ...; `ast.TypeRef.plain`) is checked by the code
`engine.shape` generates inline; a type with an enum, a record or `| null` anywhere in it
is checked by a function built here once per distinct type (`checker`), so a toolset
that uses none of these forms pays nothing for them. The rules, at every depth:

- an enum's value is a `str` among its values (`enum["open", "closed"]`);
- a record's value is an object whose keys are all its fields' names, with every field
  not marked `?` present and each value of its field's type: a field it does not declare
  is refused, as an unknown argument of a tool is;
- `T | null` takes `null` as well as a value of `T`;
- the plain forms as `engine.shape` checks them (an `int` fits a `decimal`; a `bool` is
  no `int`; a `map` is an object with string keys; non-finite numbers fit nothing).

`fits` (the reference), `checker` (what decisions run) and `misfit` (a test's literal
call, a parameter's default: the part that does not fit) agree on every value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from policy import ast

Check = Callable[[Any], bool]


def is_decimal(value: Any) -> bool:
    t = type(value)
    if t is int or t is Decimal:
        return t is int or value.is_finite()
    return t is float and math.isfinite(value)


def is_map(value: Any) -> bool:
    return type(value) is dict and all(type(k) is str for k in value)


def _scalar(kind: str) -> Check:
    if kind == "str":
        return lambda v: type(v) is str
    if kind == "int":
        return lambda v: type(v) is int
    if kind == "bool":
        return lambda v: type(v) is bool
    if kind == "decimal":
        return is_decimal
    return is_map


def _build(ref: ast.TypeRef) -> Check:
    check: Check
    if ref.kind == "list":
        assert ref.item is not None
        item = _build(ref.item)
        check = lambda v: type(v) is list and all(map(item, v))  # noqa: E731
    elif ref.kind == "enum":
        values = frozenset(ref.values)
        check = lambda v: type(v) is str and v in values  # noqa: E731
    elif ref.kind == "record":
        check = _record(ref)
    else:
        check = _scalar(ref.kind)
    if ref.nullable:
        inner = check
        return lambda v: v is None or inner(v)
    return check


def _record(ref: ast.TypeRef) -> Check:
    fields = {f.name: _build(f.type) for f in ref.fields}
    required = tuple(f.name for f in ref.fields if not f.optional)

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for name in required:
            if name not in value:
                return False
        for key, item in value.items():
            field = fields.get(key) if type(key) is str else None
            if field is None or not field(item):
                return False
        return True

    return check


_built: dict[str, Check] = {}


def key(ref: ast.TypeRef) -> str:
    """The type's canonical text: equal for equal types (spans aside)."""
    return str(ref)


def checker(ref: ast.TypeRef) -> Check:
    """The check of a value against `ref`, built once per distinct type."""
    text = key(ref)
    found = _built.get(text)
    if found is None:
        found = _built.setdefault(text, _build(ref))
    return found


def by_key(text: str) -> Check:
    """The check built for a type's `key` (generated validation code names it so)."""
    return _built[text]


def fits(ref: ast.TypeRef, value: Any) -> bool:
    """Does `value` (as JSON decodes it) fit the declared type `ref`? (The reference.)"""
    if value is None:
        return ref.nullable
    if ref.kind == "list":
        assert ref.item is not None
        item = ref.item
        return type(value) is list and all(fits(item, v) for v in value)
    if ref.kind == "enum":
        return type(value) is str and value in ref.values
    if ref.kind == "record":
        if type(value) is not dict or not all(type(k) is str for k in value):
            return False
        declared = {f.name: f for f in ref.fields}
        if any(k not in declared for k in value):
            return False
        return all(
            fits(f.type, value[f.name]) if f.name in value else f.optional for f in ref.fields
        )
    return _scalar(ref.kind)(value)


def misfit(ref: ast.TypeRef, value: ast.Expr) -> tuple[ast.Expr, str] | None:
    """The innermost part of the literal `value` that does not fit `ref`, with the type
    wanted there as an author writes it; None when all of it fits."""
    if isinstance(value, ast.Lit) and value.kind == "null":
        return None if ref.nullable else (value, str(ref))
    if ref.kind == "list":
        assert ref.item is not None
        if not isinstance(value, ast.ListLit):
            return value, str(ref)
        for each in value.items:
            found = misfit(ref.item, each)
            if found is not None:
                return found
        return None
    if ref.kind == "record":
        if not isinstance(value, ast.MapLit):
            return value, str(ref)
        declared = {f.name: f for f in ref.fields}
        given = dict(value.entries)
        for name, each in value.entries:
            field = declared.get(name)
            if field is None:
                return value, str(ref)
            found = misfit(field.type, each)
            if found is not None:
                return found
        if any(not f.optional and f.name not in given for f in ref.fields):
            return value, str(ref)
        return None
    if ref.kind == "map":
        return None if isinstance(value, ast.MapLit) else (value, str(ref))
    if not isinstance(value, ast.Lit):
        return value, str(ref)
    if ref.kind == "enum":
        return None if value.kind == "str" and value.value in ref.values else (value, str(ref))
    if value.kind == ref.kind or (ref.kind == "decimal" and value.kind == "int"):
        return None
    return value, str(ref)


def sample(ref: ast.TypeRef) -> Any:
    """A value of type `ref` (for an argument that a counterexample's conditions leave
    free): `null` where that fits, else the smallest value of the type."""
    if ref.nullable:
        return None
    if ref.kind == "enum":
        return ref.values[0]
    if ref.kind == "record":
        return {f.name: sample(f.type) for f in ref.fields if not f.optional}
    return {"str": "x", "int": 0, "decimal": 0, "bool": False, "map": {}}.get(ref.kind, [])
