"""A tool's JSON Schema (an MCP `inputSchema`) as Charter argument types.

Each part of a schema becomes the DSL type that takes the same JSON values:

- `string`, `integer`, `number`, `boolean` -> `str`, `int`, `decimal`, `bool`;
- an `enum` (or a `const`) of strings -> `enum["a", "b"]`;
- `array` with `items` -> `list[T]`;
- `object` with `properties` -> a record `{ name: T, other?: T }` (`?`: not in `required`),
  which refuses a member it does not list, as a tool refuses an unknown argument (the
  models a server is written with, pydantic's among them, list every member they read);
  an object with no `properties` -> `map`;
- `null` beside one other type (`"type": ["string", "null"]`, an `anyOf`/`oneOf` of a
  type and `{"type": "null"}`, or `null` among an enum's values) -> `T | null`;
- a local `$ref` (`#/$defs/Owner`, `#/definitions/Owner`) -> the type it points at;
  `allOf` of one schema -> that schema's type.

A part no DSL type says exactly (a union of several types, a tuple, an enum of numbers,
a recursive `$ref`, an object that also takes properties it does not list, an array
without `items`, a schema with no type) becomes `map`, and `Loss` says where: the tool's
argument path (`owner.labels[]`) and why. A value that is not an object is refused there
for its shape, so such a part fails closed until its author writes a type for it.
Keywords that narrow a value without changing its type (`format`, `pattern`,
`minimum`, `maxLength`, ...) are not declared: the server checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy import ast

# Records and lists nested deeper than this become `map` (the parser's nesting limit is
# 48 levels; a real tool's arguments nest a few).
MAX_DEPTH = 16

_SCALARS = {"string": "str", "integer": "int", "number": "decimal", "boolean": "bool"}


@dataclass(frozen=True, slots=True)
class Loss:
    """A part of a tool's schema declared `map` because no DSL type says it: `path` is
    the argument's path (`owner.labels[]`: the items of `labels` of `owner`)."""

    tool: str
    path: str
    why: str
    left_out: bool = False  # (an argument not declared at all: no name holds it)

    def __str__(self) -> str:
        if not self.path:
            return f"tool `{self.tool}`: {self.why}"
        if self.left_out:
            return f"tool `{self.tool}`: argument `{self.path}` is left out: {self.why}"
        return f"tool `{self.tool}`: `{self.path}` is declared `map`: {self.why}"


