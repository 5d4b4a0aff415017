"""What an agent creates must fit inside its own access (DESIGN.md section 3).

Thin glue over `engine.fit`: a refusal is a 403 with the violations; a check that cannot
run (solver timeout, unsupported construct) is the engine's "does not fit", never a pass.
"""

from __future__ import annotations

import importlib
from typing import Any

from api.service.core import Service
from api.service.errors import ServiceError
from policy import ast
from policy.diagnostics import CharterError
from policy.store import Doc

TIMEOUT_MS = 2000


def _engine() -> Any:
    try:
        return importlib.import_module("engine.fit")
    except ImportError:  # fail closed: without the checker nothing an agent makes can fit
        raise ServiceError(503, "fit-unavailable", "the fit check is not available") from None


def _refuse(result: Any, what: str) -> ServiceError:
    return ServiceError(
        403, "does-not-fit", f"{what} does not fit inside the caller's access", fit=result.to_json()
    )


def _agent_budget(doc: Doc | None) -> ast.Budget | None:
    budget = (doc or {}).get("budget")
    if not budget:
        return None
    from decimal import Decimal

    return ast.Budget(Decimal(str(budget["amount"])), budget["period"])


def require_source_fits(service: Service, caller: Doc, source: str, kind: str) -> None:
    snapshot = service.current()
    try:
        result = _engine().fit_source(
            snapshot, caller["profile"], source, kind=kind, timeout_ms=TIMEOUT_MS
        )
    except CharterError as exc:
        raise ServiceError(
            422, "policy-invalid", "the source does not check",
            diagnostics=[d.to_json() for d in exc.diagnostics],
        ) from None  # fmt: skip
    if not result.fits:
        raise _refuse(result, f"the new {kind}")


def require_agent_fits(
    service: Service, caller: Doc, profile: str, budget: dict[str, str] | None
) -> None:
    """A child agent: its profile fits the caller's, its budget is no looser."""
    fit = _engine()
    snapshot = service.current()
    result = fit.fit_profile(snapshot, caller["profile"], snapshot, profile, timeout_ms=TIMEOUT_MS)
    if not result.fits:
        raise _refuse(result, f"profile `{profile}`")
    caller_profile = snapshot.workspace.profiles.get(caller["profile"])
    candidate_profile = snapshot.workspace.profiles.get(profile)
    child = _agent_budget({"budget": budget}) or (
        candidate_profile.budget if candidate_profile else None
    )
    for cap in (caller_profile.budget if caller_profile else None, _agent_budget(caller)):
        violation = fit.fit_budget(cap, child)
        if violation is not None:
            raise ServiceError(
                403, "budget-looser", "the child agent's budget is looser than the caller's",
                violation=violation.to_json(),
            )  # fmt: skip
