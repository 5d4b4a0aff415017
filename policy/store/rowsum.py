"""The checksum every stored row carries, in its `sum` column: one function computes it.

A row's digest is BLAKE2b-128 over the table's name and the row's columns, each as a type
byte, its length and its bytes, so no two different rows (of one table or of two) encode
alike. It is checked on every read: a byte changed anywhere in a row, in its key as much
as in its body, no longer matches, and the row is reported as damaged, never served.

The decision log is one chain: each row's digest covers the digest of the row before it
(`GENESIS` for the first), so a row removed, put back at another place or inserted breaks
the link of the row after it, and the digest of the last row (`SqliteStore.log_head`)
stands for the whole log: signing it vouches for every row before.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

SIZE = 16
GENESIS = bytes(SIZE)  # what the first row of the log chains to
_PERSON = b"charter-row-v1"
_LENGTH = struct.Struct("<Q")

Column = bytes | str | int | None


def _encoded(column: Column) -> bytes:
    if column is None:
        return b"n"
    if isinstance(column, bytes):
        return b"b" + _LENGTH.pack(len(column)) + column
    if isinstance(column, str):
        data = column.encode("utf-8", "surrogatepass")
        return b"s" + _LENGTH.pack(len(data)) + data
    text = str(column).encode()  # an integer, exact at any size (the ledger's `cum`)
    return b"i" + _LENGTH.pack(len(text)) + text


_TABLES: dict[str, bytes] = {}  # each table's name, encoded once


def row_digest(table: str, columns: tuple[Column, ...], chained_to: bytes | None = None) -> bytes:
    """The digest of a row of `table` with these columns (in the table's order); for a
    chained table, `chained_to` is the digest of the row before it. (Every stored row's
    write and read computes one: text and bytes, nearly every column, are encoded inline.)"""
    digest = hashlib.blake2b(digest_size=SIZE, person=_PERSON)
    update = digest.update
    name = _TABLES.get(table)
    if name is None:
        name = _TABLES[table] = _encoded(table)
    update(name)
    if chained_to is not None:
        update(_encoded(chained_to))
    for column in columns:
        if type(column) is str:
            data = column.encode("utf-8", "surrogatepass")
            update(b"s" + _LENGTH.pack(len(data)) + data)
        elif type(column) is bytes:
            update(b"b" + _LENGTH.pack(len(column)) + column)
        else:
            update(_encoded(column))
    return digest.digest()


def log_hasher(chained_to: bytes, seq: int, count: int, length: int) -> Any:
    """A BLAKE2b of a run of the decision log (`seq`, `count` rows, a body of `length`
    bytes), chained to the run before it, with all but the body fed: the caller feeds the
    body (whole, or piece by piece) and takes `digest()`, the same bytes `row_digest`
    gives for the row. The hot path's: one call to `update` for the columns."""
    digest = hashlib.blake2b(digest_size=SIZE, person=_PERSON)
    first, number = str(seq).encode(), str(count).encode()
    digest.update(
        b"".join(
            (
                b"s", _LENGTH.pack(9), b"decisions", b"b", _LENGTH.pack(SIZE), chained_to,
                b"i", _LENGTH.pack(len(first)), first, b"i", _LENGTH.pack(len(number)), number,
                b"b", _LENGTH.pack(length),
            )
        )
    )  # fmt: skip
    return digest


def log_digest(chained_to: bytes, seq: int, count: int, body: bytes) -> bytes:
    digest = log_hasher(chained_to, seq, count, len(body))
    digest.update(body)
    result: bytes = digest.digest()
    return result
