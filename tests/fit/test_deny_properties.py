"""(f) A profile that fits keeps every deny of the caller, on denies over the two map
arguments of `agents.update` (lists in them, equal or of one length, maps compared):
no sampled call, nor any call around the solver's own models of the kid's access, is
allowed by the kid and denied by the caller; and every counterexample is real."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.fit import fit_workspace_profile
from tests.examples import examples
from tests.fit.strategies import call, conditions
from tests.fit.support import model_calls, progress, roles_effect, snapshot

# Generous: a loaded machine must not turn the solver's answer into a (sound) timeout.
TIMEOUT_MS = 30_000


@settings(max_examples=examples(25))
@given(
    conditions("agents.update"),
    conditions("agents.update"),
    st.lists(call("agents.update"), min_size=4, max_size=12),
)
def test_a_profile_that_fits_keeps_every_deny_over_map_arguments(
    mine: str, theirs: str, sample: list[dict[str, Any]]
) -> None:
    progress("test_a_profile_that_fits_keeps_every_deny_over_map_arguments")
    snap = snapshot(
        f"role c {{\n  allow agents.update\n  deny agents.update where {mine}\n}}\n"
        f"role k {{\n  allow agents.update\n  deny agents.update where {theirs}\n}}\n"
        "profile caller { roles c\n hooks none }\nprofile kid { roles k\n hooks none }\n"
    )
    ws = snap.workspace
    result = fit_workspace_profile(ws, "caller", ws, "kid", timeout_ms=TIMEOUT_MS)
    for v in result.violations:  # every counterexample: the caller denies, the kid allows
        if v.counterexample is not None:
            assert roles_effect(snap, "caller", v.counterexample) == "deny", v
            assert roles_effect(snap, "kid", v.counterexample) == "allow", v
    if result.fits:
        sample = [*sample, *model_calls(ws, "kid", "agents.update")]
        for c in sample:
            if roles_effect(snap, "kid", c) == "allow":
                assert roles_effect(snap, "caller", c) == "allow", (c, result)
