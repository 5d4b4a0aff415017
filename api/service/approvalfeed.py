"""The approvals' events: each approval opened and each decided, numbered by the change
feed (policy/store/changes.py), in which the transaction that opens or decides one notes
it (`ReadModel.note_approval`). An event's number is its change's: events come in
commit order, and a reader resumes after the last number it read, for as long as the
feed keeps the changes after it (its newest `KEEP`; past that, it cannot tell what it
missed, and reads the approvals' list again)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from api.records import Approval
from api.service.core import Service
from policy.store.changes import APPROVAL_DECIDED, APPROVAL_OPENED, APPROVALS

EventKind = Literal["opened", "decided"]
KIND_OF: dict[str, EventKind] = {APPROVAL_OPENED: "opened", APPROVAL_DECIDED: "decided"}
# An `after` no feed reaches: `changes_after` then reads no row, and tells the version.
PAST_ANY = 1 << 62


@dataclass(frozen=True, slots=True)
class Event:
    seq: int  # its change's number: what a reader resumes after
    kind: EventKind
    approval: Approval  # as it is when the event is read (decided since, maybe)


@dataclass(frozen=True, slots=True)
class Events:
    """The feed's version (the number to resume after when `events` is empty), and the
    events after the number read from, in order; None when the feed cannot tell them
    (pruned past it, damaged, or a number past the newest: another database's)."""

    version: int
    events: tuple[Event, ...] | None


def version(service: Service) -> int:
    """The change feed's newest number: where a reader that wants what comes next starts."""
    return service.store.changes_after(PAST_ANY).version


def events_after(service: Service, after: int) -> Events:
    """The approvals opened and decided after change `after`. An approval whose
    document is not stored (none is deleted) is left out."""
    feed = service.store.changes_after(after)
    if feed.changes is None:
        return Events(feed.version, None)
    found: list[Event] = []
    for seq, (kind, key) in enumerate(feed.changes, start=after + 1):
        if kind not in APPROVALS:
            continue
        doc = service.store.get(Approval.KIND, key)
        if doc is not None:
            found.append(Event(seq, KIND_OF[kind], Approval.read(doc)))
    return Events(feed.version, tuple(found))


def changed_after(service: Service, after: int | None) -> tuple[int, frozenset[str] | None]:
    """(the feed's version, the ids of the approvals opened or decided after change
    `after`); None for the ids when the feed cannot tell them, or `after` is None."""
    if after is None:
        return version(service), None
    feed = service.store.changes_after(after)
    if feed.changes is None:
        return feed.version, None
    return feed.version, frozenset(key for kind, key in feed.changes if kind in APPROVALS)
