"""The SQLite store's budget ledger: running totals (policy/store/ledger.py).

`spent` must say what summing the window's rows said, on any sequence of charges; a
charge whose time is earlier than its subject's last row is recorded at that row's time;
a ledger written before rows kept running totals gets them when the store opens it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.service.budget import Ledger
from policy.store import SPENT_OVERFLOW, ledger
from policy.store.sqlite import SqliteStore

MAX = (1 << 63) - 1
SUBJECTS = ["agent:a", "agent:b", "thread:t"]
# The ledger's layout before rows kept running totals, as such a database has it.
OLD_LEDGER = """
CREATE TABLE ledger (subject TEXT NOT NULL, at INTEGER NOT NULL, micros INTEGER NOT NULL);
CREATE INDEX ledger_subject ON ledger (subject, at);
"""


def _summed(rows: list[tuple[str, int, int]], subject: str, since: int) -> int:
    """What the store said by summing the window (SQLite's sum() failing past 64 bits)."""
    total = sum(micros for s, at, micros in rows if s == subject and at >= since)
    return total if total <= MAX else SPENT_OVERFLOW


def _old_sum(store: SqliteStore, subject: str, since: int) -> int:
    """The query `spent` ran before, on the same rows."""
    try:
        (total,) = store._db.execute(
            "SELECT coalesce(sum(micros), 0) FROM ledger WHERE subject = ? AND at >= ?",
            (subject, since),
        ).fetchone()
    except sqlite3.OperationalError as exc:
        assert str(exc) == "integer overflow"
        return SPENT_OVERFLOW
    return int(total)


charges = st.lists(
    st.tuples(
        st.lists(st.sampled_from(SUBJECTS), min_size=1, max_size=3, unique=True),
        # Mostly small; now and then large enough that a few pass 64 bits together.
        st.one_of(st.integers(0, 2_000_000), st.integers(0, 4 * 10**18)),
        st.integers(-5, 40),  # times in any order, repeated, negative
    ),
    max_size=30,
)


@settings(deadline=None)
@given(charges=charges, in_one_transaction=st.booleans())
def test_spent_is_the_sum_of_the_window(
    tmp_path_factory: pytest.TempPathFactory,
    charges: list[tuple[list[str], int, int]],
    in_one_transaction: bool,
) -> None:
    """Whatever the charges, `spent` for every window (starting at, before and after each
    row, and before them all) is the sum of the rows in it, SPENT_OVERFLOW past 64 bits,
    with a charge earlier than its subject's last row counted at that row's time."""
    store = SqliteStore(tmp_path_factory.mktemp("ledger") / "s.db")
    recorded: list[tuple[str, int, int]] = []
    last: dict[str, int] = {}
    with store.atomic() if in_one_transaction else _nothing():
        for subjects, micros, at in charges:
            store.charge(subjects, micros, at)
            for subject in subjects:
                last[subject] = max(at, last.get(subject, at))
                recorded.append((subject, last[subject], micros))
    rows = store._db.execute("SELECT subject, at, micros FROM ledger ORDER BY rowid").fetchall()
    assert rows == recorded
    times = {at for _, at, _ in recorded}
    windows = {-(1 << 62), 0, 41} | times | {t - 1 for t in times} | {t + 1 for t in times}
    for subject in [*SUBJECTS, "agent:none"]:
        for since in windows:
            expected = _summed(recorded, subject, since)
            assert store.spent(subject, since) == expected == _old_sum(store, subject, since)
    store.close()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_an_earlier_charge_is_recorded_at_the_last_rows_time(tmp_path: Path) -> None:
    """A charge dated before its subject's last row (a clock stepped back) is recorded at
    that row's time, later than its own, never earlier; another subject keeps its time."""
    store = SqliteStore(tmp_path / "s.db")
    store.charge(["agent:a"], 5, at_ms=5_000)
    store.charge(["agent:a", "agent:b"], 7, at_ms=1_000)
    assert store.spent("agent:a", 5_000) == 12
    assert store.spent("agent:a", 5_001) == 0
    assert store.spent("agent:b", 1_000) == 7 and store.spent("agent:b", 1_001) == 0
    rows = store._db.execute("SELECT subject, at FROM ledger ORDER BY rowid").fetchall()
    assert rows == [("agent:a", 5_000), ("agent:a", 5_000), ("agent:b", 1_000)]
    store.close()


def _steps(store: SqliteStore, subject: str, since: int) -> int:
    """SQLite virtual-machine instructions one `spent` takes."""
    count = 0

    def step() -> int:
        nonlocal count
        count += 1
        return 0

    store._db.set_progress_handler(step, 1)
    try:
        store.spent(subject, since)
    finally:
        store._db.set_progress_handler(None, 1)
    return count


def test_spent_reads_two_rows_however_many_there_are(tmp_path: Path) -> None:
    """`spent` costs about as much at 5,000 rows in the window as at 5: the work of two
    index searches, where summing the window stepped through every row of it."""
    store = SqliteStore(tmp_path / "s.db")
    with store.atomic():
        for at in range(5):
            store.charge(["agent:few"], 1, at)
        for at in range(5_000):
            store.charge(["agent:many"], 1, at)
    assert store.spent("agent:many", 2) == 4_998
    for since in (0, 2, 4, 5):  # (a search may take a step more in a deeper index)
        assert _steps(store, "agent:many", since) <= _steps(store, "agent:few", since) + 4
    explained = store._db.execute(
        "EXPLAIN QUERY PLAN " + ledger.SQLITE.spent, {"subject": "agent:many", "since": 2}
    )
    plan = " ".join(row[3] for row in explained)
    assert "SCAN ledger" not in plan and plan.count("USING INDEX ledger_subject") == 2
    store.close()


def test_sums_past_64_bits_are_exact_and_over_every_cap(tmp_path: Path) -> None:
    """A running total past 64 bits is kept exactly (as text), so a window whose sum is past
    them says SPENT_OVERFLOW, one whose sum fits says it, even when the totals on both
    sides of it are past 64 bits, and a total that wrapped around 2^64 is not mistaken for
    a small sum. Charging past 64 bits does not fail."""
    store = SqliteStore(tmp_path / "s.db")
    store.charge(["agent:a"], MAX, at_ms=1)
    store.charge(["agent:a"], MAX, at_ms=2)
    store.charge(["agent:a"], 2, at_ms=3)  # the total is now 2^64 exactly
    store.charge(["agent:a"], 5, at_ms=4)
    store.charge(["agent:a"], 9 * 10**18, at_ms=5)
    store.charge(["agent:a"], 3, at_ms=6)
    assert store.spent("agent:a", 0) == SPENT_OVERFLOW  # 2^64 + 9 * 10^18 + 8
    assert store.spent("agent:a", 2) == SPENT_OVERFLOW  # 2^63 + 9 * 10^18 + 9
    assert store.spent("agent:a", 3) == 9 * 10**18 + 10
    assert store.spent("agent:a", 4) == 9 * 10**18 + 8
    assert store.spent("agent:a", 6) == 3
    assert store.spent("agent:a", 7) == 0
    cums = [cum for (cum,) in store._db.execute("SELECT cum FROM ledger ORDER BY rowid")]
    assert cums[0] == MAX and cums[1] == str(2 * MAX) and cums[5] == str(2**64 + 9 * 10**18 + 8)
    store.close()


def test_a_batch_ledger_reads_again_a_window_a_later_recorded_charge_lands_in(
    tmp_path: Path,
) -> None:
    """The batch's Ledger keeps its sums up to date with its own charges: a charge dated
    before a window it has read, which the store records later (at the subject's last
    row's time) and so inside that window, is not left out of its sum."""
    store = SqliteStore(tmp_path / "s.db")
    store.charge(["agent:a"], 10, at_ms=1_000)
    with store.atomic():
        batch = Ledger(store)
        assert batch.spent("agent:a", 800) == 10
        assert batch.spent("agent:a", 0) == 10
        batch.charge(["agent:a"], 4, at_ms=500)
        assert batch.spent("agent:a", 800) == store.spent("agent:a", 800) == 14
        assert batch.spent("agent:a", 0) == 14
    store.close()


def _old_database(path: Path, rows: list[tuple[str, int, int]]) -> None:
    db = sqlite3.connect(path)
    db.executescript(OLD_LEDGER)
    db.executemany("INSERT INTO ledger (subject, at, micros) VALUES (?, ?, ?)", rows)
    db.commit()
    db.close()


# Out of time order (as processes with different clocks wrote them), times repeated, and
# one subject past 64 bits in all but its latest windows.
OLD_ROWS = [
    ("agent:a", 3_000, 5),
    ("agent:b", 1_000, 9 * 10**18),
    ("agent:a", 1_000, 7),
    ("agent:a", 3_000, 11),
    ("agent:b", 2_000, 9 * 10**18),
    ("agent:a", 2_000, 13),
    ("agent:b", 3_000, 17),
]


def test_a_ledger_of_the_old_layout_gets_running_totals(tmp_path: Path) -> None:
    """A database written before rows kept running totals: opening it adds them, and every
    window sums as it did; new charges go on from them, and opening it again changes
    nothing."""
    path = tmp_path / "old.db"
    _old_database(path, OLD_ROWS)
    store = SqliteStore(path)
    for subject in ("agent:a", "agent:b", "agent:c"):
        for since in (0, 999, 1_000, 1_001, 2_000, 2_500, 3_000, 3_001):
            assert store.spent(subject, since) == _summed(OLD_ROWS, subject, since)
    store.charge(["agent:a"], 100, at_ms=2_500)  # before agent:a's last row: at 3,000
    assert store.spent("agent:a", 3_000) == 116 and store.spent("agent:a", 2_001) == 116
    assert store.spent("agent:a", 0) == 136
    before = store._db.execute("SELECT rowid, subject, at, micros, cum FROM ledger").fetchall()
    store.close()
    again = SqliteStore(path)
    assert again._db.execute("SELECT rowid, subject, at, micros, cum FROM ledger").fetchall() == (
        before
    )
    assert again.spent("agent:a", 0) == 136 and again.spent("agent:b", 0) == SPENT_OVERFLOW
    assert again.spent("agent:b", 2_000) == 9 * 10**18 + 17
    again.close()


def test_adding_running_totals_is_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure part way through adding the totals leaves the old layout as it was (no
    column without its totals), and the next opening adds them."""
    path = tmp_path / "old.db"
    _old_database(path, OLD_ROWS)

    def failing(rows: object) -> object:
        yield 1, 1
        raise OSError("disk gone")

    with monkeypatch.context() as patch:
        patch.setattr(ledger, "_totals", failing)
        with pytest.raises(OSError, match="disk gone"):
            SqliteStore(path)
    db = sqlite3.connect(path)
    assert [c[1] for c in db.execute("PRAGMA table_info(ledger)")] == ["subject", "at", "micros"]
    db.close()
    store = SqliteStore(path)
    assert store.spent("agent:a", 0) == 36
    store.close()
