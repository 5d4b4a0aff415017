"""The fit check (docs/design.md section 3): agents can only narrow.

A candidate (a role, a profile, a child agent's profile and budget) *fits* a caller when
every call it allows is in Access(caller); a profile must also keep every deny and hook
the caller holds, and its budget may be no looser. The question is put to z3 tool by
tool; see docs/fit.md for the encoding, the fragment and the guarantees.
"""

from __future__ import annotations

from engine.compile import Snapshot
from engine.fit.access import Side
from engine.fit.budget import fit_budget, fit_budgets, fit_rate
from engine.fit.check import Deadline, dropped_denies, dropped_hooks, widenings
from engine.fit.result import FitResult, Violation
from engine.fit.sources import candidate_workspace
from engine.fit.terms import Z3_LOCK
from engine.workspace import Workspace
from policy import ast
from policy.diagnostics import CharterError, Diagnostic

__all__ = [
    "FitResult",
    "Violation",
    "fit_budget",
    "fit_budgets",
    "fit_profile",
    "fit_role",
    "fit_source",
    "fit_workspace_profile",
]


def _profile(ws: Workspace, name: str, who: str) -> ast.Profile:
    profile = ws.profiles.get(name)
    if profile is None:
        raise CharterError(
            [
                Diagnostic(
                    "E0902",
                    f"unknown {who} profile `{name}`",
                    help=f"profiles: {', '.join(sorted(ws.profiles)) or 'none'}",
                )
            ]
        )
    return profile


def fit_role(
    caller_ws: Workspace,
    caller_profile: str,
    cand_ws: Workspace,
    role: str,
    *,
    timeout_ms: int = 2000,
) -> FitResult:
    """Does every call role `role` (of `cand_ws`) allows lie in the caller's access?"""
    caller = Side(caller_ws, _profile(caller_ws, caller_profile, "caller"))
    if role not in cand_ws.roles:
        raise CharterError([Diagnostic("E0903", f"unknown role `{role}`")])
    return FitResult.of(
        _role_widenings(caller, cand_ws, role, Deadline.after(timeout_ms), caller_profile)
    )


def _role_widenings(
    caller: Side, cand_ws: Workspace, role: str, deadline: Deadline, caller_profile: str
) -> list[Violation]:
    candidate = Side(cand_ws, ast.Profile("~candidate", (role,)), assume_execute=True)
    with Z3_LOCK:
        return widenings(caller, candidate, deadline, caller_profile)


def fit_workspace_profile(
    caller_ws: Workspace,
    caller_profile: str,
    cand_ws: Workspace,
    cand_profile: str,
    *,
    timeout_ms: int = 2000,
    candidate_budgets: list[ast.Budget | None] | None = None,
    caller_budgets: list[ast.Budget | None] | None = None,
) -> FitResult:
    """A profile (or child agent) candidate: access, denies, hooks and budget."""
    caller_p = _profile(caller_ws, caller_profile, "caller")
    cand_p = _profile(cand_ws, cand_profile, "candidate")
    caller, candidate = Side(caller_ws, caller_p), Side(cand_ws, cand_p)
    location = str(cand_p.span)
    deadline = Deadline.after(timeout_ms)
    with Z3_LOCK:
        violations = widenings(caller, candidate, deadline, caller_profile)
        violations += dropped_denies(caller, candidate, deadline, cand_profile, location)
    violations += dropped_hooks(
        caller_ws.profile_hooks(caller_p), cand_ws.profile_hooks(cand_p), cand_profile, location
    )
    budget = fit_budgets(
        caller_budgets if caller_budgets is not None else [caller_p.budget],
        candidate_budgets if candidate_budgets is not None else [cand_p.budget],
    )
    if budget is not None:
        violations.append(budget)
    rate = fit_rate(caller_p.rate, cand_p.rate)
    if rate is not None:
        violations.append(rate)
    return FitResult.of(violations)


def fit_profile(
    caller: Snapshot,
    caller_profile: str,
    candidate: Snapshot,
    candidate_profile: str,
    *,
    timeout_ms: int = 2000,
) -> FitResult:
    return fit_workspace_profile(
        caller.served,
        caller_profile,
        candidate.served,
        candidate_profile,
        timeout_ms=timeout_ms,
    )


def fit_source(
    caller: Snapshot,
    caller_profile: str,
    source: str,
    *,
    kind: str = "role",
    timeout_ms: int = 2000,
    path: str = "<candidate>",
) -> FitResult:
    """Check DSL text of a candidate role (kind="role": its grants only) or profile
    (kind="profile"; it may refer to the workspace's roles and hooks) against the caller.
    Raises policy.diagnostics.CharterError for bad text."""
    _profile(caller.workspace, caller_profile, "caller")
    cand_ws, found = candidate_workspace(caller.workspace, source, kind, path)
    if isinstance(found, ast.Profile):
        return fit_workspace_profile(
            caller.workspace, caller_profile, cand_ws, found.name, timeout_ms=timeout_ms
        )
    # One deadline for every role of the text: a deadline each made a text of 300 roles
    # that each widen take 13 s (4,000 fit in the 256,000 characters `POST /v1/fit`
    # takes), holding the solver's lock all along.
    side = Side(caller.workspace, _profile(caller.workspace, caller_profile, "caller"))
    deadline = Deadline.after(timeout_ms)
    violations: list[Violation] = []
    for role in found:
        violations += _role_widenings(side, cand_ws, role.name, deadline, caller_profile)
    return FitResult.of(violations)
