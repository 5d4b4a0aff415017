"""A plain tree-walking interpreter of docs/design.md section 2: the executable specification.

Slow on purpose and written for clarity: it walks the AST for every request, with no
index, no code generation and no caching. The property tests check that the compiled
evaluator agrees with it on generated workspaces and requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine import clock, valuefit
from engine import runtime as R
from engine.decision import Request
from engine.shape import literal
from engine.types import from_ref, item_of
from engine.valuefit import is_decimal, is_map
from engine.workspace import Workspace
from grammar.fmt import expr_text
from policy import ast
from policy.catalogue import ToolSpec


class _Env:
    def __init__(self, args: Any, request: Request) -> None:
        self.roots = {
            "args": args,
            "context": request.context,
            "agent": request.agent,
            "thread": request.thread,
            "time": clock.fields(),
        }


def evaluate(expr: ast.Expr, env: _Env) -> Any:
    """Evaluate an expression; raises `EvalError` (or KeyError for a missing argument)."""
    if isinstance(expr, ast.Lit):
        return expr.value
    if isinstance(expr, ast.ListLit):
        return [evaluate(i, env) for i in expr.items]
    if isinstance(expr, ast.MapLit):
        return {k: evaluate(v, env) for k, v in expr.entries}
    if isinstance(expr, ast.Path):
        if not expr.parts and expr.root not in ast.PATH_ROOTS:
            return env.roots[expr.root]  # an `all`/`any` item, whatever it is (`null` too)
        return R.get(env.roots[expr.root], expr.root, expr.parts)
    if isinstance(expr, ast.Call):
        arg = expr.args[0]
        if expr.fn == "has":
            assert isinstance(arg, ast.Path)
            root = env.roots[arg.root]
            return root is not None and R.has(root, arg.parts)
        value = evaluate(arg, env)
        fn = {"len": R.length, "lower": R.lower, "host": R.host}[expr.fn]
        return fn(value, expr_text(arg))
    if isinstance(expr, ast.Not):
        return not R.as_bool(evaluate(expr.operand, env))
    if isinstance(expr, ast.BoolOp):
        left = R.as_bool(evaluate(expr.left, env))
        if expr.op == "and":
            return R.as_bool(evaluate(expr.right, env)) if left else False
        return True if left else R.as_bool(evaluate(expr.right, env))
    if isinstance(expr, ast.Quantifier):
        return _quantify(expr, env)
    left, right = evaluate(expr.left, env), evaluate(expr.right, env)
    op = expr.op
    if op == "==":
        return R.eq(left, right)
    if op == "!=":
        return not R.eq(left, right)
    if op == "in":
        return R.contains(right, left)
    if op == "not in":
        return not R.contains(right, left)
    table = {
        "<": R.lt, "<=": R.le, ">": R.gt, ">=": R.ge, "startswith": R.startswith,
        "endswith": R.endswith, "contains": R.substring, "like": R.like,
    }  # fmt: skip
    return table[op](left, right)


def _quantify(q: ast.Quantifier, env: _Env) -> bool:
    """Each item in order, bound to the quantifier's name; the first that settles it ends
    it (`all`: a false body; `any`: a true one)."""
    items = evaluate(q.source, env)
    if not isinstance(items, list | tuple):
        raise R.EvalError(f"`{q.kind}` reads a list, and `{expr_text(q.source)}` is not one")
    settles = q.kind == "any"
    for item in items:
        inner = _Env.__new__(_Env)
        inner.roots = {**env.roots, q.var: item}
        if R.as_bool(evaluate(q.body, inner)) is settles:
            return settles
    return not settles


def holds(expr: ast.Expr | None, env: _Env) -> bool | Exception:
    """True / False, or the exception when the condition errors."""
    if expr is None:
        return True
    try:
        return R.as_bool(evaluate(expr, env))
    except Exception as exc:
        return exc


def _fits(ty: str, value: Any) -> bool:
    if ty == "str":
        return type(value) is str
    if ty == "int":
        return type(value) is int
    if ty == "bool":
        return type(value) is bool
    if ty == "decimal":
        return is_decimal(value)
    if ty == "map":
        return is_map(value)
    return type(value) is list and all(_fits(item_of(ty), v) for v in value)


def validate(tool: ToolSpec, args: Any) -> dict[str, Any] | str:
    """The arguments to use (defaults applied), or why the call has the wrong shape."""
    if type(args) is not dict:
        return "arguments must be an object"
    known = {p.name for p in tool.params}
    for name in args:
        if name not in known:
            return f"unknown argument `{name}`"
    out = dict(args)
    for param in tool.params:
        if param.name in args:
            ty = param.type
            if not (
                _fits(from_ref(ty), args[param.name])
                if ty.plain
                else valuefit.fits(ty, args[param.name])
            ):
                return f"argument `{param.name}` has the wrong type"
        elif param.required:
            return f"missing required argument `{param.name}`"
        elif param.default is not None:
            out[param.name] = literal(param.default)
    return out


def _has_execute(ws: Workspace, profile: ast.Profile) -> bool:
    rules = [
        r
        for name in profile.roles
        for r in ws.roles[name].rules
        if any(p.matches("execute") for p in r.patterns)
    ]
    return any(r.effect == "allow" and r.where is None for r in rules) and not any(
        r.effect == "deny" for r in rules
    )


def _roles(
    ws: Workspace, profile: ast.Profile, tool: ToolSpec, args: Any, request: Request
) -> tuple[str, Mapping[str, Any] | None]:
    shaped = validate(tool, args)
    if isinstance(shaped, str):
        return "deny", None
    env = _Env(shaped, request)
    rules = [
        r
        for name in dict.fromkeys(profile.roles)
        for r in ws.roles[name].rules
        if any(p.matches(tool.name) for p in r.patterns)
    ]
    for rule in rules:
        if rule.effect == "deny" and holds(rule.where, env) is not False:
            return "deny", None  # true, or an error: an erroring deny applies
    if tool.runs_code and not _has_execute(ws, profile):
        return "deny", None
    for rule in rules:
        if rule.effect == "allow" and holds(rule.where, env) is True:
            return "allow", shaped
    return "deny", None


def reference_decide(ws: Workspace, request: Request) -> tuple[str, Mapping[str, Any] | None]:
    """(effect, args to use) for a request, by walking the tree."""
    profile = ws.profiles.get(request.profile)
    tool = ws.tools.get(request.tool)
    if profile is None or tool is None:
        return "deny", None
    effect, args = _roles(ws, profile, tool, request.args, request)
    if effect != "allow":
        return effect, None
    hooks = [h for h in ws.profile_hooks(profile) if any(p.matches(tool.name) for p in h.patterns)]
    env = _Env(args, request)
    for hook in hooks:
        if hook.kind == "deny" and holds(hook.where, env) is not False:
            return "deny", None
    rewritten = False
    for hook in hooks:
        if hook.kind != "rewrite":
            continue
        applies = holds(hook.where, env)
        if isinstance(applies, Exception):
            return "deny", None
        if not applies:
            continue
        new = dict(args or {})
        try:
            for rewrite in hook.rewrites:
                new[rewrite.target.parts[0]] = evaluate(rewrite.value, env)
        except Exception:
            return "deny", None
        args, env, rewritten = new, _Env(new, request), True
    if rewritten:
        effect, args = _roles(ws, profile, tool, args, request)
        if effect != "allow":
            return "deny", None
        env = _Env(args, request)
    for hook in hooks:
        if hook.kind == "pause" and holds(hook.where, env) is not False:
            return "pause", args
    return "allow", args
