"""A database file's structure, looked at before it is served: its header, its size, and
SQLite's own `PRAGMA quick_check`.

A file cut short (a copy that stopped, a full disk) or garbled in the middle opens in
SQLite as if whole: the pages it lacks or cannot read fail only the statements that
reach them, so a server on it would be ready and log decisions while the reads that reach
those pages fail. So `charter serve` looks first, changing neither the file nor its WAL:

- the header: SQLite's 16-byte magic string, a page size that is a power of two from 512
  to 65536, a file a whole number of those pages, and no fewer pages than the header
  counts (when that count is valid: SQLite keeps it with the change counter);
- `PRAGMA quick_check`: every page of every table and index read once, their structure
  checked (not that each index matches its table: `charter db check` runs the full
  `integrity_check`). It reads the whole file: about a second per 100 MB here, see
  docs/operations.md.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

MAGIC = b"SQLite format 3\x00"
HEADER = 100
NOT_SQLITE = "its header is not an SQLite database's (the file's start is garbled or cut)"
MOST_SHOWN = 5  # quick_check's messages a refusal quotes


def header_damage(path: str | Path, sized: bool = True) -> str | None:
    """What is wrong with the file's header or size, or None. OSError if it cannot be read.
    `sized`: check the size too. Not while the `-wal` holds frames: a checkpoint copies
    page 1, with the new count, first, so one a crash cut short leaves the file shorter
    than its header says until the next open copies the rest from the WAL."""
    with open(path, "rb") as file:
        header = file.read(HEADER)
        size = os.fstat(file.fileno()).st_size
    if size == 0:
        return None  # (an empty file: a database not made yet)
    if len(header) < HEADER or header[:16] != MAGIC:
        return NOT_SQLITE
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return f"its header names a page size of {page_size} bytes, which SQLite never uses"
    if not sized:
        return None
    if size % page_size:
        return f"it is {size} bytes, not a whole number of its {page_size}-byte pages (cut)"
    pages = int.from_bytes(header[28:32], "big")
    counted = header[92:96] == header[24:28]  # (the count is valid with this change counter)
    if counted and pages * page_size > size:
        return (
            f"it is {size} bytes, and its header counts {pages} pages of {page_size} bytes "
            f"({pages * page_size} bytes): it was cut short"
        )
    return None


def read_only(path: str | Path) -> sqlite3.Connection:
    """A connection that writes nothing to the file (nor makes it). With no `-wal` beside
    it, the file is all there is: opened `immutable`, so no `-wal` or `-shm` is made
    either (a read-only connection to a WAL database makes both, and leaves them)."""
    wal = os.path.exists(f"{path}-wal")
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro" + ("" if wal else "&immutable=1")
    return sqlite3.connect(uri, uri=True)


def quick_check(path: str | Path, full: bool = False) -> list[str]:
    """SQLite's check of the file's pages: [] when it finds nothing, else its messages (at
    most 100). `full`: `integrity_check`, which also matches every index with its table."""
    pragma = "integrity_check(100)" if full else "quick_check(100)"
    connection = read_only(path)
    try:
        rows = [str(message) for (message,) in connection.execute(f"PRAGMA {pragma}")]
    except sqlite3.DatabaseError as exc:  # (a page the check itself cannot get past)
        return [str(exc).lower()]
    finally:
        connection.close()
    return [] if rows == ["ok"] else rows
