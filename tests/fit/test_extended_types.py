"""The fit check on tools with enum, record and `| null` arguments: an enum is a string
among its values; a condition that reads a record or a nullable value is outside the
fragment (`unsupported`: never a "fits" it cannot prove); and a counterexample's
arguments that no condition reads are values of their declared types."""

from __future__ import annotations

from engine.decision import Request
from engine.fit import fit_source
from tests.fit.support import roles_effect, snapshot

TOOLSETS = """
toolset tracker {
  tool getIssue(repoName: str, owner: { login: str, id?: int | null }, state: enum["open", "closed"] = "open", labels: list[{ name: str }] = [], note: str | null = null)
}
"""


def _caller(where: str) -> str:
    return f"role caller {{\n  allow tracker.getIssue{where}\n}}\nprofile boss {{\n  roles caller\n}}\n"


def test_a_condition_on_a_record_or_a_nullable_is_outside_the_fragment_never_fits() -> None:
    caller = snapshot(_caller(' where args.state == "open"'), TOOLSETS)
    for candidate in (
        'role c {\n  allow tracker.getIssue where args.owner.login == "ann"\n}\n',
        "role c {\n  allow tracker.getIssue where args.note == null\n}\n",
        'role c {\n  allow tracker.getIssue where args.state == "open" and args.note == null\n}\n',
    ):
        result = fit_source(caller, "boss", candidate)
        assert not result.fits
        assert [v.kind for v in result.violations] == ["unsupported"], candidate


def test_an_enum_is_a_string_among_its_values() -> None:
    caller = snapshot(_caller(' where args.state == "open"'), TOOLSETS)
    # Only `open` and `closed` are calls: `!= "closed"` is `== "open"`.
    for narrower in ('args.state == "open"', 'args.state != "closed"', 'args.state in ["open"]'):
        assert fit_source(
            caller, "boss", f"role c {{\n  allow tracker.getIssue where {narrower}\n}}\n"
        ).fits
    result = fit_source(
        caller, "boss", 'role c {\n  allow tracker.getIssue where args.state != "open"\n}\n'
    )
    assert not result.fits
    (violation,) = result.violations
    assert violation.kind == "widens" and violation.counterexample is not None
    assert violation.counterexample["args"]["state"] == "closed"  # (no value off the enum)
    assert roles_effect(caller, "boss", violation.counterexample) == "deny"


def test_a_wider_grant_is_found_with_a_call_of_the_declared_types() -> None:
    caller = snapshot(_caller(' where args.repoName == "charter"'), TOOLSETS)
    result = fit_source(caller, "boss", "role c {\n  allow tracker.getIssue\n}\n")
    assert not result.fits
    (violation,) = result.violations
    assert violation.kind == "widens" and violation.counterexample is not None
    call = violation.counterexample
    assert call["args"]["owner"] == {"login": "x"} and call["args"]["repoName"] != "charter"
    # The call is well formed (not denied for its shape): the caller denies it, the
    # candidate allows it.
    assert roles_effect(caller, "boss", call) == "deny"
    candidate = snapshot(
        "role c {\n  allow tracker.getIssue\n}\nprofile p {\n  roles c\n}\n", TOOLSETS
    )
    request = Request("p", call["tool"], call["args"], None)
    assert candidate.decide(request).effect == "allow"


def test_a_grant_on_plain_arguments_of_such_a_tool_still_fits() -> None:
    caller = snapshot(_caller(' where args.repoName == "charter"'), TOOLSETS)
    candidate = 'role c {\n  allow tracker.getIssue where args.repoName == "charter"\n}\n'
    assert fit_source(caller, "boss", candidate).fits
