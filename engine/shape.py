"""Argument validation against a tool's signature (DESIGN.md section 2, step 2).

One validator per tool is generated as Python source and compiled in a batch: it checks
every argument's type, reports missing required and unknown arguments, and applies
defaults, returning the arguments to use. Bad input raises `ShapeError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from engine import types as T
from engine.runtime import ShapeError, kind
from policy import ast
from policy.catalogue import ToolSpec

Validator = Callable[[Any], dict[str, Any]]


def is_decimal(value: Any) -> bool:
    t = type(value)
    if t is int or t is Decimal:
        return t is int or value.is_finite()
    return t is float and math.isfinite(value)


def is_map(value: Any) -> bool:
    return type(value) is dict and all(type(k) is str for k in value)


def _type_check(ty: str, var: str, depth: int = 0) -> str:
    if ty == "str":
        return f"type({var}) is str"
    if ty == "int":
        return f"type({var}) is int"
    if ty == "bool":
        return f"type({var}) is bool"
    if ty == "decimal":
        return f"_isdec({var})"
    if ty == "map":
        return f"_ismap({var})"
    item = f"i{depth}"
    inner = _type_check(T.item_of(ty), item, depth + 1)
    return f"(type({var}) is list and all({inner} for {item} in {var}))"


def _literal(expr: ast.Expr) -> Any:
    if isinstance(expr, ast.Lit):
        return expr.value
    if isinstance(expr, ast.ListLit):
        return [_literal(i) for i in expr.items]
    if isinstance(expr, ast.MapLit):
        return {k: _literal(v) for k, v in expr.entries}
    raise ValueError("not a literal")  # the checker only admits literal defaults


def literal(expr: ast.Expr) -> Any:
    """The Python value of a literal expression (defaults, test arguments)."""
    return _literal(expr)


def unknown_argument(args: Mapping[str, Any], tool: str, known: frozenset[str]) -> None:
    extra = sorted(k for k in args if k not in known)
    name = extra[0] if extra else "?"
    hint = f"; its arguments: {', '.join(sorted(known))}" if known else "; it takes none"
    raise ShapeError(f"`{tool}` has no argument `{name}`{hint}")


def wrong_type(tool: str, name: str, declared: str, value: Any) -> None:
    shown = declared.replace("list:", "list[") + "]" * declared.count("list:")
    raise ShapeError(f"argument `{name}` of `{tool}` must be `{shown}`, got a {kind(value)}")


def _tool_source(slot: int, tool: ToolSpec, consts: dict[str, Any]) -> str:
    tool_const = f"n{slot}"
    consts[tool_const] = tool.name
    known_const = f"kn{slot}"
    consts[known_const] = frozenset(p.name for p in tool.params)
    lines = [
        f"def v{slot}(args):",
        "    if type(args) is not dict:",
        f"        raise ShapeError('arguments of `' + {tool_const} + '` must be an object')",
        "    seen = 0",
        "    out = args",
    ]
    for param in tool.params:
        ty = T.from_ref(param.type)
        key = repr(param.name)
        lines.append(f"    if {key} in args:")
        lines.append("        seen += 1")
        lines.append(f"        v = args[{key}]")
        lines.append(f"        if not ({_type_check(ty, 'v')}):")
        lines.append(f"            _wrong({tool_const}, {key}, {ty!r}, v)")
        if param.required:
            lines.append("    else:")
            lines.append(
                f"        raise ShapeError('missing required argument `' + {key} + '` of `' + {tool_const} + '`')"
            )
        elif param.default is not None:
            # A fresh value per call (the repr of a literal rebuilds it), so no caller
            # can mutate the default that another call sees.
            default_src = repr(literal(param.default))
            lines.append("    else:")
            lines.append("        if out is args:")
            lines.append("            out = dict(args)")
            lines.append(f"        out[{key}] = {default_src}")
    lines.append("    if seen != len(args):")
    lines.append(f"        _unknown(args, {tool_const}, {known_const})")
    lines.append("    return out")
    return "\n".join(lines) + "\n"


def build_validators(tools: Iterable[ToolSpec]) -> dict[str, Validator]:
    """One compiled validator per tool, all compiled with a single `exec`."""
    consts: dict[str, Any] = {}
    sources: list[str] = []
    names: list[str] = []
    for slot, tool in enumerate(tools):
        sources.append(_tool_source(slot, tool, consts))
        names.append(tool.name)
    namespace: dict[str, Any] = {
        **consts,
        "ShapeError": ShapeError,
        "_isdec": is_decimal,
        "_ismap": is_map,
        "_wrong": wrong_type,
        "_unknown": unknown_argument,
        "Decimal": Decimal,
    }
    if sources:
        exec(compile("\n".join(sources), "<charter validators>", "exec"), namespace)
    return {name: namespace[f"v{slot}"] for slot, name in enumerate(names)}
