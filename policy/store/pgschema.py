"""The PostgreSQL store's schema version and its migrations, applied in order at open.

The version is the one row of `schema_version` (none: a database no charter has opened).
Opening a database takes the store's writer lock (the transaction-scoped advisory lock
every write transaction takes, policy/store/postgres.py), reads the version, applies
every migration past it and stores the version, in one transaction: two processes
opening a fresh database at once take turns, and the second finds the version moved and
applies nothing. A database whose version is past `VERSION` was written by a newer
charter, whose rows this one could misread: it is refused (`StoreTooNew`), never opened.

1. the tables: the same as the SQLite store's (policy/store/__init__.py), each row with
   its checksum (`sum`, policy/store/rowsum.py), and `feed`, the one row whose version
   every write transaction moves (the change feed, policy/store/pgfeed.py);
2. the change feed's `changes` table (policy/store/changes.py), and the `cache_epoch`
   named value it replaces removed;
3. the decision log's runs compressed with lz4 where the server has it (`LZ4`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import psycopg

from policy.store import StoreTooNew

# The key of the advisory lock every write transaction (and a migration) takes first.
WRITER_LOCK = 0x63686172746572  # "charter"
# The first key of the two-key advisory locks that hold a ledger subject to a transaction
# (the second: the subject's hashtext). Two-key locks are apart from WRITER_LOCK's.
LEDGER_LOCKS = 0x6C656467  # "ledg"

TABLES = """
CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, body bytea NOT NULL, sum bytea);
CREATE TABLE IF NOT EXISTS revisions (n bigint PRIMARY KEY, body bytea NOT NULL, sum bytea);
CREATE TABLE IF NOT EXISTS texts (digest bytea PRIMARY KEY, body bytea NOT NULL, sum bytea);
CREATE TABLE IF NOT EXISTS documents (
  pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL, id text NOT NULL, tag text, body bytea NOT NULL, sum bytea,
  UNIQUE (kind, id)
);
CREATE INDEX IF NOT EXISTS documents_tag ON documents (kind, tag, pos);
CREATE INDEX IF NOT EXISTS documents_list ON documents (kind, pos);
CREATE TABLE IF NOT EXISTS decisions (
  seq bigint PRIMARY KEY, count integer NOT NULL, body bytea NOT NULL, sum bytea
);
CREATE TABLE IF NOT EXISTS ledger (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  subject text NOT NULL, at bigint NOT NULL, micros bigint NOT NULL, cum numeric NOT NULL,
  sum bytea
);
CREATE INDEX IF NOT EXISTS ledger_subject ON ledger (subject, at, id);
CREATE TABLE IF NOT EXISTS feed (
  one boolean PRIMARY KEY DEFAULT true CHECK (one), version bigint NOT NULL
);
INSERT INTO feed (one, version) VALUES (true, 1) ON CONFLICT DO NOTHING;
"""


def _tables(db: psycopg.Connection[tuple[object, ...]]) -> None:
    db.execute(TABLES)


CHANGES = (
    "CREATE TABLE IF NOT EXISTS changes (seq bigint PRIMARY KEY, kind text NOT NULL, "
    "key text NOT NULL, sum bytea)"
)


def _changes(db: psycopg.Connection[tuple[object, ...]]) -> None:
    db.execute(CHANGES)
    db.execute("DELETE FROM meta WHERE key = 'cache_epoch'")


# A run of the log is one value of tens to hundreds of kilobytes, which the server
# compresses as it stores it (TOAST). Its default, pglz, took two thirds of the server's
# CPU per decision in batches (1.5 µs; 0.5 µs with lz4, and 0.9 µs stored uncompressed,
# where the larger WAL costs more than lz4 does). A server built without lz4 keeps pglz.
LZ4 = "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"


def _lz4_runs(db: psycopg.Connection[tuple[object, ...]]) -> None:
    if db.execute(LZ4).fetchone() is not None:
        db.execute("ALTER TABLE decisions ALTER COLUMN body SET COMPRESSION lz4")


MIGRATIONS: tuple[Callable[[psycopg.Connection[tuple[object, ...]]], None], ...] = (
    _tables,
    _changes,
    _lz4_runs,
)
VERSION = len(MIGRATIONS)

VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)"
READ_VERSION = "SELECT coalesce(max(version), 0) FROM schema_version"


def refusal(found: int) -> StoreTooNew | None:
    """A database written by a newer charter, or None."""
    return StoreTooNew(found, VERSION) if found > VERSION else None


def migrate(db: psycopg.Connection[tuple[object, ...]]) -> None:
    """Bring the database up to `VERSION` (StoreTooNew past it), in one transaction under
    the writer lock. `db` is in autocommit mode and outside a transaction."""
    db.execute("BEGIN")
    try:
        db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
        db.execute(VERSION_TABLE)
        row = db.execute(READ_VERSION).fetchone()
        found = 0 if row is None else int(str(row[0]))
        too_new = refusal(found)
        if too_new is not None:
            raise too_new
        for number, step in enumerate(MIGRATIONS, 1):
            if number > found:
                step(db)
        if found < VERSION:
            db.execute("DELETE FROM schema_version")
            db.execute("INSERT INTO schema_version (version) VALUES (%s)", (VERSION,))
        db.execute("COMMIT")
    except BaseException:
        if not db.closed:
            with contextlib.suppress(psycopg.Error):
                db.execute("ROLLBACK")
        raise
