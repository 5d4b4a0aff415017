"""Why a store will not open a database: a refusal with a stable code.

Raised where opening would lose or hide what was committed (the database lacks commits
its mark records, a database's files are there without it, the disk is full on a first
start). `charter serve` and `charter token` show it as `charter: error[<code>]: <message>`
with its help line and exit 2; nothing at the paths is changed.
"""

from __future__ import annotations

# The codes, each with its section in docs/errors.md ("D01xx": the files beside the
# database, at start).
LOST_COMMITS = "D0101"  # the database ends below its mark: its `-wal` lost
LOST_DATABASE = "D0102"  # no database, beside the files of one that was there
MARK_DAMAGED = "D0103"  # the mark does not read as one
DISK_FULL = "D0104"  # the disk filled up during a start


class StoreRefused(Exception):
    """The database is not opened: `code` (stable), `message` (one line, lowercase) and
    `help` (what to do about it)."""

    def __init__(self, code: str, message: str, help: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.help = help
