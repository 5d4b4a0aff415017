"""Budgets: a candidate's cap may be no looser than the caller's.

Periods are ordered `1m` < `1h` < `24h` < `7d` < `total`. A `rate` (calls per period)
is held to the caller's the same way, by its number of calls. A cap of `b` over a longer period also caps
every shorter window at `b`, so it is no looser than a cap of `a >= b` over a shorter
period. A cap over a *shorter* period is refused even when its multiple would fit (a
`1 usd per 24h` cap does not bound a calendar week by any one number of days we could
rely on): conservative, never wrong. Absent (`None`) means unlimited.
"""

from __future__ import annotations

from decimal import Decimal

from engine.fit.result import Violation
from policy import ast

_ORDER = {"1m": 0, "1h": 1, "24h": 2, "7d": 3, "total": 4}


Cap = ast.Budget | ast.Rate


def _size(cap: Cap) -> Decimal:
    return Decimal(cap.amount) if isinstance(cap, ast.Budget) else Decimal(cap.calls)


def _show(cap: Cap) -> str:
    if isinstance(cap, ast.Budget):
        return f"`{cap.amount} usd per {cap.period}`"
    return f"`{cap.calls} calls per {cap.period}`"


def _fit_cap(kind: str, caller: Cap | None, candidate: Cap | None) -> Violation | None:
    """None when the candidate's cap (a budget, or a rate) is no looser than the caller's:
    no larger, over a window no shorter. Absent means unlimited."""
    if caller is None:
        return None
    if candidate is None:
        return Violation(
            kind,
            f"the caller's {kind} is {_show(caller)}, and the candidate has no {kind} (unlimited)",
        )
    if _size(candidate) > _size(caller):
        return Violation(
            kind,
            f"{kind} {_show(candidate)} is more than the caller's {_show(caller)}",
            None,
            str(candidate.span),
        )
    if _ORDER[candidate.period] < _ORDER[caller.period]:
        return Violation(
            kind,
            f"{kind} {_show(candidate)} resets more often than the caller's {_show(caller)}",
            None,
            str(candidate.span),
        )
    return None


def fit_budget(caller: ast.Budget | None, candidate: ast.Budget | None) -> Violation | None:
    """None when the candidate's budget is no looser than the caller's."""
    return _fit_cap("budget", caller, candidate)


def fit_rate(caller: ast.Rate | None, candidate: ast.Rate | None) -> Violation | None:
    """None when the candidate's rate is no looser than the caller's (absent: no limit)."""
    return _fit_cap("rate", caller, candidate)


def fit_budgets(
    caller: list[ast.Budget | None], candidate: list[ast.Budget | None]
) -> Violation | None:
    """Every cap the caller is under must be matched by a candidate cap no looser."""
    for cap in caller:
        if cap is None:
            continue
        found = [fit_budget(cap, mine) for mine in candidate if mine is not None]
        if not any(v is None for v in found):
            return found[0] if found else fit_budget(cap, None)
    return None
