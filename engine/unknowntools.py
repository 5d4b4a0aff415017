"""The answers for tool names a snapshot does not have, cached within a bound.

An unknown name is denied whatever the profile and the arguments, so its answer is one
`Decision` per name, made once and kept for every later call of that name (an agent
retrying a tool it imagined, under any profile, pays a look-up, not a new answer). Any
caller can send any name, so what is kept is bounded: at most `LIMIT` names per
snapshot, the oldest dropped first, and never a name longer than a declared name can be
(`MAX_NAME_CHARS`) nor one that is not a `str`: random names cost a hostile caller a
new answer every time and the snapshot at most `LIMIT` answers. Answers live here, not in the profiles' indexes, so
those (the hot path's dicts) never change for a name that is not a tool.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from engine.decision import Decision
from engine.plan import make_unknown_tool
from grammar.source import MAX_NAME_CHARS

LIMIT = 4_096


class UnknownTools:
    """Unknown tool name -> its answer, the oldest `limit` names dropped first."""

    __slots__ = ("_answers", "_lock", "limit")

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._answers: OrderedDict[str, Decision] = OrderedDict()
        self._lock = threading.Lock()  # for adding (reading takes none)

    def __len__(self) -> int:
        return len(self._answers)

    def answer(self, tool: str) -> Decision:
        found = self._answers.get(tool)
        if found is None:
            found = make_unknown_tool(tool)
            if type(tool) is str and len(tool) <= MAX_NAME_CHARS:
                with self._lock:
                    self._answers[tool] = found
                    while len(self._answers) > self.limit:
                        self._answers.popitem(last=False)
        return found


class UnknownToolPlan:
    """The plan of a tool name that does not exist: its answer, whatever the arguments."""

    __slots__ = ("decision",)

    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    def __call__(
        self, args: object, x: object = None, g: object = None, t: object = None
    ) -> Decision:
        return self.decision
