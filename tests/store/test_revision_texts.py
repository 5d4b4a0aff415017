"""A revision's file texts are stored by content, once each (policy/store/texts.py): a
chain of changes that each add a file grows the store by that file, not by the policy."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import cbor2
import pytest

from policy.store.sqlite import SCHEMA, SqliteStore
from tests.store.tables import table_size


def _role(i: int, size: int) -> str:
    """A role's file of about `size` bytes (a comment pads it), its text its own."""
    return f"role r{i} {{\n}}\n" + f"# {i:06d} " + "x" * size + "\n"


def test_a_chain_of_added_files_stores_each_text_once(tmp_path: Path) -> None:
    """Revision k holds the first k files (as a chain of `roles.create`s makes them): the
    old store kept k texts in revision k, N(N+1)/2 in all; this one keeps N, and a
    revision's own row holds paths and digests. Each revision reads back as it was."""
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    n, size = 40, 4000
    files: list[list[Any]] = []
    for i in range(n):
        files.append([f"api/roles/r{i}.charter", _role(i, size)])
        assert store.add_revision({"files": files, "note": f"create role r{i}"}) == i + 1
    for k in (1, n // 2, n):
        assert store.get_revision(k) == {"files": files[:k], "note": f"create role r{k - 1}"}
    store.close()
    texts, text_bytes = table_size(db, "texts")
    assert texts == n and text_bytes == sum(len(text) for _, text in files)
    revisions, revision_bytes = table_size(db, "revisions")
    assert revisions == n
    # (paths and 32-byte digests: about 60 bytes a file; the texts were 4 KB each)
    assert revision_bytes < 70 * n * (n + 1) // 2
    assert db.stat().st_size < 2 * text_bytes  # (the old store: over 80 MB)


def test_the_same_text_twice_is_one_text(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    same = [["a.charter", "role a {\n}\n"], ["b/a.charter", "role a {\n}\n"]]
    store.add_revision({"files": same})
    store.add_revision({"files": [*same, ["c.charter", "é"]]})
    assert store.get_revision(2) == {"files": [*same, ["c.charter", "é"]]}
    store.close()
    assert table_size(db, "texts") == (2, len("role a {\n}\n") + len("é".encode()))


def test_a_revision_and_its_texts_are_one_transaction(tmp_path: Path) -> None:
    """A revision that is not written leaves none of its texts behind: not when the
    caller's transaction rolls back, nor when its own row fails after its texts went in."""
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    with pytest.raises(RuntimeError), store.atomic():
        store.add_revision({"files": [["a.charter", "role a {\n}\n"]]})
        raise RuntimeError("rolled back")
    with pytest.raises(cbor2.CBOREncodeError):  # (the row is encoded after the texts' INSERT)
        store.add_revision({"files": [["b.charter", "role b {\n}\n"]], "bad": object()})
    assert store.latest_revision() == 0
    store.close()
    assert table_size(db, "texts") == (0, 0)


def _old_database(db: Path, bodies: list[dict[str, Any]]) -> None:
    """A database as an older charter wrote it: SCHEMA's tables (no `texts`), and each
    revision's row its body with every `[path, text]` in it."""
    with sqlite3.connect(db) as made:
        made.executescript(SCHEMA)
        made.executemany(
            "INSERT INTO revisions (n, body) VALUES (?, ?)",
            [(n, cbor2.dumps(body)) for n, body in enumerate(bodies, 1)],
        )
    made.close()


OLD_FILES = [["policy.charter", "role a {\n}\n"], ["api/roles/b.charter", "role b {\n}\n"]]
OLD: dict[str, Any] = {
    "files": OLD_FILES,
    "author": "token:x",
    "note": "",
    "created_at": 1,
    "summary": {"roles": ["a", "b"]},
}


def test_a_revision_stored_in_the_old_form_reads_as_it_was(tmp_path: Path) -> None:
    """Old rows are read as they are (their texts in them), beside new ones; the history
    lists either's paths alone."""
    db = tmp_path / "s.db"
    _old_database(db, [OLD])
    store = SqliteStore(db)
    assert store.get_revision(1) == OLD
    changed = {**OLD, "files": [*OLD_FILES, ["c.charter", "role c {\n}\n"]], "created_at": 2}
    assert store.add_revision(changed) == 2
    assert store.get_revision(1) == OLD and store.get_revision(2) == changed
    listed = store.list_revisions(0, 10)
    paths = ["policy.charter", "api/roles/b.charter"]
    assert listed == [
        (1, {**OLD, "files": paths}),
        (2, {**changed, "files": [*paths, "c.charter"]}),
    ]
    store.close()
    assert table_size(db, "texts")[0] == 3  # (the new revision's: an old row is not rewritten)


def test_the_history_reads_no_text(tmp_path: Path) -> None:
    """`list_revisions` gives paths without reading a text: it answers the same with
    the texts gone."""
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    store.add_revision({"files": [["a.charter", "role a {\n}\n" + "#" * 10_000]], "note": "1"})
    store.add_revision({"files": [["a.charter", "role a {\n}\n"], ["b.charter", "x"]]})
    before = store.list_revisions(0, 10)
    assert before == [(1, {"files": ["a.charter"], "note": "1"}),
                      (2, {"files": ["a.charter", "b.charter"]})]  # fmt: skip
    with sqlite3.connect(db) as other:
        other.execute("DELETE FROM texts")
    other.close()
    assert store.list_revisions(0, 10) == before
    store.close()
