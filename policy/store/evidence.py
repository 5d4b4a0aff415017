"""Whether a database path with no database at it is new, or lost.

A first start makes a database where there is none, or in an empty file. A database
truncated to 0 bytes (or removed) beside its `-wal` and key is not such a place: made
anew, its `-wal` would be overwritten, a new admin token issued, and an empty log served
as if nothing had been there.

The rule: a database was here, and one missing, empty or without tables at `<db>` is
lost (`D0102`), when any of these is beside it:

- `<db>.mark`, which every database a charter with the mark opens has (policy/store/
  mark.py), from its first start on;
- a `<db>-wal` that is not empty: commits that a checkpoint has not copied into `<db>`
  yet (SQLite writes a new database's header into `<db>` itself, so a database is never
  empty beside its own `-wal`);
- `<db>.admin-token` holding a token, which a first start writes once the database is
  in place (an empty file or a directory there says nothing of a database).

A key file alone is not: a key made by hand for a new database (`openssl rand -hex 32 >
charter.db.key`) is how a first start is given its key, and a first start that failed
removes the key it made (a killed one may leave it, to be taken by the next).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from policy.store.mark import mark_path
from policy.store.probe import probe
from policy.store.refusal import LOST_DATABASE, StoreRefused


def evidence(db: str, more: Sequence[Path] = ()) -> list[str]:
    """The files beside `db` that say a database was there (`more`: others the caller
    writes only once a database is in place, such as the admin token's)."""
    found = []
    with contextlib.suppress(OSError):
        os.stat(mark_path(db))
        found.append(mark_path(db))
    # (SQLite names the -wal after the file a symlink at `db` leads to)
    for wal in dict.fromkeys((f"{db}-wal", f"{os.path.realpath(db)}-wal")):
        with contextlib.suppress(OSError):
            if os.stat(wal).st_size > 0:
                found.append(wal)
                break
    found += [str(path) for path in more if os.path.lexists(path)]
    return found


def is_new(db: str) -> bool:
    """Nothing at `db`, or an empty file or database (what a first start makes anew)."""
    try:
        return probe(db).kind in ("missing", "empty")
    except (OSError, sqlite3.Error):  # (refused otherwise: policy/store/probe.py)
        return False


def lost_database(db: str, more: Sequence[Path] = ()) -> StoreRefused | None:
    """Why `db`, which holds no database, is not made a new one: the files beside it
    that a database left (`evidence`); None when there are none, or it is a database."""
    if not is_new(db):
        return None
    found = evidence(db, more)
    if not found:
        return None
    what = "no database" if not os.path.exists(db) else "an empty database"
    names = ", ".join(f"`{name}`" for name in found)
    return StoreRefused(
        LOST_DATABASE,
        f"`{db}` is {what}, but a database was there and is lost (beside it: {names})",
        f"put that database back at `{db}`; to make a new one there, move {names} away first",
    )
