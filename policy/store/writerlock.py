"""A lock the serving processes of one database take around their write transactions.

With several workers (`charter serve --workers N`), two processes often want SQLite's
write lock at once. SQLite's own busy handler then sleeps 1, 2, 5, 10 ... ms between
tries, and the worker's event loop sleeps with it: measured at 2 workers and 16
clients, one BEGIN IMMEDIATE in ten waited, 4-5 ms on average, a quarter of each
worker's time. The transactions themselves last tens of microseconds, so the waiting
process here takes an flock on `<db>.writer-lock` first, retrying after 10 µs, doubling
up to 1 ms, and finds SQLite's lock free once it has this one (a process that does not
take this lock, such as the `charter token` command, still meets SQLite's busy handler).
"""

from __future__ import annotations

import fcntl
import os
import time

from policy.store import StoreUnavailable

FIRST_WAIT = 0.00001
LONGEST_WAIT = 0.001


class WriterLock:
    def __init__(self, path: str, timeout: float) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._timeout = timeout

    @classmethod
    def of(cls, db: str, timeout: float) -> WriterLock:
        """The writer lock of the database file `db` (`<db>.writer-lock`), an open file
        of its own."""
        return cls(f"{db}.writer-lock", timeout)

    def acquire(self) -> None:
        if self.try_acquire():
            return
        deadline = time.monotonic() + self._timeout
        wait = FIRST_WAIT
        while True:
            time.sleep(wait)  # releases the GIL: the process's other threads go on
            if self.try_acquire():
                return
            if time.monotonic() > deadline:  # as SQLite's own busy timeout gives up
                raise StoreUnavailable("the database's writer lock stayed taken")
            wait = min(2 * wait, LONGEST_WAIT)

    def try_acquire(self) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)
