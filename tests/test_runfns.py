"""Run functions are shared by signature across snapshots (engine.runfns), and bounded."""

from __future__ import annotations

import gc
import weakref
from collections import OrderedDict

import pytest

from engine import runfns
from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.decision import Request

POLICY = """
toolset mail {
  tool send(to: str, body: str)
  tool read(folder: str)
}
role sender {
  allow mail.send where args.to endswith "@example.com"
}
profile writer {
  roles sender
  hooks none
}
"""


def _snapshot(text: str) -> Snapshot:
    return compile_workspace(check_sources([("p.charter", text)]))


def test_two_snapshots_share_the_functions_of_a_signature() -> None:
    first, second = _snapshot(POLICY), _snapshot(POLICY + "\n# another revision\n")
    for kind in runfns.KINDS:
        assert first.parts.runs.get("mail.send", kind) is second.parts.runs.get("mail.send", kind)
    same = Request("writer", "mail.send", {"to": "a@example.com", "body": "x"})
    assert first.decide(same).effect == second.decide(same).effect == "allow"
    wrong = Request("writer", "mail.send", {"to": 3, "body": "x"})
    assert first.decide(wrong).effect == second.decide(wrong).effect == "deny"


def test_the_cache_keeps_the_most_recent_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runfns, "CACHE_SIGNATURES", 3)
    monkeypatch.setattr(runfns, "_cache", OrderedDict())
    for n in range(6):
        params = ", ".join(f"f{i}: str" for i in range(n + 1))
        snap = _snapshot(
            f"toolset t {{\n  tool x({params})\n}}\n"
            "role r {\n  allow t.x\n}\nprofile p {\n  roles r\n  hooks none\n}\n"
        )
        args = {f"f{i}": "v" for i in range(n + 1)}
        assert snap.decide(Request("p", "t.x", args)).effect == "allow"
        assert len(runfns._cache) <= 3


def test_an_evicted_signature_is_freed_without_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Generated functions hold no cycle with their namespace: dropped from the cache,
    reference counting frees them at once (a serving process rarely runs a full
    collection)."""
    monkeypatch.setattr(runfns, "CACHE_SIGNATURES", 1)
    monkeypatch.setattr(runfns, "_cache", OrderedDict())
    first = _snapshot(POLICY)
    watched = [weakref.ref(first.parts.runs.get("mail.send", kind)) for kind in runfns.KINDS]
    del first
    gc.disable()
    try:
        _snapshot(POLICY.replace("to: str, body: str", 'to: str, body: str, cc: str = ""'))
        assert all(ref() is None for ref in watched)
    finally:
        gc.enable()
