"""One moment per decided group (api.service.core.one_moment): the `time.*` every
condition of a call reads is the ms its log row says it was decided at, however long the
group takes, through the group commit (`POST /v1/decisions`, a batch) and through the
service's own path (an approval's re-check)."""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import engine.clock
import engine.codegen
from api.service.logrows import log_view
from tests.api.conftest import POLICY, Harness

MORE = """
toolset net {
  tool ping(host: str)
}
role timed {
  allow net.ping where time.ms > 0
}
hook late on net.ping where time.minute < 0 or args.host == "slow" {
  pause "a human looks at slow hosts"
}
"""
TIMED = POLICY.replace(
    "roles mailer, refunder, manager, vault-reader\n  hooks approve-big",
    "roles mailer, refunder, manager, vault-reader, timed\n  hooks approve-big, late",
) + MORE  # fmt: skip


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The ms each condition reads as `time.*`, with a clock that moves a millisecond at
    every look (so two looks never agree by chance)."""
    ticks = iter(range(1_764_806_400_000, 1_764_806_400_000 + 10_000_000))
    monkeypatch.setattr(
        engine.clock, "time", types.SimpleNamespace(time=lambda: next(ticks) / 1000)
    )
    read: list[int] = []
    real = engine.codegen._HELPERS["_clock"]

    def recorded() -> dict[str, Any]:
        fields: dict[str, Any] = real()
        read.append(fields["ms"])
        return fields

    monkeypatch.setitem(engine.codegen._HELPERS, "_clock", recorded)
    yield read


def _row_at(harness: Harness, seq: int) -> int:
    ((_, row),) = harness.service.store.read_decisions(seq - 1, 1)
    assert isinstance(row, bytes)
    at: int = log_view(seq, row)["at"]
    return at


def test_a_calls_conditions_read_the_moment_its_row_says(
    live: httpx.Client, harness: Harness, seen: list[int]
) -> None:
    files = {"files": [{"path": "policy.charter", "text": TIMED}]}
    assert live.put("/v1/policy", json=files, headers=harness.auth()).status_code == 201
    call = {"agent": "a1", "tool": "net.ping", "args": {"host": "h"}}
    seen.clear()
    one = live.post("/v1/decisions", json=call, headers=harness.auth(harness.decide)).json()
    assert one["effect"] == "allow" and len(seen) == 2  # (the role's and the hook's)
    assert set(seen) == {_row_at(harness, one["seq"])}

    seen.clear()
    batch = {"calls": [call, {**call, "args": {"host": "slow"}}, call]}
    answer = live.post("/v1/decisions/batch", json=batch, headers=harness.auth(harness.decide))
    decided = answer.json()["decisions"]
    assert [d["effect"] for d in decided] == ["allow", "pause", "allow"]
    assert len(seen) == 6 and set(seen) == {_row_at(harness, d["seq"]) for d in decided}

    # An approval's re-check is decided on the service's own path, at a moment of its own.
    seen.clear()
    approved = live.post(f"/v1/approvals/{decided[1]['approval_id']}/approve",
                         headers=harness.auth())  # fmt: skip
    assert approved.status_code == 200, approved.text
    recheck = approved.json()["decision"]
    assert recheck["effect"] == "allow" and len(seen) == 2
    assert set(seen) == {_row_at(harness, recheck["seq"])}
