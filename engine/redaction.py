"""Secret arguments out of sight: a call's arguments with the ones named secret replaced.

A tool's secret arguments are the ones its signature marks `secret` (`ToolSpec.sensitive`).
Whatever shows a call — the decision log, a decision, an approval, a fit counterexample —
shows it through `redact`, so a secret's value (or a policy literal a condition compares it
with, which a solver's counterexample would carry) is never in a response or a log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"


def redact(hidden: frozenset[str], args: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`args` with each argument named in `hidden` (casefolded) `[redacted]`, at any depth."""
    if args is None:
        return None
    if not hidden:
        return args if type(args) is dict else dict(args)
    return {k: REDACTED if k.casefold() in hidden else _hide(hidden, v) for k, v in args.items()}


def _hide(hidden: frozenset[str], value: Any) -> Any:
    """`value` with every key named like a secret argument redacted, in any case and at any
    depth: a call that misnames one (`Seed`, `{label: {seed: ...}}`) is denied for its
    shape, but its arguments are logged as sent, where the secret was kept in clear."""
    if isinstance(value, Mapping):
        return {
            k: REDACTED if isinstance(k, str) and k.casefold() in hidden else _hide(hidden, v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_hide(hidden, v) for v in value]
    return value


def redact_call(hidden: frozenset[str], call: dict[str, Any] | None) -> dict[str, Any] | None:
    """A whole call (`{"tool", "args", ...}`, as a fit counterexample is) with its secret
    arguments redacted."""
    if call is None or not hidden or not isinstance(call.get("args"), Mapping):
        return call
    return {**call, "args": redact(hidden, call["args"])}
