"""Every stored row carries a checksum, checked on every read; the decision log is a hash
chain. A changed byte, a removed or moved log row, a row that does not decode: reported
by row (StoreDamaged, or a `Damaged` in the log's place), never served as data, and the
rows around it read on. Schema versions: migrations at open, a newer file refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.service.logrows import decode_row
from policy.store import Damaged, StoreDamaged, StoreTooNew, schema
from policy.store.rowsum import GENESIS, log_digest, row_digest
from policy.store.sqlite import SqliteStore
from policy.store.verify import every_damage


def _row(i: int, effect: str = "allow") -> bytes:
    return json.dumps({"id": f"d{i}", "effect": effect, "args": {"n": i}}).encode()


def _filled(store: SqliteStore, runs: list[int]) -> dict[int, bytes]:
    """Documents, two revisions, a meta value, ledger charges, and log runs of the given
    sizes; the log's rows by seq."""
    store.insert("agents", "a1", {"name": "one", "profile": "p"}, tag="root")
    store.insert("agents", "a2", {"name": "two", "profile": "p"})
    store.add_revision({"files": [["a.charter", "role a {\n}\n"]], "note": "1"})
    store.add_revision({"files": [["a.charter", "role a {\n}\n"], ["b.charter", "x"]]})
    store.set_meta("admin_token_issued", True)
    store.charge(["agent:a1", "agent:a2"], 1500, 10)
    store.charge(["agent:a1"], 7, 20)
    rows: dict[int, bytes] = {}
    for size in runs:
        made = [_row(len(rows) + 1 + i) for i in range(size)]
        rows.update(zip(store.append_decisions(made), made, strict=True))
    return rows


def _log(store: SqliteStore) -> list[tuple[int, bytes | Damaged]]:
    return store.read_decisions(0, 10_000)


def _damage(store: SqliteStore) -> list[tuple[str, str]]:
    return [(f.where, f.why) for f in every_damage(store._db, decode_row)]


