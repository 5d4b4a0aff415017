"""A thread's events: what happened on it, in order, read in pages (`threads.events`).

Each event is a document of kind `thread-events` tagged with its thread, inserted in the
very transaction that does what it tells: the thread's creation (`created`), a turn
admitted in it (`turn`, with the revision and profile it pinned), each call decided in it
(`call`: the tool, the effect, the decision's `seq` and `id` in the log, the USD charged
for an allowed call's `expected_cost`, and for a pause the approval it asked), an
approval of one of its calls answered (`approval`), a cost reported for one of its calls
(`cost`), and a change of its status (`status`: `running`, `waiting`, `done`, `failed`,
`cancelled`, ...). A transaction that rolls back takes its events with it, and one that
commits has them: a reader never sees an event for what did not happen, nor misses one
for what did. Writers take the store's one writer lock (SQLite's file lock, PostgreSQL's
advisory lock), so documents are positioned in commit order, and a page read by position
after a cursor never skips an event committed later. The events go with their thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from api.records import Approval
from api.service.core import new_id
from api.service.pages import decode, encode
from policy.store import Store

KIND = "thread-events"
Event = Literal["created", "turn", "call", "approval", "cost", "status"]


def _body(thread: str, event: Event, at: int, fields: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"thread": thread, "event": event, "at": at}
    body.update((key, value) for key, value in fields.items() if value is not None)
    return body


def record(store: Store, thread: str, event: Event, at: int, **fields: Any) -> None:
    """Inside the caller's transaction: `event` on `thread` at `at` (ms since the epoch),
    with `fields` (None values left out)."""
    store.insert(KIND, new_id(), _body(thread, event, at, fields), tag=thread)


def record_many(store: Store, events: Sequence[tuple[str, Event, int, Mapping[str, Any]]]) -> None:
    """Inside the caller's transaction: each (thread, event, at, fields) as `record` has
    it, in their order, in one statement (a batch's calls in a thread: one event each)."""
    store.insert_many(
        KIND,
        [
            (new_id(), _body(thread, event, at, fields), thread)
            for thread, event, at, fields in events
        ],
    )


def answered(store: Store, approval: Approval) -> None:
    """Inside the transaction that closes `approval`: its `approval` event, when its call
    was made in a thread that is still there (one deleted took its events with it)."""
    thread = approval.thread
    if thread is None or approval.decided_at is None or store.get("threads", thread) is None:
        return
    record(
        store, thread, "approval", approval.decided_at, approval=approval.id,
        tool=approval.tool, status=approval.status, by=approval.decided_by,
    )  # fmt: skip


def delete_all(store: Store, thread: str) -> None:
    """Inside the transaction that deletes `thread`: its events, through the tag index."""
    for key in [row.id for row in store.scan(KIND, tag=thread)]:
        store.delete(KIND, key)


def page(store: Store, thread: str, cursor: str | None, limit: int) -> dict[str, Any]:
    """The page of `thread`'s events after `cursor` (one this list gave; another thread's,
    or another list's, is `bad-cursor`), oldest first, at most `limit`. Its `tail_cursor`
    is after its last event, on every page: what a reader that follows the thread reads
    with next, to see only what was committed since."""
    after = decode(KIND, cursor, thread)
    rows = store.page(KIND, after, limit + 1, thread)
    more = len(rows) > limit
    rows = rows[:limit]
    items = [{"id": row.id, **row.body} for row in rows]
    tail = encode(KIND, rows[-1].pos, listed=thread) if rows else cursor or None
    return {"items": items, "next_cursor": tail if more else None, "tail_cursor": tail}
