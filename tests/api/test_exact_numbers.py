"""Decimal arguments are compared exactly, never rounded (docs/design-notes.md): a JSON
number reaches the engine with its exact value, whichever way the body is read, is
logged and answered with its exact digits, and a number past the range of a double is a
422 (never rounded into an allow)."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.http.calls import batch_calls, one_call
from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.decision import Request
from tests.api.conftest import Harness

SOURCE = """
toolset pay {
  tool le(amount: decimal)
  tool lt(amount: decimal)
  tool gt(amount: decimal)
  tool ge(amount: decimal)
  tool eq(amount: decimal)
  tool ctx(n: int)
}
role payer {
  allow pay.le where args.amount <= 100.00
  allow pay.lt where args.amount < 0.1
  allow pay.gt where args.amount > 2.675
  allow pay.ge where args.amount >= 0.000001
  allow pay.eq where args.amount == 0.3
  allow pay.ctx where context.limit <= 100.00
}
profile p {
  roles payer
  hooks none
}
"""

Compare = Callable[[Any, Any], bool]
RULES: dict[str, tuple[Compare, Decimal]] = {
    "pay.le": (operator.le, Decimal("100.00")),
    "pay.lt": (operator.lt, Decimal("0.1")),
    "pay.gt": (operator.gt, Decimal("2.675")),
    "pay.ge": (operator.ge, Decimal("0.000001")),
    "pay.eq": (operator.eq, Decimal("0.3")),
    "pay.ctx": (operator.le, Decimal("100.00")),
}
WIDE = Context(prec=1000)  # exact for the sums drawn here


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    return compile_workspace(check_sources([("pay.charter", SOURCE)]))


@st.composite
def near(draw: st.DrawFn, literal: Decimal) -> str:
    """The text of a number at or near `literal`: off by a digit anywhere from the
    hundreds to the 10^-60s (past where a double can tell), written any JSON way."""
    value = literal
    if draw(st.booleans()):
        step = Decimal(draw(st.integers(1, 9))).scaleb(draw(st.integers(-60, 2)))
        value = WIDE.add(value, step if draw(st.booleans()) else -step)
    style = draw(st.sampled_from(["str", "plain", "e", "padded"]))
    if style == "plain":
        return format(value, "f")
    if style == "e":
        return format(value, "e")
    if style == "padded":  # trailing zeros: the same number
        text = format(value, "f")
        return (text if "." in text else text + ".") + "0" * draw(st.integers(1, 30))
    return str(value)


@given(st.data())
def test_the_engine_compares_every_number_exactly(snapshot: Snapshot, data: st.DataObject) -> None:
    """For any decimal text: the condition the engine evaluates on the number the reader
    gives it holds exactly when it holds for the Decimal of the text."""
    tool = data.draw(st.sampled_from(sorted(RULES)))
    compare, literal = RULES[tool]
    text = data.draw(near(literal))
    if tool == "pay.ctx":
        raw = f'{{"agent": "a", "tool": "{tool}", "args": {{"n": 1}}, "context": {{"limit": {text}}}}}'
    else:
        raw = f'{{"agent": "a", "tool": "{tool}", "args": {{"amount": {text}}}}}'
    batch = (
        f'{{"calls": [{raw}, {{"agent": "a", "tool": "t", "expected_cost": "1"}}]}}'  # the models'
    )
    for call in (one_call(raw.encode()), batch_calls(batch.encode())[0]):
        decision = snapshot.decide(Request("p", tool, call.args, call.context))
        expected = compare(Decimal(text), literal)
        assert decision.effect == ("allow" if expected else "deny"), (text, call.args)


def _finance(harness: Harness) -> str:
    """The design's workspace (fixtures/workspace) uploaded, and agent `fin` on profile
    `finance-desk` (refunds up to 100.00 USD; a human approves those over 50)."""
    folder = Path(__file__).parents[2] / "fixtures" / "workspace"
    files = [(p.name, p.read_text()) for p in sorted(folder.glob("*.charter"))]
    with harness.service.store.atomic():
        harness.service.upload(files, "finance")
    return harness.add_agent("fin", "finance-desk")


def _refund(client: Any, harness: Harness, amount: str) -> Any:
    raw = f'{{"agent": "fin", "tool": "billing.refund", "args": {{"order": "o1", "amount": {amount}, "reason": "r"}}}}'
    return client.post("/v1/decisions", content=raw.encode(), headers=harness.auth())


def test_the_reviewers_amounts_are_never_allowed(client: Any, harness: Harness) -> None:
    """`100.000000000000000000000001` is over the 100.00 cap: denied (it was read as 100.0
    and paused, so approving it granted a refund over the cap); `1e-400` was read as 0.0
    and allowed: it is a 422 now. A number past 50 by a hair is paused by the hook."""
    _finance(harness)
    over = _refund(client, harness, "100.000000000000000000000001")
    assert over.status_code == 200, over.text
    assert over.json()["effect"] == "deny"
    tiny = _refund(client, harness, "1e-400")
    assert tiny.status_code == 422 and tiny.json()["code"] == "number-out-of-range"
    batch = client.post(
        "/v1/decisions/batch",
        content=b'{"calls": [{"agent": "fin", "tool": "billing.refund", "args": '
        b'{"order": "o1", "amount": 1e-400, "reason": "r"}}]}',
        headers=harness.auth(),
    )
    assert batch.status_code == 422
    hair = _refund(client, harness, "50.000000000000000000000001")
    assert hair.json()["effect"] == "pause"  # read as 50.0 it was allowed without a human
    assert _refund(client, harness, "50.00").json()["effect"] == "allow"
    assert _refund(client, harness, "20.5").json()["effect"] == "allow"


def test_a_decimal_argument_is_logged_and_answered_with_its_digits(
    client: Any, harness: Harness
) -> None:
    """The response, the log row (`GET /v1/decisions`) and the pending approval show the
    exact number, as a JSON number."""
    _finance(harness)
    amount = "50.000000000000000000000001"
    paused = _refund(client, harness, amount)
    assert paused.json()["effect"] == "pause"
    assert f'"amount":{amount}' in paused.text
    seq = paused.json()["seq"]
    log = client.get(f"/v1/decisions?after_seq={seq - 1}&limit=1", headers=harness.auth())
    assert f'"amount":{amount}' in log.text
    row = log.json()["decisions"][0]
    assert row["args"]["amount"] == float(amount)  # a number, not a string
    approval = client.get(f"/v1/approvals/{paused.json()['approval_id']}", headers=harness.auth())
    assert approval.status_code == 200
    assert f'"amount":{amount}' in approval.text
    approved = client.post(
        f"/v1/approvals/{paused.json()['approval_id']}/approve", headers=harness.auth()
    )
    assert approved.status_code == 200, approved.text
    assert f'"amount":{amount}' in approved.text  # re-checked on the sealed, exact call
    assert '"effect":"allow"' in approved.text
    # exact floats stay floats, and the log gives back the digits it was given
    for text in ("20.5", "0.1", "20.50", "1E-7", "1e+16"):
        answer = _refund(client, harness, text)
        logged = client.get(
            f"/v1/decisions?after_seq={answer.json()['seq'] - 1}&limit=1",
            headers=harness.auth(),
        )
        shown = json.loads(logged.text, parse_float=Decimal)["decisions"][0]["args"]["amount"]
        assert shown == Decimal(text), text
