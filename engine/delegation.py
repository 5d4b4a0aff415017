"""Delegation (docs/design.md section 3): what an agent creates can only narrow what it has.

A `Principal` is an agent's current authority: its identity, its profile in a policy
snapshot, and its own budget cap (on top of its profile's). Creating a role, a profile
or a child agent on its behalf goes through the fit check; a child inherits the
caller's identity and is itself a `Principal`, so a chain of delegations is a chain of
fit checks and, since each step's access is a subset of the one before, only shrinks.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.compile import Snapshot
from engine.fit import FitResult, Violation, fit_source, fit_workspace_profile
from policy import ast


@dataclass(frozen=True)
class Principal:
    identity: str
    snapshot: Snapshot
    profile: str
    budget: ast.Budget | None = None  # the agent's own cap; None = only the profile's
    parent: Principal | None = None

    def caps(self) -> list[ast.Budget | None]:
        """Every cap this agent spends under: its own and its profile's."""
        profile = self.snapshot.served.profiles.get(self.profile)
        return [self.budget, profile.budget if profile else None]

    def chain(self) -> list[Principal]:
        out: list[Principal] = []
        node: Principal | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        return out


class DelegationRefused(Exception):
    """The candidate does not fit; `result` says why, with counterexamples."""

    def __init__(self, result: FitResult) -> None:
        self.result = result
        first = result.violations[0].message if result.violations else "does not fit"
        super().__init__(first)


def delegate_role(caller: Principal, source: str, *, timeout_ms: int = 2000) -> FitResult:
    """May `caller` create (or update to) the role in `source`?"""
    return fit_source(caller.snapshot, caller.profile, source, kind="role", timeout_ms=timeout_ms)


def delegate_profile(caller: Principal, source: str, *, timeout_ms: int = 2000) -> FitResult:
    """May `caller` create (or update to) the profile in `source`?"""
    return fit_source(
        caller.snapshot, caller.profile, source, kind="profile", timeout_ms=timeout_ms
    )


def check_child(
    caller: Principal,
    profile: str,
    *,
    snapshot: Snapshot | None = None,
    budget: ast.Budget | None = None,
    identity: str | None = None,
    timeout_ms: int = 2000,
) -> FitResult:
    """May `caller` create a child agent on `profile` (of `snapshot`, default the
    caller's) with its own `budget`? `identity`, when given, must be the caller's."""
    snap = snapshot or caller.snapshot
    result = fit_workspace_profile(
        caller.snapshot.served,
        caller.profile,
        snap.served,
        profile,
        timeout_ms=timeout_ms,
        caller_budgets=caller.caps(),
        candidate_budgets=[budget, _profile_budget(snap, profile)],
    )
    if identity is not None and identity != caller.identity:
        extra = Violation(
            "identity",
            f"a child agent inherits its creator's identity `{caller.identity}`, not `{identity}`",
        )
        return FitResult.of([*result.violations, extra])
    return result


def create_child(
    caller: Principal,
    profile: str,
    *,
    snapshot: Snapshot | None = None,
    budget: ast.Budget | None = None,
    identity: str | None = None,
    timeout_ms: int = 2000,
) -> Principal:
    """The child agent, or `DelegationRefused` when it would widen its creator."""
    result = check_child(
        caller,
        profile,
        snapshot=snapshot,
        budget=budget,
        identity=identity,
        timeout_ms=timeout_ms,
    )
    if not result.fits:
        raise DelegationRefused(result)
    return Principal(caller.identity, snapshot or caller.snapshot, profile, budget, caller)


def _profile_budget(snapshot: Snapshot, profile: str) -> ast.Budget | None:
    found = snapshot.served.profiles.get(profile)
    return found.budget if found else None
