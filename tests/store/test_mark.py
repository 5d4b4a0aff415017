"""The mark (policy/store/mark.py): a database that lost commits its mark records is
refused, one that lost none opens and numbers on after every seq given out, and a mark
that is not one is refused, never read as a number."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from policy.store.mark import SIZE, Marked, encode, mark_path, read_mark
from policy.store.refusal import LOST_COMMITS, MARK_DAMAGED, StoreRefused
from policy.store.sqlite import SqliteStore

# What a run does to the store: log `n` decisions, add a revision, or copy the WAL into
# the file (a checkpoint: what the file alone holds moves up to the last commit).
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("decide"), st.integers(1, 5)),
        st.tuples(st.just("revise"), st.just(0)),
        st.tuples(st.just("checkpoint"), st.just(0)),
    ),
    max_size=12,
)


def _ends(db: Path) -> tuple[int, int]:
    """The last seq and revision of the file, read without the store (nor its mark); a
    file whose tables were in the lost `-wal` too holds neither."""
    with sqlite3.connect(db) as raw:
        if raw.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            return 0, 0
        seq = raw.execute("SELECT coalesce(max(seq + count) - 1, 0) FROM decisions").fetchone()
        revision = raw.execute("SELECT coalesce(max(n), 0) FROM revisions").fetchone()
    return int(seq[0]), int(revision[0])


@given(steps=STEPS)
def test_a_lost_wal_is_refused_exactly_when_it_held_a_commit_given_out(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]
) -> None:
    """Steps on a store, then its file copied without its `-wal` (and with its mark), as a
    lost `-wal` leaves it: opening the copy is refused exactly when a seq or revision
    given out is not in it, and otherwise its next decision comes after every seq given
    out, never one of them again."""
    where = tmp_path_factory.mktemp("mark")
    db, copy = where / "x.db", where / "copy.db"
    store = SqliteStore(db)
    given_seq = given_revision = 0
    try:
        for step, n in steps:
            if step == "decide":
                given_seq = store.append_decisions([b"{}"] * n)[-1]
            elif step == "revise":
                given_revision = store.add_revision({"files": [["a", str(given_seq)]]})
            else:
                store.fold_wal()
        shutil.copyfile(db, copy)  # (the file alone: its -wal is lost)
        shutil.copyfile(mark_path(str(db)), mark_path(str(copy)))
    finally:
        store.close()
    kept_seq, kept_revision = _ends(copy)
    lost = kept_seq < given_seq or kept_revision < given_revision
    try:
        opened = SqliteStore(copy)
    except StoreRefused as refused:
        event("refused: commits lost")
        assert lost and refused.code == LOST_COMMITS
        assert f"its mark records seq {given_seq}" in refused.message or kept_seq == given_seq
        return
    event("opened: nothing lost")
    try:
        assert not lost
        assert opened.append_decisions([b"{}"]) == [given_seq + 1]
    finally:
        opened.close()


def test_a_database_opened_again_after_its_commits_opens(tmp_path: Path) -> None:
    """No false alarm: a store closed (or left: its `-wal` still there) opens again, its
    mark equal to its ends."""
    db = tmp_path / "x.db"
    store = SqliteStore(db)
    store.append_decisions([b"{}", b"{}"])
    store.add_revision({"files": []})
    assert read_mark(str(db)) == Marked(2, 1)
    again = SqliteStore(db)  # (the first is still open: its -wal is there)
    assert again.append_decisions([b"{}"]) == [3]
    again.close()
    store.close()
    assert read_mark(str(db)) == Marked(3, 1)
    SqliteStore(db).close()


def test_every_changed_byte_of_a_mark_is_refused(tmp_path: Path) -> None:
    """Any one byte of the mark changed (the magic, a value, its check), or the file cut
    or grown, is `D0103`: never a seq read off a garbled file."""
    db = tmp_path / "x.db"
    SqliteStore(db).close()
    mark = Path(mark_path(str(db)))
    whole = encode(Marked(300, 7))
    for at in range(SIZE):
        for flip in (0x01, 0x80, 0xFF):
            garbled = bytearray(whole)
            garbled[at] ^= flip
            mark.write_bytes(bytes(garbled))
            with pytest.raises(StoreRefused) as refused:
                SqliteStore(db)
            assert refused.value.code == MARK_DAMAGED
    for cut in (b"", whole[:47], whole + b"\0"):
        mark.write_bytes(cut)
        with pytest.raises(StoreRefused):
            SqliteStore(db)
    swapped = whole[:16] + whole[32:] + whole[16:32]  # (seq and revision fields swapped)
    mark.write_bytes(swapped)
    with pytest.raises(StoreRefused):
        SqliteStore(db)
    mark.write_bytes(encode(Marked(0, 0)))
    SqliteStore(db).close()


def test_processes_writing_at_once_leave_the_mark_at_the_last_seq(tmp_path: Path) -> None:
    """Two stores on one file (as `--workers 2` are), logging at once: each writes the
    mark after its COMMIT with the writer lock still held, so the mark never goes back
    and ends at the last seq given out."""
    db = tmp_path / "x.db"
    stores = [SqliteStore(db, shared=True) for _ in range(2)]
    given: list[int] = []

    def log(store: SqliteStore) -> None:
        for _ in range(200):
            given.extend(store.append_decisions([b"{}"] * 3))

    threads = [threading.Thread(target=log, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert sorted(given) == list(range(1, 1201))
    assert read_mark(str(db)) == Marked(1200, 0)
