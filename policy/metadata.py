"""The caps on the metadata an identity or an agent keeps (PATCH merges keys into it).

At most 16 KiB as the store encodes it (CBOR), Seed's cap on an agent definition's
metadata (docs/design.md section 7), and at most 32 levels deep, as a JSON body is
(api.http.body, 400 `too-deep`, so an HTTP request never meets that one): cbor2's C
encoder recurses on the C stack, and crashed the process at ~20,000 levels. An agent's
metadata is also what its conditions read (`agent.metadata.*`), held by every decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cbor2

METADATA_LIMIT = 16 * 1024
METADATA_DEPTH = 32
MERGE_HELP = (
    "a PATCH merges its keys into what is there: set the keys you no longer need to `null` "
    "to make room"
)


def over_cap(meta: Mapping[str, Any], what: str) -> str | None:
    """Why `meta` is over a cap (`what`: whose metadata, for the message), or None."""
    if deeper_than(meta, METADATA_DEPTH):  # (before the encoder, which would crash)
        return f"{what} is nested more than {METADATA_DEPTH} levels deep"
    size = len(cbor2.dumps(dict(meta)))
    if size <= METADATA_LIMIT:
        return None
    return f"{what} would take {size:,} bytes as CBOR, over its cap of {METADATA_LIMIT:,} bytes (16 KiB)"


def deeper_than(value: Any, limit: int) -> bool:
    """Whether objects and lists nest in `value` more than `limit` levels (`{}` is one);
    without recursion, whatever the depth."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
