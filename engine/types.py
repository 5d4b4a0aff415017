"""Static types of `where` expressions, inferred against tool signatures.

A type is a short string: `str`, `int`, `decimal`, `bool`, `null`, `map`, `any`, or
`list:T`. `any` is what unchecked data (context, metadata, map members) has; the
evaluator checks such values at run time and fails closed when they do not fit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from engine import clock
from grammar.fmt import expr_text
from policy import ast
from policy.catalogue import ToolSpec
from policy.diagnostics import Diagnostic, did_you_mean

NUMERIC = ("int", "decimal")

_AGENT_FIELDS = {"id": "str", "name": "str", "identity": "str", "metadata": "map"}
_THREAD_FIELDS = {"id": "str", "cost": "decimal", "depth": "int"}


def from_ref(ref: ast.TypeRef) -> str:
    """The type a condition reads: an enum is a `str`, a record a `map`, and a value that
    may be `null` is `any` (the evaluator checks it as it reads it, and fails closed)."""
    if ref.nullable:
        return "any"
    if ref.kind == "list":
        assert ref.item is not None
        return "list:" + from_ref(ref.item)
    if ref.kind == "enum":
        return "str"
    if ref.kind == "record":
        return "map"
    return ref.kind


def show(ty: str) -> str:
    """A type as an author writes it: `list:str` -> `list[str]`."""
    depth = ty.count("list:")
    return ty.replace("list:", "list[") + "]" * depth


def _a(shown: str) -> str:
    """A shown type with its article: a `str`, an `int`."""
    return f"{'an' if shown[0] in 'aeiou' else 'a'} `{shown}`"


def item_of(ty: str) -> str:
    return ty[5:] if ty.startswith("list:") else "any"


def is_numeric(ty: str) -> bool:
    return ty in NUMERIC


def compatible(a: str, b: str) -> bool:
    """Could a value of type `a` sensibly be compared for equality with one of type `b`?"""
    if a == b or "any" in (a, b) or "null" in (a, b):
        return True
    if is_numeric(a) and is_numeric(b):
        return True
    if a.startswith("list:") and b.startswith("list:"):
        return compatible(item_of(a), item_of(b))
    return False


def join(a: str, b: str) -> str | None:
    """The common type of two values (for list literals and multi-tool paths)."""
    if a == b:
        return a
    if is_numeric(a) and is_numeric(b):
        return "decimal"
    if "any" in (a, b):
        return "any"
    if a.startswith("list:") and b.startswith("list:"):
        inner = join(item_of(a), item_of(b))
        return None if inner is None else "list:" + inner
    return None


def literal_type(expr: ast.Expr) -> str | None:
    """The type of a constant value (parameter defaults, test arguments)."""
    if isinstance(expr, ast.Lit):
        return expr.kind
    if isinstance(expr, ast.ListLit):
        ty = "any"
        for item in expr.items:
            item_ty = literal_type(item)
            if item_ty is None:
                return None
            ty = item_ty if ty == "any" else (join(ty, item_ty) or "mixed")
        return None if ty == "mixed" else "list:" + ty
    if isinstance(expr, ast.MapLit):
        return "map"
    return None


def value_fits(ty: str, value_ty: str) -> bool:
    """May a value of `value_ty` be given where `ty` is declared?"""
    if ty == value_ty or ty == "any":
        return True
    if ty == "decimal" and value_ty == "int":
        return True
    if ty.startswith("list:") and value_ty.startswith("list:"):
        return item_of(value_ty) == "any" or value_fits(item_of(ty), item_of(value_ty))
    return False


@dataclass
class TypeEnv:
    """What a condition may read: the tools its pattern matches, for `args` paths."""

    tools: Sequence[ToolSpec]
    report: Callable[[Diagnostic], None]
    bound: dict[str, str] = field(default_factory=dict)  # an `all`/`any` item -> its type


def path_type(path: ast.Path, env: TypeEnv) -> str | None:
    """The type of a path, or None (after reporting) when it names nothing."""
    bound = env.bound.get(path.root)
    if bound is not None:
        if not path.parts:
            return bound
        return "any" if bound in ("map", "any") else _into_scalar(path, bound, env, path.root)
    if path.root == "context":
        return "map" if not path.parts else "any"
    if path.root == "time":
        return _time_type(path, env)
    if path.root in ("agent", "thread"):
        fields = _AGENT_FIELDS if path.root == "agent" else _THREAD_FIELDS
        if not path.parts:
            return "map"
        head = path.parts[0]
        if head not in fields:
            env.report(
                Diagnostic(
                    "E0201",
                    f"`{path.root}` has no field `{head}`",
                    path.span,
                    did_you_mean(head, fields)
                    or f"`{path.root}` has {', '.join(f'`{f}`' for f in sorted(fields))}",
                )
            )
            return None
        ty = fields[head]
        return ty if len(path.parts) == 1 else "any" if ty == "map" else _into_scalar(path, ty, env)
    # args: the path must exist, with one type, in every tool the pattern matches.
    if not path.parts:
        return "map"
    name = path.parts[0]
    found: str | None = None
    for tool in env.tools:
        param = tool.param(name)
        if param is None:
            env.report(
                Diagnostic(
                    "E0201",
                    f"tool `{tool.name}` has no argument `{name}`",
                    path.span,
                    did_you_mean(name, [p.name for p in tool.params])
                    or f"its arguments: {', '.join(p.name for p in tool.params) or 'none'}",
                )
            )
            return None
        member = _member_type(path, param.type, tool, env)
        if member is None:
            return None
        if found is None:
            found = member
        elif join(found, member) is None:
            env.report(
                Diagnostic(
                    "E0204",
                    f"`{path}` is `{show(found)}` in one matched tool and `{show(member)}` in `{tool.name}`",
                    path.span,
                    "narrow the pattern so every matched tool gives the argument one type",
                )
            )
            return None
        else:
            found = join(found, member)
    return "any" if found is None else found


def _member_type(path: ast.Path, ref: ast.TypeRef, tool: ToolSpec, env: TypeEnv) -> str | None:
    """The type of an `args` path in one tool whose argument `path.parts[0]` is of type
    `ref`: a record's fields are read by name (E0201 for one it does not declare), a
    `map`'s members are `any`, and anything else has no fields (E0209)."""
    for depth, part in enumerate(path.parts[1:], start=1):
        if ref.kind == "record":
            field = next((f for f in ref.fields if f.name == part), None)
            if field is None:
                names = [f.name for f in ref.fields]
                env.report(
                    Diagnostic(
                        "E0201",
                        f"`{_prefix(path, depth)}` of tool `{tool.name}` has no field `{part}`",
                        path.span,
                        did_you_mean(part, names) or f"its fields: {', '.join(names) or 'none'}",
                    )
                )
                return None
            ref = field.type
        elif ref.kind == "map":
            return "any"
        else:
            shown = ast.Path(path.root, path.parts[:depth])
            return _into_scalar(path, from_ref(ref), env, str(shown))
    return from_ref(ref)


