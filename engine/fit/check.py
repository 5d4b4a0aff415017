"""The fit question, tool by tool: is there a call the candidate allows and the caller
does not? Unsat for every tool = fits. Sat = a counterexample, confirmed by the
reference evaluator before it is reported. Unknown, timeout or a construct outside
the fragment = does not fit, with that reason (sound always).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import z3

from engine.fit.access import Side
from engine.fit.encode import Encoder
from engine.fit.model import MAX_SIZE, CallBuilder, TooLarge, preferences, size_bounds
from engine.fit.result import Violation
from engine.fit.terms import Unsupported, negate
from policy import ast
from policy.catalogue import ToolSpec

# A nicer counterexample is worth at most this long once a real one is known.
_PREFERENCE_MS = 300


@dataclass
class Deadline:
    end: float

    @staticmethod
    def after(ms: int) -> Deadline:
        return Deadline(time.monotonic() + ms / 1000)

    def remaining_ms(self) -> int:
        return max(0, int((self.end - time.monotonic()) * 1000))


def _solver(axioms: list[Any]) -> Any:
    solver = z3.Solver()
    solver.add(*axioms)
    return solver


def bounded_check(solver: Any, deadline: Deadline, cap_ms: int | None = None) -> Any:
    budget = deadline.remaining_ms()
    if cap_ms is not None:
        budget = min(budget, cap_ms)
    if budget <= 0:
        return z3.unknown
    solver.set("timeout", budget)
    # z3 does not always honour its timeout inside the sequence theory; interrupting the
    # context from a timer bounds the wait (an interrupted check answers `unknown`) where
    # z3 heeds it. It heeds neither while it takes in long string constants: the service
    # runs each check in a process killed at its deadline (engine.fit.isolated).
    # The interrupt must land inside this check: one landing after it returned would
    # cancel whatever z3 is asked next in this context (a model's `eval` raises
    # `canceled` until the next check). So the timer interrupts only while `running`.
    running = [True]
    lock = threading.Lock()

    def interrupt() -> None:
        with lock:
            if running[0]:
                z3.main_ctx().interrupt()

    guard = threading.Timer(budget / 1000 + 0.5, interrupt)
    guard.daemon = True
    guard.start()
    try:
        return solver.check()
    finally:
        with lock:
            running[0] = False
        guard.cancel()


def _unknown(
    solver: Any, deadline: Deadline, what: str, grant: str | None, location: str | None
) -> Violation:
    reason = solver.reason_unknown()
    if deadline.remaining_ms() <= 0 or "timeout" in reason or "canceled" in reason:
        return Violation(
            "timeout",
            f"the solver ran out of time on {what}; treated as not fitting",
            grant,
            location,
        )
    return Violation(
        "unsupported",
        f"the solver could not decide {what} (`{reason}`); treated as not fitting",
        grant,
        location,
    )


def _out_of_time(what: str, grant: str, rule: ast.Rule, tool: str) -> Violation:
    return Violation(
        "timeout",
        f"the solver ran out of time on {what}; treated as not fitting",
        grant,
        _location(rule),
        tool=tool,
    )


def _layers(enc: Encoder) -> Iterator[list[Any]]:
    """The preferences `find_call` tries, nicest first; each built only when the one
    before it could not be met (most calls meet the first)."""
    small, nice = size_bounds(enc), preferences(enc)
    yield [*small, *nice]
    yield small
    capped = size_bounds(enc, MAX_SIZE)
    yield [*capped, *nice]
    yield capped


def find_call(
    solver: Any, enc: Encoder, deadline: Deadline, real: Callable[[dict[str, Any]], bool]
) -> tuple[dict[str, Any] | None, bool]:
    """A concrete call from a satisfiable solver that `real` confirms, preferring small,
    readable values, and whether the solver ran out of time looking for one.

    A model of the encoding need not be a real call: `lower` and `host` are uninterpreted,
    so only the preferences (`lower` leaves the text unchanged, ...) make a model the
    evaluator agrees with. The preferences are tried first for `_PREFERENCE_MS` each;
    when none of those calls is real, the ones that ran out of that time are tried again
    with the rest of the deadline, so whether a counterexample is confirmed does not
    depend on how busy the machine is, only on the deadline."""
    asserted = list(solver.assertions())
    retry: list[list[Any]] = []

    canceled = False

    def built(model: Any) -> dict[str, Any] | None:
        nonlocal canceled
        try:
            call = CallBuilder(enc, model).call()
        except TooLarge:
            return None
        except z3.Z3Exception:  # (an interrupt at the deadline that landed as it returned)
            canceled = True
            return None
        return call if real(call) else None

    for extra in _layers(enc):
        # A fresh solver each time: z3 can stall on `push` after a sat sequence check.
        nicer = _solver([*asserted, *extra])
        answer = bounded_check(nicer, deadline, _PREFERENCE_MS)
        if answer == z3.sat:
            call = built(nicer.model())
            if call is not None:
                return call, False
            break
        if answer == z3.unknown:
            retry.append(extra)
    call = built(solver.model())
    if call is not None:
        return call, False
    for extra in retry:
        nicer = _solver([*asserted, *extra])
        if bounded_check(nicer, deadline) == z3.sat:
            call = built(nicer.model())
            if call is not None:
                return call, False
    return None, canceled or (bool(retry) and deadline.remaining_ms() <= 0)


def _location(rule: ast.Rule) -> str:
    return str(rule.span)


def widenings(
    caller: Side, candidate: Side, deadline: Deadline, caller_name: str
) -> list[Violation]:
    """Calls the candidate's roles allow outside the caller's access, per grant and tool."""
    out: list[Violation] = []
    for tool in candidate.allowed_tools():
        spec = candidate.workspace.tools[tool]
        if not candidate.executes(spec):
            continue
        caller_spec = caller.workspace.tools.get(tool)
        same_tool = caller_spec == spec
        if same_tool and caller.trivially_allows(spec):
            continue
        grants = candidate.allows(tool)
        if caller_spec is not None and not same_tool and caller.allows(tool):
            rule, role = grants[0]
            out.append(
                Violation(
                    "unsupported",
                    f"`{tool}` has a different signature for the caller; cannot compare",
                    role,
                    _location(rule),
                    tool=tool,
                )
            )
            continue
        found = _widenings_of_tool(caller, candidate, spec, same_tool, deadline, caller_name)
        hidden = _secrets(caller, candidate, spec.name)
        out.extend(replace(v, question="allow", secrets=hidden) for v in found)
    return out


def _secrets(caller: Side, candidate: Side, tool: str) -> frozenset[str]:
    """The argument names either side's `tool` keeps secret (redacted when shown)."""
    specs = (side.workspace.tools.get(tool) for side in (caller, candidate))
    return frozenset().union(*(spec.sensitive for spec in specs if spec is not None))


