"""Tool listing ("narrow", docs/design.md section 2): what a profile may call, tool by tool.

Each tool is `allow` (every valid call is allowed), `deny` (none is) or `narrow`: allowed
only where a residual condition holds. The residual keeps the decision's error rules:
it is `not D1 and ... and not Dn and (A1 or ... or Am)` over the deny rules and deny
hooks D (an erroring deny denies, and `not D` errors too) and the allow conditions A.
A DSL `or` errors when its left side errors, while an erroring allow only fails to grant,
so the allows that can never error (asked of the solver) come first; when more than one
allow can error the text is marked inexact and `grants` (JSON `any_of`) is the exact
form: allowed iff one of them evaluates to true. z3 turns an always-true residual into
`allow` and an unsatisfiable one into `deny`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from engine.compile import Snapshot
from engine.fit.access import Side
from engine.fit.check import Deadline, bounded_check
from engine.fit.encode import Encoder
from engine.fit.terms import Z3_LOCK, Unsupported, all_and, any_or, negate
from grammar.fmt import expr_text
from policy import ast
from policy.catalogue import ToolSpec
from policy.diagnostics import CharterError, Diagnostic

_SOLVER_MS = 2000  # one question's most
# A whole listing's most: past it, each tool left is listed by its rules as written
# (`_unsimplified`), as exact as a simplified listing and longer to read.
LISTING_MS = 10_000


@dataclass(frozen=True)
class HookNote:
    name: str
    kind: str  # "pause" | "rewrite" | "deny"
    condition: str | None
    location: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "condition": self.condition,
            "location": self.location,
        }


@dataclass(frozen=True)
class ToolListing:
    tool: str
    status: str  # "allow" | "narrow" | "deny"
    condition: str | None = None  # the residual as DSL text (narrow only)
    grants: tuple[ast.Expr, ...] = ()  # exact residual: allowed iff one evaluates true
    exact: bool = True  # `condition` alone, evaluated as a `where`, equals `grants`
    hooks: tuple[HookNote, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": self.tool, "status": self.status}
        if self.status == "narrow":
            out["condition"] = self.condition
            out["exact"] = self.exact
            out["any_of"] = [expr_json(g) for g in self.grants]
        out["hooks"] = [h.to_json() for h in self.hooks]
        return out


def expr_json(expr: ast.Expr) -> Any:
    """A condition as JSON, one object per node."""
    if isinstance(expr, ast.Lit):
        value = expr.value if expr.kind != "decimal" else str(expr.value)
        return {"lit": value, "kind": expr.kind}
    if isinstance(expr, ast.ListLit):
        return {"list": [expr_json(i) for i in expr.items]}
    if isinstance(expr, ast.MapLit):
        return {"map": {k: expr_json(v) for k, v in expr.entries}}
    if isinstance(expr, ast.Path):
        return {"path": str(expr)}
    if isinstance(expr, ast.Call):
        return {"call": expr.fn, "args": [expr_json(a) for a in expr.args]}
    if isinstance(expr, ast.Not):
        return {"not": expr_json(expr.operand)}
    if isinstance(expr, ast.BoolOp):
        return {expr.op: [expr_json(expr.left), expr_json(expr.right)]}
    if isinstance(expr, ast.Quantifier):
        return {
            expr.kind: {
                "item": expr.var,
                "in": expr_json(expr.source),
                "where": expr_json(expr.body),
            }
        }
    return {"op": expr.op, "left": expr_json(expr.left), "right": expr_json(expr.right)}


def _negation(expr: ast.Expr) -> ast.Expr:
    """`not D`; `not not X` is X (both error exactly when X is not a boolean)."""
    return expr.operand if isinstance(expr, ast.Not) else ast.Not(expr)


def _conj(parts: list[ast.Expr]) -> ast.Expr | None:
    out: ast.Expr | None = None
    for part in parts:
        out = part if out is None else ast.BoolOp("and", out, part)
    return out


def _disj(parts: list[ast.Expr]) -> ast.Expr | None:
    out: ast.Expr | None = None
    for part in parts:
        out = part if out is None else ast.BoolOp("or", out, part)
    return out


def _contingent(spec: ToolSpec, where: ast.Expr) -> bool:
    """A lone comparison of an always-present typed argument with a literal that some
    valid calls pass and others fail: `narrow` with no need to ask the solver."""
    if not (
        isinstance(where, ast.Compare)
        and isinstance(where.left, ast.Path)
        and where.left.root == "args"
        and len(where.left.parts) == 1
        and isinstance(where.right, ast.Lit)
    ):
        return False
    param = spec.param(where.left.parts[0])
    if param is None or not (param.required or param.default is not None):
        return False
    if not param.type.plain:
        return False
    kind, lit = param.type.kind, where.right
    if (kind, lit.kind) in (("int", "int"), ("decimal", "int"), ("decimal", "decimal")):
        return where.op in ("<", "<=", ">", ">=", "==", "!=")
    if kind == "str" and lit.kind == "str":
        if where.op in ("==", "!="):
            return True
        return where.op in ("startswith", "endswith", "contains") and lit.value != ""
    return False


class _Sat:
    """Satisfiability questions about one tool, under its axioms."""

    def __init__(self, axioms: list[Any], deadline: Deadline) -> None:
        self.axioms = axioms
        self.deadline = deadline

    def __call__(self, formula: Any) -> bool | None:
        """None: z3 could not tell by the question's or the listing's deadline (what a
        caller keeps, as it keeps what can happen)."""
        # A fresh solver per question: z3 can stall on `push` after a sat sequence check.
        solver = z3.Solver()
        solver.add(*self.axioms, formula)
        answer = bounded_check(solver, self.deadline, _SOLVER_MS)
        return None if answer == z3.unknown else answer == z3.sat


class _Lister:
    def __init__(self, snapshot: Snapshot, profile: ast.Profile, deadline: Deadline) -> None:
        ws = snapshot.served
        self.deadline = deadline
        self.side = Side(ws, profile)
        self.hooks_by_tool: dict[str, list[ast.Hook]] = {}
        for hook in ws.profile_hooks(profile):
            for spec in ws.matching_tools(hook.patterns):
                self.hooks_by_tool.setdefault(spec.name, []).append(hook)

    def hooks_for(self, tool: str) -> list[ast.Hook]:
        return self.hooks_by_tool.get(tool, [])

    def list_tool(self, spec: ToolSpec) -> ToolListing:
        hooks = self.hooks_for(spec.name)
        notes = tuple(
            HookNote(h.name, h.kind, None if h.where is None else expr_text(h.where), str(h.span))
            for h in hooks
        )
        allows = self.side.allows(spec.name)
        if not allows or not self.side.executes(spec):
            return ToolListing(spec.name, "deny", hooks=notes)
        deny_hooks = [h for h in hooks if h.kind == "deny"]
        if self.side.trivially_allows(spec) and not deny_hooks:
            return ToolListing(spec.name, "allow", hooks=notes)
        if not deny_hooks and not self.side.denies(spec.name) and len(allows) == 1:
            where = allows[0][0].where
            if where is not None and _contingent(spec, where):
                return ToolListing(spec.name, "narrow", expr_text(where), (where,), True, notes)
        if self.deadline.remaining_ms() <= 0:
            return self._unsimplified(spec, allows, deny_hooks, notes)
        try:
            return self._residual(spec, allows, deny_hooks, notes)
        except Unsupported:
            # Outside the fragment: the residual is the rules themselves, unsimplified.
            return self._unsimplified(spec, allows, deny_hooks, notes)

    def _denies(self, spec: ToolSpec, deny_hooks: list[ast.Hook]) -> list[ast.Expr | None]:
        return [r.where for r, _ in self.side.denies(spec.name)] + [h.where for h in deny_hooks]

    def _unsimplified(
        self,
        spec: ToolSpec,
        allows: list[tuple[ast.Rule, str]],
        deny_hooks: list[ast.Hook],
        notes: tuple[HookNote, ...],
    ) -> ToolListing:
        denies = self._denies(spec, deny_hooks)
        if any(d is None for d in denies):
            return ToolListing(spec.name, "deny", hooks=notes)
        prefix = [_negation(d) for d in denies if d is not None]
        either = _conj(prefix)
        if any(r.where is None for r, _ in allows):  # an unconditional allow
            if either is None:
                return ToolListing(spec.name, "allow", hooks=notes)
            return ToolListing(spec.name, "narrow", expr_text(either), (either,), True, notes)
        grants = tuple(_conj([*prefix, r.where]) or r.where for r, _ in allows if r.where)
        text = expr_text(_disj(list(grants)) or ast.Lit("bool", True))
        return ToolListing(spec.name, "narrow", text, grants, len(grants) <= 1, notes)

    def _residual(
        self,
        spec: ToolSpec,
        allows: list[tuple[ast.Rule, str]],
        deny_hooks: list[ast.Hook],
        notes: tuple[HookNote, ...],
    ) -> ToolListing:
        enc = Encoder(spec).prepare(
            [*self._denies(spec, deny_hooks), *(r.where for r, _ in allows)]
        )
        fires: list[tuple[ast.Expr | None, Any]] = []
        for where in self._denies(spec, deny_hooks):
            value, err = enc.condition(where)
            fires.append((where, any_or(err, value)))
        grants: list[tuple[ast.Expr | None, Any, Any]] = []
        for rule, _ in allows:
            value, err = enc.condition(rule.where)
            grants.append((rule.where, all_and(negate(err), value), err))
        sat = _Sat(enc.axioms(), self.deadline)
        not_denied = negate(any_or(*(f for _, f in fires)))
        allowed = all_and(not_denied, any_or(*(g for _, g, _ in grants)))
        can_allow = sat(allowed)
        if can_allow is False:
            return ToolListing(spec.name, "deny", hooks=notes)
        if can_allow and sat(negate(allowed)) is False:
            return ToolListing(spec.name, "allow", hooks=notes)
        # Keep only denies that can fire and grants that can grant.
        kept_denies = [w for w, f in fires if sat(f) is not False]
        kept: list[tuple[ast.Expr | None, bool]] = []
        for where, holds, err in grants:
            if len(grants) == 1:  # it can grant: `allowed` was satisfiable
                kept.append((where, True))
                continue
            if sat(all_and(not_denied, holds)) is False:
                continue
            kept.append((where, sat(err) is not False))
        if any(w is None for w in kept_denies):  # pragma: no cover - caught as unsat above
            return ToolListing(spec.name, "deny", hooks=notes)
        kept.sort(key=lambda item: item[1])  # allows that can never error first
        prefix: list[ast.Expr] = [_negation(w) for w in kept_denies if w is not None]
        conditions = [w for w, _ in kept]
        exact = sum(1 for _, may_err in kept if may_err) <= 1
        grants_out: tuple[ast.Expr, ...]
        if any(c is None for c in conditions):
            residual = _conj(prefix)
            grants_out = (residual,) if residual is not None else ()
        else:
            either = _disj([c for c in conditions if c is not None])
            assert either is not None
            residual = _conj([*prefix, either])
            grants_out = tuple(_conj([*prefix, c]) or c for c in conditions if c is not None)
            exact = exact or len(grants_out) <= 1
        text = expr_text(residual) if residual is not None else "true"
        return ToolListing(
            spec.name, "narrow", text, tuple(g for g in grants_out if g), exact, notes
        )


def list_tools(snapshot: Snapshot, profile: str, timeout_ms: int = LISTING_MS) -> list[ToolListing]:
    """Every tool of the workspace, as the profile sees it (roles, deny hooks; pause and
    rewrite hooks are listed with the tool). z3 is asked until `timeout_ms` have passed
    (0: not at all); the tools left then are listed by their rules as written."""
    prof = snapshot.served.profiles.get(profile)
    if prof is None:
        known = ", ".join(sorted(snapshot.served.profiles)) or "none"
        raise CharterError(
            [Diagnostic("E0902", f"unknown profile `{profile}`", help=f"profiles: {known}")]
        )
    lister = _Lister(snapshot, prof, Deadline.after(timeout_ms))
    with Z3_LOCK:  # z3's context is shared: building terms needs the lock too
        return [lister.list_tool(spec) for spec in snapshot.served.tools.values()]
