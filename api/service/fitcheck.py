"""What an agent creates must fit inside its own access (docs/design.md section 3).

Thin glue over `engine.fit`: a refusal is `does-not-fit` with the violations; a check that cannot
run (solver timeout, unsupported construct) is the engine's "does not fit", never a pass.
Each check takes its turn as the caller's and runs in a process of its own, stopped at
its deadline (api.service.solver); one that cannot get a turn is `solver-busy`.
"""

from __future__ import annotations

import hashlib
import importlib
import threading
import weakref
from typing import Any, cast

from api.records import Agent
from api.service import solver
from api.service.budget import agent_cap, ancestors
from api.service.core import Service
from api.service.decide import agent_context
from api.service.errors import ServiceError
from engine.runtime import EvalError, eq
from policy import ast
from policy.diagnostics import CharterError

TIMEOUT_MS = 2000


def _engine() -> Any:
    try:
        return importlib.import_module("engine.fit")
    except ImportError:  # fail closed: without the checker nothing an agent makes can fit
        raise ServiceError("fit-unavailable", "the fit check is not available") from None


def _refuse(result: Any, what: str) -> ServiceError:
    return ServiceError(
        "does-not-fit", f"{what} does not fit inside the caller's access", fit=result.to_json()
    )


def _agent_budget(agent: Agent | None) -> ast.Budget | None:
    own = agent_cap(agent)  # (a stored period is one parse_budget accepted)
    return None if own is None else ast.Budget(own[0], cast(ast.Period, own[1]))


# Fits found, per compiled snapshot. An agent's management request is checked before its
# write transaction (`manage.PRECHECKS`: a check may wait for its turn and then take up
# to TIMEOUT_MS, which must not be spent holding the store's lock that every decision takes) and again by the operation
# inside it, where the same question on the same snapshot is then a look-up. Only fits
# are kept: a refusal may be a solver timeout, which is asked again. A source is kept by
# its digest: kept whole, 4,096 fitting roles of 256,000 characters each (a comment is
# enough) were a gigabyte, which any agent's token could send, its policy allowing
# `roles.create` or not (the check comes before the decision).
_FITS: weakref.WeakKeyDictionary[Any, set[tuple[str, ...]]] = weakref.WeakKeyDictionary()
_FITS_LOCK = threading.Lock()


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def _known_fit(snapshot: Any, key: tuple[str, ...]) -> bool:
    with _FITS_LOCK:
        return key in _FITS.get(snapshot, ())


def _remember_fit(snapshot: Any, key: tuple[str, ...]) -> None:
    with _FITS_LOCK:  # (gone with its snapshot)
        found = _FITS.setdefault(snapshot, set())
        if len(found) < 4096:
            found.add(key)


def require_source_fits(service: Service, caller: Agent, source: str, kind: str) -> None:
    snapshot = service.current()
    profile = service.agent_profile(caller, snapshot)
    key = ("source", profile, kind, _digest(source))
    if _known_fit(snapshot, key):
        return
    fit = _engine()
    try:
        result = solver.check(
            solver.agent_key(caller.id), fit.fit_source, snapshot, profile, source,
            kind=kind, timeout_ms=TIMEOUT_MS,
        )  # fmt: skip
    except CharterError as exc:
        raise ServiceError(
            "policy-invalid", "the source does not check",
            diagnostics=[d.to_json() for d in exc.diagnostics],
        ) from None  # fmt: skip
    if not result.fits:
        raise _refuse(result, f"the new {kind}")
    _remember_fit(snapshot, key)


