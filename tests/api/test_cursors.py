"""Cursors: a forged one, or junk, is 400 `bad-cursor` on every list, never a 500; a
policy view's pages are all read on the revision of the first page."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.service import pages
from tests.api.conftest import BOTH, LISTS, Harness, expect

STORES = BOTH  # each test on SQLite and on PostgreSQL (tests/api/conftest.py)


def _cursor(payload: bytes) -> str:
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def _kind(path: str) -> str:
    return {"/v1/identities": "secrets"}.get(path, path.rsplit("/", 1)[1])


@pytest.mark.parametrize("path", LISTS)
def test_forged_cursors_are_bad_cursor(live: httpx.Client, harness: Harness, path: str) -> None:
    auth = harness.auth()
    kind = _kind(path)
    deep = b'{"k":"' + kind.encode() + b'","a":' + b"[" * 3000 + b"]" * 3000 + b"}"
    forged = [
        {"k": kind, "a": 1 << 63},  # past SQLite's integers: was an OverflowError
        {"k": kind, "a": 10**30},
        {"k": kind, "a": -1},
        {"k": kind, "a": 1.5},
        {"k": kind, "a": True},
        {"k": kind, "a": "name"},
        {"k": kind, "a": 1, "x": 0},
        {"k": kind, "a": 1, "r": 1 << 63},
        {"k": kind, "a": 0, "r": 0},
        {"k": kind, "a": 0, "r": 99},  # a revision that does not exist
        {"k": kind},
        [kind, 1],
    ]
    cursors = [_cursor(json.dumps(f).encode()) for f in forged]
    cursors += [_cursor(deep), _cursor(b"\xff\xfe"), "a" * 5000, "é", "abc=", "a"]
    for cursor in cursors:
        response = live.get(path, params={"cursor": cursor}, headers=auth)
        expect(response, 400, "bad-cursor")
    assert harness.service.store.last_seq() == 0  # an admin's list is not a tool call


def test_any_cursor_is_a_page_or_bad_cursor(live: httpx.Client, harness: Harness) -> None:
    """Any string at all as a cursor: 200, or 400 `bad-cursor`; and any JSON value encoded
    as a cursor, the same."""
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
            st.sampled_from(["k", "a", "r", "x"]), inner, max_size=4),
        max_leaves=8,
    )  # fmt: skip
    fields = st.fixed_dictionaries(
        {"k": st.sampled_from(["agents", "roles", "revisions", "x"]),
         "a": st.integers(min_value=-(1 << 70), max_value=1 << 70)},
        optional={"r": st.integers(min_value=-2, max_value=1 << 64)},
    )  # fmt: skip
    cursors = st.one_of(
        st.text(max_size=300),
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_="),
        st.one_of(json_values, fields).map(lambda v: _cursor(json.dumps(v).encode())),
    )

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(["/v1/agents", "/v1/roles", "/v1/revisions"]), cursors)
    def run(path: str, cursor: str) -> None:
        response = live.get(path, params={"cursor": cursor}, headers=harness.auth())
        if response.status_code != 200:
            expect(response, 400, "bad-cursor")

    run()


def test_a_cursor_round_trips_at_the_bounds() -> None:
    top = pages.MAX_POSITION
    assert pages.decode("agents", pages.encode("agents", top)) == top
    assert pages.decode_pinned("roles", pages.encode("roles", top, top)) == (top, top)
    assert len(pages.encode("identities", top, top)) < pages.MAX_CURSOR


ROLE = 'role {name} {{\n  allow mail.send where args.to endswith "@example.com"\n}}\n'


@pytest.mark.parametrize("path", ["/v1/roles", "/v1/profiles", "/v1/hooks", "/v1/toolsets"])
def test_a_policy_view_pages_through_one_revision(
    live: httpx.Client, harness: Harness, path: str
) -> None:
    """A role added while paging (a new revision) neither shifts nor shows up: the cursor
    pins the revision of the first page, so the pages are one consistent listing."""
    auth = harness.auth()
    whole = live.get(path, params={"limit": 200}, headers=auth).json()["items"]
    first = live.get(path, params={"limit": 1}, headers=auth).json()
    assert first["next_cursor"] is not None
    for name in ("aaa-added", "zzz-added"):
        made = live.post("/v1/roles", json={"name": name, "source": ROLE.format(name=name)},
                         headers=auth)  # fmt: skip
        assert made.status_code == 201, made.text
    seen, cursor = list(first["items"]), first["next_cursor"]
    while cursor is not None:
        page = live.get(path, params={"limit": 1, "cursor": cursor}, headers=auth).json()
        seen += page["items"]
        cursor = page["next_cursor"]
    assert [item["name"] for item in seen] == [item["name"] for item in whole]
    assert {item["revision"] for item in seen} == {1}
    # a new listing reads the latest revision, with both new roles in place
    fresh = live.get(path, params={"limit": 200}, headers=auth).json()["items"]
    if path == "/v1/roles":
        names = [item["name"] for item in fresh]
        assert names == sorted([*(i["name"] for i in whole), "aaa-added", "zzz-added"])
    assert {item["revision"] for item in fresh} == {3}


def test_a_filtered_list_takes_only_its_own_cursors(live: httpx.Client, harness: Harness) -> None:
    """A list filtered by `?agent=` or `?status=` is a list of its own: another filter's
    cursor, or the unfiltered list's, is 400 `bad-cursor` (it was read as a position and
    skipped every row of this list before it), and its own pages on."""
    auth = harness.auth()
    harness.add_agent("b1", "support")
    for agent in ("a1", "b1", "a1", "b1"):
        made = live.post("/v1/threads", json={"agent": agent}, headers=auth)
        assert made.status_code == 201, made.text
        paused = live.post("/v1/decisions", headers=auth, json={
            "agent": agent, "tool": "billing.refund", "args": {"amount": 100}})  # fmt: skip
        assert paused.json()["effect"] == "pause", paused.text
        if agent == "b1":
            approval = paused.json()["approval_id"]
            closed = live.post(f"/v1/approvals/{approval}/reject", json={}, headers=auth)
            assert closed.status_code == 200, closed.text
    lists = [("/v1/threads", "agent", ["a1", "b1", None]),
             ("/v1/approvals", "status", ["pending", "rejected", None])]  # fmt: skip
    for path, name, values in lists:
        for chosen in values:
            query = {name: chosen} if chosen else {}
            first = live.get(path, params={**query, "limit": 1}, headers=auth).json()
            on = live.get(path, params={**query, "cursor": first["next_cursor"]}, headers=auth)
            assert on.status_code == 200 and on.json()["items"], on.text
            for other in values:
                if other != chosen:
                    elsewhere = {name: other} if other else {}
                    response = live.get(path, params={**elsewhere, "cursor": first["next_cursor"]},
                                        headers=auth)  # fmt: skip
                    expect(response, 400, "bad-cursor")
