"""The decision log's chain walked run by run: what is damaged, and where.

A run of the log (a row of `decisions`: `count` decisions from `seq` on) is sound when its
`sum` is the digest of its columns chained to the `sum` of the run before it
(policy/store/rowsum.py), and when it starts where the run before ended. Walking the runs
in `seq` order, `Chain` says of each what is wrong with it: the seqs missing before it
(a run deleted), a checksum that does not match (a byte of it changed, or its link to the
run before: told apart by whether rows are missing before it), a body whose run does not
unpack. The store's reads (`SqliteStore.read_decisions`) and `charter db check` walk it
alike.
"""

from __future__ import annotations

import struct

from policy.store import Damaged
from policy.store.rowsum import GENESIS

MAX_RUN = 1 << 31  # more rows than a run can hold (a garbled `count`)


def extent(seq: int, count: object, next_seq: int | None) -> int:
    """The last seq a run stands for: its `count`'s when that is sane, else up to the next
    run (or its first seq alone, when it is the last)."""
    if isinstance(count, int) and 1 <= count <= MAX_RUN:
        last = seq + count - 1
        if next_seq is None or last < next_seq:
            return last
    return seq if next_seq is None else max(seq, next_seq - 1)


def packed(count: int, body: bytes) -> bool:
    """Whether `body` is a run of `count` rows: their lengths and then exactly their bytes."""
    if count == 1:
        return True
    try:
        sizes = struct.unpack_from(f"<{count}I", body)
    except struct.error:
        return False
    return bool(4 * count + sum(sizes) == len(body))


class Chain:
    """The walk's state: where the run before ended (the next seq expected) and its sum."""

    __slots__ = ("chained_to", "end")

    def __init__(self, end: int = 1, chained_to: object = GENESIS) -> None:
        self.end = end
        self.chained_to = chained_to if isinstance(chained_to, bytes) else b""

    def missing(self, seq: int) -> Damaged | None:
        """The seqs missing before a run that starts at `seq`, or None."""
        if seq <= self.end:
            return None
        return Damaged(
            self.end, seq - 1, "missing",
            f"decisions {self.end} to {seq - 1} are not in the log (removed)"
            if seq - 1 > self.end
            else f"decision {self.end} is not in the log (removed)",
        )  # fmt: skip

    def check(
        self, seq: int, last: int, stored: object, digest: bytes | None, body_ok: bool
    ) -> Damaged | None:
        """What is wrong with the run `seq` to `last` whose checksum, chained to the run
        before, is `digest` (None: not computed, its body could not be read), and whose
        body unpacks (`body_ok`); None when it is sound. Moves the walk past it."""
        after_gap = seq > self.end
        damaged: Damaged | None = None
        if digest is None or stored != digest:
            if after_gap:
                why, detail = (
                    "chain-broken",
                    "rows before it are missing or do not read, so its link cannot be checked",
                )
            else:
                why, detail = "checksum-mismatch", "it does not match its checksum"
            damaged = Damaged(seq, last, why, detail)
        elif not body_ok:
            damaged = Damaged(seq, last, "undecodable", "its rows do not unpack")
        self.end = last + 1
        self.chained_to = stored if isinstance(stored, bytes) else b""
        return damaged