def test_a_sound_store_reads_whole_and_checks_clean(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    rows = _filled(store, [1, 3, 1, 2])
    assert _log(store) == sorted(rows.items())
    assert _damage(store) == []
    # Every row has its sum; the log's head is the last run's, chained from GENESIS.
    for table in (*schema.KEYS, "decisions"):
        (unsummed,) = store._db.execute(
            f"SELECT count(*) FROM {table} WHERE sum IS NULL"
        ).fetchone()
        assert unsummed == 0, table
    chained_to = GENESIS
    for seq, count, body in store._db.execute(
        "SELECT seq, count, body FROM decisions ORDER BY seq"
    ):
        chained_to = log_digest(chained_to, seq, count, body)
    assert store.log_head() == (7, chained_to)
    store.close()


# ---- any single byte changed in a stored row's body is found, never served ---------------

TABLES = ["documents", "revisions", "meta", "texts", "decisions"]


@given(
    table=st.sampled_from(TABLES),
    which=st.integers(0, 10_000),
    at=st.integers(0, 1 << 20),
    flip=st.integers(1, 255),
    runs=st.lists(st.integers(1, 4), min_size=1, max_size=5),
)
def test_any_single_byte_changed_in_a_body_is_found_never_served(
    table: str, which: int, at: int, flip: int, runs: list[int]
) -> None:
    """One byte of one row's body XORed with a non-zero value (so the body differs and
    keeps its length; a change that still decodes among them): the read that reaches
    that row refuses it by name or puts a `Damaged` over its seqs, every other row reads
    as written, and `every_damage` names that row alone."""
    store = SqliteStore(":memory:")
    rows = _filled(store, runs)
    key = {"documents": "pos", "revisions": "n", "meta": "key", "texts": "digest",
           "decisions": "seq"}[table]  # fmt: skip
    keys = [k for (k,) in store._db.execute(f"SELECT {key} FROM {table} ORDER BY {key}")]
    chosen = keys[which % len(keys)]
    (body,) = store._db.execute(f"SELECT body FROM {table} WHERE {key} = ?", (chosen,)).fetchone()
    changed = bytearray(body)
    changed[at % len(changed)] ^= flip
    store._db.execute(f"UPDATE {table} SET body = ? WHERE {key} = ?", (bytes(changed), chosen))

    found = _damage(store)
    assert len(found) == 1, found
    if table == "decisions":
        (count,) = store._db.execute(
            "SELECT count FROM decisions WHERE seq = ?", (chosen,)
        ).fetchone()
        log = _log(store)
        damaged = [row for _, row in log if isinstance(row, Damaged)]
        assert damaged == [Damaged(chosen, chosen + count - 1, "checksum-mismatch",
                                   "it does not match its checksum")]  # fmt: skip
        served = {seq: row for seq, row in log if isinstance(row, bytes)}
        assert served == {s: r for s, r in rows.items() if not chosen <= s < chosen + count}
        # A page that starts inside the run is refused the same way, from where it starts.
        inside = store.read_decisions(chosen + count - 2, 1) if count > 1 else []
        assert all(isinstance(row, Damaged) for _, row in inside)
        return
    with pytest.raises(StoreDamaged):
        if table == "documents":
            kind, id = store._db.execute(
                "SELECT kind, id FROM documents WHERE pos = ?", (chosen,)
            ).fetchone()
            store.get(kind, id)
        elif table == "revisions":
            store.get_revision(2)  # (revision 2 reads from revision 1 when it is a delta)
            store.get_revision(chosen)
        elif table == "meta":
            store.get_meta(chosen)
        else:
            store.get_revision(2)
    assert _log(store) == sorted(rows.items())  # (the log is untouched)


def test_a_changed_log_row_that_still_decodes_is_not_served(tmp_path: Path) -> None:
    """`allow` made `pause` (as long, still JSON): the row reads as another decision to
    anyone who does not check its checksum."""
    store = SqliteStore(tmp_path / "s.db")
    rows = _filled(store, [1, 1, 1])
    forged = rows[2].replace(b"allow", b"pause")
    assert decode_row(forged)["effect"] == "pause"
    store._db.execute("UPDATE decisions SET body = ? WHERE seq = 2", (forged,))
    log = _log(store)
    assert [(seq, row) for seq, row in log if isinstance(row, bytes)] == [
        (1, rows[1]),
        (3, rows[3]),
    ]
    assert log[1] == (2, Damaged(2, 2, "checksum-mismatch", "it does not match its checksum"))
    assert _damage(store) == [("decisions 2", "checksum-mismatch")]
    store.close()


def test_a_removed_log_run_is_missing_and_breaks_the_chain(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    rows = _filled(store, [1, 2, 1, 1])  # runs at 1, 2-3, 4, 5
    store._db.execute("DELETE FROM decisions WHERE seq = 2")
    log = _log(store)
    assert log == [
        (1, rows[1]),
        (2, Damaged(2, 3, "missing", "decisions 2 to 3 are not in the log (removed)")),
        (
            4,
            Damaged(
                4,
                4,
                "chain-broken",
                "rows before it are missing or do not read, so its link cannot be checked",
            ),
        ),
        (5, rows[5]),
    ]
    # Paged one at a time, the pages meet the same stretches, and `after_seq` inside one.
    assert store.read_decisions(1, 1) == log[1:2]
    assert store.read_decisions(2, 1) == [(3, Damaged(3, 3, "missing", log[1][1].detail))]  # type: ignore[union-attr]
    assert store.read_decisions(4, 5) == [(5, rows[5])]
    assert _damage(store) == [("decisions 2 to 3", "missing"), ("decisions 4", "chain-broken")]
    store.close()


def test_log_rows_moved_to_other_places_are_found(tmp_path: Path) -> None:
    """Two runs' bodies and sums swapped (every column but `seq`): each is checked against
    its place in the chain, and neither is served; nor is the run after them, which chains
    to a sum that is no longer the one it was written after (an edited row whose sum was
    made again is found so too)."""
    store = SqliteStore(tmp_path / "s.db")
    rows = _filled(store, [1, 1, 1])
    one, two = store._db.execute("SELECT body, sum FROM decisions WHERE seq IN (1, 2) ORDER BY seq")
    store._db.execute("UPDATE decisions SET body = ?, sum = ? WHERE seq = 1", two)
    store._db.execute("UPDATE decisions SET body = ?, sum = ? WHERE seq = 2", one)
    log = _log(store)
    assert [seq for seq, row in log if isinstance(row, Damaged)] == [1, 2, 3]
    store.append_decisions([_row(4)])
    assert _log(store)[3] == (4, _row(4))
    _ = rows
    store.close()


def test_a_damaged_document_is_refused_by_name_and_the_others_read(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    _filled(store, [1])
    store._db.execute("UPDATE documents SET tag = 'other' WHERE id = 'a1'")  # (the key too)
    with pytest.raises(StoreDamaged) as info:
        store.get("agents", "a1")
    assert info.value.what == "document agents/a1"
    assert str(info.value) == "document agents/a1 is damaged: it does not match its checksum"
    assert store.get("agents", "a2") == {"name": "two", "profile": "p"}
    with pytest.raises(StoreDamaged):  # (a page that holds it)
        store.page("agents", 0, 10)
    store.close()


def test_a_damaged_ledger_row_fails_the_budget_closed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    _filled(store, [1])
    assert store.spent("agent:a1", 0) == 1507
    store._db.execute("UPDATE ledger SET cum = 0 WHERE subject = 'agent:a1' AND at = 20")
    with pytest.raises(StoreDamaged):
        store.spent("agent:a1", 0)
    with pytest.raises(StoreDamaged):  # (a charge adds to the last total: read, so checked)
        store.charge(["agent:a1"], 1, 30)
    assert store.spent("agent:a2", 0) == 1500
    store.close()


def test_a_row_without_its_checksum_is_damaged(tmp_path: Path) -> None:
    """A NULL sum is no way around the check."""
    store = SqliteStore(tmp_path / "s.db")
    rows = _filled(store, [1, 1])
    store._db.execute("UPDATE meta SET sum = NULL")
    store._db.execute("UPDATE decisions SET sum = NULL WHERE seq = 2")
    with pytest.raises(StoreDamaged):
        store.get_meta("admin_token_issued")
    assert _log(store)[0] == (1, rows[1]) and isinstance(_log(store)[1][1], Damaged)
    store.close()
    # A page that starts in a gap after a run without its sum: the gap, then on.
    other = SqliteStore(tmp_path / "t.db")
    _filled(other, [1, 1, 1, 1])
    other._db.execute("UPDATE decisions SET sum = NULL WHERE seq = 1")
    other._db.execute("DELETE FROM decisions WHERE seq = 2")
    assert [(seq, getattr(row, "why", None)) for seq, row in other.read_decisions(1, 10)] == [
        (2, "missing"), (3, "chain-broken"), (4, None)
    ]  # fmt: skip
    other.close()


# ---- schema versions ------------------------------------------------------------------------


def _version_1(path: Path, runs: list[list[bytes]]) -> None:
    """A file as the charter before checksums left it: its tables, no `sum`, version 0."""
    made = sqlite3.connect(path)
    made.executescript(schema.SCHEMA + schema.TEXTS)
    made.execute("INSERT INTO documents (kind, id, tag, body) VALUES ('agents', 'a1', NULL, ?)",
                 (cbor2.dumps({"name": "one"}),))  # fmt: skip
    made.execute("INSERT INTO meta (key, body) VALUES ('k', ?)", (cbor2.dumps(5),))
    made.execute("INSERT INTO ledger (subject, at, micros, cum) VALUES ('s', 1, 2, 2)")
    seq = 1
    for run in runs:
        body = run[0] if len(run) == 1 else b"".join(
            [len(r).to_bytes(4, "little") for r in run] + run
        )  # fmt: skip
        made.execute("INSERT INTO decisions (seq, count, body) VALUES (?, ?, ?)",
                     (seq, len(run), body))  # fmt: skip
        seq += len(run)
    made.commit()
    made.close()


def test_opening_an_older_file_adds_every_checksum(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    runs = [[_row(1)], [_row(2), _row(3)], [_row(4)]]
    _version_1(path, runs)
    store = SqliteStore(path)
    assert schema.version(store._db) == schema.VERSION
    assert store.get("agents", "a1") == {"name": "one"} and store.get_meta("k") == 5
    assert store.spent("s", 0) == 2
    assert _log(store) == [(i, _row(i)) for i in range(1, 5)]
    assert store.append_decisions([_row(5)]) == [5]
    assert _damage(store) == []
    store.close()
    again = SqliteStore(path)  # (at its version: nothing to do)
    assert _log(again)[-1] == (5, _row(5))
    again.close()


def test_a_file_from_a_newer_charter_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as newer:
        newer.execute(f"PRAGMA user_version = {schema.VERSION + 1}")
    newer.close()
    before = path.read_bytes()
    with pytest.raises(StoreTooNew) as info:
        SqliteStore(path)
    assert (info.value.found, info.value.known) == (schema.VERSION + 1, schema.VERSION)
    assert path.read_bytes() == before


def test_the_migrations_are_listed_in_order_and_the_version_is_their_number() -> None:
    assert schema.VERSION == len(schema.MIGRATIONS) >= 2
    assert row_digest("t", (1, "1")) != row_digest("t", ("1", 1))  # (types are encoded)
    assert row_digest("t", (b"ab", b"c")) != row_digest("t", (b"a", b"bc"))  # (and lengths)


def test_every_damage_names_a_row_that_does_not_decode(tmp_path: Path) -> None:
    """A log row the store was given as is, that matches its checksum and is not a
    decision: the store serves its bytes (it does not read them); the check names it."""
    store = SqliteStore(tmp_path / "s.db")
    store.append_decisions([_row(1), b"\xff not a row", _row(3)])
    found: list[Any] = list(every_damage(store._db, decode_row))
    assert [(f.where, f.why) for f in found] == [("decisions 2", "undecodable")]
    store.close()


def test_log_pages_that_do_not_read_are_store_damaged(tmp_path: Path) -> None:
    """A page of the log's table zeroed in the file (SQLite: "malformed"): the read that
    reaches it is StoreDamaged naming where, never SQLite's own error."""
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    for i in range(1, 3001):
        store.append_decisions([_row(i) + b" " * 150])
    store.close()
    data = bytearray(path.read_bytes())
    middle = (len(data) // 2) // 4096 * 4096
    data[middle : middle + 4096] = bytes(4096)
    path.write_bytes(bytes(data))
    store = SqliteStore(path)
    with pytest.raises(StoreDamaged) as info:
        store.read_decisions(0, 10_000)
    assert info.value.what.startswith("the decision log after seq ")
    assert info.value.why.startswith("its pages do not read (")
    store.close()


def test_every_damage_reads_past_log_pages_that_do_not_read(tmp_path: Path) -> None:
    """A page of the log's table zeroed in the file, and a row changed after it: the check
    names the stretch that does not read, the run after it (its link cannot be checked),
    and goes on to find the changed row."""
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    for i in range(1, 3001):
        store.append_decisions([_row(i) + b" " * 150])
    store._db.execute("UPDATE decisions SET body = ? WHERE seq = 2900", (_row(2900, "pause"),))
    store.close()
    data = bytearray(path.read_bytes())
    middle = (len(data) // 2) // 4096 * 4096
    data[middle : middle + 4096] = bytes(4096)
    path.write_bytes(bytes(data))
    db = sqlite3.connect(path)
    found = [(f.where, f.why) for f in every_damage(db, decode_row)]
    db.close()
    assert len(found) == 3, found
    (unreadable, why), (after, broken), changed = found
    first, last = map(int, unreadable.removeprefix("decisions ").split(" to "))
    assert why == "unreadable" and 1 < first < last < 2900
    assert (after, broken) == (f"decisions {last + 1}", "chain-broken")
    assert changed == ("decisions 2900", "checksum-mismatch")
