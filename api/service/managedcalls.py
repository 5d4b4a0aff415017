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

from api.commands import Command
from api.service.core import Service
from api.service.ops import Operation, Precheck
from api.service.tokens import Principal


@dataclass(frozen=True, slots=True)
class ManagedCalls:
    # The precheck of a management tool (None: it has none).
    precheck: Callable[[str], Precheck | None]
    # `unchanged(service, actor, command, if_match)`: `resource-moved` when the document
    # `command` acts on differs from the one `if_match` names.
    unchanged: Callable[[Service, Principal, Command, str], None]
    # `guarded(tool, if_match)`: the tool's operation, run only while its document is the
    # one `if_match` names (None: unconditionally).
    guarded: Callable[[str, str | None], Operation]
