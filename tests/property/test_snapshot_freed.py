"""A compiled snapshot is freed by reference counting alone, the moment it is dropped.

A serving process runs the cyclic collector's full collection rarely (`tune_gc`), so a
snapshot caught in a reference cycle outlived the cache that dropped it, revision after
revision. The property compiles generated workspaces, decides with them (lazy plans and
unknown names included), and drops them with the collector off: the snapshot and each of
its compiled conditions must be gone at once. (Run functions are shared by signature in
a bounded cache, engine.runfns; tests/test_runfns.py frees them on eviction.)
"""

from __future__ import annotations

import weakref
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.check import check_sources
from engine.collector import collector_paused
from engine.compile import Snapshot, compile_workspace
from engine.decision import Request
from policy.diagnostics import CharterError
from tests.property.requests import requests
from tests.property.strategies import GenWorkspace, workspaces


def _watched(snapshot: Snapshot) -> list[weakref.ref[Any]]:
    """Weak references to the snapshot and its conditions. (Its run functions are not
    its own: snapshots share them by signature, in engine.runfns's bounded cache.)"""
    functions: list[Any] = [fn for fn in snapshot._entries.fns.values() if fn is not None]
    for entry in snapshot._hook_entries.values():
        functions += [fn for fn in (entry.fn, *(f for _, f in entry.rewrites)) if fn is not None]
    return [weakref.ref(snapshot), *(weakref.ref(fn) for fn in functions)]


@given(workspaces(), st.data())
def test_a_dropped_snapshot_is_freed_without_the_collector(
    gw: GenWorkspace, data: st.DataObject
) -> None:
    with collector_paused():
        try:
            snapshot = compile_workspace(check_sources([("gen.charter", gw.text)]), 7)
        except CharterError:  # (the generator's rare workspace the checker rejects)
            return
        for _ in range(6):
            snapshot.decide(data.draw(requests(gw)))
        for profile in snapshot.profiles:  # a lazily built plan, and an unknown tool
            snapshot.decide(Request(profile, "no.such_tool", {}))
            for tool in list(snapshot.tools)[:3]:
                snapshot.plan(profile, tool)
        watched = _watched(snapshot)
        assert watched[0]() is not None
        del snapshot
        alive = [ref() for ref in watched if ref() is not None]
        assert not alive, f"{len(alive)} of {len(watched)} still alive: {alive[:3]}"


def test_the_example_workspace_is_freed_without_the_collector() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "fixtures" / "workspace"
    files = [(path.name, path.read_text()) for path in sorted(root.glob("*.charter"))]
    with collector_paused():
        snapshot = compile_workspace(check_sources(files), 1)
        for profile in snapshot.profiles:
            for tool in snapshot.tools:
                snapshot.plan(profile, tool)
        watched = _watched(snapshot)
        del snapshot
        assert all(ref() is None for ref in watched)
