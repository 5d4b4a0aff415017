"""Properties of `charter import mcp`'s conversion, on generated tool schemas: scalars,
string and mixed enums, `const`, arrays with and without `items`, objects with and
without `properties` and `required`, `additionalProperties`, `anyOf`/`oneOf` with and
without `null`, `"type": [..., "null"]`, `allOf`, local `$ref`s into `$defs` (recursive
ones too), defaults of any JSON value, and names of any text.

- The declaration always parses, checks, and is `charter fmt`'s own text; each part
  declared `map` for want of a type is named in a comment of its tool.
- Sound where it says nothing lost: a tool whose schema converted with no loss takes
  every value its schema takes (objects holding only the members they list), and the
  value a JSON Schema validator would refuse for its enum or type is refused.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from api.mcpimport.schema import Converter
from api.mcpimport.toolset import declaration
from engine import valuefit
from engine.check import check_sources
from grammar.fmt import format_file
from grammar.parser import parse

NAMES = st.one_of(
    st.sampled_from(("repoName", "id", "x.y", "_meta", "a b", "", "list", "secret", "Ünï")),
    st.text(max_size=6),
)
JSON: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=4),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)
SCALARS = ("string", "integer", "number", "boolean")


def _with_extras(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    if draw(st.booleans()):
        schema["default"] = draw(JSON)
    if draw(st.booleans()):
        schema["description"] = draw(st.text(max_size=8))
    return schema


@st.composite
def parts(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    """One part of a tool's schema (`$ref`s point at `#/$defs/Node` or `#/$defs/Leaf`)."""
    leaves = ["scalar", "enum", "const", "ref-leaf", "empty"]
    kinds = leaves + (
        ["array", "object", "union", "nullable", "all-of", "ref-node"] if depth < 3 else []
    )
    kind = draw(st.sampled_from(kinds))
    schema: dict[str, Any]
    if kind == "scalar":
        schema = {"type": draw(st.sampled_from(SCALARS))}
    elif kind == "enum":
        values = draw(
            st.lists(
                st.one_of(st.text(max_size=3), st.none(), st.integers(0, 2)), min_size=1, max_size=3
            )
        )
        schema = {"enum": values}
        if draw(st.booleans()):
            schema["type"] = "string"
    elif kind == "const":
        schema = {"const": draw(st.text(max_size=3))}
    elif kind == "ref-leaf":
        schema = {"$ref": "#/$defs/Leaf"}
    elif kind == "ref-node":
        schema = {"$ref": "#/$defs/Node"}
    elif kind == "empty":
        schema = draw(st.sampled_from(({}, {"description": "any"}, {"type": "null"})))
    elif kind == "array":
        schema = {"type": "array"}
        if draw(st.integers(0, 4)):
            schema["items"] = draw(parts(depth + 1))
    elif kind == "object":
        schema = draw(objects(depth + 1))
    elif kind == "union":
        key = draw(st.sampled_from(("anyOf", "oneOf")))
        schema = {key: draw(st.lists(parts(depth + 1), min_size=1, max_size=3))}
    elif kind == "nullable":
        inner = draw(parts(depth + 1))
        if "type" in inner and isinstance(inner["type"], str) and draw(st.booleans()):
            schema = {**inner, "type": [inner["type"], "null"]}
        else:
            schema = {"anyOf": [inner, {"type": "null"}]}
    else:
        schema = {"allOf": draw(st.lists(parts(depth + 1), min_size=1, max_size=2))}
    return _with_extras(draw, schema)


@st.composite
def objects(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    props: dict[str, Any] = draw(st.dictionaries(NAMES, parts(depth), max_size=4))
    schema: dict[str, Any] = {"type": "object", "properties": props}
    listed: bool = draw(st.booleans())
    if props and listed:
        schema["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
    if draw(st.integers(0, 5)) == 0:
        schema["additionalProperties"] = draw(st.sampled_from((True, False, {"type": "string"})))
    return schema


@st.composite
def tool_schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema = draw(objects())
    node = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
        },
        "required": ["name"],
    }
    schema["$defs"] = {"Node": node, "Leaf": draw(parts(3))}
    return schema


def _instances(schema: Any, root: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values the JSON Schema `schema` takes (objects with only the members it lists),
    for the forms the converter says without loss."""
    if not isinstance(schema, dict) or depth > 12:
        return st.nothing()
    if "$ref" in schema:
        return _instances(root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return st.one_of([_instances(p, root, depth + 1) for p in schema[key]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_instances({**schema, "type": k}, root, depth) for k in kind])
    if kind == "null":
        return st.none()
    if kind == "string":
        return st.text(max_size=3)
    if kind == "integer":
        return st.integers(-3, 3)
    if kind == "number":
        return st.one_of(st.integers(-3, 3), st.floats(-3, 3))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(_instances(schema.get("items", {}), root, depth + 1), max_size=2)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        required = [n for n in schema.get("required", []) if n in props]
        return st.fixed_dictionaries(
            {n: _instances(props[n], root, depth + 1) for n in required},
            optional={
                n: _instances(p, root, depth + 1) for n, p in props.items() if n not in required
            },
        )
    return st.nothing()


@given(st.lists(st.tuples(NAMES, tool_schemas()), max_size=3))
def test_the_declaration_checks_and_is_fmts_own_text(
    tools: list[tuple[str, dict[str, Any]]],
) -> None:
    listed = [{"name": name, "inputSchema": schema, "description": name} for name, schema in tools]
    imported = declaration("gen", listed)
    text = imported.text
    assert format_file(parse(text, "gen.charter")) == text
    check_sources([("gen.charter", text)])  # (raises on any error)
    mapped = [loss for loss in imported.losses if loss.path and not loss.left_out]
    assert text.count("` is `map`: ") == len(mapped)


@given(tool_schemas(), st.data())
def test_a_schema_said_without_loss_takes_the_values_its_schema_takes(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    converter = Converter("t", schema)
    ref = converter.convert(schema, "")
    if converter.losses:
        return
    for _ in range(4):
        value = data.draw(_instances(schema, schema))
        assert valuefit.fits(ref, value), (value, str(ref))
