"""Whether a counterexample is confirmed does not depend on how busy the machine is.

`lower` is uninterpreted in the encoding, so only a model under the preferences (`lower`
leaves the text unchanged) is a real call. Each preference gets `_PREFERENCE_MS` first;
under load those checks run out of that time, and the solver's first model (`subject`
`"!0!"` with `lower` of it `"b"`) is not a real call. The preferences are then tried with
the rest of the deadline: the answer is still the confirmed widening, not `unsupported`.
A 20,000-example run of property (a) on a loaded machine found the `unsupported`."""

from __future__ import annotations

from typing import Any

import pytest
import z3

from engine.fit import check, fit_role
from tests.fit.strategies import Rule
from tests.fit.test_properties import _workspace

CALLER: list[Rule] = [
    ("mail.send", 'not (lower(args.subject) == "b")'),
    ("mail.send", 'not ("@x" in args.cc)'),
    ("mail.send", '((args.priority < 0 and args.to endswith "a") or args.to startswith "ab")'),
]
CANDIDATE: list[Rule] = [
    ("mail.send", '((args.priority < 0 and args.to startswith "a") or args.to contains "a")')
]


@pytest.mark.parametrize("preference_ms", [1, 300])
def test_a_widening_is_confirmed_however_short_the_preference_time(
    monkeypatch: pytest.MonkeyPatch, preference_ms: int
) -> None:
    monkeypatch.setattr(check, "_PREFERENCE_MS", preference_ms)
    ws = _workspace(CALLER, None, {"cand": CANDIDATE}).workspace
    result = fit_role(ws, "caller", ws, "cand", timeout_ms=30_000)
    [violation] = result.violations
    assert violation.kind == "widens", violation
    assert violation.counterexample is not None
    assert violation.counterexample["args"]["subject"] == "b"


def test_an_interrupt_that_lands_after_its_check_is_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deadline's interrupt can land just as a check returns (a loaded machine): z3
    then refuses to read models (`canceled`) until its next check. The answer is a
    `timeout` violation (does not fit), never an exception out of the fit check."""
    checked = check.bounded_check

    def late(solver: Any, deadline: Any, cap_ms: int | None = None) -> Any:
        answer = checked(solver, deadline, cap_ms)
        if cap_ms is not None:  # (the preferences' checks)
            z3.main_ctx().interrupt()
        return answer

    monkeypatch.setattr(check, "bounded_check", late)
    ws = _workspace(CALLER, None, {"cand": CANDIDATE}).workspace
    result = fit_role(ws, "caller", ws, "cand", timeout_ms=30_000)
    assert not result.fits
    assert [v.kind for v in result.violations] == ["timeout"]
