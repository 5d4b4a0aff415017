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

SharedValidator = Callable[[Any, str], dict[str, Any]]  # (args, tool name) -> args to use


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
        # Integers (the common case) pass without a call; floats and Decimals must be finite.
        return f"(type({var}) is int or _isdec({var}))"
    if ty == "map":
        return f"_ismap({var})"
    item_type = T.item_of(ty)
    if item_type in _EXACT:
        # Exact types of every item in one C-level pass (`bool` is not an `int` here).
        return f"(type({var}) is list and set(map(type, {var})) <= {_EXACT[item_type]})"
    item = f"i{depth}"
    inner = _type_check(item_type, item, depth + 1)
    return f"(type({var}) is list and all({inner} for {item} in {var}))"


_EXACT = {"str": "_ONLY_STR", "int": "_ONLY_INT", "bool": "_ONLY_BOOL"}


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
    # Keys of a junk request need not be strings, nor comparable with each other.
    extra = sorted((k for k in args if k not in known), key=repr)
    name = extra[0] if extra else "?"
    hint = f"; its arguments: {', '.join(sorted(known))}" if known else "; it takes none"
    raise ShapeError(f"`{tool}` has no argument `{name}`{hint}")


def wrong_type(tool: str, name: str, declared: str, value: Any) -> None:
    shown = declared.replace("list:", "list[") + "]" * declared.count("list:")
    raise ShapeError(f"argument `{name}` of `{tool}` must be `{shown}`, got a {kind(value)}")


def _signature(tool: ToolSpec) -> tuple[tuple[str, str, bool, str], ...]:
    """What a validator's code depends on: names, types, required-ness and defaults (not
    the tool's name). Tools with the same signature share one compiled code object."""
    return tuple(
        (
            p.name,
            T.from_ref(p.type),
            p.required,
            "" if p.default is None else repr(literal(p.default)),
        )
        for p in tool.params
    )


def _shared_source(slot: int, signature: tuple[tuple[str, str, bool, str], ...]) -> str:
    """`v<slot>(args, n)` validates the arguments of tool `n` (named only in errors).

    Required arguments are read inside one `try` (a missing key raises KeyError, which is
    free in 3.11 until it happens); optional ones are counted so that the final length
    test catches unknown names without a scan. Arguments are checked in declared order,
    so the first problem reported is the first in the signature."""
    required = sum(1 for _, _, req, _ in signature if req)
    lines = [
        f"def v{slot}(args, n):",
        "    if type(args) is not dict:",
        "        raise ShapeError('arguments of `' + n + '` must be an object')",
        "    out = args",
        "    seen = 0",
        "    try:",
    ]
    body: list[str] = []
    for name, ty, req, default_src in signature:
        key = repr(name)
        check = _type_check(ty, "v")
        if req:
            body.append(f"v = args[{key}]")
            body.append(f"if not ({check}):")
            body.append(f"    _wrong(n, {key}, {ty!r}, v)")
            continue
        body.append(f"if {key} in args:")
        body.append("    seen += 1")
        body.append(f"    v = args[{key}]")
        body.append(f"    if not ({check}):")
        body.append(f"        _wrong(n, {key}, {ty!r}, v)")
        if default_src:
            # A fresh value per call (the repr of a literal rebuilds it), so no caller
            # can mutate the default that another call sees.
            body.append("else:")
            body.append("    if out is args:")
            body.append("        out = dict(args)")
            body.append(f"    out[{key}] = {default_src}")
    body.append("pass")
    lines.extend("        " + line for line in body)
    lines.append("    except KeyError as exc:")
    lines.append("        _missing(n, exc)")
    lines.append(f"    if len(args) != {required} + seen:")
    lines.append(f"        _unknown(args, n, kn{slot})")
    lines.append("    return out")
    return "\n".join(lines) + "\n"


def missing_argument(tool: str, exc: KeyError) -> None:
    name = exc.args[0] if exc.args else "?"
    raise ShapeError(f"missing required argument `{name}` of `{tool}`")


def build_shared_validators(tools: Iterable[ToolSpec]) -> dict[str, SharedValidator]:
    """Tool name -> its validator `v(args, tool_name)`. Tools with the same signature share
    one generated function (all compiled with a single `exec`): 5,000 tools typically have
    a few dozen signatures, which keeps compile time and memory low and the code that
    decisions run hot in the CPU caches."""
    tools = list(tools)
    slots: dict[tuple[tuple[str, str, bool, str], ...], int] = {}
    sources: list[str] = []
    namespace: dict[str, Any] = {}
    for tool in tools:
        signature = _signature(tool)
        if signature not in slots:
            slot = len(sources)
            slots[signature] = slot
            sources.append(_shared_source(slot, signature))
            namespace[f"kn{slot}"] = frozenset(name for name, _, _, _ in signature)
    namespace |= {
        "ShapeError": ShapeError,
        "_isdec": is_decimal,
        "_ONLY_STR": frozenset({str}),
        "_ONLY_INT": frozenset({int}),
        "_ONLY_BOOL": frozenset({bool}),
        "_ismap": is_map,
        "_wrong": wrong_type,
        "_unknown": unknown_argument,
        "_missing": missing_argument,
        "Decimal": Decimal,
    }
    if sources:
        exec(compile("\n".join(sources), "<charter validators>", "exec"), namespace)
    return {tool.name: namespace[f"v{slots[_signature(tool)]}"] for tool in tools}
