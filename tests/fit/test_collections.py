"""Lists and maps in the fit check and the listing: their contents, not only their length.

Two different collections of equal length at two paths are two values: a condition that
tells them apart is satisfiable, so a role that grants on it does not fit a caller who
refuses the tool, a profile is not listed `deny` for it, and a deny that fires on it is
not taken for a deny that never fires.
"""

from __future__ import annotations

from typing import Any

from engine.decision import Request
from engine.fit import fit_profile, fit_source
from engine.listing import list_tools
from tests.fit.support import roles_effect, snapshot

# Two context lists of one length, one holding "x" and the other not.
APART = 'len(context.a) == len(context.b) and "x" in context.a and not ("x" in context.b)'


def _request(profile: str, call: dict[str, Any]) -> Request:
    return Request(
        profile, call["tool"], call["args"], call["context"], call["agent"], call["thread"]
    )


def test_a_role_telling_two_context_lists_apart_does_not_fit_a_caller_without_the_tool() -> None:
    snap = snapshot("role c { allow mail.search }\nprofile caller { roles c\n hooks none }")
    result = fit_source(snap, "caller", f"role r {{ allow mail.send where {APART} }}")
    assert not result.fits
    assert [v.kind for v in result.violations] == ["widens"]
    call = result.violations[0].counterexample
    assert call is not None
    a, b = call["context"]["a"], call["context"]["b"]
    assert len(a) == len(b) and "x" in a and "x" not in b
    assert roles_effect(snap, "caller", call) == "deny"


def test_a_caller_telling_two_context_lists_apart_is_fitted_by_the_same_condition() -> None:
    snap = snapshot(f"role c {{ allow mail.send where {APART} }}\nprofile caller {{ roles c }}")
    assert fit_source(snap, "caller", f"role r {{ allow mail.send where {APART} }}").fits
    # the other list: a call the caller refuses
    swapped = 'len(context.a) == len(context.b) and "x" in context.b and not ("x" in context.a)'
    result = fit_source(snap, "caller", f"role r {{ allow mail.send where {swapped} }}")
    assert [v.kind for v in result.violations] == ["widens"]


def test_the_listing_of_a_tool_allowed_on_two_lists_apart_is_not_deny() -> None:
    snap = snapshot(
        f"role r {{ allow mail.send where {APART} }}\nprofile p {{ roles r\n hooks none }}"
    )
    listing = {t.tool: t for t in list_tools(snap, "p")}
    assert listing["mail.send"].status == "narrow"
    call = {
        "tool": "mail.send",
        "args": {"to": "a", "subject": "s", "body": "b"},
        "context": {"a": ["x"], "b": ["y"]},
        "agent": None,
        "thread": None,
    }
    assert snap.decide(_request("p", call)).effect == "allow"


# Two lists in the two map arguments of `agents.update`: of one length, and told apart
# by "x". The caller denies that case; the kid's deny errors where the caller's does (an
# erroring deny applies) and fires on every other case of equal lengths.
L_A, L_B = "args.budget.l", "args.metadata.l"
APART_IN_MAPS = f'"x" in {L_A} and not ("x" in {L_B})'
CALLER_DENY = f"len({L_A}) == len({L_B}) and {APART_IN_MAPS}"
KID_DENY = f"len({L_A}) == len({L_B}) and not ({APART_IN_MAPS})"


def test_a_profile_dropping_a_deny_over_two_map_arguments_does_not_fit() -> None:
    snap = snapshot(
        f"role c {{\n  allow agents.update\n  deny agents.update where {CALLER_DENY}\n}}\n"
        f"role k {{\n  allow agents.update\n  deny agents.update where {KID_DENY}\n}}\n"
        "profile caller { roles c\n hooks none }\nprofile kid { roles k\n hooks none }"
    )
    result = fit_profile(snap, "caller", snap, "kid")
    assert not result.fits
    kinds = sorted(v.kind for v in result.violations)
    assert kinds == ["drops-deny", "widens"]
    for violation in result.violations:
        call = violation.counterexample
        assert call is not None and call["tool"] == "agents.update"
        budget, metadata = call["args"]["budget"]["l"], call["args"]["metadata"]["l"]
        assert len(budget) == len(metadata) and "x" in budget and "x" not in metadata
        assert roles_effect(snap, "caller", call) == "deny"
        assert roles_effect(snap, "kid", call) == "allow"
    assert fit_profile(snap, "caller", snap, "caller").fits


def test_equal_maps_and_lists_compare_by_contents() -> None:
    snap = snapshot(
        "role c { allow data.put where args.a == args.b }\nprofile caller { roles c\n hooks none }"
    )
    # equal maps have equal members
    same = "args.a == args.b and has(args.a.k) and args.a.k == 1 and args.b.k == 1"
    assert fit_source(snap, "caller", f"role r {{ allow data.put where {same} }}").fits
    # equal lengths and equal members named do not make equal maps
    looser = "len(args.a) == len(args.b) and has(args.a.k) and args.a.k == args.b.k"
    result = fit_source(snap, "caller", f"role r {{ allow data.put where {looser} }}")
    assert [v.kind for v in result.violations] == ["widens"]
    call = result.violations[0].counterexample
    assert call is not None and call["args"]["a"] != call["args"]["b"]
