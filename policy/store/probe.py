"""What is at a database path, found without creating or changing anything there.

Opening a path with `SqliteStore` makes it charter's: SQLite creates a missing file, and
the store adds its tables to whatever database is there. So the command line looks first
(`charter serve` makes a database only where there is none or an empty one; `charter
token` issues a token only into a charter database), and refuses anything else with the
reason, leaving the path as it was.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from policy.store.sqlite import SCHEMA

# The tables a charter database has had since its first start (the store makes `texts`
# too, which one written by an older charter lacks: SCHEMA leaves it out).
TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))
SQLITE_NOTADB = 26  # "file is not a database": its header is not SQLite's


@dataclass(frozen=True, slots=True)
class Found:
    """`missing`: nothing at the path; `empty`: a zero-byte file, or an SQLite database
    without a table; `charter`: one with the store's tables; `other`: an SQLite database
    with other tables (`tables`)."""

    kind: Literal["missing", "empty", "charter", "other"]
    tables: tuple[str, ...] = ()


def probe(path: str | Path) -> Found:
    """What is at `path`. OSError when it is not a regular file or cannot be looked at
    (the reason is its `strerror`); sqlite3.Error when it is not a database SQLite reads
    (`sqlite_errorcode` SQLITE_NOTADB: not an SQLite file at all)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return Found("missing")
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    if not stat.S_ISREG(info.st_mode):  # a device, a pipe, a socket: SQLite would hang or fail
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    if info.st_size == 0:
        return Found("empty")
    # mode=rw: never create the file (read-only would refuse a WAL database whose `-shm`
    # is not there yet). Reading the schema writes nothing.
    uri = f"file:{quote(os.path.abspath(path))}?mode=rw"
    connection = sqlite3.connect(uri, uri=True)
    try:
        rows = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
    finally:
        connection.close()
    tables = tuple(sorted(str(name) for (name,) in rows))
    if not tables:
        return Found("empty")
    if set(tables) >= TABLES:
        return Found("charter", tables)
    return Found("other", tables)
