"""The store contract (policy/store/__init__.py), on both stores: SQLite and PostgreSQL.

Each test runs on a `backend` (tests/store/backends.py): one database, opened by one or
more stores as several processes would, and changed behind their backs with SQL where a
test damages a row. What is about SQLite's file alone is in test_sqlite.py."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.store import (
    SPENT_OVERFLOW,
    Damaged,
    Limit,
    Store,
    StoreDamaged,
    StoreTooNew,
    changes,
    pgschema,
    revisions,
    schema,
)
from policy.store.changes import Feed
from policy.store.rowsum import GENESIS, log_digest
from tests.store.backends import Backend

FIXTURE_PER_TEST = settings(
    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# ---- documents --------------------------------------------------------------------------


def test_documents_and_pages(backend: Backend) -> None:
    store = backend.open()
    assert store.insert("agents", "a", {"x": 1})
    assert not store.insert("agents", "a", {"x": 2})
    assert store.get("agents", "a") == {"x": 1}
    assert store.update("agents", "a", {"x": 3}, tag="t")
    assert not store.update("agents", "zz", {"x": 3})
    store.insert("agents", "b", {"x": 4})
    store.insert("other", "a", {"x": 5}, tag="t")
    first = store.page("agents", 0, 1)
    assert [r.id for r in first] == ["a"] and first[0].body == {"x": 3}
    assert [r.id for r in store.page("agents", first[0].pos, 10)] == ["b"]
    assert [r.id for r in store.page("agents", 0, 10, tag="t")] == ["a"]
    assert store.delete("agents", "a") and not store.delete("agents", "a")
    assert store.get("agents", "a") is None
    assert [r.id for r in store.scan("agents")] == ["b"]
    assert [(r.id, r.body) for r in store.scan("other", tag="t")] == [("a", {"x": 5})]


def test_documents_inserted_together_are_positioned_in_order(backend: Backend) -> None:
    """`insert_many` adds each new document in the order given, after those before it,
    leaves one whose id is taken as it is, and rolls back with its transaction."""
    store = backend.open()
    store.insert("events", "e0", {"n": 0}, tag="th")
    added = store.insert_many(
        "events", [("e1", {"n": 1}, "th"), ("e0", {"n": -1}, None), ("e2", {"n": 2}, None)]
    )
    assert added == 2
    assert [(r.id, r.body) for r in store.scan("events")] == [
        ("e0", {"n": 0}), ("e1", {"n": 1}), ("e2", {"n": 2}),
    ]  # fmt: skip
    assert [r.id for r in store.scan("events", tag="th")] == ["e0", "e1"]
    assert store.insert_many("events", []) == 0
    with pytest.raises(RuntimeError), store.atomic():
        store.insert_many("events", [("e3", {"n": 3}, "th")])
        raise RuntimeError("rolled back")
    assert store.get("events", "e3") is None
    other = backend.open()  # (another process sees what committed)
    assert [r.id for r in other.page("events", 0, 10, tag="th")] == ["e0", "e1"]


def test_positions_stay_as_documents_change_and_scans_page_on(backend: Backend) -> None:
    """An update keeps its document's position and may change its tag; a scan reads every
    document of a kind a page at a time, in position order, tagged or not."""
    store = backend.open()
    for i in range(1203):
        store.insert("turns", f"t{i:04d}", {"i": i}, tag=f"th{i % 3}")
    before = {row.id: row.pos for row in store.scan("turns")}
    assert list(before) == [f"t{i:04d}" for i in range(1203)]
    assert list(before.values()) == sorted(before.values())
    store.update("turns", "t0001", {"i": -1}, tag="th0")
    store.update("turns", "t0002", {"i": -2})  # (no tag now)
    after = {row.id: row.pos for row in store.scan("turns")}
    assert after == before
    tagged = [row.id for row in store.scan("turns", tag="th0")]
    assert tagged == [f"t{i:04d}" for i in range(1203) if i % 3 == 0 or i == 1]
    assert "t0002" not in [row.id for row in store.scan("turns", tag="th2")]
    assert store.page("turns", 0, 1, tag="th1") == store.page("turns", 0, 1, tag="th1")
    assert [r.id for r in store.page("turns", before["t1200"], 10)] == ["t1201", "t1202"]


# ---- revisions --------------------------------------------------------------------------


def _body(files: dict[str, str], note: str) -> dict[str, Any]:
    roles = sorted(path.removesuffix(".charter") for path in files)
    return {"files": [[p, t] for p, t in files.items()], "note": note,
            "summary": {"roles": roles, "tests": 1}}  # fmt: skip


def test_revisions_round_trip_through_their_deltas(backend: Backend) -> None:
    """A chain of single-file changes longer than `revisions.EVERY` (deltas and the full
    rows between them): each revision reads back as added, from a second store too, and
    the history lists each one's paths."""
    store, other = backend.open(), backend.open()
    assert store.latest_revision() == 0 and store.get_revision(1) is None
    files = {f"r{i:02d}.charter": f"role r{i:02d} {{\n}}\n" for i in range(20)}
    expected = [_body(files, "upload")]
    store.add_revision(expected[0])
    for i in range(revisions.EVERY + 10):
        path = f"r{i % 25:02d}.charter"
        if i % 4 == 0 and path in files:
            del files[path]
        else:
            files.pop(path, None)
            files[path] = f"role x{i} {{\n}}\n"
        expected.append(_body(files, f"change {i}"))
        writer = store if i % 2 else other  # (each stores against the latest, whoever wrote)
        assert writer.add_revision(expected[-1]) == len(expected)
    stored = backend.sql("SELECT body FROM revisions ORDER BY n")
    assert len(stored) == len(expected)
    assert sum(b"base" in bytes(body) for (body,) in stored) > revisions.EVERY // 2  # deltas
    for number, body in enumerate(expected, 1):
        assert store.get_revision(number) == body
        assert other.get_revision(number) == body
    listed = store.list_revisions(0, 1000)
    assert [n for n, _ in listed] == list(range(1, len(expected) + 1))
    for (_, got), body in zip(listed, expected, strict=True):
        assert got == {**body, "files": [path for path, _ in body["files"]]}
    assert [n for n, _ in store.list_revisions(30, 5)] == [31, 32, 33, 34, 35]
    assert store.list_revisions(30, 5)[0][1] == listed[30][1]
    assert store.latest_revision() == other.latest_revision() == len(expected)


