"""A store's write transaction: `atomic()`, the same on every store.

The store's lock, then BEGIN ... COMMIT (ROLLBACK on an exception), `on_begin`'s check
first; a nested one joins the outer transaction (and is not checked again), and what
`after_commit` was given runs once the outer COMMIT is done. How a store begins, commits
and rolls back is its own (`Transactional`: SQLite's BEGIN IMMEDIATE and writers' lock,
PostgreSQL's advisory lock and pipelines); this class holds what they share.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Protocol


class _Lock(Protocol):
    def acquire(self) -> bool: ...
    def release(self) -> None: ...


class Transactional(Protocol):
    """What a transaction needs of its store: its lock (re-entrant), how deep the current
    transaction is nested (0: none), what runs after its COMMIT and before its body, and
    the store's hooks, each called with the store's lock held."""

    _depth: int
    _after_commit: list[Callable[[], None]]
    _on_begin: Callable[[], None] | None

    @property
    def _lock(self) -> _Lock: ...

    def _begin(self) -> None:
        """BEGIN the outer transaction; on a failure nothing is left begun."""

    def _commit(self) -> None:
        """COMMIT it; on a failure it is rolled back."""

    def _rollback(self, exc: BaseException | None) -> None:
        """Roll it back, after `exc` in its body (may raise what `exc` goes up as)."""

    def _ended(self) -> None:
        """After the COMMIT or ROLLBACK, whichever way it went."""


class Transaction:
    """`Store.atomic()`. A class rather than a generator-based context manager: it is
    entered twice for every decision request."""

    __slots__ = ("_outer", "_store")

    def __init__(self, store: Transactional) -> None:
        self._store = store
        self._outer = False

    def __enter__(self) -> None:
        store = self._store
        store._lock.acquire()
        if store._depth:
            store._depth += 1
            return
        try:
            store._begin()
        except BaseException:
            store._lock.release()
            raise
        store._depth = 1
        self._outer = True
        check = store._on_begin
        if check is not None:
            try:
                check()
            except BaseException as refused:  # rolled back: nothing of it is written
                self.__exit__(type(refused), refused, refused.__traceback__)
                raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        store = self._store
        try:
            if not self._outer:
                store._depth -= 1
                return
            try:
                if kind is None:
                    store._commit()
                    actions, store._after_commit = store._after_commit, []
                    for action in actions:
                        action()
                else:
                    store._rollback(exc)
            finally:
                store._depth = 0
                store._after_commit = []
                store._ended()
        finally:
            store._lock.release()
