"""The rule that tells a new database path from a lost database (policy/store/evidence.py),
on real files: each piece of evidence alone refuses, a key file alone does not."""

from __future__ import annotations

from pathlib import Path

from policy.store.evidence import lost_database
from policy.store.refusal import LOST_DATABASE
from policy.store.sqlite import SqliteStore


def _why(db: Path, *more: Path) -> str | None:
    refused = lost_database(str(db), more)
    if refused is None:
        return None
    assert refused.code == LOST_DATABASE
    return refused.message.replace(str(db.parent) + "/", "")


def test_each_file_a_database_leaves_says_one_was_there(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    assert _why(db) is None  # nothing anywhere: new
    (tmp_path / "x.db.key").write_text("42" * 32)
    assert _why(db) is None  # a key made by hand: new
    (tmp_path / "x.db-wal").write_bytes(b"")
    db.write_bytes(b"")
    assert _why(db) is None  # an empty -wal beside an empty file: nothing committed
    (tmp_path / "x.db-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(28))
    assert _why(db) == (
        "`x.db` is an empty database, but a database was there and is lost (beside it: `x.db-wal`)"
    )
    (tmp_path / "x.db-wal").unlink()
    token = tmp_path / "x.db.admin-token"
    token.write_text("chr_x\n")
    assert _why(db, token) is not None
    db.unlink()
    (tmp_path / "x.db.mark").write_bytes(b"")
    assert _why(db) == (
        "`x.db` is no database, but a database was there and is lost (beside it: `x.db.mark`)"
    )


def test_a_database_that_is_there_is_not_lost(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    store = SqliteStore(db)
    store.append_decisions([b"{}"])  # (its -wal not empty, its mark there)
    try:
        assert _why(db) is None
    finally:
        store.close()


def test_through_a_symlink_the_wal_of_the_file_it_leads_to_counts(tmp_path: Path) -> None:
    """SQLite names the `-wal` after the file a symlink leads to: `data/x.db-wal` beside an
    emptied `data/x.db` says a database was there, whatever the link is called."""
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "x.db"
    target.write_bytes(b"")
    (tmp_path / "data" / "x.db-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(28))
    link = tmp_path / "link.db"
    link.symlink_to(target)
    refused = lost_database(str(link))
    assert refused is not None and f"`{target}-wal`" in refused.message


def test_every_start_refusal_code_is_in_errors_md() -> None:
    """Each code a store refusal carries has its section in docs/errors.md, and each
    D01xx section there is a code the store raises."""
    import re

    from policy.store import refusal

    codes = {v for k, v in vars(refusal).items() if k.isupper() and isinstance(v, str)}
    text = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text("utf-8")
    assert set(re.findall(r"^### (D01\d\d):", text, re.M)) == codes
