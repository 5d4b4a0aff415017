"""Feeds over a real server (`/v1/feeds`, `/v1/feeds/{feed}/messages`): made, listed by
page, read, renamed and deleted, messages published with gap-free numbers and read back by
`after_seq`, by an admin and by an agent's token as the built-in tools `feeds.*`, decided
by its policy and logged."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api import commands as c
from api.service.errors import ServiceError
from api.service.manage import manage
from api.service.tokens import Principal
from tests.api.conftest import BOTH, POLICY, Harness, expect

STORES = BOTH
PUBLISHER = """
role feed-user {
  allow feeds.*
}
profile publisher {
  roles feed-user
  hooks none
}
"""


def _publisher(harness: Harness) -> dict[str, str]:
    """An agent whose policy grants `feeds.*`: its token."""
    with harness.service.store.atomic():
        harness.service.upload(
            [("policy.charter", POLICY), ("publisher.charter", PUBLISHER)], "test"
        )
    harness.add_agent("p1", "publisher")
    return harness.auth(harness.token_for("p1"))


def _log(live: httpx.Client, harness: Harness) -> list[tuple[str, str, str]]:
    logged = live.get("/v1/decisions", params={"after_seq": "0"}, headers=harness.auth()).json()
    return [(d["agent"], d["tool"], d["effect"]) for d in logged["decisions"]]


def test_create_list_get_rename_delete(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    made = [live.post("/v1/feeds", json={"name": f"f{i}"}, headers=admin) for i in range(3)]
    assert [m.status_code for m in made] == [201] * 3, made[0].text
    first = made[0].json()
    assert first["name"] == "f0" and first["last_seq"] == 0
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = live.get("/v1/feeds", params=params, headers=admin)
        assert page.status_code == 200, page.text
        seen += [item["name"] for item in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == ["f0", "f1", "f2"]
    at = f"/v1/feeds/{first['id']}"
    assert live.get(at, headers=admin).json() == first
    renamed = live.patch(at, json={"name": "releases"}, headers=admin)
    assert renamed.status_code == 200 and renamed.json()["name"] == "releases", renamed.text
    assert live.get(at, headers=admin).json()["name"] == "releases"
    assert live.delete(at, headers=admin).status_code == 204
    expect(live.get(at, headers=admin), 404, "feed-not-found")
    expect(live.delete(at, headers=admin), 404, "feed-not-found")
    assert [f["name"] for f in live.get("/v1/feeds", headers=admin).json()["items"]] == [
        "f1",
        "f2",
    ]


def test_messages_are_numbered_and_paged(live: httpx.Client, harness: Harness) -> None:
    own = _publisher(harness)
    feed = live.post("/v1/feeds", json={"name": "releases"}, headers=own).json()["id"]
    other = live.post("/v1/feeds", json={"name": "other"}, headers=own).json()["id"]
    sent = ["v1", "v2", "v3"]
    for text in sent:
        done = live.post(f"/v1/feeds/{feed}/messages", json={"message": text}, headers=own)
        assert done.status_code == 201, done.text
    one = live.post(f"/v1/feeds/{other}/messages", json={"message": "x"}, headers=own)
    assert one.json()["seq"] == 1  # (each feed numbers its own)
    got: list[tuple[int, str]] = []
    after = 0
    for _ in range(5):
        page = live.get(
            f"/v1/feeds/{feed}/messages", params={"after_seq": after, "limit": 2}, headers=own
        )
        assert page.status_code == 200, page.text
        items = page.json()["items"]
        got += [(m["seq"], m["message"]) for m in items]
        assert page.json()["next_after_seq"] == (items[-1]["seq"] if items else after)
        if not items:
            break
        after = page.json()["next_after_seq"]
    assert got == [(1, "v1"), (2, "v2"), (3, "v3")]
    tail = live.get(f"/v1/feeds/{feed}/messages", params={"after_seq": 2}, headers=own).json()
    assert [m["message"] for m in tail["items"]] == ["v3"]
    assert live.get(f"/v1/feeds/{feed}", headers=own).json()["last_seq"] == 3
    tools = _log(live, harness)
    assert ("p1", "feeds.publish", "allow") in tools and ("p1", "feeds.messages", "allow") in tools
    # a request on a feed that is not there is refused before it is decided: not logged
    for unknown in (live.get("/v1/feeds/nope/messages", headers=own),
                    live.post("/v1/feeds/nope/messages", json={"message": "m"}, headers=own),
                    live.patch("/v1/feeds/nope", json={"name": "n"}, headers=own)):  # fmt: skip
        expect(unknown, 404, "feed-not-found")
    assert _log(live, harness) == tools
    # a feed deleted goes with its messages: one made later starts at 1 again
    assert live.delete(f"/v1/feeds/{feed}", headers=own).status_code == 204
    expect(live.get(f"/v1/feeds/{feed}/messages", headers=own), 404, "feed-not-found")
    assert harness.service.store.page("feed-messages", 0, 10, feed) == []


def test_concurrent_publishes_take_consecutive_numbers(
    live: httpx.Client, harness: Harness
) -> None:
    admin = harness.auth()
    feed = live.post("/v1/feeds", json={"name": "busy"}, headers=admin).json()["id"]

    def publish(i: int) -> int:
        done = live.post(f"/v1/feeds/{feed}/messages", json={"message": f"m{i}"}, headers=admin)
        assert done.status_code == 201, done.text
        return int(done.json()["seq"])

    with ThreadPoolExecutor(8) as pool:
        seqs = list(pool.map(publish, range(16)))
    assert sorted(seqs) == list(range(1, 17))
    read = live.get(f"/v1/feeds/{feed}/messages", params={"limit": 200}, headers=admin).json()
    assert [m["seq"] for m in read["items"]] == list(range(1, 17))
    assert {m["message"] for m in read["items"]} == {f"m{i}" for i in range(16)}


def test_denied_by_policy_is_logged(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    feed = live.post("/v1/feeds", json={"name": "releases"}, headers=admin).json()["id"]
    own = harness.auth(harness.agent_token)  # `a1`: its profile grants no `feeds.*`
    denied = live.post(f"/v1/feeds/{feed}/messages", json={"message": "hi"}, headers=own)
    expect(denied, 403, "denied-by-policy")
    expect(live.post("/v1/feeds", json={"name": "mine"}, headers=own), 403, "denied-by-policy")
    assert _log(live, harness) == [("a1", "feeds.publish", "deny"), ("a1", "feeds.create", "deny")]
    # nothing was written
    assert live.get(f"/v1/feeds/{feed}", headers=admin).json()["last_seq"] == 0
    assert len(live.get("/v1/feeds", headers=admin).json()["items"]) == 1


def test_refusals_change_nothing(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    feed = live.post("/v1/feeds", json={"name": "releases"}, headers=admin).json()
    at = f"/v1/feeds/{feed['id']}"
    for bad in ({}, {"name": ""}, {"name": "x" * 257}, {"name": 5}, {"name": "a", "x": 1}):
        expect(live.post("/v1/feeds", json=bad, headers=admin), 422, "invalid-body")
    expect(live.patch(at, json={"name": ""}, headers=admin), 422, "invalid-body")
    messages: list[dict[str, object]] = [
        {}, {"message": "x" * 65_537}, {"message": None}, {"message": "m", "seq": 9},
    ]  # fmt: skip
    for message in messages:
        expect(live.post(f"{at}/messages", json=message, headers=admin), 422, "invalid-body")
    expect(live.post(f"{at}/messages", content=b"{", headers=admin), 400, "malformed-json")
    unknown = "/v1/feeds/nope"
    expect(live.get(unknown, headers=admin), 404, "feed-not-found")
    expect(live.patch(unknown, json={"name": "n"}, headers=admin), 404, "feed-not-found")
    expect(live.post(f"{unknown}/messages", json={"message": "m"}, headers=admin), 404,
           "feed-not-found")  # fmt: skip
    expect(live.get(f"{unknown}/messages", headers=admin), 404, "feed-not-found")
    for query, code in (("after_seq=-1", "bad-after-seq"), ("after_seq=x", "bad-after-seq"),
                        ("limit=0", "bad-limit"), ("limit=201", "bad-limit")):  # fmt: skip
        expect(live.get(f"{at}/messages?{query}", headers=admin), 400, code)
    # nothing was written or logged
    assert live.get(at, headers=admin).json() == feed
    assert len(live.get("/v1/feeds", headers=admin).json()["items"]) == 1
    assert live.get("/v1/decisions", headers=admin).json()["decisions"] == []


ADMIN = Principal("t", "admin")
# A step: publish to feed 0-2 (a message that may be empty or hold any character), delete
# one (a later step on it is refused and numbers nothing), or make another.
PUBLISH = st.tuples(st.just("publish"), st.integers(0, 2), st.text(max_size=8))
STEPS = st.lists(
    st.one_of(  # (publishes most: a feed reaches many messages, and pages of them)
        PUBLISH, PUBLISH, PUBLISH, PUBLISH,
        st.tuples(st.just("delete"), st.integers(0, 2), st.just("")),
        st.tuples(st.just("create"), st.just(0), st.just("")),
    ),
    max_size=30,
)  # fmt: skip
READS = st.lists(st.integers(1, 4), min_size=1, max_size=4)  # the pages' limits


def _run(harness: Harness, command: c.Command) -> Any:
    return manage(harness.service, ADMIN, command).body


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS, limits=READS, start=st.integers(0, 12))
def test_numbers_are_gap_free_and_pages_read_them_all(
    harness: Harness, steps: list[tuple[str, int, str]], limits: list[int], start: int
) -> None:
    """Whatever publishes, deletions and refused publishes come in whatever order, each
    feed's messages are numbered 1..n in the order published, and pages of any limit
    read from any `after_seq` give exactly those after it, each once."""
    feeds = [_run(harness, c.CreateFeed(name=f"f{i}")).id for i in range(3)]
    sent: dict[str, list[str]] = {feed: [] for feed in feeds}
    gone: set[str] = set()
    for action, index, text in steps:
        feed = feeds[index % len(feeds)]
        if action == "create":
            feeds.append(_run(harness, c.CreateFeed(name="more")).id)
            sent[feeds[-1]] = []
        elif action == "delete" and feed not in gone:
            _run(harness, c.DeleteFeed(id=feed))
            gone.add(feed)
        elif action == "publish" and feed in gone:
            with pytest.raises(ServiceError) as refused:
                _run(harness, c.PublishMessage(feed=feed, message=text))
            assert refused.value.code == "feed-not-found"
        elif action == "publish":
            done = _run(harness, c.PublishMessage(feed=feed, message=text))
            sent[feed].append(text)
            assert done["seq"] == len(sent[feed])
    for feed, texts in sent.items():
        if feed in gone:
            assert harness.service.store.page("feed-messages", 0, 1, feed) == []
            continue
        after, got = start, []
        for limit in [*limits, 200]:  # (the last page reads what is left)
            page = _run(harness, c.ReadMessages(feed=feed, after_seq=after, limit=limit))
            assert [m["seq"] for m in page["items"]] == list(
                range(after + 1, after + 1 + len(page["items"]))
            )
            assert page["next_after_seq"] == (page["items"][-1]["seq"] if page["items"] else after)
            got += [m["message"] for m in page["items"]]
            after = page["next_after_seq"]
        assert got == texts[start:]
        assert _run(harness, c.GetFeed(id=feed)).last_seq == len(texts)