def require_role_change_narrows(
    service: Service, role: str, files: list[tuple[str, str]], source: str, whose: str
) -> None:
    """An agent's change of role `role` to `source`, `files` the policy after it: every
    profile that names the role grants nothing it did not, and
    keeps every deny and hook it held (docs/design.md section 3). A role is fit-checked against
    its writer's access, but the profiles that name it hold its denies: rewriting a role
    that denies `agents.delete` into one that allows `agents.get` fits, and would lift
    the deny from every profile naming it, the writer's own and its children's included.
    Policy text that does not check passes here: the operation refuses it with the
    checker's diagnostics. `whose` is the writer's turn (`solver.key_of`): each profile's
    check takes its turn as the writer's."""
    snapshot = service.current()
    users = sorted(p.name for p in snapshot.served.profiles.values() if role in p.roles)
    require_profiles_narrow(
        service, f"role `{role}`", ", which names it", users, files, _digest(source), whose
    )


def require_profiles_narrow(
    service: Service, what: str, why: str, users: list[str], files: list[tuple[str, str]],
    change: str, whose: str,
) -> None:  # fmt: skip
    """An agent's change of `what` (a role, a profile, a hook, a toolset), `files` the
    policy after it: each profile of `users` (those it reaches; `why` says how) grants
    nothing it did not and keeps every deny and hook it held. `change` identifies the
    change (a digest of what it writes), for the fits remembered; `whose` is the
    writer's turn. Policy text that does not check passes here: the operation refuses it
    with the checker's diagnostics."""
    snapshot = service.current()
    key = ("narrows", what, change)
    if not users or _known_fit(snapshot, key):
        return
    try:
        changed = service.prepare(files).workspace  # (what the upload then takes)
    except CharterError:
        return
    fit = _engine()
    for name in users:
        if name not in changed.profiles:  # (gone with the change: it grants nothing)
            continue
        result = solver.check(
            whose, fit.fit_workspace_profile,
            snapshot.served, name, changed, name, timeout_ms=TIMEOUT_MS,
        )  # fmt: skip
        if not result.fits:
            whom = "it" if what == f"profile `{name}`" else f"profile `{name}`{why}"
            raise ServiceError(
                "does-not-fit",
                f"the change to {what} would widen {whom}: "
                "it would grant more, or lose a deny or a hook",
                fit=result.to_json(),
            )  # fmt: skip
    _remember_fit(snapshot, key)


def require_written_profile_fits(
    service: Service, caller: Agent, name: str, files: list[tuple[str, str]], source: str
) -> None:
    """Profile `name` as an agent writes it (`source`, its file; `files` the policy
    after the write) keeps every deny and hook of the caller's and grants nothing more,
    its budget no looser. Policy text that does not check passes here: the operation
    refuses it with the checker's diagnostics."""
    snapshot = service.current()
    callers = service.agent_profile(caller, snapshot)
    key = ("written-profile", callers, name, _digest(source))
    if _known_fit(snapshot, key):
        return
    try:
        changed = service.prepare(files).workspace
    except CharterError:
        return
    result = solver.check(
        solver.agent_key(caller.id), _engine().fit_workspace_profile,
        snapshot.served, callers, changed, name, timeout_ms=TIMEOUT_MS,
    )  # fmt: skip
    if not result.fits:
        raise _refuse(result, f"profile `{name}`")
    _remember_fit(snapshot, key)


def require_profile_fits(service: Service, caller: Agent, profile: str) -> None:
    """Profile `profile` keeps every deny and hook of the caller's and grants nothing more."""
    snapshot = service.current()
    callers = service.agent_profile(caller, snapshot)
    key = ("profile", callers, profile)
    if _known_fit(snapshot, key):
        return
    result = solver.check(
        solver.agent_key(caller.id), _engine().fit_profile,
        snapshot, callers, snapshot, profile, timeout_ms=TIMEOUT_MS,
    )  # fmt: skip
    if not result.fits:
        raise _refuse(result, f"profile `{profile}`")
    _remember_fit(snapshot, key)


