"""The change feed's changes: what a write transaction changed that other processes cache.

A change names a kind and a key: an agent (`agent`, its id), a toolset's connections
(`connection`, the toolset's name), a token (`token`, its id), a thread deleted
(`thread`, its id: what a decision reads of a thread never changes while it is there),
or an approval opened
(`approval.opened`, its id) or decided (`approval.decided`, its id). Nothing caches
approvals: their changes are what a long poll and the approvals' event stream wait for
(api/service/approvalfeed.py), numbered with the rest. A transaction notes each
change it makes (`Store.note_change`) in the `changes` table, numbered 1, 2, ... in
commit order under the writer lock (max + 1, so without gaps), and the row commits or
rolls back with the change. The newest number is the feed's version. A process that
caches what changes name reads the changes after the version it last saw
(`Store.changes_after`) and drops what they name, nothing else. Only the newest `KEEP`
changes are kept: a process further behind, or one that meets a row whose checksum
fails, cannot know what changed and drops everything it caches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from policy.store.rowsum import row_digest

AGENT = "agent"  # key: the agent's id
CONNECTION = "connection"  # key: the toolset whose connections changed
TOKEN = "token"  # key: the token's id
THREAD = "thread"  # key: the id of a thread deleted
APPROVAL_OPENED = "approval.opened"  # key: the approval's id
APPROVAL_DECIDED = "approval.decided"  # key: the approval's id
APPROVALS = frozenset({APPROVAL_OPENED, APPROVAL_DECIDED})
KINDS = frozenset({AGENT, CONNECTION, TOKEN, THREAD, *APPROVALS})
KEEP = 1000  # changes kept; one number past the newest `KEEP` is read as "everything"

Change = tuple[str, str]  # (kind, key)


@dataclass(frozen=True, slots=True)
class Feed:
    """What `changes_after(after)` read: the latest revision, the newest change's number
    (0: none yet), and the changes numbered after `after` in order, or None when they
    cannot all be told (pruned, damaged, or numbered past the newest: another database)
    and the reader must drop everything."""

    latest: int
    version: int
    changes: tuple[Change, ...] | None


def digest(seq: int, kind: str, key: str) -> bytes:
    """A change row's checksum: over its number too, so a row moved is a row damaged."""
    return row_digest("changes", (seq, kind, key))


def read(after: int, latest: int, version: int, rows: Iterable[tuple[Any, ...]]) -> Feed:
    """The feed from the rows `(seq, kind, key, sum)` numbered after `after` (at most
    KEEP + 1 of them, in order) and the newest number `version`."""
    if version == after:
        return Feed(latest, version, ())
    if version < after:  # (numbered past the newest: not the database it was read from)
        return Feed(latest, version, None)
    found: list[Change] = []
    expected = after + 1
    for seq, kind, key, stored in rows:
        seq = int(seq)
        if seq != expected or kind not in KINDS or bytes(stored or b"") != digest(seq, kind, key):
            return Feed(latest, version, None)
        found.append((kind, key))
        expected += 1
    if expected != version + 1:  # (more than were read, or some missing at the end)
        return Feed(latest, version, None)
    return Feed(latest, version, tuple(found))
