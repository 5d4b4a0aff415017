"""What a condition reads that changes while a thread runs: the thread's spend.

`thread.cost` is the ledger's sum for the thread, which every allowed call with an
expected cost moves; `thread.id` and `thread.depth` stay as the thread was opened. A
service decides a call whose conditions read the cost inside the write transaction that
charges it (api.service.decisionlog), so the compiler says which ones may: see
`Snapshot.reads_thread_cost`.
"""

from __future__ import annotations

from typing import Any

from policy import ast


def reads_thread_cost(node: Any) -> bool:
    """Whether an expression (or a tuple of them, a hook's rewrites) reads `thread.cost`
    or the whole `thread` map, which holds it."""
    return any(
        path.root == "thread" and (not path.parts or path.parts[0] == "cost")
        for path in ast.paths(node)
    )
