"""`charter db check`, and the look `charter serve` and `charter token` take at a database
before they open it: a damaged file, or one a newer charter wrote, is refused (exit 2),
never served (docs/operations.md).

The refusals, each with its code (docs/errors.md, "D00xx: the database"):

- D0001: the file's header or size says it is damaged (cut short, garbled at its start);
- D0002: SQLite's `quick_check` finds damaged pages (garbled in the middle);
- D0003: the file's schema version is past this charter's (a newer charter wrote it);
- D0004: a row read at start fails its checksum or does not decode.

`charter db check --db FILE` (a path or a `sqlite:///` URL; a PostgreSQL URL is refused,
exit 2: what it checks is SQLite's file) checks a stopped database through: SQLite's
`integrity_check`, every row's checksum and body, the decision log's chain and the
continuity of its seqs; it prints each damaged row on a line of its own and exits 0 when
nothing is damaged, 1 when something is, 2 when it cannot check the file.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from typing import Any

from api.cli_serve_checks import database_path, os_reason, refuse, store_refused
from api.service.logrows import decode_row
from policy.store import StoreDamaged, StoreTooNew, schema
from policy.store.filecheck import MOST_SHOWN, NOT_SQLITE, header_damage, quick_check, read_only
from policy.store.open import StoreUrlError, parse
from policy.store.verify import Finding, every_damage

RESTORE = "restore it from a backup; `charter db check --db {db}` lists what is damaged"


def wal_in_use(db: str) -> bool:
    """Whether `<db>-wal` holds frames: pages newer than the file's own, which SQLite
    reads first (and a checkpoint cut short by a crash left the file shorter than its
    header counts until they are copied back)."""
    try:
        return os.path.getsize(f"{db}-wal") > 0
    except OSError:
        return False


def _version(db: str) -> int:
    connection = read_only(db)
    try:
        return schema.version(connection)
    finally:
        connection.close()


def too_new(db: str, exc: StoreTooNew) -> tuple[str, str]:
    return (
        f"error[D0003]: `{db}` was written by a newer charter: its schema version is "
        f"{exc.found}, this charter knows up to {exc.known}",
        "serve it with the charter that wrote it (or a newer one); nothing was changed",
    )


def damaged_row(db: str, exc: StoreDamaged) -> tuple[str, str]:
    return f"error[D0004]: `{db}`: {exc}", RESTORE.format(db=db)


def start_refusal(db: str) -> tuple[str, str] | None:
    """Why the charter database at `db` must not be served (D0001-D0003), or None; for a
    file that is there and not empty (nothing to look at otherwise). Writes nothing."""
    if not os.path.isfile(db) or os.path.getsize(db) == 0:
        return None  # (none yet, empty, or not a file: `database_refusal` looks at it)
    try:
        damage = header_damage(db, sized=not wal_in_use(db))
    except OSError:
        return None  # (unreadable: `database_refusal` says why)
    if damage is not None and NOT_SQLITE in damage:
        return None  # (not an SQLite file at all: `database_refusal` says so)
    if damage is not None:
        return f"error[D0001]: `{db}` is damaged: {damage}", RESTORE.format(db=db)
    try:
        found = _version(db)
    except sqlite3.Error as exc:
        return f"error[D0002]: `{db}` is damaged: {str(exc).lower()}", RESTORE.format(db=db)
    if found > schema.VERSION:
        return too_new(db, StoreTooNew(found, schema.VERSION))
    problems = quick_check(db)
    if problems:
        shown = "; ".join(problems[:MOST_SHOWN]) + ("; ..." if len(problems) > MOST_SHOWN else "")
        return (
            f"error[D0002]: `{db}` is damaged: SQLite's check finds {shown}",
            RESTORE.format(db=db),
        )
    return None


# ---- charter db check ---------------------------------------------------------------------


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def _findings(db: str) -> tuple[list[Finding], list[str]] | int:
    """What is damaged, and notes; or the exit code of a refusal."""
    notes: list[str] = []
    found: list[Finding] = []
    damage = header_damage(db, sized=not wal_in_use(db))
    if damage is not None:
        found.append(Finding("file", "damaged-file", damage))
        if NOT_SQLITE in damage:
            return found, notes  # (nothing more SQLite can read)
    for message in quick_check(db, full=True):
        found.append(Finding("file", "integrity", message))
    try:
        connection = read_only(db)
    except sqlite3.Error as exc:
        found.append(Finding("file", "unreadable", str(exc).lower()))
        return found, notes
    try:
        version = schema.version(connection)
        if version > schema.VERSION:
            return refuse(*too_new(db, StoreTooNew(version, schema.VERSION)))
        if version < schema.CHECKSUMS:
            notes.append(
                f"its schema version is {version}: its rows carry no checksums until this "
                "charter next opens it (`charter serve` adds them)"
            )
            return found, notes
        found.extend(every_damage(connection, decode_row))
    except sqlite3.DatabaseError as exc:
        found.append(Finding("file", "unreadable", str(exc).lower()))
    finally:
        connection.close()
    return found, notes


def cmd_db_check(args: argparse.Namespace) -> int:
    try:
        target = parse(args.db)
    except StoreUrlError as exc:
        return store_refused(exc)
    if target.path is None:  # (a PostgreSQL server checks its own pages)
        return refuse(
            f"`charter db check` checks an SQLite database file; `{target.shown}` is a "
            "PostgreSQL database",
            "give a file path or a `sqlite:///` URL; check a PostgreSQL database with "
            "PostgreSQL's own tools (`pg_amcheck`)",
        )
    db = target.path
    if not os.path.isfile(db):
        return refuse(
            f"no database file at `{db}`", "`--db` is the file `charter serve --db` serves"
        )
    try:
        result = _findings(db)
    except OSError as exc:
        return refuse(f"cannot read database `{db}`: {os_reason(exc)}")
    if isinstance(result, int):
        return result
    found, notes = result
    for note in notes:
        _say(f"{db}: note: {note}")
    for finding in found:
        _say(f"{db}: {finding.where}: {finding.why}: {finding.detail}")
    if found:
        _say(f"{db}: {len(found)} damaged")
        return 1
    _say(f"{db}: no damage found")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("db", help="look after a database file")
    verbs = p.add_subparsers(dest="db_verb", required=True)
    check = verbs.add_parser(
        "check", help="check a stopped database: every page, every row's checksum, the log's chain"
    )
    check.add_argument("--db", type=database_path, default="charter.db",
                       help="an SQLite database: a path or `sqlite:///PATH`")  # fmt: skip
    check.set_defaults(func=cmd_db_check)
