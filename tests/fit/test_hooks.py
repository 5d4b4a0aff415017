"""A candidate profile keeps the caller's hooks as they act: every hook, and the caller's
rewrite hooks exactly, in their order. Rewrites apply one after another, each to what
the one before made, and only the final call is checked against the roles again; deny
hooks read the call as sent. So a rewrite hook that the candidate adds, or runs in
another order, can undo the caller's (a clamp, or what a deny hook refuses)."""

from __future__ import annotations

import pytest

from engine.decision import Request
from engine.fit import fit_profile
from engine.reference import reference_decide
from tests.fit.support import snapshot

HOOKS = """
role r { allow mail.search }
hook clamp on mail.search where args.limit > 20 { rewrite args.limit = 20 }
hook unclamp on mail.search { rewrite args.limit = 1000 }
hook no-big on mail.search where args.limit > 50 { deny "at most 50" }
hook audit on mail.search where args.limit > 40 { pause "a human looks" }
profile caller { roles r
 hooks unclamp, clamp }
profile clamped { roles r
 hooks clamp }
profile guarded { roles r
 hooks no-big }
profile reordered { roles r
 hooks clamp, unclamp }
profile unclamped { roles r
 hooks clamp, unclamp }
profile more { roles r
 hooks unclamp, clamp, no-big, audit }
profile unguarded { roles r
 hooks no-big, unclamp }
"""


def _executed(profile: str, limit: int) -> tuple[str, object]:
    snap = snapshot(HOOKS)
    request = Request(profile, "mail.search", {"query": "q", "limit": limit})
    effect, args = reference_decide(snap.workspace, request)
    return effect, None if args is None else args["limit"]


@pytest.mark.parametrize(
    ("caller", "candidate"),
    [("caller", "reordered"), ("clamped", "unclamped"), ("guarded", "unguarded")],
)
def test_a_rewrite_hook_added_or_reordered_does_not_fit(caller: str, candidate: str) -> None:
    # the candidate runs `mail.search` with a limit of 1000, which the caller never can
    assert _executed(candidate, 5) == ("allow", 1000)
    assert all(_executed(caller, n)[1] != 1000 for n in (5, 30, 60, 1000))
    snap = snapshot(HOOKS)
    result = fit_profile(snap, caller, snap, candidate)
    assert not result.fits
    # (named: the first rewrite hook where the two differ)
    assert [(v.kind, v.grant) for v in result.violations] in (
        [("drops-hook", "unclamp")],
        [("drops-hook", "clamp")],
    )


def test_the_same_rewrites_with_more_deny_and_pause_hooks_fit() -> None:
    snap = snapshot(HOOKS)
    assert fit_profile(snap, "caller", snap, "more").fits
    assert fit_profile(snap, "caller", snap, "caller").fits