@dataclass
class Converter:
    """Converts the parts of one tool's schema, resolving its local `$ref`s against
    `root`, and collects the `Loss` of each part it declares `map`."""

    tool: str
    root: Mapping[str, Any]
    losses: list[Loss] = field(default_factory=list)
    _resolving: list[str] = field(default_factory=list)

    def lost(self, path: str, why: str) -> ast.TypeRef:
        self.losses.append(Loss(self.tool, path, why))
        return ast.TypeRef("map")

    def convert(self, schema: Any, path: str, depth: int = 0) -> ast.TypeRef:
        """The type of one part (`path`: where it is, for a `Loss`)."""
        if schema is True or schema == {}:
            return self.lost(path, "it takes any value")
        if not isinstance(schema, Mapping):
            return self.lost(path, "its schema is not an object")
        if depth > MAX_DEPTH:
            return self.lost(path, f"it nests deeper than {MAX_DEPTH} levels")
        if "$ref" in schema:
            return self._ref(schema["$ref"], path, depth)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._union(schema[key], key, path, depth)
        if "allOf" in schema:
            parts = schema["allOf"]
            if isinstance(parts, list) and len(parts) == 1:
                return self.convert(parts[0], path, depth)
            return self.lost(path, "`allOf` of several schemas")
        if "const" in schema:
            return self._enum([schema["const"]], path)
        if "enum" in schema:
            return self._enum(schema["enum"], path)
        kind = schema.get("type")
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            if len(others) != 1:
                shown = ", ".join(str(k) for k in kind)
                return self.lost(path, f"it takes several types ({shown})")
            inner = self.convert({**schema, "type": others[0]}, path, depth)
            return _nullable(inner) if len(others) < len(kind) else inner
        if kind is None and "properties" in schema:
            kind = "object"
        if kind in _SCALARS:
            return ast.TypeRef(_SCALARS[kind])  # type: ignore[arg-type]
        if kind == "array":
            return self._array(schema, path, depth)
        if kind == "object":
            return self._object(schema, path, depth)
        if kind is None:
            return self.lost(path, "its schema gives no type")
        return self.lost(path, f"its type is `{kind}`")

    def _ref(self, ref: Any, path: str, depth: int) -> ast.TypeRef:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return self.lost(path, f"`$ref` `{ref}` is not a reference inside the schema")
        if ref in self._resolving:
            return self.lost(path, f"`$ref` `{ref}` refers to itself (a recursive type)")
        target: Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, Mapping) else None
        if target is None:
            return self.lost(path, f"`$ref` `{ref}` points at nothing")
        self._resolving.append(ref)
        try:
            return self.convert(target, path, depth)
        finally:
            self._resolving.pop()

    def _union(self, parts: Any, key: str, path: str, depth: int) -> ast.TypeRef:
        if not isinstance(parts, list):
            return self.lost(path, f"`{key}` is not a list")
        null = [p for p in parts if isinstance(p, Mapping) and p.get("type") == "null"]
        others = [p for p in parts if p not in null]
        if len(others) == 1:
            inner = self.convert(others[0], path, depth)
            return _nullable(inner) if null else inner
        kinds = ", ".join(_kind_of(p) for p in parts)
        return self.lost(path, f"`{key}` of several types ({kinds})")

    def _enum(self, values: Any, path: str) -> ast.TypeRef:
        if not isinstance(values, list) or not values:
            return self.lost(path, "an empty enum")
        strings = list(dict.fromkeys(v for v in values if isinstance(v, str)))
        if len(strings) + values.count(None) != len(values) or not strings:
            return self.lost(path, "an enum of values that are not all strings")
        ref = ast.TypeRef("enum", values=tuple(strings))
        return _nullable(ref) if None in values else ref

    def _array(self, schema: Mapping[str, Any], path: str, depth: int) -> ast.TypeRef:
        items = schema.get("items")
        if items is None:
            item = self.lost(path + "[]", "an array whose items have no schema")
        elif isinstance(items, list):
            item = self.lost(path + "[]", "a tuple (`items` as a list of schemas)")
        else:
            item = self.convert(items, path + "[]", depth + 1)
        return ast.TypeRef("list", item)

    def _object(self, schema: Mapping[str, Any], path: str, depth: int) -> ast.TypeRef:
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            return ast.TypeRef("map")  # (an open object: any members)
        if schema.get("additionalProperties", False) not in (False, None):
            return self.lost(path, "an object that takes properties beyond those it lists")
        required = _required(schema)
        fields: list[ast.Field] = []
        for name, sub in props.items():
            shown = ast.name_text(name) if isinstance(name, str) else str(name)
            where = f"{path}.{shown}" if path else shown
            if not isinstance(name, str) or not name:
                self.losses.append(Loss(self.tool, where, "its name is empty", left_out=True))
                continue
            fields.append(
                ast.Field(name, self.convert(sub, where, depth + 1), name not in required)
            )
        return ast.TypeRef("record", fields=tuple(fields))


def _required(schema: Mapping[str, Any]) -> frozenset[str]:
    listed = schema.get("required")
    return (
        frozenset(n for n in listed if isinstance(n, str))
        if isinstance(listed, list)
        else (frozenset())
    )


def _nullable(ref: ast.TypeRef) -> ast.TypeRef:
    return ast.TypeRef(ref.kind, ref.item, values=ref.values, fields=ref.fields, nullable=True)


def _kind_of(schema: Any) -> str:
    if isinstance(schema, Mapping):
        kind = schema.get("type")
        if isinstance(kind, str):
            return kind
        if "$ref" in schema:
            return str(schema["$ref"]).rsplit("/", 1)[-1]
    return "a schema"
