"""The fit check on tools with enum, record and `| null` arguments: a condition that reads
one is outside its fragment (`unsupported`: never a "fits" it cannot prove), and a
counterexample's arguments that no condition reads are values of their declared types."""

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


def test_a_condition_on_an_enum_is_outside_the_fragment_never_fits() -> None:
    caller = snapshot(_caller(' where args.state == "open"'), TOOLSETS)
    for candidate in (
        'role c {\n  allow tracker.getIssue where args.state == "open"\n}\n',
        'role c {\n  allow tracker.getIssue where args.state != "closed"\n}\n',
        'role c {\n  allow tracker.getIssue where args.owner.login == "ann"\n}\n',
        "role c {\n  allow tracker.getIssue where args.note == null\n}\n",
    ):
        result = fit_source(caller, "boss", candidate)
        assert not result.fits
        assert [v.kind for v in result.violations] == ["unsupported"], candidate


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