def test_texts_are_kept_once_by_digest(backend: Backend) -> None:
    store = backend.open()
    text = "role a {\n}\n" * 100
    for i in range(5):
        store.add_revision({"files": [["a.charter", text], ["b.charter", text], [f"{i}", "x"]]})
    (count,) = backend.sql("SELECT count(*) FROM texts")[0]
    assert count == 2  # the shared text and "x", each once
    assert store.get_revision(4) == {
        "files": [["a.charter", text], ["b.charter", text], ["3", "x"]]
    }


# ---- the decision log -------------------------------------------------------------------


def test_log_is_gap_free_across_rollbacks_and_stores(backend: Backend) -> None:
    store = backend.open()
    assert store.append_decisions([b'{"n":1}', b'{"n":2}']) == [1, 2]
    with pytest.raises(RuntimeError), store.atomic():
        store.append_decisions([b'{"n":3}'])
        raise RuntimeError("rolled back")
    assert store.append_decisions([b'{"n":4}']) == [3]
    other = backend.open()  # a second process's store

    def write(s: Store) -> None:
        for _ in range(25):
            s.append_decisions([b'{"n":0}'] * 3)

    threads = [threading.Thread(target=write, args=(s,)) for s in (store, other, store, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seqs = [seq for seq, _ in store.read_decisions(0, 10_000)]
    assert seqs == list(range(1, 3 + 300 + 1))
    assert store.last_seq() == other.last_seq() == 303


def test_log_rows_are_kept_as_given_and_groups_numbered_in_order(backend: Backend) -> None:
    store = backend.open()
    rows = [b'{"tool":"mail.send"}', b"\xa1an\x01", b""]
    assert store.append_decisions(rows) == [1, 2, 3]
    assert store.append_decisions([]) == []
    assert store.append_decisions([b"lone"]) == [4]
    assert [row for _, row in store.read_decisions(0, 10)] == [*rows, b"lone"]
    assert store.read_decisions(2, 1) == [(3, b"")]
    expected = [*rows, b"lone"]
    for size in (2, 63, 64, 65, 1000, 1):
        made = [b"%d:%d" % (size, i) for i in range(size)]
        assert store.append_decisions(made) == list(
            range(len(expected) + 1, len(expected) + size + 1)
        )
        expected += made
    assert [row for _, row in store.read_decisions(0, 5000)] == expected
    assert store.last_seq() == len(expected)


def test_log_head_is_the_chain_through_the_last_seq(backend: Backend) -> None:
    store = backend.open()
    assert store.log_head() == (0, GENESIS)
    chained_to = GENESIS
    for first, group in ((1, [b"a"]), (2, [b"b", b"cc"]), (4, [b"d"])):
        store.append_decisions(group)
        body = group[0] if len(group) == 1 else None
        if body is None:
            (stored,) = backend.sql("SELECT body FROM decisions WHERE seq = ?", (first,))[0]
            body = bytes(stored)
        chained_to = log_digest(chained_to, first, len(group), body)
    assert store.log_head() == (4, chained_to) == backend.open().log_head()


def _within(rows: list[tuple[int, bytes]], limit: int, max_bytes: int) -> list[tuple[int, bytes]]:
    page: list[tuple[int, bytes]] = []
    size = 0
    for seq, row in rows[:limit]:
        if page and size + len(row) > max_bytes:
            break
        page.append((seq, row))
        size += len(row)
    return page


@FIXTURE_PER_TEST
@given(
    groups=st.lists(
        st.lists(st.binary(max_size=40).map(lambda b: b * 3), min_size=1, max_size=9),
        max_size=8,
    ),
    after=st.integers(min_value=-1, max_value=80),
    limit=st.integers(min_value=1, max_value=80),
    max_bytes=st.one_of(st.none(), st.integers(min_value=0, max_value=400)),
)
def test_reading_the_log_anywhere_in_its_runs(
    backend: Backend,
    groups: list[list[bytes]],
    after: int,
    limit: int,
    max_bytes: int | None,
) -> None:
    """Whatever the groups were, the log reads back as one numbered list from `after + 1`,
    `limit` rows of it, and with a byte budget stops before the row that would take the
    page past it (never before the first)."""
    store = backend.kept()
    backend.sql("DELETE FROM decisions")
    for group in groups:
        store.append_decisions(group)
    numbered = [(s, r) for s, r in enumerate((r for g in groups for r in g), 1) if s > after]
    budget = (1 << 62) if max_bytes is None else max_bytes
    assert store.read_decisions(after, limit, max_bytes) == _within(numbered, limit, budget)
    assert store.last_seq() == sum(map(len, groups))


def test_a_page_of_a_long_run_reads_only_its_rows(backend: Backend) -> None:
    store = backend.open()
    rows = [bytes([i % 251]) * 20_000 for i in range(300)]
    store.append_decisions(rows)
    assert store.read_decisions(5, 1000, 200_000) == [(6 + i, rows[5 + i]) for i in range(10)]
    assert store.read_decisions(7, 1000, 10) == [(8, rows[7])]
    assert store.read_decisions(299, 1000, 10) == [(300, rows[299])]
    assert store.read_decisions(300, 1000, 10) == []


# ---- the ledger -------------------------------------------------------------------------


def test_ledger_windows_and_the_time_order_rule(backend: Backend) -> None:
    store = backend.open()
    store.charge(["agent:a", "agent:p"], 1_500_000, at_ms=1_000)
    store.charge(["agent:a"], 500_000, at_ms=5_000)
    assert store.spent("agent:a", 0) == 2_000_000
    assert store.spent("agent:a", 2_000) == 500_000
    assert store.spent("agent:p", 0) == 1_500_000
    assert store.spent("agent:x", 0) == 0
    # Dated before agent:a's last row: recorded at that row's time, never earlier.
    store.charge(["agent:a", "agent:b"], 7, at_ms=1_000)
    assert store.spent("agent:a", 5_000) == 500_007 and store.spent("agent:a", 5_001) == 0
    assert store.spent("agent:b", 1_000) == 7 and store.spent("agent:b", 1_001) == 0
    assert backend.open().spent("agent:a", 0) == 2_000_007


def test_a_ledger_sum_past_64_bits_is_spent_overflow(backend: Backend) -> None:
    store = backend.open()
    store.charge(["agent:a", "agent:b"], 9 * 10**18, at_ms=1_000)
    with store.atomic():
        store.charge(["agent:a"], 9 * 10**18, at_ms=2_000)
        assert store.spent("agent:a", 0) == SPENT_OVERFLOW
        assert store.spent("agent:a", 1_500) == 9 * 10**18
        store.charge(["agent:b"], 1, at_ms=3_000)
    assert store.spent("agent:a", 0) == SPENT_OVERFLOW
    assert store.spent("agent:b", 0) == 9 * 10**18 + 1
    max_ = (1 << 63) - 1
    for at in (10, 11):
        store.charge(["agent:c"], max_, at_ms=at)
    store.charge(["agent:c"], 2, at_ms=12)  # the total is 2^64 exactly
    store.charge(["agent:c"], 5, at_ms=13)
    assert store.spent("agent:c", 0) == SPENT_OVERFLOW
    assert store.spent("agent:c", 12) == 7 and store.spent("agent:c", 13) == 5


# ---- named values -----------------------------------------------------------------------


def test_charge_within_checks_and_charges_as_one(backend: Backend) -> None:
    """The index of the first limit the charge would pass and nothing charged, or every
    subject charged; in the caller's transaction (rolled back with it) or its own."""
    store = backend.open()
    store.charge(["agent:a"], 60, at_ms=1_000)
    limits = [Limit("agent:a", 0, 100), Limit("agent:p", 0, 50), Limit("agent:a", 2_000, 10)]
    assert store.charge_within(limits, ["agent:a", "agent:p"], 41, at_ms=3_000) == 0
    assert store.charge_within(limits, ["agent:a", "agent:p"], 11, at_ms=3_000) == 2
    assert store.spent("agent:a", 0) == 60 and store.spent("agent:p", 0) == 0
    assert store.charge_within(limits, ["agent:a", "agent:p"], 10, at_ms=3_000) is None
    assert store.spent("agent:a", 0) == 70 and store.spent("agent:p", 0) == 10
    wide = [Limit("agent:a", 0, 200), Limit("agent:p", 0, 50)]
    assert store.charge_within(wide, ["agent:a", "agent:p"], 41, at_ms=3_000) == 1
    assert store.charge_within([], ["agent:q"], 5, at_ms=3_000) is None
    with pytest.raises(RuntimeError), store.atomic():
        assert store.charge_within(limits[:1], ["agent:a"], 30, at_ms=4_000) is None
        raise RuntimeError("rolled back")
    assert store.spent("agent:a", 0) == 70 and store.spent("agent:q", 0) == 5


def test_checks_and_charges_at_once_never_pass_a_limit(backend: Backend) -> None:
    """Four stores (four processes' worth) spending against one limit at once: exactly as
    many charges as fit go through, never one more."""
    stores = [backend.open(shared=True) for _ in range(4)]
    passed: list[int | None] = []

    def spend(store: Store) -> None:
        for at in range(10):
            found = store.charge_within([Limit("agent:a", 0, 100)], ["agent:a"], 7, at_ms=at)
            passed.append(found)

    threads = [threading.Thread(target=spend, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert passed.count(None) == 14 and passed.count(0) == 26
    assert stores[0].spent("agent:a", 0) == 98


def test_named_values(backend: Backend) -> None:
    store = backend.open()
    assert store.get_meta("nope") is None
    store.set_meta("k", {"v": 1})
    store.set_meta("k", {"v": 2})
    assert store.get_meta("k") == {"v": 2}
    assert backend.open().get_meta("k") == {"v": 2}


# ---- the change feed --------------------------------------------------------------------


def test_the_change_feed_tells_what_changed_in_commit_order(backend: Backend) -> None:
    """Changes are numbered 1, 2, ... as they commit; a reader gets those after the
    number it saw, with the latest revision, from any store on the database."""
    store, elsewhere = backend.open(), backend.open()
    assert store.changes_after(0) == Feed(0, 0, ())
    with store.atomic():
        store.note_change("agent", "a1")
        store.note_change("token", "t1")
    store.add_revision({"files": []})
    store.note_change("connection", "mail")
    assert elsewhere.changes_after(0) == Feed(
        1, 3, (("agent", "a1"), ("token", "t1"), ("connection", "mail"))
    )
    assert elsewhere.changes_after(2) == Feed(1, 3, (("connection", "mail"),))
    assert elsewhere.changes_after(3) == Feed(1, 3, ())
    # a number past the newest is another database's: everything is to be dropped
    assert elsewhere.changes_after(7) == Feed(1, 3, None)


def test_a_change_rolled_back_is_not_in_the_feed(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(RuntimeError), store.atomic():
        store.note_change("agent", "a1")
        raise RuntimeError("the change failed")
    store.note_change("agent", "a2")
    assert backend.open().changes_after(0) == Feed(0, 1, (("agent", "a2"),))


def test_a_reader_behind_the_kept_changes_is_told_to_drop_everything(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the newest KEEP changes are kept: a reader further behind cannot know what
    changed, and is told so (None), never given the changes that are left."""
    monkeypatch.setattr(changes, "KEEP", 5)
    store = backend.open()
    for i in range(8):
        store.note_change("agent", f"a{i}")
    assert len(backend.sql("SELECT seq FROM changes", ())) == 5
    assert store.changes_after(3) == Feed(0, 8, tuple(("agent", f"a{i}") for i in range(3, 8)))
    assert store.changes_after(2) == Feed(0, 8, None)
    assert store.changes_after(0) == Feed(0, 8, None)


@pytest.mark.parametrize("damage", ["key", "sum", "kind", "gone"])
def test_a_damaged_change_makes_the_reader_drop_everything(backend: Backend, damage: str) -> None:
    """A change row changed behind the store's back (its key, its checksum, a kind no
    charter notes) or removed: what changed cannot be told, so the answer is None, never
    the changes as they read (a reader would keep an agent it should drop)."""
    store = backend.open()
    for key in ("a1", "a2", "a3"):
        store.note_change("agent", key)
    if damage == "gone":
        backend.sql("DELETE FROM changes WHERE seq = ?", (2,))
    elif damage == "kind":
        backend.sql("UPDATE changes SET kind = ? WHERE seq = ?", ("secret", 2))
    elif damage == "key":
        backend.sql("UPDATE changes SET key = ? WHERE seq = ?", ("a9", 2))
    else:
        backend.sql("UPDATE changes SET sum = ? WHERE seq = ?", (b"\x00" * 16, 2))
    assert store.changes_after(0) == Feed(0, 3, None)
    assert store.changes_after(2) == Feed(0, 3, (("agent", "a3"),))


# ---- transactions -----------------------------------------------------------------------


def test_nested_transactions_join_and_roll_back_whole(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(RuntimeError), store.atomic():
        store.insert("thing", "a", {"n": 1})
        with store.atomic():
            store.append_decisions([b"x"])
            store.charge(["s"], 5, 1)
            store.set_meta("m", 1)
            store.add_revision({"files": [["f", "t"]]})
        raise RuntimeError("boom")
    assert store.get("thing", "a") is None and store.last_seq() == 0
    assert store.spent("s", 0) == 0 and store.get_meta("m") is None
    assert store.latest_revision() == 0
    with store.atomic():
        store.insert("thing", "a", {"n": 1})
        with pytest.raises(KeyError), store.atomic():  # an inner failure caught inside
            raise KeyError("inner")
        store.append_decisions([b"x"])
    assert store.get("thing", "a") == {"n": 1} and store.last_seq() == 1


def test_after_commit_runs_once_the_outer_transaction_commits(backend: Backend) -> None:
    store = backend.open()
    ran: list[str] = []
    store.after_commit(lambda: ran.append("outside"))  # no transaction: at once
    assert ran == ["outside"]
    with store.atomic():
        store.insert("thing", "a", {"n": 1})
        with store.atomic():  # nested: joins the outer one
            store.after_commit(lambda: ran.append("inner"))
        assert ran == ["outside"]  # not before the outer COMMIT
    assert ran == ["outside", "inner"]
    with pytest.raises(RuntimeError), store.atomic():
        store.insert("thing", "b", {"n": 2})
        store.after_commit(lambda: ran.append("rolled back"))
        raise RuntimeError("boom")
    with store.atomic():
        pass  # a later commit does not run what a rolled-back transaction queued
    assert ran == ["outside", "inner"] and store.get("thing", "b") is None


def test_on_begin_checks_every_outermost_transaction(backend: Backend) -> None:
    """`on_begin`'s check runs once a transaction holds the write lock, once however many
    transactions join it, for a lone write too; what it raises is raised, the transaction
    rolled back and the lock let go."""
    store, other = backend.open(shared=True), backend.open(shared=True)
    checks: list[int] = []
    refuse = False

    def check() -> None:
        checks.append(len(checks))
        if refuse:
            raise PermissionError("refused")

    store.on_begin(check)
    with store.atomic():
        store.insert("thing", "a", {"n": 1})
        with store.atomic():
            store.insert("thing", "b", {"n": 2})
    store.insert("thing", "c", {"n": 3})
    assert len(checks) == 2
    refuse = True
    with pytest.raises(PermissionError), store.atomic():
        store.insert("thing", "d", {"n": 4})  # (not reached)
    with pytest.raises(PermissionError):
        store.insert("thing", "d", {"n": 4})
    assert len(checks) == 4 and store.get("thing", "d") is None
    assert other.insert("thing", "e", {"n": 5})  # the lock was let go
    store.on_begin(None)
    assert store.insert("thing", "d", {"n": 4}) and len(checks) == 4
    assert sorted(row.id for row in other.scan("thing")) == ["a", "b", "c", "d", "e"]


def test_writers_take_turns(backend: Backend) -> None:
    """A second store's transaction waits while the first's is open, then goes ahead."""
    first, second = backend.open(shared=True), backend.open(shared=True)
    order: list[str] = []

    def other() -> None:
        with second.atomic():
            order.append("second")
            second.append_decisions([b'{"n":2}'])

    with first.atomic():
        waiter = threading.Thread(target=other)
        waiter.start()
        time.sleep(0.1)
        order.append("first")
        first.append_decisions([b'{"n":1}'])
    waiter.join(5)
    assert order == ["first", "second"]
    assert [row for _, row in first.read_decisions(0, 10)] == [b'{"n":1}', b'{"n":2}']


# ---- the data version -------------------------------------------------------------------

# How long after another process's commit `data_version()` may go on saying the same
# (policy/store/pgfeed.py: FRESH; SQLite's PRAGMA data_version moves at once).
BOUND = 0.5


def _moves_within(store: Store, before: int, bound: float) -> float:
    """Seconds until `store.data_version()` differs from `before` (fails past `bound`)."""
    start = time.monotonic()
    while store.data_version() == before:
        assert time.monotonic() - start <= bound, "the data version did not move in time"
        time.sleep(0.005)
    return time.monotonic() - start


def test_data_version_moves_when_another_store_commits(backend: Backend) -> None:
    """What another process caches moves it on both stores: a revision, a noted change."""
    store, other = backend.open(), backend.open()
    ids = itertools.count()
    for write in (
        lambda: other.note_change("agent", f"a{next(ids)}"),
        lambda: other.add_revision({"files": []}),
    ):
        before = store.data_version()
        write()
        _moves_within(store, before, BOUND)
        # Inside a transaction it is read exactly: another commit is seen at once.
        with store.atomic():
            inside = store.data_version()
        write_ = threading.Thread(target=write)
        write_.start()
        write_.join()
        with store.atomic():
            assert store.data_version() != inside
    still = store.data_version()
    time.sleep(0.05)
    assert store.data_version() == still  # (nobody committed)


def test_decisions_documents_charges_and_values_move_no_feed_on_postgres(
    backend: Backend,
) -> None:
    """SQLite's data version moves with any commit (PRAGMA data_version); PostgreSQL's
    change feed only with what another process caches, so a node's decisions cost the
    others no look at what moved."""
    store, other = backend.open(), backend.open()
    for write in (
        lambda: other.append_decisions([b"x"]),
        lambda: other.insert("a", "b", {}),
        lambda: other.charge(["s"], 1, 1),
        lambda: other.set_meta("k", 1),
    ):
        with store.atomic():
            before = store.data_version()
        write()
        with store.atomic():
            after = store.data_version()
        assert (after != before) is (backend.kind == "sqlite")


def test_data_version_moves_within_its_bound_with_no_notification(backend: Backend) -> None:
    """A commit whose notification never comes (written behind the stores' backs, as a
    lost notification looks) is still seen within the bound: the feed's row is read."""
    store = backend.open()
    before = store.data_version()
    time.sleep(0.3)  # (the feed's thread running, its reads fresh)
    if backend.kind == "postgres":
        backend.sql("UPDATE feed SET version = version + 1")
    else:
        backend.sql("INSERT INTO meta (key, body, sum) VALUES ('x', x'00', NULL)")
    _moves_within(store, before, BOUND + 0.1)


# ---- versions and damage ----------------------------------------------------------------


def test_a_database_from_a_newer_charter_is_refused(backend: Backend) -> None:
    store = backend.open()
    store.set_meta("k", 1)
    if backend.kind == "postgres":
        newer = pgschema.VERSION + 1
        backend.sql("UPDATE schema_version SET version = ?", (newer,))
    else:
        newer = schema.VERSION + 1
        backend.sql(f"PRAGMA user_version = {newer}")
    with pytest.raises(StoreTooNew) as info:  # seen by a store that opened it before
        store.changes_after(0)
    assert info.value.found == newer
    with pytest.raises(StoreTooNew):
        backend.open()


def test_damaged_rows_are_reported_never_served(backend: Backend) -> None:
    """A byte changed behind the store's back in a document, a revision, a text, a meta
    value, a ledger row or a log run: reported by name (or a `Damaged` in the log), and
    every other row reads on."""
    store = backend.open()
    store.insert("agents", "a1", {"name": "one"}, tag="root")
    store.insert("agents", "a2", {"name": "two"})
    store.add_revision({"files": [["a.charter", "role a {\n}\n"]]})
    store.set_meta("m", "value")
    store.set_meta("n", "other")
    store.charge(["agent:a1"], 1500, 10)
    store.charge(["agent:a2"], 7, 10)
    store.append_decisions([b'{"effect":"allow"}'])
    store.append_decisions([b'{"effect":"allow"}', b'{"effect":"deny"}'])
    store.append_decisions([b'{"effect":"deny"}'])

    def flip(table: str, where: str, params: tuple[Any, ...], column: str = "body") -> None:
        (found,) = backend.sql(f"SELECT {column} FROM {table} WHERE {where}", params)[0]
        changed = bytearray(bytes(found))
        changed[len(changed) // 2] ^= 0x01
        backend.sql(f"UPDATE {table} SET {column} = ? WHERE {where}", (bytes(changed), *params))

    flip("documents", "kind = ? AND id = ?", ("agents", "a1"))
    with pytest.raises(StoreDamaged, match="document agents/a1"):
        store.get("agents", "a1")
    with pytest.raises(StoreDamaged):
        store.page("agents", 0, 10)
    assert store.get("agents", "a2") == {"name": "two"}
    flip("revisions", "n = ?", (1,))
    with pytest.raises(StoreDamaged, match="revision 1"):
        store.get_revision(1)
    flip("meta", "key = ?", ("m",))
    with pytest.raises(StoreDamaged, match="`m`"):
        store.get_meta("m")
    assert store.get_meta("n") == "other"
    flip("ledger", "subject = ?", ("agent:a1",), column="sum")
    with pytest.raises(StoreDamaged, match="agent:a1"):
        store.spent("agent:a1", 0)
    with pytest.raises(StoreDamaged):  # a budget check fails closed, the charge is refused
        store.charge(["agent:a1"], 1, 20)
    assert store.spent("agent:a2", 0) == 7
    flip("decisions", "seq = ?", (2,))
    log = store.read_decisions(0, 10)
    assert log[0] == (1, b'{"effect":"allow"}') and log[2] == (4, b'{"effect":"deny"}')
    assert log[1] == (2, Damaged(2, 3, "checksum-mismatch", "it does not match its checksum"))
    assert isinstance(store.read_decisions(2, 1)[0][1], Damaged)


def test_a_text_changed_behind_the_stores_back_is_damaged(backend: Backend) -> None:
    store = backend.open()
    store.add_revision({"files": [["a.charter", "role a {\n}\n"]]})
    backend.sql("UPDATE texts SET body = ?", (b"role b {\n}\n",))
    with pytest.raises(StoreDamaged, match="policy text"):
        store.get_revision(1)
