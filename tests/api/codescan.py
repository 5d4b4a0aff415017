"""The problem codes a body of source gives, worked out with `ast` (for
tests/api/test_error_codes.py).

A code is found where it is built: the code argument of `ServiceError`, of
`IdentityError` (policy/identities.py; api.service.accounts passes its code on as it
is) and of `problem` (api/http/errors.py). A code built from a helper's parameter
(`not_found(what, id)` is `f"{what}-not-found"`) is worked out from the helper's calls
(`not_found("thread", ...)` is `thread-not-found`), through further helpers that pass
the parameter on (`Service.doc`, `owned`), and so is one read from a table (`{404:
"route-not-found"}.get(status)`, which gives the status too). What the scan cannot work
out is reported, never skipped, so no code goes unchecked.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

# (status, code, ...) builders of a problem answer.
BUILDERS = {"ServiceError", "IdentityError", "problem"}


class Hint(NamedTuple):
    status: int | None  # the key of the status table the code is read from
    origin: str | None  # where the literal is


Values = dict[str, Hint]


class Unresolved(Exception):
    """A code the scan cannot work out from the source."""


@dataclass(frozen=True)
class Found:
    code: str
    status: int | None  # None: not written as a literal where the code is built
    where: str


@dataclass
class Scan:
    """The parsed sources, with each node's parent and each module's path."""

    modules: dict[str, ast.Module]
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    path_of: dict[ast.AST, str] = field(default_factory=dict)
    resolving: set[tuple[int, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        for path, tree in self.modules.items():
            self.path_of[tree] = path
            for node in ast.walk(tree):
                for child in ast.iter_child_nodes(node):
                    self.parents[child] = node

    def where(self, node: ast.AST) -> str:
        top = node
        while top in self.parents:
            top = self.parents[top]
        return f"{self.path_of[top]}:{getattr(node, 'lineno', '?')}"

    def calls(self) -> Iterator[ast.Call]:
        for tree in self.modules.values():
            yield from (n for n in ast.walk(tree) if isinstance(n, ast.Call))

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function (or module) whose local names `node` sees first."""
        up = self.parents.get(node)
        while up is not None and not isinstance(up, _SCOPES):
            up = self.parents.get(up)
        assert up is not None
        return up

    # ---- what an expression can be -----------------------------------------------------
    def values(self, node: ast.expr) -> Values:
        """Every string `node` can be, each with the status it implies (the key of an
        `{404: "route-not-found"}` table it is read from, else None) and where the
        literal it came from is."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value: Hint(None, self.where(node))}
        if isinstance(node, ast.JoinedStr):
            return self._joined(node)
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.IfExp):
            return {**self.values(node.body), **self.values(node.orelse)}
        if isinstance(node, ast.Subscript):  # any value of the table
            return self._table_values(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, args = node.func.attr, node.args
            texts = [a.value for a in args if isinstance(a, ast.Constant) and type(a.value) is str]
            if method == "replace" and len(texts) == len(args) == 2:
                old, new = texts
                return {v.replace(old, new): h for v, h in self.values(node.func.value).items()}
            if method == "get" and 1 <= len(args) <= 2:  # a table's value, or the default
                default = self.values(args[1]) if len(args) == 2 else {}
                return {**self._table_values(node.func.value), **default}
        raise Unresolved(f"{self.where(node)}: cannot tell what `{ast.unparse(node)}` is")

    def _joined(self, node: ast.JoinedStr) -> Values:
        parts: list[Values] = []
        for part in node.values:
            if isinstance(part, ast.FormattedValue) and not (
                part.conversion > 0 or part.format_spec
            ):
                parts.append(self.values(part.value))
            elif isinstance(part, ast.Constant) and isinstance(part.value, str):
                parts.append({part.value: Hint(None, None)})
            else:
                raise Unresolved(f"{self.where(node)}: cannot tell what `{ast.unparse(node)}` is")
        found: Values = {}
        for combination in itertools.product(*(p.items() for p in parts)):
            text = "".join(t for t, _ in combination)
            status = next((h.status for _, h in combination if h.status is not None), None)
            origin = next((h.origin for _, h in combination if h.origin is not None), None)
            found[text] = Hint(status, origin or self.where(node))
        return found

    def _name(self, node: ast.Name) -> Values:
        scope = self.scope_of(node)
        while True:
            if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) and node.id in _params(
                scope
            ):
                return self._from_callers(scope, node.id)
            assigned = _assigned(scope, node.id)
            if assigned:
                found: Values = {}
                for value in assigned:
                    found.update(self.values(value))
                return found
            if isinstance(scope, ast.Module):
                raise Unresolved(f"{self.where(node)}: cannot tell what `{node.id}` is")
            scope = self.scope_of(scope)

    def _table_values(self, node: ast.expr) -> Values:
        found: Values = {}
        for key, value in self._table(node):
            found.update({t: h._replace(status=key) for t, h in self.values(value).items()})
        return found

    def _table(self, node: ast.expr) -> list[tuple[int | None, ast.expr]]:
        """The (key, value) pairs of the dict literal `node` is (directly or by name)."""
        if isinstance(node, ast.Dict):
            return [
                (k.value if isinstance(k, ast.Constant) and type(k.value) is int else None, v)
                for k, v in zip(node.keys, node.values, strict=True)
            ]
        if isinstance(node, ast.Name):
            scope = self.scope_of(node)
            while True:
                assigned = _assigned(scope, node.id)
                if assigned:
                    return [pair for value in assigned for pair in self._table(value)]
                if isinstance(scope, ast.Module):
                    break
                scope = self.scope_of(scope)
        raise Unresolved(f"{self.where(node)}: cannot tell what table `{ast.unparse(node)}` is")

    def _from_callers(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> Values:
        """What parameter `param` of `fn` is given, over every call of `fn` by name."""
        key = (id(fn), param)
        if key in self.resolving:  # a recursive helper: its other calls say the rest
            return {}
        defined = [
            n
            for tree in self.modules.values()
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == fn.name
        ]
        if len(defined) > 1:
            raise Unresolved(f"{self.where(fn)}: `{fn.name}` is defined {len(defined)} times")
        method = isinstance(self.parents[fn], ast.ClassDef)
        positional = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        self.resolving.add(key)
        try:
            found: Values = {}
            for call in self.calls():
                if _callee(call) != fn.name:
                    continue
                found.update(self.values(self._argument(call, fn, param, positional, method)))
            return found
        finally:
            self.resolving.discard(key)

    def _argument(
        self,
        call: ast.Call,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        param: str,
        positional: list[str],
        method: bool,
    ) -> ast.expr:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            raise Unresolved(f"{self.where(call)}: `*` or `**` arguments to `{fn.name}`")
        for keyword in call.keywords:
            if keyword.arg == param:
                return keyword.value
        if param in positional:
            bound = method and isinstance(call.func, ast.Attribute)  # (`self` is given)
            index = positional.index(param) - int(bound)
            if index < len(call.args):
                return call.args[index]
            defaults = fn.args.defaults
            at = positional.index(param) - (len(positional) - len(defaults))
            if at >= 0:
                return defaults[at]
        else:
            names = [a.arg for a in fn.args.kwonlyargs]
            default = fn.args.kw_defaults[names.index(param)]
            if default is not None:
                return default
        raise Unresolved(f"{self.where(call)}: no `{param}` given to `{fn.name}`")


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = fn.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}


def _assigned(scope: ast.AST, name: str) -> list[ast.expr]:
    """The values `name` is assigned in `scope`'s own body (not in functions inside)."""
    found: list[ast.expr] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (*_SCOPES, ast.ClassDef)):
            continue
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            targets = []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            found.append(value)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _argument_of(call: ast.Call, index: int, name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return call.args[index] if index < len(call.args) else None


def _passed_on(status: ast.expr | None, code: ast.expr) -> bool:
    """`ServiceError(exc.status, exc.code, ...)`: another error's status and code."""
    return (
        isinstance(status, ast.Attribute)
        and isinstance(code, ast.Attribute)
        and isinstance(status.value, ast.Name)
        and isinstance(code.value, ast.Name)
        and status.value.id == code.value.id
        and status.attr in ("status", "status_code")
        and code.attr == "code"
    )


def codes_in(modules: dict[str, ast.Module]) -> tuple[list[Found], list[str]]:
    """Every code the builders are given in `modules` (path -> tree), and what the scan
    could not work out."""
    scan = Scan(modules)
    found: list[Found] = []
    unresolved: list[str] = []
    for call in scan.calls():
        if _callee(call) not in BUILDERS:
            continue
        code = _argument_of(call, 1, "code")
        status = _argument_of(call, 0, "status")
        if code is None:
            unresolved.append(f"{scan.where(call)}: no code given")
            continue
        if _passed_on(status, code):
            continue  # found where the error passed on was built
        literal = status.value if isinstance(status, ast.Constant) else None
        try:
            values = scan.values(code)
        except Unresolved as exc:
            unresolved.append(str(exc))
            continue
        here, span = scan.where(call), call.end_lineno or call.lineno
        for text, hint in values.items():
            value = literal if isinstance(literal, int) else hint.status
            where = hint.origin or here
            path, _, line = where.rpartition(":")
            if not (path == here.rpartition(":")[0] and call.lineno <= int(line) <= span):
                where = f"{where} (through {here})"  # a helper's code, from this call
            found.append(Found(text, value, where))
    return found, unresolved
