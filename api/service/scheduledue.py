"""When a schedule runs: what a runner's tick at `now_ms` does to one stored schedule.

A schedule stores `next_run`, the minute (ms since the epoch, UTC) its next run is due:
set from its `cron` when it is made or its `cron` changes (the first matching minute
after then), and moved on by each run. A tick at `now_ms` runs a schedule whose
`next_run` is at or before `now_ms`, once, and moves `next_run` to the first matching
minute after `now_ms`. So a due time a server was down for (or several, the whole
stretch) is run once, at the first tick after it comes back, and the other due times of
that stretch are skipped: a schedule is never run twice for one due time, nor run in a
burst to catch up.

`next_run` is null when no minute within a year matches (`0 0 31 2 *`, or a 29 February
more than a year off): each tick looks again, so such a schedule gets a `next_run` once
its minute comes within the year. A schedule stored without the field (by a charter
that did not run schedules) gets its first `next_run` from the first tick that sees it,
and runs from then on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.service import cron


@dataclass(frozen=True, slots=True)
class Step:
    """What a tick does to a schedule: run it for `due` (or not), and set `next_run` to
    `next_run`, provided the stored `next_run` is still `expected` (None: null; `missing`:
    not stored at all): the compare-and-set that lets one runner alone take a due time."""

    run: bool
    expected: int | None
    missing: bool
    next_run: int | None

    @property
    def due(self) -> int | None:
        """The due time this step runs (None: it runs nothing)."""
        return self.expected if self.run else None

    def holds(self, doc: Any) -> bool:
        """Whether the schedule `doc`, read again inside the claiming transaction, is still
        the one this step was made for."""
        if self.missing:
            return "next_run" not in doc
        return "next_run" in doc and doc["next_run"] == self.expected


def step(doc: Any, now_ms: int) -> Step | None:
    """What a tick at `now_ms` does to the stored schedule `doc`; None: nothing. (Its
    `cron` is parsed only when a `next_run` is to be found: most looks find none due.)"""
    stored = doc.get("next_run")
    if stored is not None and int(stored) > now_ms:
        return None
    parsed = cron.parse(str(doc["cron"]))
    if "next_run" not in doc:
        return Step(False, None, True, cron.next_run(parsed, now_ms))
    if stored is None:
        found = cron.next_run(parsed, now_ms)
        return None if found is None else Step(False, None, False, found)
    return Step(True, int(stored), False, cron.next_run(parsed, now_ms))
