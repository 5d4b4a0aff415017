"""What a serving process loads of a stored revision (engine/served.py) decides as the
whole policy does: over generated policies and sequences of changes to them, each loaded
against the partial load of the revision before, the served snapshot gives the same
decision for every request as one compiled whole, and holds the same toolsets, hooks and
profiles, the roles those profiles select, and the whole workspace on demand."""

from __future__ import annotations

from functools import partial

from hypothesis import assume, given
from hypothesis import strategies as st

from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.served import load_served
from engine.workspace import Workspace
from policy.diagnostics import CharterError
from tests.property.requests import requests
from tests.property.strategies import GenWorkspace, workspaces
from tests.property.test_incremental import changed, files_of, same_decision


def _whole(files: list[tuple[str, str]]) -> Workspace | None:
    try:
        return check_sources(files)
    except CharterError:
        return None


@given(workspaces(), st.data())
def test_what_a_worker_loads_decides_as_the_whole_policy(
    first: GenWorkspace, data: st.DataObject
) -> None:
    gw = first
    assume(_whole(files_of(gw)) is not None)  # (the generator's rare policy that does not check)
    base: Snapshot | None = None
    for step in range(data.draw(st.integers(1, 3))):
        if step:
            gw = data.draw(changed(gw))
        files = files_of(gw)
        whole = _whole(files)
        if whole is None:
            continue  # (never stored: a worker loads only what checked)
        served = load_served(files, base=None if base is None else base.served)
        assert served is not None and served.partial
        assert served.toolsets == whole.toolsets and served.tools == whole.tools
        assert served.hooks == whole.hooks and served.profiles == whole.profiles
        selected = {r for p in whole.profiles.values() for r in p.roles}
        assert served.roles == {n: r for n, r in whole.roles.items() if n in selected}
        assert [(f.path, f.text) for f in served.files] == files
        snapshot = Snapshot(served, 1, base, whole=partial(check_sources, files))
        full = compile_workspace(whole)
        for _ in range(4):
            request = data.draw(requests(gw))
            assert same_decision(snapshot.decide(request), full.decide(request)), request
        assert snapshot.whole_loaded() is None  # (deciding never needs the rest)
        assert snapshot.workspace.roles == whole.roles
        base = snapshot