def _widenings_of_tool(
    caller: Side,
    candidate: Side,
    spec: ToolSpec,
    same_tool: bool,
    deadline: Deadline,
    caller_name: str,
) -> list[Violation]:
    tool = spec.name
    if deadline.remaining_ms() <= 0:  # (nothing to encode for a solver that won't be asked)
        return [_out_of_time(f"`{tool}` for role `{role}`", role, rule, tool)
                for rule, role in candidate.allows(tool)]  # fmt: skip
    enc = Encoder(spec).prepare(
        [r.where for side in (caller, candidate) for r, _ in side.rules_for(tool)]
    )
    try:
        grants = candidate.grants(enc)
        cand_denied = candidate.deny_fires(enc)
        caller_allows = caller.allowed(enc) if same_tool else z3.BoolVal(False)
    except Unsupported as exc:
        rule, role = candidate.allows(tool)[0]
        return [
            Violation(
                "unsupported",
                f"cannot decide `{tool}`: {exc}; treated as not fitting",
                role,
                _location(rule),
                tool=tool,
            )
        ]
    out: list[Violation] = []
    base = [*enc.axioms(), negate(cand_denied), negate(caller_allows)]
    for rule, role, holds in grants:
        solver = _solver([*base, holds])
        answer = bounded_check(solver, deadline)
        if answer == z3.unsat:
            continue
        if answer != z3.sat:
            what = f"`{tool}` for role `{role}`"
            out.append(replace(_unknown(solver, deadline, what, role, _location(rule)), tool=tool))
            continue
        call, out_of_time = find_call(
            solver, enc, deadline, lambda c: _widens(caller, candidate, spec, c)
        )
        if call is None and out_of_time:
            out.append(_out_of_time(f"`{tool}` for role `{role}`", role, rule, tool))
            continue
        out.append(_widening(spec, call, rule, role, caller_name))
    return out


def _widens(caller: Side, candidate: Side, spec: ToolSpec, call: dict[str, Any]) -> bool:
    """The evaluator's word: the candidate's roles allow `call` and the caller's do not."""
    caller_spec = caller.workspace.tools.get(spec.name)
    return candidate.decide_roles(spec, call) == "allow" and (
        caller_spec is None or caller.decide_roles(caller_spec, call) != "allow"
    )


def _widening(
    spec: ToolSpec,
    call: dict[str, Any] | None,
    rule: ast.Rule,
    role: str,
    caller_name: str,
) -> Violation:
    tool = spec.name
    if call is not None:  # (find_call returns only calls the evaluator confirms)
        return Violation(
            "widens",
            f"role `{role}` allows `{tool}` calls that `{caller_name}` may not make",
            role,
            _location(rule),
            call,
            tool,
        )
    return Violation(
        "unsupported",
        f"role `{role}` may widen `{tool}`, but the solver's call was not confirmed by the "
        "evaluator; treated as not fitting",
        role,
        _location(rule),
        tool=tool,
    )