def _prefix(path: ast.Path, depth: int) -> str:
    return str(ast.Path(path.root, path.parts[:depth]))


def _time_type(path: ast.Path, env: TypeEnv) -> str | None:
    """`time.hour` and the other fields of engine/clock.py; `time` alone is a map."""
    if not path.parts:
        return "map"
    head = path.parts[0]
    ty = clock.FIELDS.get(head)
    if ty is None:
        env.report(
            Diagnostic(
                "E0201",
                f"`time` has no field `{head}`",
                path.span,
                did_you_mean(head, clock.FIELDS)
                or f"`time` has {', '.join(f'`{f}`' for f in clock.FIELDS)}",
            )
        )
        return None
    return ty if len(path.parts) == 1 else _into_scalar(path, ty, env)


def _into_scalar(path: ast.Path, ty: str, env: TypeEnv, read: str = "") -> str | None:
    """E0209: `path` reads a field of `read` (default: its first part), of type `ty`."""
    read = read or str(ast.Path(path.root, path.parts[:1]))
    env.report(
        Diagnostic(
            "E0209",
            f"`{path}` reads into a value of type `{show(ty)}`, which has no fields",
            path.span,
            f"only `map` values and records have fields; `{read}` is `{show(ty)}`",
        )
    )
    return None


def infer(expr: ast.Expr, env: TypeEnv) -> str | None:
    """The type of `expr`; reports every problem found and returns None for a bad node."""
    if isinstance(expr, ast.Lit):
        return expr.kind
    if isinstance(expr, ast.ListLit):
        ty = "any"
        for item in expr.items:
            item_ty = infer(item, env)
            if item_ty is None:
                return None
            if ty == "any":
                ty = item_ty
            else:
                joined = join(ty, item_ty)
                if joined is None:
                    env.report(
                        Diagnostic(
                            "E0210",
                            f"list mixes `{show(ty)}` and `{show(item_ty)}` values",
                            item.span,
                            "every item of a list has one type",
                        )
                    )
                    return None
                ty = joined
        return "list:" + ty
    if isinstance(expr, ast.MapLit):
        for _, value in expr.entries:
            infer(value, env)
        return "map"
    if isinstance(expr, ast.Path):
        return path_type(expr, env)
    if isinstance(expr, ast.Call):
        return _infer_call(expr, env)
    if isinstance(expr, ast.Not):
        _expect_bool(expr.operand, env)
        return "bool"
    if isinstance(expr, ast.BoolOp):
        _expect_bool(expr.left, env)
        _expect_bool(expr.right, env)
        return "bool"
    if isinstance(expr, ast.Quantifier):
        return _infer_quantifier(expr, env)
    return _infer_compare(expr, env)


