"""A COMMIT sent and not read back yet: what its caller waits for before telling anyone.

A store whose commits wait on a server (PostgreSQL: the COMMIT's round trip and its
fsync, most of a decision transaction's time) can end a transaction with its COMMIT sent
and its answer read later (`Store.defer_commit`), so the caller's thread does other work
meanwhile: the HTTP app's event loop reads and decides the next requests while the
server syncs its log. Nothing is durable, and nobody may be told anything of it, until
the answer is read: `settled`, with `error` None (committed) or what the commit failed
with (nothing of it written).

The answer is read by whoever comes first: the caller once `fileno` is readable
(`settle`), or the store itself before anything else uses its connection (the next
transaction, a read, another thread's). Either way, `when_settled`'s callbacks run then,
on the thread that read it; after-commit actions run there too, before them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Deferred:
    def __init__(self) -> None:
        self.fileno = -1  # the connection's socket: readable once the server answered
        self.settled = False
        self.error: BaseException | None = None
        self.reader: Callable[[], None] | None = None  # the store's: reads the answer
        # The store's: whether the answer is in already (read off the socket into the
        # driver's buffer, where `fileno` will not say so).
        self.answered: Callable[[], bool] = lambda: False
        self._lock = threading.Lock()
        self._waiters: list[Callable[[], None]] = []

    def settle(self) -> None:
        """Read the answer (waiting for it if it has not come), unless already read."""
        reader = self.reader
        if not self.settled and reader is not None:
            reader()

    def done(self, error: BaseException | None) -> None:
        """The store read the answer: committed (`error` None), or failed."""
        with self._lock:
            self.settled, self.error = True, error
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter()

    def when_settled(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the answer is read (at once if it is)."""
        with self._lock:
            if not self.settled:
                self._waiters.append(callback)
                return
        callback()
