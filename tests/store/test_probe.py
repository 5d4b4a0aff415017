"""Looking at a database path (policy/store/probe.py) tells a charter database from
anything else and creates or changes nothing, even beside a server that has it open."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from policy.store.probe import SQLITE_NOTADB, TABLES, Found, probe
from policy.store.sqlite import SCHEMA, SqliteStore


def files(directory: Path) -> dict[str, bytes | None]:
    """The files and their bytes (a WAL index, `-shm`, by name only: it is shared memory,
    where a reader marks what it reads)."""
    return {
        p.name: None if p.name.endswith("-shm") else p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


def test_missing_empty_and_charter(tmp_path: Path) -> None:
    db = tmp_path / "charter.db"
    assert probe(db) == Found("missing") and probe(tmp_path / "no" / "a.db").kind == "missing"
    db.touch()
    assert probe(db) == Found("empty")
    store = SqliteStore(db)  # in WAL mode, open: its -wal and -shm beside it
    try:
        store.set_meta("x", 1)
        before = files(tmp_path)
        assert probe(db) == Found("charter", tuple(sorted({*TABLES, "texts", "changes"})))
        assert files(tmp_path) == before
    finally:
        store.close()
    assert {"meta", "revisions", "documents", "decisions", "ledger"} == TABLES


def test_a_database_of_an_older_charter_is_charters(tmp_path: Path) -> None:
    """One written before the store kept texts apart has no `texts` table (the store
    makes it when it opens the file): `charter token` and `serve` still take it."""
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as made:
        made.executescript(SCHEMA)
    made.close()
    assert probe(db) == Found("charter", tuple(sorted(TABLES)))
    SqliteStore(db).close()
    assert probe(db) == Found("charter", tuple(sorted({*TABLES, "texts", "changes"})))


def test_another_programs_database_and_no_database(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as made:
        made.execute("CREATE TABLE meta (k)")  # one table of the same name is not enough
        made.execute("CREATE TABLE songs (title)")
        made.execute("CREATE TABLE gone (x)")
        made.execute("DROP TABLE gone")
    made.close()
    before = files(tmp_path)
    assert probe(other) == Found("other", ("meta", "songs"))
    text = tmp_path / "notes.txt"
    text.write_text("hello\n" * 100)
    with pytest.raises(sqlite3.DatabaseError) as info:
        probe(text)
    assert info.value.sqlite_errorcode == SQLITE_NOTADB
    assert files(tmp_path) == {**before, "notes.txt": b"hello\n" * 100}


def test_what_is_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        probe(tmp_path)
    with pytest.raises(OSError, match="not a regular file"):
        probe("/dev/null")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):  # (SQLite would wait on it)
        probe(fifo)
    (tmp_path / "file").touch()
    with pytest.raises(NotADirectoryError):
        probe(tmp_path / "file" / "a.db")