def require_agent_fits(
    service: Service,
    caller: Agent,
    candidate: Agent,
    caps: list[ast.Budget | None] | None = None,
    *,
    access: bool = True,
) -> None:
    """An agent an agent makes or changes (a child, itself, a descendant): decided with
    its own attributes, it may do nothing the caller may not with the caller's. Its
    profile fits the caller's (keeping every deny and hook) and every `agent.*` path a
    condition of either profile reads has the caller's value (the fit check compares
    both sides on one shared agent, so a differing attribute cannot be compared: it is
    refused); and its budget is no looser than any of `caps` (default: the caller's
    own and its profile's). `access` False checks the budget alone."""
    snapshot = service.current()
    fit = _engine()
    profile = candidate.profile
    if access:
        require_profile_fits(service, caller, profile)
        _require_same_attributes(snapshot.served, caller, candidate)
    caller_profile = snapshot.served.profiles.get(caller.profile)
    if caps is None:
        caps = [caller_profile.budget if caller_profile else None, _agent_budget(caller)]
    candidate_profile = snapshot.served.profiles.get(profile)
    child = _agent_budget(candidate) or (candidate_profile.budget if candidate_profile else None)
    for cap in caps:
        violation = fit.fit_budget(cap, child)
        if violation is not None:
            raise ServiceError(
                "budget-looser", "the agent's budget would be looser than the caller's",
                violation=violation.to_json(),
            )  # fmt: skip


def chain_caps(service: Service, agent: Agent | None) -> list[ast.Budget | None]:
    """Every cap `agent` and its ancestors spend under (each one's own and its profile's)."""
    if agent is None:
        return []
    profiles = service.current().served.profiles
    caps: list[ast.Budget | None] = []
    for node in ancestors(agent, service.find_agent):
        found = profiles.get(node.profile)
        caps += [found.budget if found else None, _agent_budget(node)]
    return caps


def _agent_reads(node: Any, where: str, found: dict[tuple[str, ...], str]) -> None:
    for path in ast.paths(node):
        if path.root == "agent":
            found.setdefault(path.parts, where)


def agent_reads(ws: Any, profiles: list[str]) -> dict[tuple[str, ...], str]:
    """The `agent.*` paths the conditions (and rewrites) of the profiles' roles and
    hooks read, each with where it is read first."""
    found: dict[tuple[str, ...], str] = {}
    for name in dict.fromkeys(profiles):
        profile = ws.profiles.get(name)
        if profile is None:
            continue
        for role in dict.fromkeys(profile.roles):
            for rule in ws.roles[role].rules:
                _agent_reads(rule.where, f"role `{role}` at {rule.span}", found)
        for hook in ws.profile_hooks(profile):
            _agent_reads((hook.where, hook.rewrites), f"hook `{hook.name}` at {hook.span}", found)
    return found


_ABSENT = object()


def _attribute(agent: Agent, parts: tuple[str, ...]) -> Any:
    # What a condition's `agent.*` reads, built as decisions build it.
    value: Any = agent_context(agent)
    for part in parts:
        value = value.get(part, _ABSENT) if isinstance(value, dict) else _ABSENT
    return value


def _same(one: Any, other: Any) -> bool:
    # As the engine compares (engine.runtime.eq): kinds first (`1` is not `true`, the
    # number 0.1 is not the string "0.1"), numbers by their exact value (0.10 is 0.1).
    # (Their JSON text said a Decimal was the string of its digits.)
    if one is _ABSENT or other is _ABSENT:
        return one is other
    try:
        return eq(one, other)
    except EvalError:  # a NaN or an infinity (stored before they were refused) is no value
        return False


def _require_same_attributes(ws: Any, caller: Agent, candidate: Agent) -> None:
    reads = agent_reads(ws, [caller.profile, candidate.profile])
    differ = [
        {"path": ".".join(("agent", *parts)), "read_by": where}
        for parts, where in reads.items()
        if not _same(_attribute(caller, parts), _attribute(candidate, parts))
    ]
    if differ:
        paths = ", ".join(f"`{d['path']}`" for d in differ)
        raise ServiceError(
            "agent-attribute-differs",
            f"the policy's conditions read {paths}, which would differ from the caller's; "
            "an agent cannot give an agent attributes the fit check cannot compare",
            attributes=differ,
        )  # fmt: skip