def dropped_denies(
    caller: Side, candidate: Side, deadline: Deadline, candidate_name: str, location: str | None
) -> list[Violation]:
    """ "Keeps every deny", semantically: every call a caller deny rule denies, some deny
    rule of the candidate denies too (so adding roles later can never reach it)."""
    out: list[Violation] = []
    for tool in caller.denied_tools():
        spec = caller.workspace.tools[tool]
        same_tool = candidate.workspace.tools.get(tool) == spec
        enc = Encoder(spec).prepare(
            [r.where for side in (caller, candidate) for r, _ in side.denies(tool)]
        )
        try:
            caller_denies = caller.deny_fires(enc)
            cand_denies = candidate.deny_fires(enc) if same_tool else z3.BoolVal(False)
        except Unsupported as exc:
            out.append(
                Violation(
                    "unsupported",
                    f"cannot compare the denies of `{tool}`: {exc}; treated as not fitting",
                    candidate_name,
                    location,
                    tool=tool,
                )
            )
            continue
        solver = _solver(enc.axioms())
        solver.add(caller_denies, negate(cand_denies))
        what = f"the denies of `{tool}`"
        answer = bounded_check(solver, deadline)
        if answer == z3.unsat:
            continue
        if answer != z3.sat:
            out.append(
                replace(_unknown(solver, deadline, what, candidate_name, location), tool=tool)
            )
            continue
        dropped = partial(_drops, caller, candidate, spec, same_tool)
        call, out_of_time = find_call(solver, enc, deadline, dropped)
        roles = ", ".join(f"`{n}`" for n in dict.fromkeys(n for _, n in caller.denies(tool)))
        if call is None and out_of_time:
            out.append(
                Violation(
                    "timeout",
                    f"the solver ran out of time confirming a call for {what}; treated as "
                    "not fitting",
                    candidate_name,
                    location,
                    tool=tool,
                )
            )
        elif call is not None:
            out.append(
                Violation(
                    "drops-deny",
                    f"`{candidate_name}` does not keep the caller's deny of `{tool}` "
                    f"(role {roles})",
                    candidate_name,
                    location,
                    call,
                    tool,
                )
            )
        else:
            out.append(
                Violation(
                    "unsupported",
                    f"`{candidate_name}` may drop the caller's deny of `{tool}`, but the call "
                    "was not confirmed by the evaluator; treated as not fitting",
                    candidate_name,
                    location,
                    tool=tool,
                )
            )
    return [
        replace(v, question="deny", secrets=_secrets(caller, candidate, v.tool or "")) for v in out
    ]


def _drops(caller: Side, candidate: Side, spec: ToolSpec, same_tool: bool, call: Any) -> bool:
    """The evaluator's word: a caller deny refuses `call` and no candidate deny does."""
    return caller.deny_probe(spec, call) and not (same_tool and candidate.deny_probe(spec, call))


def dropped_hooks(
    caller_hooks: tuple[ast.Hook, ...],
    candidate_hooks: tuple[ast.Hook, ...],
    candidate_name: str,
    location: str | None,
) -> list[Violation]:
    """Every caller hook (after `default` is expanded) must be among the candidate's,
    with the same text (AST equality ignores source positions); and the candidate's
    rewrite hooks must be the caller's, in the same order. Rewrites apply one after
    another to what the one before made, deny hooks read the call as sent, and only the
    final call is checked against the roles again: a rewrite hook added anywhere (or two
    run in the other order) could undo the caller's clamp, or set what a deny hook of
    the caller refuses, and have it run."""
    out = []
    for hook in caller_hooks:
        if hook not in candidate_hooks:
            out.append(
                Violation(
                    "drops-hook",
                    f"`{candidate_name}` does not keep the caller's hook `{hook.name}`",
                    hook.name,
                    location,
                )
            )
    mine = [h for h in caller_hooks if h.kind == "rewrite"]
    theirs = [h for h in candidate_hooks if h.kind == "rewrite"]
    if not out and mine != theirs:
        # (the first place they differ: a rewrite hook the candidate adds or moves)
        shorter = min(len(mine), len(theirs))
        at = next((i for i in range(shorter) if mine[i] != theirs[i]), shorter)
        hook = theirs[at] if at < len(theirs) else mine[at]
        out.append(
            Violation(
                "drops-hook",
                f"`{candidate_name}` does not run the caller's rewrite hooks as the caller "
                f"does (the same ones, in the same order, and no other): `{hook.name}`",
                hook.name,
                location,
            )
        )
    return out
