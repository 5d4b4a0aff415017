"""A row's checksum (policy/store/rowsum.py): BLAKE2b-128 over the table's name and the
row's columns, each as a type byte, its length and its bytes. Every stored row carries
one, so the encoding is fixed: a digest computed by this charter matches the definition
for any columns, and a known row's digest is pinned."""

from __future__ import annotations

import hashlib
import struct

from hypothesis import given
from hypothesis import strategies as st

from policy.store.rowsum import GENESIS, row_digest

Column = bytes | str | int | None


def _defined(table: str, columns: tuple[Column, ...], chained_to: bytes | None) -> bytes:
    def encoded(column: Column) -> bytes:
        if column is None:
            return b"n"
        if isinstance(column, bytes):
            kind, data = b"b", column
        elif isinstance(column, str):
            kind, data = b"s", column.encode("utf-8", "surrogatepass")
        else:
            kind, data = b"i", str(column).encode()
        return kind + struct.pack("<Q", len(data)) + data

    digest = hashlib.blake2b(digest_size=16, person=b"charter-row-v1")
    for part in (table, *(() if chained_to is None else (chained_to,)), *columns):
        digest.update(encoded(part))
    return digest.digest()


COLUMNS = st.one_of(
    st.none(), st.binary(max_size=64), st.text(max_size=32),
    st.integers(min_value=-(2**70), max_value=2**70), st.booleans(),
)  # fmt: skip


@given(
    st.sampled_from(["documents", "ledger", "meta", "decisions"]),
    st.tuples(*[COLUMNS] * 5),
    st.none() | st.binary(min_size=16, max_size=16),
)
def test_a_digest_is_its_definition(
    table: str, columns: tuple[Column, ...], chained_to: bytes | None
) -> None:
    assert row_digest(table, columns, chained_to) == _defined(table, columns, chained_to)


def test_a_known_rows_digest_is_pinned() -> None:
    """(A change here makes every stored row read as damaged.)"""
    document = ("thread-events", "01a2442c-5a43-74fb-ad22-e1b51501ccb2", "th", b"\xa1ax\x01")
    assert row_digest("documents", document).hex() == "4ed133e0c6d12ea841af68551b1ee2ef"
    assert (
        row_digest("decisions", (1, 3, b"{}"), GENESIS).hex() == "b8263368746af8f56ba0fb99fd37627f"
    )
    assert (
        row_digest("meta", ("surrogate \udcff", None, -(2**65))).hex()
        == "10578ce9cafb375329b51701b555427b"
    )
