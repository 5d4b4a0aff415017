"""Conditions -> Python source, compiled once per snapshot (cel-go's "plan" step).

Where the checker proved a type (arguments validated against the signature, literals,
results of `len`/`lower`/`host`), the generated code uses Python's operators directly;
everything else (context, agent and thread fields, map members) goes through the
strict helpers in `engine.runtime`, which raise instead of guessing. Either way the
result matches the reference interpreter exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from engine import clock, runtime
from engine import types as T
from grammar.fmt import expr_text
from policy import ast
from policy.catalogue import ToolSpec

ConditionFn = Callable[[Any, Any, Any, Any], Any]
"""A compiled condition: (args, context, agent, thread) -> bool, or raises."""

_HELPERS: dict[str, Any] = {
    "_get": runtime.get, "_has": runtime.has, "_bool": runtime.as_bool, "_eq": runtime.eq,
    "_in": runtime.contains, "_lt": runtime.lt, "_le": runtime.le, "_gt": runtime.gt,
    "_ge": runtime.ge, "_sw": runtime.startswith, "_ew": runtime.endswith,
    "_ct": runtime.substring, "_like": runtime.like, "_glob": runtime.glob,
    "_len": runtime.length, "_lower": runtime.lower, "_host": runtime.host,
    "_items": runtime.items, "_clock": clock.fields,
}  # fmt: skip


def _plain(value: Any) -> Any:
    """A rewrite's value as call data: list literals compile to tuples (fast `in`), but an
    argument of type `list[T]` must be a list to pass the re-check of the rewritten call."""
    if type(value) is tuple or type(value) is list:
        return [_plain(v) for v in value]
    if type(value) is dict:
        return {k: _plain(v) for k, v in value.items()}
    return value


_HELPERS["_plain"] = _plain

_ROOT_VARS = {"args": "a", "context": "x", "agent": "g", "thread": "t"}
_ORDER_OPS = {"<": "_lt", "<=": "_le", ">": "_gt", ">=": "_ge"}
_STRING_OPS = {"startswith": "_sw", "endswith": "_ew", "contains": "_ct", "like": "_like"}


class _Gen:
    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.tools = tools
        self.consts: list[Any] = []
        # An `all`/`any` item in scope -> (its Python name, its proven type).
        self.bound: dict[str, tuple[str, str]] = {}
        self.reads_time = False  # (then the condition reads the clock once, as `tm`)

    def const(self, value: Any) -> str:
        """Literals become parameters of the condition's factory, so `args.n < 10` and
        `args.n < 20` share one code object (fewer code objects: faster to compile, and
        the few that decisions run stay hot in the CPU caches)."""
        name = f"k{len(self.consts)}"
        self.consts.append(value)
        return name

    def arg_type(self, name: str) -> str:
        """The proven type of a validated argument, or `any` when the tools disagree."""
        found: str | None = None
        for tool in self.tools:
            param = tool.param(name)
            if param is None:
                return "any"
            ty = T.from_ref(param.type)
            if found is None:
                found = ty
            elif found != ty:
                joined = T.join(found, ty)
                return joined if joined in ("decimal",) else "any"
        return found or "any"

    def gen(self, expr: ast.Expr) -> tuple[str, str]:
        """(python source, proven type); the type is `any` when unproven."""
        if isinstance(expr, ast.Lit):
            if expr.kind in ("str", "decimal", "int"):
                return self.const(expr.value), expr.kind
            return repr(expr.value), expr.kind
        if isinstance(expr, ast.ListLit):
            items = [self.gen(i)[0] for i in expr.items]
            return "(" + "".join(f"{i}, " for i in items) + ")", "list"
        if isinstance(expr, ast.MapLit):
            entries = ", ".join(f"{k!r}: {self.gen(v)[0]}" for k, v in expr.entries)
            return "{" + entries + "}", "map"
        if isinstance(expr, ast.Path):
            return self.path(expr)
        if isinstance(expr, ast.Call):
            return self.call(expr)
        if isinstance(expr, ast.Not):
            return f"(not {self.boolean(expr.operand)})", "bool"
        if isinstance(expr, ast.BoolOp):
            return f"({self.boolean(expr.left)} {expr.op} {self.boolean(expr.right)})", "bool"
        if isinstance(expr, ast.Quantifier):
            return self.quantifier(expr), "bool"
        return self.compare(expr), "bool"

    def quantifier(self, q: ast.Quantifier) -> str:
        """Python's `all`/`any` over a generator: items in order, stopping at the first
        that settles it; an error in the body propagates (fail closed, as `and`/`or`)."""
        src, ty = self.gen(q.source)
        items = (
            src if ty.startswith("list") else f"_items({src}, {self.shown(q.source)}, {q.kind!r})"
        )
        item = T.item_of(ty) if ty.startswith("list:") else "any"
        name = f"_q{len(self.bound)}"
        outer = self.bound.get(q.var)
        self.bound[q.var] = (name, item)
        try:
            body = self.boolean(q.body)
        finally:
            if outer is None:
                del self.bound[q.var]
            else:
                self.bound[q.var] = outer
        return f"{q.kind}({body} for {name} in {items})"

    def boolean(self, expr: ast.Expr) -> str:
        src, ty = self.gen(expr)
        return src if ty == "bool" else f"_bool({src})"

    def path(self, path: ast.Path) -> tuple[str, str]:
        bound = self.bound.get(path.root)
        if bound is not None:
            name, ty = bound
            if not path.parts:
                return name, ty
            return f"_get({name}, {path.root!r}, {path.parts!r})", "any"
        if path.root == "time":
            self.reads_time = True
            if not path.parts:
                return "tm", "map"
            return f"tm[{path.parts[0]!r}]", clock.FIELDS[path.parts[0]]
        var = _ROOT_VARS[path.root]
        if path.root == "args" and path.parts:
            head = f"{var}[{path.parts[0]!r}]"  # KeyError -> "missing `args.x`"
            if len(path.parts) == 1:
                return head, self.arg_type(path.parts[0])
            shown = str(ast.Path("args", path.parts[:1]))  # (`args."x.y"`: quoted)
            return f"_get({head}, {shown!r}, {path.parts[1:]!r})", "any"
        return f"_get({var}, {path.root!r}, {path.parts!r})", "any"

    def call(self, call: ast.Call) -> tuple[str, str]:
        arg = call.args[0]
        if call.fn == "has":
            assert isinstance(arg, ast.Path)
            bound = self.bound.get(arg.root)
            if bound is not None:
                return f"_has({bound[0]}, {arg.parts!r})", "bool"
            if arg.root == "time":
                self.reads_time = True
                return f"_has(tm, {arg.parts!r})", "bool"
            var = _ROOT_VARS[arg.root]
            if arg.root == "args" and len(arg.parts) == 1:
                return f"({arg.parts[0]!r} in {var})", "bool"
            return f"_has({var}, {arg.parts!r})", "bool"
        src, ty = self.gen(arg)
        if call.fn == "len":
            proven = ty in ("str", "map") or ty.startswith("list")
            return (f"len({src})" if proven else f"_len({src}, {self.shown(arg)})"), "int"
        if call.fn == "lower":
            return (f"{src}.lower()" if ty == "str" else f"_lower({src}, {self.shown(arg)})"), "str"
        return f"_host({src}, {self.shown(arg)})", "str"

    def shown(self, arg: ast.Expr) -> str:
        """A function's argument as the policy writes it, which its run-time error names
        (never the value: engine.runtime)."""
        return self.const(expr_text(arg))

    def compare(self, cmp: ast.Compare) -> str:
        left, lt = self.gen(cmp.left)
        op = cmp.op
        if op in ("in", "not in"):
            prefix = "not " if op == "not in" else ""
            if (
                isinstance(cmp.right, ast.ListLit)
                and lt in ("str", "int")
                and all(isinstance(i, ast.Lit) and i.kind == lt for i in cmp.right.items)
            ):
                members = frozenset(i.value for i in cmp.right.items if isinstance(i, ast.Lit))
                return f"({left} {prefix}in {self.const(members)})"
            right, _ = self.gen(cmp.right)
            return f"({prefix}_in({right}, {left}))"
        right, rt = self.gen(cmp.right)
        if op in ("==", "!="):
            proven = (lt == rt and lt in ("str", "int", "bool")) or (
                T.is_numeric(lt) and T.is_numeric(rt)
            )
            if proven:
                return f"({left} {op} {right})"
            return f"({'not ' if op == '!=' else ''}_eq({left}, {right}))"
        if op in _ORDER_OPS:
            if T.is_numeric(lt) and T.is_numeric(rt):
                return f"({left} {op} {right})"
            return f"{_ORDER_OPS[op]}({left}, {right})"
        if lt == "str" and rt == "str":
            if op == "startswith":
                return f"{left}.startswith({right})"
            if op == "endswith":
                return f"{left}.endswith({right})"
            if op == "contains":
                return f"({right} in {left})"
            return f"_glob({left}, {right})"
        return f"{_STRING_OPS[op]}({left}, {right})"


def fresh_copy(text: str) -> str:
    """A new string equal to `text` (slicing or `str()` would return the same object),
    for strings the hot path reads: made at compile time they lie side by side, where
    the parser's lie scattered over the whole workspace's heap."""
    return (text + " ")[:-1]


def _fresh_literal(value: Any, made: dict[str, str]) -> Any:
    if type(value) is not str:
        return value
    found = made.get(value)
    if found is None:
        found = made[value] = fresh_copy(value)
    return found


class ConditionCompiler:
    """Collects conditions, then compiles them all with one `exec` (fast for 10k rules).

    Each distinct generated body becomes one factory `f<n>(k0, k1, ...)`; a condition is
    that factory applied to its own literals. Thousands of rules written from a handful
    of templates share a handful of code objects."""

    def __init__(self) -> None:
        self._bodies: dict[str, int] = {}
        self._sources: list[str] = []
        self._calls: list[tuple[int, tuple[Any, ...]]] = []
        self._cache: dict[tuple[int, tuple[str, ...], bool], int] = {}
        self._functions: list[ConditionFn] = []

    def add(self, expr: ast.Expr, tools: Sequence[ToolSpec], value: bool = False) -> int:
        """Queue a condition (or, with value=True, a value expression); returns its slot."""
        key = (id(expr), tuple(t.name for t in tools), value)
        if key in self._cache:
            return self._cache[key]
        gen = _Gen(tools)
        src = f"_plain({gen.gen(expr)[0]})" if value else gen.boolean(expr)
        factory = self._bodies.get(src)
        if factory is None:
            factory = len(self._sources)
            params = ", ".join(f"k{i}" for i in range(len(gen.consts)))
            clock_line = "        tm = _clock()\n" if gen.reads_time else ""
            self._sources.append(
                f"def f{factory}({params}):\n"
                f"    def c(a, x, g, t):\n{clock_line}        return {src}\n"
                f"    return c\n"
            )
            self._bodies[src] = factory
        slot = len(self._calls)
        self._calls.append((factory, tuple(gen.consts)))
        self._cache[key] = slot
        return slot

    def build(self) -> list[ConditionFn]:
        namespace: dict[str, Any] = {**_HELPERS, "Decimal": Decimal}
        if self._sources:
            code = compile("\n".join(self._sources), "<charter conditions>", "exec")
            exec(code, namespace)
        # Taken out of the namespace, which every condition keeps as its globals: left in,
        # each factory and its namespace would make a reference cycle, kept until the
        # collector's next full collection (rare in a serving process) with the snapshot.
        factories = [namespace.pop(f"f{i}") for i in range(len(self._sources))]
        # String literals are fresh copies (see fresh_copy): a condition reads its literal
        # on every call, and the parser's copy would cost a cache miss each time.
        fresh: dict[str, str] = {}
        self._functions = [
            factories[f](*(_fresh_literal(c, fresh) for c in consts)) for f, consts in self._calls
        ]
        return self._functions
