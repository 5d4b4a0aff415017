"""What approving an agent's paused management call runs of it (`ManagedCalls`).

An approved management call runs as it would have when the agent asked
(api.service.manage): its precheck, the comparison of the `If-Match` it was sent with,
then its operation. Those come from the registry of management operations, which holds
the approvals' own operations too (an agent's paused `approvals.approve` runs one once
approved); so the module that assembles the registry hands them to the approvals'
operations, which never import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from api.service.core import Service
from api.service.ops import Operation, Precheck
from api.service.tokens import Principal


@dataclass(frozen=True, slots=True)
class ManagedCalls:
    # The precheck of a management tool (None: it has none).
    precheck: Callable[[str], Precheck | None]
    # `unchanged(service, actor, tool, args, if_match)`: `resource-moved` when the document
    # `tool` acts on differs from the one `if_match` names.
    unchanged: Callable[[Service, Principal, str, dict[str, Any], str], None]
    # `guarded(tool, if_match)`: the tool's operation, run only while its document is the
    # one `if_match` names (None: unconditionally).
    guarded: Callable[[str, str | None], Operation]
