"""The decision log's runs, packed and read back: one reader for every store.

The log is kept in runs: a row of `decisions` holds the `count` rows a transaction logged
together, numbered `seq` to `seq + count - 1`. A run of one is the row itself; a longer
run is its rows' lengths (unsigned 32-bit, little-endian) and then the rows. Each run's
`sum` chains it to the run before (policy/store/rowsum.py).

`read` is `Store.read_decisions` over a store's runs: it takes the runs in `seq` order
from the one that holds the first seq wanted (their seq, count, body length and sum), the
run before them (`Chain`), and a way to read a run's body a piece at a time (`Body`), so
a page of a long run never copies all of it. Every run a row is taken from is checked
whole, its link to the run before too (policy/store/logcheck.py); a damaged stretch is
one `Damaged`. The store wraps it in its own errors (damaged pages, a lost connection).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from itertools import accumulate
from typing import Any, Protocol

from policy.store import Damaged
from policy.store.logcheck import Chain, extent, packed
from policy.store.rowsum import log_digest, log_hasher

PIECE = 1 << 16  # what a long run is hashed by, a piece at a time
_NO_BUDGET = (1 << 63) - 1


class Body(Protocol):
    """A run's body, read as a blob reads: `read(size)` from where it is, `seek(offset)`."""

    def read(self, size: int = -1) -> bytes: ...
    def seek(self, offset: int) -> None: ...


# Opens the body of the run `seq`, `length` bytes long.
Opener = Callable[[int, int], AbstractContextManager[Body]]


class Pieces:
    """A run's body read a piece at a time with a store's SQL, as a blob reads (a `Body`):
    `piece(seq, start, size)` is the run's bytes from `start` (1-based), `size` of them."""

    def __init__(self, piece: Callable[[int, int, int], bytes], seq: int, length: int) -> None:
        self._piece, self._seq, self._length, self._at = piece, seq, length, 0

    def __enter__(self) -> Pieces:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def seek(self, offset: int) -> None:
        self._at = offset

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            size = self._length - self._at
        size = min(size, self._length - self._at)
        if size <= 0:
            return b""
        found = self._piece(self._seq, self._at + 1, size)
        self._at += size
        return found


def link_at(seq: int, run: tuple[Any, ...] | None) -> bytes | None:
    """`Store.log_link` from the last run starting at or before `seq` (its seq + count,
    its sum): that sum when the run ends at `seq`, else None."""
    if run is None or run[0] is None or int(run[0]) != seq + 1:
        return None
    stored = run[1]
    return bytes(stored) if isinstance(stored, bytes | memoryview) else None


def pack(rows: Sequence[bytes]) -> bytes:
    if len(rows) == 1:
        return rows[0]
    return struct.pack(f"<{len(rows)}I", *map(len, rows)) + b"".join(rows)


def unpack(count: int, body: bytes, start: int, stop: int) -> list[bytes]:
    """Rows `start` to `stop - 1` of a run (only those are copied out)."""
    if count == 1:
        return [body][start:stop]
    ends = list(accumulate(struct.unpack_from(f"<{count}I", body), initial=4 * count))
    return [body[ends[i] : ends[i + 1]] for i in range(start, min(stop, count))]


def read(
    runs: Iterable[tuple[Any, ...]],
    chain_before: Callable[[int], Chain],
    open_body: Opener,
    garbled: tuple[type[BaseException], ...],
    after_seq: int,
    limit: int,
    max_bytes: int | None,
    found: list[tuple[int, bytes | Damaged]],
) -> list[tuple[int, bytes | Damaged]]:
    """Rows from `after_seq + 1` on, at most `limit`; with `max_bytes`, stopping before the
    row that would take their bytes past it, but never before the first. `runs`: (seq,
    count, body length, sum) from the run holding `after_seq + 1` on; `garbled`: what
    reading a body raises when it is not a blob. Rows are added to `found` as they are
    read (so a caller that fails part way knows where)."""
    budget = _NO_BUDGET if max_bytes is None else max_bytes
    size = 0
    wanted = after_seq + 1
    ahead = iter(runs)
    current = next(ahead, None)
    chain: Chain | None = None
    while current is not None and len(found) < limit:
        following = next(ahead, None)
        seq, count, length, stored = current
        if chain is None:  # (the run before the first one read)
            chain = chain_before(seq)
        last = extent(seq, count, None if following is None else following[0])
        gap = chain.missing(seq)
        if gap is not None and gap.last_seq >= wanted:
            found.append((max(gap.seq, wanted), replace(gap, seq=max(gap.seq, wanted))))
        start = max(wanted, seq)
        stop = min(last + 1, start + limit - len(found))
        if start >= stop:  # (the first run ended at or before `after_seq`)
            chain.end = last + 1
            chain.chained_to = stored if isinstance(stored, bytes) else b""
            current = following
            continue
        # `_run_rows` keeps to the bytes left (but for a page's first row)
        rows, damaged = _run_rows(
            open_body, garbled, chain, seq, last, count, length, stored, start - seq,
            stop - seq, budget - size, not found,
        )  # fmt: skip
        if damaged is not None:
            found.append((start, replace(damaged, seq=start)))
            current = following
            continue
        if rows is None:
            break  # (the run does not fit in the page's bytes)
        found.extend(enumerate(rows, start))
        size += sum(map(len, rows))
        if len(rows) < stop - start:
            break  # (full by its bytes)
        current = following
    return found[:limit]


def _run_rows(
    open_body: Opener, garbled: tuple[type[BaseException], ...], chain: Chain, seq: int,
    last: int, count: Any, length: Any, stored: Any, start: int, stop: int, room: int,
    first: bool,
) -> tuple[list[bytes] | None, Damaged | None]:  # fmt: skip
    """Rows `start` to `stop - 1` of the run `seq` (`length` bytes), as many of them as
    fit in `room` bytes together (and the `first` row of a page whatever its size; None
    when not even one), once the run is found sound (else what is damaged): the whole run
    read when it fits, else hashed a piece at a time and then read a row at a time, so a
    page of a long run never copies all of it. Moves `chain` past it."""
    if not isinstance(count, int) or not isinstance(length, int):
        return None, chain.check(seq, last, stored, None, False)
    if length > room and count == 1 and not first:
        return None, None  # (not read: the next page starts with it)
    try:
        with open_body(seq, length) as blob:
            if length <= room:
                body = blob.read()
                digest = log_digest(chain.chained_to, seq, count, body)
                damaged = chain.check(seq, last, stored, digest, packed(count, body))
                return (None, damaged) if damaged else (unpack(count, body, start, stop), None)
            hasher = log_hasher(chain.chained_to, seq, count, length)
            sizes: tuple[int, ...] = ()
            if count > 1:
                head = blob.read(4 * count)
                hasher.update(head)
                if len(head) == 4 * count:
                    sizes = struct.unpack(f"<{count}I", head)
            while piece := blob.read(PIECE):
                hasher.update(piece)
            whole = count == 1 or (len(sizes) == count and 4 * count + sum(sizes) == length)
            damaged = chain.check(seq, last, stored, hasher.digest(), whole)
            if damaged is not None:
                return None, damaged
            if count == 1:
                blob.seek(0)
                return [blob.read()], None
            ends = list(accumulate(sizes, initial=4 * count))
            rows: list[bytes] = []
            for i in range(start, stop):
                if sizes[i] > room and (rows or not first):
                    break
                blob.seek(ends[i])
                rows.append(blob.read(sizes[i]))
                room -= sizes[i]
            return rows or None, None
    except garbled:  # (a body that is not a blob)
        return None, chain.check(seq, last, stored, None, False)
