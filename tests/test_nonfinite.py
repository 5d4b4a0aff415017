"""A NaN or an infinity never passes a condition (engine/runtime.py `finite`).

The HTTP service refuses them as not JSON, but an in-process caller's context, or an
agent's metadata stored before that, may still hold one. Compared as Python compares
floats, `NaN > 5` and `NaN <= 5` are both false and `NaN != 1` is true, so a hook
`where context.risk > 5` let a NaN through, and an allow `where context.risk != 9`
granted it. Every comparison with one is now an error, which never grants: the compiled
closures and the reference interpreter agree on it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Request
from engine.reference import reference_decide

POLICY = """
toolset pay {
  tool refund(amount: int)
}
role payer {
  allow pay.refund where context.risk != 9
}
hook risky on pay.refund where context.risk > 5 {
  deny "too risky"
}
hook unknown-limit on pay.refund where not (agent.metadata.limit <= 100) {
  pause "a human checks the limit"
}
profile payer {
  roles payer
  hooks risky, unknown-limit
}
"""
NOT_FINITE = [float("nan"), float("inf"), float("-inf"), Decimal("NaN"), Decimal("-Infinity")]


def _both(context: dict[str, Any], metadata: dict[str, Any]) -> tuple[list[str], int]:
    """The compiled and the reference decisions' effects, and how many errors the
    compiled decision reports."""
    workspace = check_sources([("policy.charter", POLICY)])
    request = Request(
        "payer", "pay.refund", {"amount": 1}, context, {"id": "a", "metadata": metadata}
    )
    compiled = compile_workspace(workspace).decide(request)
    return [compiled.effect, reference_decide(workspace, request)[0]], len(compiled.errors)


def test_finite_numbers_decide_as_written() -> None:
    assert _both({"risk": 1}, {"limit": 50}) == (["allow", "allow"], 0)
    assert _both({"risk": 7.5}, {"limit": 50}) == (["deny", "deny"], 0)
    assert _both({"risk": Decimal("1.5")}, {"limit": 500}) == (["pause", "pause"], 0)


@pytest.mark.parametrize("value", NOT_FINITE, ids=str)
def test_a_non_finite_number_never_passes_a_condition(value: Any) -> None:
    # the allow (`!= 9`) errors, so nothing grants, and the deny hook errs on its side
    effects, errors = _both({"risk": value}, {"limit": 50})
    assert effects == ["deny", "deny"] and errors >= 1
    # a pause hook that reads one errs on its side: it applies
    effects, errors = _both({"risk": 1}, {"limit": value})
    assert effects == ["pause", "pause"] and errors == 1


def test_a_stored_non_finite_attribute_is_no_value_to_the_fit_check() -> None:
    """The fit check compares an agent's attributes as conditions do (`runtime.eq`),
    which now refuses a NaN: such a stored value differs from everything (a 403
    `agent-attribute-differs`), not a 500."""
    from api.service.fitcheck import _same

    assert _same(float("nan"), float("nan")) is False
    assert _same(Decimal("1.5"), 1.5) is True
