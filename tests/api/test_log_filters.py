"""`GET /v1/decisions` filtered by agent, tool, effect and time (api/http/logfilter.py):
a filtered read pages on by `next_after_seq` and finds exactly the rows the filter
names, across the scan bound; a filter that cannot be read is a 400 problem."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from api.http import decisions
from tests.api.conftest import Harness

CALLS: list[dict[str, Any]] = [
    {
        "agent": "a1",
        "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "s", "body": "b"},
    },
    {
        "agent": "a1",
        "tool": "mail.send",
        "args": {"to": "eve@else.net", "subject": "s", "body": "b"},
    },
    {"agent": "a1", "tool": "billing.refund", "args": {"amount": 20}},
    {"agent": "a1", "tool": "billing.refund", "args": {"amount": 90}},
]


def _read(live: httpx.Client, harness: Harness, query: str, limit: int = 2) -> list[dict[str, Any]]:
    """Every row the filter finds, paged by `next_after_seq` until it stops moving."""
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        response = live.get(
            f"/v1/decisions?after_seq={after}&limit={limit}&{query}", headers=harness.auth()
        )
        assert response.status_code == 200, response.text[:300]
        page = response.json()
        found += page["decisions"]
        if page["next_after_seq"] == after:
            return found
        after = page["next_after_seq"]


def test_filters_find_exactly_their_rows(
    live: httpx.Client, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = int(time.time() * 1000)
    answers = [live.post("/v1/decisions", json=c, headers=harness.auth()).json() for c in CALLS]
    assert [a["effect"] for a in answers] == ["allow", "deny", "allow", "pause"]
    everything = _read(live, harness, "", limit=1000)
    assert len(everything) >= 4

    def expect(query: str, want: list[dict[str, Any]]) -> None:
        got = [d["seq"] for d in _read(live, harness, query)]
        assert got == [d["seq"] for d in want], query

    mine = [d for d in everything if d["at"] >= start]
    expect("effect=pause", [d for d in everything if d["effect"] == "pause"])
    expect("tool=billing.refund", [d for d in everything if d["tool"] == "billing.refund"])
    expect(
        "tool=mail.*&effect=deny",
        [d for d in everything if d["tool"].startswith("mail.") and d["effect"] == "deny"],
    )
    expect("agent=a1", [d for d in everything if d["agent"] == "a1"])
    expect("agent=nobody", [])
    expect(f"since={start}", mine)
    expect(f"until={start}", [d for d in everything if d["at"] < start])
    # A scan bound smaller than the log: the pages still find every row, a few at a time.
    monkeypatch.setattr(decisions, "MAX_SCAN", 2)
    expect("effect=allow", [d for d in everything if d["effect"] == "allow"])


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("effect=maybe", "bad-log-filter"),
        ("since=yesterday", "bad-log-filter"),
        ("until=-1", "bad-log-filter"),
        ("tool=" + "t" * 300, "bad-log-filter"),
        ("agent=" + "a" * 300, "id-too-long"),
        ("effect=allow&effect=deny", "repeated-parameter"),
    ],
)
def test_a_filter_that_cannot_be_read_is_refused(
    live: httpx.Client, harness: Harness, query: str, code: str
) -> None:
    response = live.get(f"/v1/decisions?{query}", headers=harness.auth())
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == code
