"""`open_store`: which store a `--db` names, on real files (policy/store/open.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy.store import StoreUnavailable
from policy.store.open import (
    BAD_URL,
    POSTGRESQL,
    SQLITE,
    StoreUrlError,
    open_store,
    parse,
    redact,
)
from policy.store.postgres import PostgresStore
from policy.store.sqlite import SqliteStore
from tests.pgserver import PgServer


@pytest.mark.parametrize(
    ("given", "path"),
    [
        ("charter.db", "charter.db"),
        ("/var/lib/charter/charter.db", "/var/lib/charter/charter.db"),
        ("a:b.db", "a:b.db"),  # (no `://`: a path, whatever it holds)
        ("sqlite:///charter.db", "charter.db"),
        ("sqlite:///tmp/x.db", "tmp/x.db"),  # three slashes: relative
        ("sqlite:////tmp/x.db", "/tmp/x.db"),  # four: absolute
        ("SQLite:///x.db", "x.db"),
        (Path("d/x.db"), "d/x.db"),
    ],
)
def test_a_path_or_an_sqlite_url_names_an_sqlite_file(given: str | Path, path: str) -> None:
    target = parse(given)
    assert (target.backend, target.path, target.url) == (SQLITE, path, str(given))


@pytest.mark.parametrize(
    "given", ["postgresql://app@db.internal/charter", "postgres://app:pw@db:5432/charter"]
)
def test_a_postgresql_url_names_a_server(given: str) -> None:
    target = parse(given)
    assert (target.backend, target.path, target.url) == (POSTGRESQL, None, given)
    assert "pw" not in target.shown


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("mysql://app:secret@db/charter", "names a `mysql://` database"),
        ("file:///tmp/x.db", "names a `file://` database"),
        ("sqlite://host/x.db", "it names a host"),
        ("sqlite:///x.db?mode=ro", "it has a query or a fragment"),
        ("sqlite:///", "it names no file"),
    ],
)
def test_any_other_url_is_a_usage_error_with_its_code(given: str, why: str) -> None:
    with pytest.raises(StoreUrlError) as raised:
        parse(given)
    error = raised.value
    assert error.code == BAD_URL and why in error.message
    assert "secret" not in error.message  # (a password is never shown)
    for form in ("sqlite:///", "sqlite:////", "postgresql://"):
        assert form in error.help  # the forms it takes


def test_a_password_is_redacted() -> None:
    assert redact("postgresql://app:pw@db/c") == "postgresql://app:***@db/c"
    assert redact("postgresql://db/c") == "postgresql://db/c"


def test_sqlite_urls_open_the_file_they_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absolute = open_store(f"sqlite:///{tmp_path}/abs.db")  # (`sqlite:///` + `/tmp/...`)
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///rel.db", shared=True)
    try:
        assert isinstance(absolute, SqliteStore) and isinstance(relative, SqliteStore)
        absolute.set_meta("k", 1)
        relative.set_meta("k", 2)
        relative.serving()  # (a serving process: the checkpointer starts; twice is once)
        relative.serving()
        assert relative.moved() is None
    finally:
        absolute.close()
        relative.close()
    assert (tmp_path / "abs.db").is_file() and (tmp_path / "rel.db").is_file()
    reopened = open_store(tmp_path / "rel.db")
    try:
        assert reopened.get_meta("k") == 2
    finally:
        reopened.close()


def test_a_postgresql_url_opens_the_server_store(pg_server: PgServer) -> None:
    store = open_store(pg_server.database())
    try:
        assert isinstance(store, PostgresStore)
        with store.atomic():
            store.set_meta("k", 1)
        assert store.get_meta("k") == 1
    finally:
        store.close()


def test_a_server_that_does_not_answer_is_unavailable_and_its_password_never_said() -> None:
    with pytest.raises(StoreUnavailable) as raised:
        open_store("postgresql://app:s3cretpw@127.0.0.1:1/charter")
    assert "s3cret" not in str(raised.value) and "s3cret" not in repr(raised.value.args)
