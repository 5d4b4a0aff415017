"""A revision's files kept by content: each text once, whatever number of revisions hold it.

Every policy change is a new revision of every file, and most changes touch one file (a
`roles.create` adds `api/roles/<name>.charter`): a revision that held a copy of each text
made the store grow with the square of the number of changes (300 role creates of 250 KB
sources, 11 GB). So a store keeps each distinct text once, under its SHA-256 (its UTF-8
bytes'), and a revision's row holds `[path, digest]` pairs: those of the files that changed
since the revision before, and now and then every file's (policy/store/revisions.py).

A revision stored before holds `[path, text]` pairs, read as they are: a digest is bytes,
a text a string, so each pair says which it is and nothing is rewritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def encode(text: str) -> bytes:
    # surrogatepass: the text a digest names must come back exactly as it was given
    # (parse() refuses a lone surrogate, so no policy that checks holds one anyway).
    return text.encode("utf-8", "surrogatepass")


def decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def split(files: Iterable[Sequence[Any]]) -> tuple[list[list[Any]], dict[bytes, bytes]]:
    """A revision's `[path, text]` pairs as `[path, digest]` pairs, and the texts (UTF-8)
    by their digests (one each: two files with one text are one text)."""
    refs: list[list[Any]] = []
    texts: dict[bytes, bytes] = {}
    for path, text in files:
        data = encode(str(text))
        digest = hashlib.sha256(data).digest()
        texts[digest] = data
        refs.append([path, digest])
    return refs, texts


def digests(files: Iterable[Sequence[Any]]) -> set[bytes]:
    """The texts a stored revision's pairs name by digest (none in one stored before)."""
    return {ref for _, ref in files if isinstance(ref, bytes)}


def join(files: Iterable[Sequence[Any]], texts: Mapping[bytes, bytes]) -> list[list[Any]]:
    """A stored revision's pairs as `[path, text]` again (`texts`: at least `digests(files)`)."""
    return [[path, decode(texts[ref]) if isinstance(ref, bytes) else ref] for path, ref in files]
