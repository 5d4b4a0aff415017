"""Enum, record and `| null` argument types: every checker of a value agrees.

For generated types (enums, records with required and `?` fields named as servers name
them, `T | null`, lists of records, at any depth) and values near them (fitting ones,
and ones with a member too many or missing, a value off the enum, a `null` where none
fits, a wrong kind at some depth), the compiled decision's shape check, the reference
interpreter's, `engine.valuefit.fits` and its built checker all give one answer, and so
does `misfit` on the value written as a literal (a test's call, a default).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import valuefit
from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Request
from engine.reference import validate
from grammar import fmt
from policy import ast
from tests.examples import examples
from tests.property.requests import any_values

NAMES = ("login", "repoName", "x.y", "_id", "id", "ID")
ENUM_VALUES = ("open", "closed", "Open", "", "x y")
scalars = st.sampled_from(("str", "int", "decimal", "bool", "map")).map(
    lambda k: ast.TypeRef(k)  # type: ignore[arg-type]
)
enums = st.lists(st.sampled_from(ENUM_VALUES), min_size=1, max_size=3, unique=True).map(
    lambda vs: ast.TypeRef("enum", values=tuple(vs))
)


def _record(fields: list[tuple[str, ast.TypeRef, bool]]) -> ast.TypeRef:
    unique = {name: (ty, optional) for name, ty, optional in fields}
    made = tuple(ast.Field(n, ty, opt) for n, (ty, opt) in unique.items())
    return ast.TypeRef("record", fields=made)


def _nullable(ref: ast.TypeRef) -> ast.TypeRef:
    return ast.TypeRef(ref.kind, ref.item, values=ref.values, fields=ref.fields, nullable=True)


types: st.SearchStrategy[ast.TypeRef] = st.recursive(
    st.one_of(scalars, enums),
    lambda inner: st.one_of(
        inner.map(lambda t: ast.TypeRef("list", t)),
        st.lists(st.tuples(st.sampled_from(NAMES), inner, st.booleans()), max_size=3).map(_record),
        inner.map(_nullable),
    ),
    max_leaves=6,
)


def near(ref: ast.TypeRef) -> st.SearchStrategy[Any]:
    """Values of `ref`, mostly; now and then one off it at some depth."""
    return st.one_of(_fitting(ref), _fitting(ref), _fitting(ref), any_values)


def _fitting(ref: ast.TypeRef) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if ref.kind == "list":
        assert ref.item is not None
        base = st.lists(near(ref.item), max_size=3)
    elif ref.kind == "enum":
        base = st.one_of(st.sampled_from(ref.values), st.sampled_from(ENUM_VALUES))
    elif ref.kind == "record":
        required = {f.name: near(f.type) for f in ref.fields if not f.optional}
        optional = {f.name: near(f.type) for f in ref.fields if f.optional}
        base = st.fixed_dictionaries(required, optional=optional)
        base = st.one_of(
            base,
            st.tuples(base, st.sampled_from(NAMES), any_values).map(lambda t: {**t[0], t[1]: t[2]}),
            base.map(lambda d: dict(list(d.items())[1:])),
        )
    else:
        base = {
            "str": st.text(max_size=3),
            "int": st.integers(-5, 5),
            "decimal": st.one_of(st.integers(-5, 5), st.decimals(-5, 5, places=1)),
            "bool": st.booleans(),
            "map": st.dictionaries(st.sampled_from(NAMES), any_values, max_size=2),
        }[ref.kind]
    return st.one_of(base, st.none()) if ref.nullable else base


def _literal(value: Any) -> ast.Expr | None:
    """`value` as a DSL literal, or None for one no literal writes (a float, NaN)."""
    if value is None:
        return ast.Lit("null", None)
    if isinstance(value, bool):
        return ast.Lit("bool", value)
    if isinstance(value, int):
        return ast.Lit("int", value)
    if isinstance(value, Decimal):
        return ast.Lit("decimal", value) if value.is_finite() else None
    if isinstance(value, str):
        return ast.Lit("str", value)
    if isinstance(value, list):
        items = [_literal(v) for v in value]
        return None if None in items else ast.ListLit(tuple(i for i in items if i is not None))
    if isinstance(value, dict) and all(type(k) is str for k in value):
        entries = [(k, _literal(v)) for k, v in value.items()]
        if any(v is None for _, v in entries):
            return None
        return ast.MapLit(tuple((k, v) for k, v in entries if v is not None))
    return None


@settings(max_examples=examples(20))  # (a workspace compiled per example; 6 values each)
@given(types, st.data())
def test_every_check_of_a_value_agrees(ref: ast.TypeRef, data: st.DataObject) -> None:
    text = f"toolset t {{\n  tool f(x: {fmt.type_text(ref)})\n}}\nrole r {{\n  allow t.f\n}}\n"
    text += "profile p {\n  roles r\n}\n"
    snapshot = compile_workspace(check_sources([("gen.charter", text)]))
    tool = snapshot.workspace.tools["t.f"]
    (param,) = tool.params
    assert param.type == ref  # (the text says the type drawn)
    check = valuefit.checker(ref)
    for _ in range(6):
        value = data.draw(near(ref))
        fits = valuefit.fits(ref, value)
        assert check(value) == fits, value
        decision = snapshot.decide(Request("p", "t.f", {"x": value}, None))
        assert (decision.effect == "allow") == fits, (value, decision.reasons)
        assert (not isinstance(validate(tool, {"x": value}), str)) == fits, value
        literal = _literal(value)
        if literal is not None:
            assert (valuefit.misfit(ref, literal) is None) == fits, value