def _infer_quantifier(expr: ast.Quantifier, env: TypeEnv) -> str | None:
    """The list's items take their type from the list (`any` for an unchecked one: then
    each is checked as the condition reads it); the body is typed with the item bound."""
    source = infer(expr.source, env)
    if source is None:
        return None
    if source == "any":
        item = "any"
    elif source.startswith("list:"):
        item = item_of(source)
    else:
        env.report(
            Diagnostic(
                "E0213",
                f"`{expr.kind}` reads a list, and `{expr_text(expr.source)}` is `{show(source)}`",
                expr.source.span,
                f"give `{expr.kind}` a list: `{expr.kind}({expr.var} in args.items, ...)`",
            )
        )
        return None
    _expect_bool(expr.body, replace(env, bound={**env.bound, expr.var: item}))
    return "bool"


def _expect_bool(expr: ast.Expr, env: TypeEnv) -> None:
    ty = infer(expr, env)
    if ty is not None and ty not in ("bool", "any"):
        env.report(
            Diagnostic(
                "E0203",
                f"expected a condition (`bool`), found `{show(ty)}`",
                expr.span,
                "compare the value, e.g. `x == ...`, or test it with `has(...)`",
            )
        )


def check_condition(expr: ast.Expr, env: TypeEnv) -> None:
    _expect_bool(expr, env)


def _infer_call(call: ast.Call, env: TypeEnv) -> str | None:
    arity = {"has": 1, "len": 1, "lower": 1, "host": 1}
    if call.fn not in arity:
        env.report(
            Diagnostic(
                "E0205",
                f"unknown function `{call.fn}`",
                call.span,
                did_you_mean(call.fn, arity)
                or "the functions are `has`, `len`, `lower` and `host`",
            )
        )
        return None
    if len(call.args) != arity[call.fn]:
        env.report(
            Diagnostic(
                "E0205",
                f"`{call.fn}` takes {arity[call.fn]} argument, got {len(call.args)}",
                call.span,
                f"call it with one value: `{call.fn}(args.name)`",
            )
        )
        return None
    arg = call.args[0]
    if call.fn == "has":
        if not isinstance(arg, ast.Path) or not arg.parts:
            env.report(
                Diagnostic(
                    "E0206",
                    "`has` takes a path such as `args.cc` or `context.ip`",
                    arg.span,
                    "write the path itself, without quotes: `has(args.cc)`",
                )
            )
            return None
        path_type(arg, env)
        return "bool"
    ty = infer(arg, env)
    if ty is None:
        return None
    allowed: Mapping[str, tuple[str, ...]] = {
        "len": ("str", "map", "any"),
        "lower": ("str", "any"),
        "host": ("str", "any"),
    }
    if ty not in allowed[call.fn] and not (call.fn == "len" and ty.startswith("list:")):
        env.report(
            Diagnostic(
                "E0202",
                f"`{call.fn}` does not take {_a(show(ty))}",
                arg.span,
                f"`{call.fn}` takes "
                + " or ".join(
                    [f"a `{a}`" for a in allowed[call.fn] if a != "any"]
                    + (["a list"] if call.fn == "len" else [])
                ),
            )
        )
        return None
    return "int" if call.fn == "len" else "str"


def _infer_compare(cmp: ast.Compare, env: TypeEnv) -> str | None:
    left = infer(cmp.left, env)
    right = infer(cmp.right, env)
    if left is None or right is None:
        return "bool"

    def mismatch(help: str) -> str:
        env.report(
            Diagnostic(
                "E0202",
                f"`{cmp.op}` cannot compare `{show(left)}` with `{show(right)}`",
                cmp.span,
                help,
            )
        )
        return "bool"

    op = cmp.op
    if op in ("==", "!="):
        if not compatible(left, right):
            return mismatch("both sides of `==` must have the same type")
    elif op in ("<", "<=", ">", ">="):
        if not all(t in (*NUMERIC, "any") for t in (left, right)):
            return mismatch(f"`{op}` compares numbers; use `len(...)` to compare a length")
    elif op in ("in", "not in"):
        if not (right.startswith("list:") or right == "any"):
            return mismatch(f'the right side of `{op}` must be a list, e.g. `["a", "b"]`')
        if not compatible(left, item_of(right)):
            return mismatch(f"the list holds `{show(item_of(right))}` values")
    else:  # startswith, endswith, contains, like
        if left not in ("str", "any") or right not in ("str", "any"):
            return mismatch(f"`{op}` works on strings")
    return "bool"
