"""What a condition reads that changes while a thread runs: the thread's spend.

`thread.cost` is the ledger's sum for the thread, which every allowed call with an
expected cost moves; `thread.id` and `thread.depth` stay as the thread was opened. A
service decides a call whose conditions read the cost inside the write transaction that
charges it (api.service.decisionlog), so the compiler says which ones may: see
`Snapshot.reads_thread_cost`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from policy import ast


def reads_thread_cost(node: Any) -> bool:
    """Whether an expression (or a tuple of them, a hook's rewrites) reads `thread.cost`
    or the whole `thread` map, which holds it."""
    stack = [node]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Path:
            if node.root == "thread" and (not node.parts or node.parts[0] == "cost"):
                return True
        elif kind is ast.Compare or kind is ast.BoolOp:
            stack += (node.left, node.right)
        elif kind is ast.Not:
            stack.append(node.operand)
        elif kind is ast.Call:
            stack += node.args
        elif kind is ast.ListLit:
            stack += node.items
        elif kind is tuple:
            stack += node
        elif kind is ast.Lit or node is None:
            continue
        elif dataclasses.is_dataclass(node):  # a map literal, a rewrite, any node added later
            stack += (getattr(node, f.name) for f in dataclasses.fields(node) if f.name != "span")
    return False
