"""The PostgreSQL store's change feed: what `data_version()` says outside a transaction.

Every write transaction moves the version in the one-row `feed` table and notifies it
on the channel of the `feed` table's schema (`charter_feed:<schema>`: stores in other
schemas of one database keep feeds of their own), which PostgreSQL delivers at its
COMMIT. A `Feed` keeps the highest version it has seen, from a thread of its own on a
connection of its own: it LISTENs on that channel and takes the version a notification
carries, and besides reads the `feed` row at least every `POLL` seconds, so a
notification that never came (a listener reconnecting, a notification queue dropped by a
server restart) is made up for by that read.

What `data_version()` says is not that version but how many times it was seen to move
past what this process knew (`moves`): a version one past the highest seen that this
process's own COMMIT gave (`own`) is known without being news, so a process's own
writes do not make its service look for changes that are its own. Any other move is
news: a version seen, by any read, past the highest known.

`Feed.version()` is that count while the thread has read the row within `FRESH` seconds;
otherwise (it is starting, its connection is lost, it is stalled) None, and the store
reads the `feed` row on its own connection instead. So another process's commit is seen
by `data_version()` at most `FRESH` (0.5 s) after its COMMIT, whatever happened to its
notification, and as soon as the notification arrives otherwise (a millisecond or so).

The versions only grow (each writer moves the row under the writer lock), so the highest
seen is the newest, whichever read saw it first.
"""

from __future__ import annotations

import threading
import time

import psycopg
from psycopg import sql

CHANNEL = "charter_feed:"  # and the schema: what `channel` gives
# The channel of the schema a connection's tables are in (its search path's first):
# what a write transaction notifies (as a value) and the listener LISTENs on.
NOTIFY_CHANNEL = f"'{CHANNEL}' || current_schema()"
POLL = 0.25  # seconds between the thread's reads of the feed row
WAIT = 0.1  # the longest the thread waits for a notification before it looks at `stop`
FRESH = 0.5  # how recent the thread's last look must be for `version()` to use it
RETRY = 0.5  # seconds between attempts to connect again
READ = "SELECT version FROM feed"


class Feed:
    def __init__(self, url: str) -> None:
        self._url = url
        self._lock = threading.Lock()
        self._seen = 0  # the highest version seen
        self._moves = 0  # how often a version past `_seen` was seen that was not our own
        self._looked = float("-inf")  # (monotonic) when the thread last read the row
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (idempotent: it runs until `stop`)."""
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="charter-pg-feed", daemon=True
                )
                self._thread.start()

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _observe(self, version: int) -> None:  # (under the lock)
        if version > self._seen:
            self._seen = version
            self._moves += 1

    def seen(self, version: int) -> int:
        """Take `version` (read by the store itself) as seen; the moves seen."""
        with self._lock:
            self._observe(version)
            return self._moves

    def own(self, version: int) -> None:
        """`version` is what this process's COMMIT moved the row to: not news when it is
        the one after the highest seen (no other process committed in between)."""
        with self._lock:
            if version == self._seen + 1:
                self._seen = version
            else:
                self._observe(version)

    def version(self) -> int | None:
        """The moves seen, while the thread has looked within `FRESH` seconds; else None
        (the caller reads the row)."""
        with self._lock:
            if time.monotonic() - self._looked > FRESH:
                return None
            return self._moves

    def stop(self) -> None:
        """Stop the thread and close its connection (within `WAIT` seconds)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True, connect_timeout=5) as db:
                    row = db.execute(f"SELECT {NOTIFY_CHANNEL}").fetchone()
                    channel = str(row[0]) if row is not None else CHANNEL
                    db.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self._listen(db)
            except psycopg.Error:
                with self._lock:
                    self._looked = float("-inf")  # (the store reads the row meanwhile)
                self._stop.wait(RETRY)

    def _listen(self, db: psycopg.Connection[tuple[object, ...]]) -> None:
        polled = float("-inf")
        while not self._stop.is_set():
            now = time.monotonic()
            if now - polled >= POLL:
                # Read after LISTEN took effect: a commit before it is in this read, one
                # after it is notified (or in the next read).
                row = db.execute(READ).fetchone()
                polled = now
                if row is not None:
                    self._take(int(str(row[0])), now)
            for notice in db.notifies(timeout=WAIT, stop_after=1):
                self._news(notice.payload)

    def _news(self, payload: str) -> None:
        """A notification on this schema's channel: the version it carries (a payload
        that is not one is left to the next poll, within POLL seconds)."""
        try:
            version = int(payload)
        except ValueError:
            return
        with self._lock:
            self._observe(version)

    def _take(self, version: int, at: float) -> None:
        """A read of the row at `at`: what it found, and that the thread is sound."""
        with self._lock:
            self._observe(version)
            self._looked = at
