"""`GET /v1/decisions` pages are bounded in bytes as well as in rows: a page stops before
the row that would take it past `MAX_LOG_PAGE_BYTES` (4 MiB) but always holds one row,
and `next_after_seq` continues after the last row given, so paging by it reads every
row once. 300 rows with an argument of 1 MB each were one response of 300 MB."""

from __future__ import annotations

import httpx
import pytest

from api.http import decisions
from tests.api.conftest import Harness

MAIL = {"to": "bob@example.com", "subject": "hi"}
MB = 1_000_000


def _pages(live: httpx.Client, harness: Harness, limit: int = 1000) -> list[list[int]]:
    """Every page of the log, read by `next_after_seq` until an empty one, as its seqs;
    each page checked: numbered on from the last, and `next_after_seq` its last row."""
    pages: list[list[int]] = []
    after = 0
    while True:
        response = live.get(f"/v1/decisions?after_seq={after}&limit={limit}",
                            headers=harness.auth())  # fmt: skip
        assert response.status_code == 200, response.text[:300]
        page = response.json()
        seqs = [d["seq"] for d in page["decisions"]]
        if not seqs:
            assert page["next_after_seq"] == after
            return pages
        assert seqs == list(range(after + 1, after + 1 + len(seqs)))
        assert page["next_after_seq"] == seqs[-1]
        if len(seqs) > 1:  # (one row may be larger alone)
            assert len(response.content) < decisions.MAX_LOG_PAGE_BYTES + 64 * 1024
        pages.append(seqs)
        after = seqs[-1]


def test_a_page_of_large_rows_stops_at_4_mib(live: httpx.Client, harness: Harness) -> None:
    for i in range(5):  # answers of about 2 MB (`args` and `final_args`): two to a page
        call = {"agent": "a1", "tool": "mail.send", "args": {**MAIL, "body": str(i) * MB}}
        response = live.post("/v1/decisions", json=call, headers=harness.auth())
        assert response.status_code == 200 and response.json()["effect"] == "allow"
    pages = _pages(live, harness)
    assert pages == [[1, 2], [3, 4], [5]]
    # `limit` still cuts a page first
    assert _pages(live, harness, limit=1) == [[1], [2], [3], [4], [5]]
    logged = live.get("/v1/decisions?after_seq=3&limit=1", headers=harness.auth()).json()
    assert logged["decisions"][0]["args"]["body"] == "3" * MB  # whole rows, never cut


def test_a_batch_is_paged_inside_its_run(
    live: httpx.Client, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch is one run of the log (one transaction); a page may stop inside it, and a
    row larger than the whole budget still makes a page of its own."""
    bodies = ["x" * 60_000] * 6 + ["y" * 400_000] + ["x" * 60_000] * 3
    calls = [{"agent": "a1", "tool": "mail.send", "args": {**MAIL, "body": b}} for b in bodies]
    response = live.post("/v1/decisions/batch", json={"calls": calls}, headers=harness.auth())
    assert response.status_code == 200, response.text[:300]
    small = {"agent": "a1", "tool": "mail.send", "args": {**MAIL, "body": "z"}}
    assert live.post("/v1/decisions", json=small, headers=harness.auth()).status_code == 200
    monkeypatch.setattr(decisions, "MAX_LOG_PAGE_BYTES", 400_000)  # three answers of 120 KB
    assert _pages(live, harness) == [[1, 2, 3], [4, 5, 6], [7], [8, 9, 10, 11]]
    monkeypatch.setattr(decisions, "MAX_LOG_PAGE_BYTES", 1)
    assert _pages(live, harness) == [[seq] for seq in range(1, 12)]


def test_rows_are_read_exactly_once_across_pages(live: httpx.Client, harness: Harness) -> None:
    """Small rows: a page is cut by `limit` alone, as before."""
    for _ in range(3):
        call = {"agent": "a1", "tool": "mail.send", "args": {**MAIL, "body": "b"}}
        assert live.post("/v1/decisions", json=call, headers=harness.auth()).status_code == 200
    assert _pages(live, harness) == [[1, 2, 3]]
    assert _pages(live, harness, limit=2) == [[1, 2], [3]]
