"""Run functions: the code every decision runs, generated per (plan kind, signature).

A plan (`engine.compiledplan.CompiledPlan`) is data; its `run` is one of a few functions
chosen at compile time by what the plan needs, with the validation of the tool's
signature inlined (one call per decision instead of two). Functions are generated per
distinct signature, not per plan: 5,000 tools have a few dozen signatures, so decisions
run a few hundred small code objects that stay hot in the CPU caches (a generated
function per profile x tool runs ~3x slower over 20,000 varied requests).

The kinds, each docs/design.md section 2 in order (shape, denies win, allows add up, default
deny; nothing here can fail open):
- `constant`: no deny and no allow can apply; after the shape check the answer is fixed.
- `allow`: no deny, no hook, an unconditional allow first: shape, then allow.
- `allows`: no deny: the allows in order (an erroring allow does not apply).
- `roles`: denies (an erroring deny applies), then the allows.
Plans with hooks run `engine.plan.run_hooks`, which calls the `roles` function of the
tool's signature, then the hooks.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from engine.compiledplan import RunFn
from engine.decision import ConditionError, Decision, Reason
from engine.runtime import ShapeError, describe
from engine.shape import (
    HELPERS,
    Signature,
    known_names,
    missing_argument,
    signature,
    validation_lines,
)
from policy.catalogue import ToolSpec

KINDS = ("constant", "allow", "allows", "roles")


def shape_denied(exc: ShapeError) -> Decision:
    return Decision(("deny", None, (Reason("shape", str(exc)),), (), ()))


def _missing(tool: str, exc: KeyError) -> Decision:
    return shape_denied(missing_argument(tool, exc))


def condition_error(reason: Reason, exc: BaseException, effect: str) -> ConditionError:
    return ConditionError(reason.location or "", describe(exc), effect)


def _denied_by_error(reason: Reason, exc: BaseException) -> Decision:
    error = condition_error(reason, exc, "applied deny")
    return Decision(("deny", None, (reason,), (error,), ()))


def _ignored(
    errors: list[ConditionError] | None, reason: Reason, exc: BaseException
) -> list[ConditionError]:
    if errors is None:
        errors = []
    errors.append(condition_error(reason, exc, "ignored allow"))
    return errors


# Default deny at the end: near misses are the conditional allows that did not apply.
_ALLOWS = """
    errors = None
    for reasons, cond in p.allows:
        if cond is None:
            return Decision(("allow", a, reasons, () if errors is None else tuple(errors), ()))
        try:
            if cond(a, x, g, t):
                return Decision(("allow", a, reasons, () if errors is None else tuple(errors), ()))
        except Exception as exc:
            errors = _ignored(errors, reasons[0], exc)
    if errors is None:
        if p.near:
            return Decision(("deny", None, p.not_granted.reasons, (), p.near))
        return p.not_granted
    return Decision(("deny", None, p.not_granted.reasons, tuple(errors), p.near))
"""

_DENIES = """
    for reason, cond, denied in p.denies:
        if cond is None:
            return denied
        try:
            if cond(a, x, g, t):
                return denied
        except Exception as exc:
            return _denied_by_error(reason, exc)
"""

_BODIES = {
    "constant": "\n    return p.not_granted\n",
    # An `allow` plan has no near misses; its `near` holds the reasons of its grant.
    "allow": '\n    return Decision(("allow", a, p.near, (), ()))\n',
    "allows": _ALLOWS,
    "roles": _DENIES + _ALLOWS,
}


def _source(kind: str, slot: int, sig: Signature) -> str:
    head = f"def {kind}{slot}(p, a, x, g, t):"
    lines = validation_lines(slot, sig, fill=kind != "constant")  # a fixed answer needs no defaults
    return "\n".join([head, *lines]) + _BODIES[kind]


# Generated functions depend on the signature only, so snapshots share them: a new
# revision compiles code only for signatures no recent snapshot had (a compile of the
# built-in tools' functions costs ~90 ms, about as much as the rest of a small compile).
# Bounded: the least recently used signatures are dropped past `CACHE_SIGNATURES`.
CACHE_SIGNATURES = 2048
_cache: OrderedDict[Signature, dict[str, RunFn]] = OrderedDict()
_cache_lock = threading.Lock()


def _generate(sigs: list[Signature]) -> list[dict[str, RunFn]]:
    """The run functions of each signature, built with a single `exec`."""
    namespace: dict[str, Any] = {
        **HELPERS,
        "Decision": Decision,
        "_missing": _missing,
        "_shape_denied": shape_denied,
        "_denied_by_error": _denied_by_error,
        "_ignored": _ignored,
    }
    sources: list[str] = []
    for slot, sig in enumerate(sigs):
        namespace[f"kn{slot}"] = known_names(sig)
        sources.extend(_source(kind, slot, sig) for kind in KINDS)
    exec(compile("\n".join(sources), "<charter run functions>", "exec"), namespace)
    # Taken out of the namespace, which each of them keeps as its globals (no run
    # function calls another): left in, they and it would make a reference cycle, kept
    # past their eviction from the cache until the collector's next full collection
    # (rare in a serving process).
    return [{kind: namespace.pop(f"{kind}{slot}") for kind in KINDS} for slot in range(len(sigs))]


def functions_of(sigs: Iterable[Signature]) -> dict[Signature, dict[str, RunFn]]:
    """The run functions of each signature, from the cache or generated (once, together)."""
    wanted = list(dict.fromkeys(sigs))
    with _cache_lock:
        found = {sig: _cache[sig] for sig in wanted if sig in _cache}
        for sig in found:
            _cache.move_to_end(sig)
    missing = [sig for sig in wanted if sig not in found]
    if missing:
        made = dict(zip(missing, _generate(missing), strict=True))
        with _cache_lock:
            for sig, fns in made.items():
                _cache[sig] = fns
            while len(_cache) > CACHE_SIGNATURES:
                _cache.popitem(last=False)
        found.update(made)
    return found


class RunFunctions:
    """Tool name -> its run function of each kind."""

    def __init__(self, tools: Iterable[ToolSpec]) -> None:
        sig_of = {tool.name: signature(tool) for tool in tools}
        by_sig = functions_of(sig_of.values())
        self._functions = {name: by_sig[sig] for name, sig in sig_of.items()}

    def get(self, tool: str, kind: str) -> RunFn:
        return self._functions[tool][kind]
