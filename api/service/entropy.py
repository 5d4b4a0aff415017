"""Random bytes for decision ids, drawn from the system in helpings."""

from __future__ import annotations

import os
import threading


class _Entropy:
    """os.urandom in 4 KiB helpings: a decision id is 12 random bytes, and a system call
    per request for them showed up in the profile of single decisions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._used = 0  # how much of the pool is handed out (an offset: no copy of the rest)
        os.register_at_fork(after_in_child=self._forget)  # a child never reuses a parent's

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._used = 0

    def hex(self, n: int) -> str:
        if n > 1024:
            return os.urandom(n).hex()
        with self._lock:
            used = self._used
            if len(self._pool) - used < n:
                self._pool = os.urandom(4096)
                used = 0
            self._used = used + n
            return self._pool[used : used + n].hex()


random_hex = _Entropy().hex
