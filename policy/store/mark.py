"""The mark: the highest decision seq and policy revision given out, kept in a file beside
the database (`<db>.mark`) where losing its `-wal` cannot erase them.

In WAL mode SQLite keeps its latest commits in `<db>-wal` until a checkpoint copies them
into `<db>`. A `-wal` lost (deleted, left out of a copy, a disk swapped under it) takes
those commits with it, and the log numbers its next run after the last one the file
holds: without the mark, seqs already given out would be given again, to other decisions.

The store writes the mark after each COMMIT that logged decisions or added a revision,
before the caller hears of it, with the write lock still held (so the writes come in
commit order and never go back: `--workers N` take a writer lock around their write
transactions, policy/store/writerlock.py). So the mark is never behind a seq or revision
anyone was told, and never ahead of what was committed: a database, read with its `-wal`,
whose log or revisions end below its mark lacks commits, and is refused (`D0101`).

Layout (48 bytes): `MAGIC`, then the seq at offset 16 and the revision at offset 32, each
as 8 bytes little-endian and a check of 8 bytes, so a changed or swapped field is found
(`D0103`). Each field is written inside one disk sector, into a block allocated
and flushed when the file was made: the write allocates nothing, so a full disk does not
fail it. The file is not fsynced at each write, as the `-wal` is not at each commit
(synchronous=NORMAL): it is as durable as the commits it follows.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from policy.store.refusal import LOST_COMMITS, MARK_DAMAGED, StoreRefused

MAGIC = b"charter mark v1\n"
SIZE = 48
_SEQ_AT = 16
_REVISION_AT = 32
_TRIES = 5  # reads of a mark that does not check, before it is damaged


def mark_path(db: str) -> str:
    return f"{db}.mark"


# Each field's check: its value XOR a constant of its own, so a changed byte, in the
# value or in its check, and the two fields swapped, are found (a keyed BLAKE2b of the
# value takes 4.4 µs a commit on a loaded machine, this well under one).
_CHECKS = {b"seq": 0xA5E8_3F21_F0A1_FFFE, b"revision": 0xA5E8_3F21_F0A1_FFFD}
_PAIR = struct.Struct("<QQ")


def _field(value: int, name: bytes) -> bytes:
    return _PAIR.pack(value, value ^ _CHECKS[name])


def _value(data: bytes, at: int, name: bytes) -> int | None:
    field = data[at : at + 16]
    value = int.from_bytes(field[:8], "little")
    return value if len(field) == 16 and _field(value, name) == field else None


@dataclass(frozen=True, slots=True)
class Marked:
    seq: int
    revision: int


def encode(marked: Marked) -> bytes:
    return MAGIC + _field(marked.seq, b"seq") + _field(marked.revision, b"revision")


def read_mark(db: str) -> Marked | None:
    """The mark beside `db`, None when there is none; StoreRefused (`D0103`) when
    the file is not a mark."""
    path = mark_path(db)
    try:
        with open(path, "rb") as handle:
            data = handle.read(SIZE + 1)
    except FileNotFoundError:
        return None
    seq = _value(data, _SEQ_AT, b"seq")
    revision = _value(data, _REVISION_AT, b"revision")
    if len(data) != SIZE or not data.startswith(MAGIC) or seq is None or revision is None:
        raise StoreRefused(
            MARK_DAMAGED,
            f"the mark `{path}` is damaged: it does not read as the highest seq and "
            "revision given out",
            f"restore `{path}` from where it was copied; a database known to be whole "
            f"(with its `-wal`) is served after `{path}` is removed, and makes it again",
        )
    return Marked(seq, revision)


def _sync_directory(path: str) -> None:
    with contextlib.suppress(OSError):  # (a file system that cannot open a directory)
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def create_mark(db: str, marked: Marked) -> None:
    """`db`'s mark, made with these values, unless one is there already (another process
    starting on the same database made it first, from the same or an older database).
    Written beside it and fsynced, then linked into place: the mark appears whole."""
    path = mark_path(db)
    spare = f"{path}.{secrets.token_hex(8)}.new"
    fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, encode(marked))
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(spare, path)  # (never replaces one that is there)
        _sync_directory(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(spare)


class Mark:
    """An open mark, written after the commits it records (`record`): mapped into memory
    (MAP_SHARED), so a write is a store of 16 bytes, with no system call and no change
    of the file's times (a `pwrite` takes 4.8 µs a commit on a loaded machine). The kernel
    keeps what a process stored in a shared mapping when it dies, SIGKILL too, and writes
    it back as it does the `-wal`'s pages."""

    __slots__ = ("_map",)

    def __init__(self, db: str) -> None:
        fd = os.open(mark_path(db), os.O_RDWR | os.O_CLOEXEC)
        try:
            self._map = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)

    def record(self, seq: int | None, revision: int | None) -> None:
        """The new highest seq and revision (None: unchanged)."""
        if seq is not None:
            self._map[_SEQ_AT : _SEQ_AT + 16] = _field(seq, b"seq")
        if revision is not None:
            self._map[_REVISION_AT : _REVISION_AT + 16] = _field(revision, b"revision")

    def close(self) -> None:
        self._map.close()


def attach(db: str, ends: Callable[[], tuple[int, int]]) -> Mark:
    """`db`'s mark, checked against `ends()` (the database's last seq and latest revision,
    read with its `-wal`), made from them when there is none (a new database, or one an
    earlier charter wrote). The mark is read first: another process's commits between
    the two reads raise the database's ends, never the mark past them. StoreRefused when
    the database ends below its mark (`D0101`) or the mark is damaged."""
    marked = _settled_mark(db)
    seq, revision = ends()
    if marked is None:
        create_mark(db, Marked(seq, revision))
    elif seq < marked.seq or revision < marked.revision:
        raise lost_commits(db, Marked(seq, revision), marked)
    return Mark(db)


def _settled_mark(db: str) -> Marked | None:
    """`read_mark`, read again a few times when it does not check: another process may be
    writing a field as it is read (its 16 bytes are not one atomic store for a reader)."""
    for _ in range(_TRIES - 1):
        try:
            return read_mark(db)
        except StoreRefused:
            time.sleep(0.005)
    return read_mark(db)


def lost_commits(db: str, found: Marked, marked: Marked) -> StoreRefused:
    behind = []
    if found.seq < marked.seq:
        behind.append(f"its log ends at seq {found.seq}, its mark records seq {marked.seq}")
    if found.revision < marked.revision:
        behind.append(
            f"its policy ends at revision {found.revision}, its mark records revision "
            f"{marked.revision}"
        )
    return StoreRefused(
        LOST_COMMITS,
        f"`{db}` lacks commits that were made: {'; '.join(behind)} (its `-wal` file was "
        "lost, or this is an older copy)",
        f"put back the `{db}-wal` file that was beside it, or the newer copy; served as it "
        "is, it would give out those seqs and revisions again",
    )
