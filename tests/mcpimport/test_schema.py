"""JSON Schema parts as Charter types (api/mcpimport/schema.py): each form the DSL says,
and each it cannot, which becomes `map` with a `Loss` naming the tool and the path."""

from __future__ import annotations

from typing import Any

import pytest

from api.mcpimport.schema import MAX_DEPTH, Converter
from grammar.fmt import type_text


def _convert(schema: Any, root: dict[str, Any] | None = None) -> tuple[str, list[str]]:
    converter = Converter("getIssue", root or {})
    ref = converter.convert(schema, "arg")
    return type_text(ref), [f"{loss.path}: {loss.why}" for loss in converter.losses]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string", "format": "uri", "maxLength": 9}, "str"),
        ({"type": "integer"}, "int"),
        ({"type": "number"}, "decimal"),
        ({"type": "boolean"}, "bool"),
        ({"type": "object"}, "map"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "map"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]"),
        ({"type": "string", "enum": ["open", "closed"]}, 'enum["open", "closed"]'),
        ({"enum": ["a", None]}, 'enum["a"] | null'),
        ({"const": "only"}, 'enum["only"]'),
        ({"type": ["string", "null"]}, "str | null"),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "int | null"),
        ({"oneOf": [{"type": "null"}, {"type": "array", "items": {"type": "integer"}}]},
         "list[int] | null"),
        ({"allOf": [{"type": "boolean"}]}, "bool"),
        (
            {"type": "object", "properties": {"login": {"type": "string"}, "x.y": {"type": "integer"}},
             "required": ["login"]},
            '{ login: str, "x.y"?: int }',
        ),
        ({"properties": {"a": {"type": "string"}}}, "{ a?: str }"),
        (
            {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}},
                                        "required": ["name"]}},
            "list[{ name: str }]",
        ),
    ],
)  # fmt: skip
def test_expressible_parts_convert_without_loss(schema: Any, expected: str) -> None:
    assert _convert(schema) == (expected, [])


def test_a_local_ref_resolves_into_defs() -> None:
    root = {
        "$defs": {
            "Owner": {"type": "object", "properties": {"login": {"type": "string"}},
                      "required": ["login"]},
        },
        "definitions": {"Tag": {"type": "string", "enum": ["x"]}},
    }  # fmt: skip
    assert _convert({"$ref": "#/$defs/Owner"}, root) == ("{ login: str }", [])
    assert _convert({"type": "array", "items": {"$ref": "#/definitions/Tag"}}, root) == (
        'list[enum["x"]]',
        [],
    )


@pytest.mark.parametrize(
    ("schema", "path", "why"),
    [
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "arg", "`anyOf` of several types"),
        ({"oneOf": [{"type": "string"}, {"$ref": "#/$defs/X"}]}, "arg", "`oneOf` of several"),
        ({"type": ["string", "integer"]}, "arg", "several types (string, integer)"),
        ({"allOf": [{"type": "string"}, {"minLength": 1}]}, "arg", "`allOf` of several"),
        ({"enum": [1, 2]}, "arg", "not all strings"),
        ({"type": "array"}, "arg[]", "items have no schema"),
        ({"type": "array", "items": [{"type": "string"}]}, "arg[]", "a tuple"),
        ({}, "arg", "any value"),
        ({"description": "no type"}, "arg", "gives no type"),
        ({"$ref": "https://example.com/s.json"}, "arg", "not a reference inside"),
        ({"$ref": "#/$defs/Missing"}, "arg", "points at nothing"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": True,
            },
            "arg",
            "beyond those it lists",
        ),
    ],
)
def test_inexpressible_parts_become_map_with_a_loss(schema: Any, path: str, why: str) -> None:
    text, losses = _convert(schema)
    assert text in ("map", "list[map]")
    assert len(losses) == 1 and losses[0].startswith(f"{path}: ") and why in losses[0]


def test_a_recursive_ref_is_map_where_it_recurs() -> None:
    root = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"name": {"type": "string"},
                               "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                "required": ["name"],
            }
        }
    }  # fmt: skip
    text, losses = _convert({"$ref": "#/$defs/Node"}, root)
    assert text == "{ name: str, children?: list[map] }"
    assert losses == ["arg.children[]: `$ref` `#/$defs/Node` refers to itself (a recursive type)"]


def test_nesting_past_the_limit_is_map() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_DEPTH + 2):
        schema = {"type": "array", "items": schema}
    text, losses = _convert(schema)
    assert text.count("list[") == MAX_DEPTH + 1 and "map" in text
    assert len(losses) == 1 and "deeper than" in losses[0]
