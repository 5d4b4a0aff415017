"""Why a store will not open a database: a refusal with a stable code.

Raised where opening would lose or hide what was committed (the database lacks commits
its mark records, a database's files are there without it, the disk is full on a first
start). `charter serve` and `charter token` show it as `charter: error[<code>]: <message>`
with its help line and exit 2; nothing at the paths is changed.
"""

from __future__ import annotations

# The codes, each with its section in docs/errors.md ("The store at start").
LOST_COMMITS = "lost-commits"
LOST_DATABASE = "lost-database"
MARK_DAMAGED = "mark-damaged"
DISK_FULL = "disk-full"


class StoreRefused(Exception):
    """The database is not opened: `code` (stable), `message` (one line, lowercase) and
    `help` (what to do about it)."""

    def __init__(self, code: str, message: str, help: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.help = help
