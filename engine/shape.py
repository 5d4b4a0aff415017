"""Argument validation against a tool's signature (docs/design.md section 2, step 2).

Validation is generated as Python source per distinct signature and inlined into the
plans' run functions (`engine.runfns`): it checks every argument's type, reports missing
required and unknown arguments, and applies defaults. Bad input denies with a `shape`
reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from engine import types as T
from engine import valuefit
from engine.runtime import ShapeError, kind
from engine.valuefit import is_decimal, is_map
from policy import ast
from policy.catalogue import ToolSpec


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
    if declared.startswith(_EXTENDED):
        shown = declared[len(_EXTENDED) :]
    else:
        shown = declared.replace("list:", "list[") + "]" * declared.count("list:")
    raise ShapeError(f"argument `{name}` of `{tool}` must be `{shown}`, got a {kind(value)}")


Signature = tuple[tuple[str, str, bool, str], ...]

# The type of a signature's argument whose type is not plain (an enum, a record, `null`
# at some depth): this, then the type's text; `engine.valuefit` checks its values.
_EXTENDED = "x:"


def _type_key(ref: ast.TypeRef) -> str:
    if ref.plain:
        return T.from_ref(ref)
    valuefit.checker(ref)  # (built here, for the generated code to find by its key)
    return _EXTENDED + valuefit.key(ref)


def signature(tool: ToolSpec) -> Signature:
    """What validation code depends on: names, types, required-ness and defaults (not the
    tool's name). Tools with the same signature share one compiled code object."""
    return tuple(
        (
            p.name,
            _type_key(p.type),
            p.required,
            "" if p.default is None else repr(literal(p.default)),
        )
        for p in tool.params
    )


def _check_lines(ty: str, key: str) -> list[str]:
    """Statements that check `v`, the value of argument `key`, against type `ty`, and
    raise the shape error through `_wrong` when it does not match."""
    wrong = f"    _wrong(p.tool, {key}, {ty!r}, v)"
    if ty.startswith(_EXTENDED):
        return [f"if not _xfit({ty[len(_EXTENDED) :]!r})(v):", wrong]
    item_type = T.item_of(ty) if ty.startswith("list:") else None
    if item_type not in _EXACT:
        return [f"if not ({_type_check(ty, 'v')}):", wrong]
    # A list of exact items: a short list is walked item by item (no allocation; most
    # calls pass a few items), a long one checked in one C-level pass over a set of types.
    return [
        "if type(v) is not list:",
        wrong,
        f"if len(v) < {_SHORT_LIST}:",
        "    for i in v:",
        f"        if type(i) is not {item_type}:",
        "        " + wrong,
        f"elif not set(map(type, v)) <= {_EXACT[item_type]}:",
        wrong,
    ]


_SHORT_LIST = 8


def validation_lines(slot: int, sig: Signature, fill: bool = True) -> list[str]:
    """Code (indented for a function body) that validates `a`, the call's arguments, for
    the tool named `p.tool`, and leaves in `a` the arguments to use (defaults applied).
    A bad call returns the shape-denied decision from the enclosing function (whose
    namespace holds `kn<slot>`, the signature's `known_names`).

    Required arguments are read inside one `try` (a missing key raises KeyError, which is
    free in 3.11 until it happens); optional ones are counted so that the final length
    test catches unknown names without a scan. Arguments are checked in declared order,
    so the first problem reported is the first in the signature. A missing argument with
    a default sets a flag, and defaults are filled in a copy: the caller's dict is never
    changed (`fill=False` when the caller only needs to know that the call is
    well-formed)."""
    required = sum(1 for _, _, req, _ in sig if req)
    optional = len(sig) - required
    defaults = [(name, default) for name, _, _, default in sig if default] if fill else []
    body = ["if type(a) is not dict:", "    _not_object(p.tool)"]
    if optional:
        body.append("seen = 0")
    if defaults:
        body.append("short = False")
    for name, ty, req, default in sig:
        key = repr(name)
        check = _check_lines(ty, key)
        if req:
            body += [f"v = a[{key}]", *check]
            continue
        body += [f"if {key} in a:", "    seen += 1", f"    v = a[{key}]"]
        body += ["    " + line for line in check]
        if default and fill:
            body += ["else:", "    short = True"]
    counted = f"{required} + seen" if optional else f"{required}"
    body += [f"if len(a) != {counted}:", f"    _unknown(a, p.tool, kn{slot})"]
    lines = ["    try:", *("        " + line for line in body)]
    lines += [
        "    except KeyError as exc:",
        "        return _missing(p.tool, exc)",
        "    except ShapeError as exc:",
        "        return _shape_denied(exc)",
    ]
    if defaults:
        # A fresh value per call (the repr of a literal rebuilds it), so no caller can
        # mutate the default that another call sees.
        lines += ["    if short:", "        a = dict(a)"]
        for name, default_src in defaults:
            lines += [f"        if {name!r} not in a:", f"            a[{name!r}] = {default_src}"]
    return lines


def known_names(sig: Signature) -> frozenset[str]:
    return frozenset(name for name, _, _, _ in sig)


def missing_argument(tool: str, exc: KeyError) -> ShapeError:
    """The error for a required argument that `exc` (from `args[name]`) found missing."""
    name = exc.args[0] if exc.args else "?"
    return ShapeError(f"missing required argument `{name}` of `{tool}`")


def not_an_object(tool: str) -> None:
    raise ShapeError(f"arguments of `{tool}` must be an object")


HELPERS: dict[str, Any] = {
    "ShapeError": ShapeError,
    "_isdec": is_decimal,
    "_ONLY_STR": frozenset({str}),
    "_ONLY_INT": frozenset({int}),
    "_ONLY_BOOL": frozenset({bool}),
    "_ismap": is_map,
    "_wrong": wrong_type,
    "_unknown": unknown_argument,
    "_not_object": not_an_object,
    "Decimal": Decimal,
    "_xfit": valuefit.by_key,
}
"""What validation code refers to (the run functions' module adds `_missing` and
`_shape_denied`, which build decisions)."""
