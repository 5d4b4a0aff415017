"""The shape every management operation shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from api.service.core import Service
from api.service.tokens import Principal


class Outcome(Enum):
    """What an operation did. Each front end says it its own way (the HTTP API with a
    status: api.http.resources.STATUS), so the core names no protocol's codes."""

    DONE = "done"  # read, or changed: the body is the resource as it is now
    CREATED = "created"  # a new resource: the body is it
    PENDING = "pending"  # an agent's call paused for a person: the body names the approval
    REMOVED = "removed"  # deleted: no body


@dataclass(frozen=True, slots=True)
class Result:
    outcome: Outcome
    body: Any
    etag: str | None = None  # the answer's `ETag`: the resource's as stored (api.service.etags)


Operation = Callable[[Service, Principal, dict[str, Any]], Result]
# What an operation refuses, checked before an agent's request for it is decided
# (api.service.manage.PRECHECKS): it raises the refusal, and returns nothing.
Precheck = Callable[[Service, Principal, dict[str, Any]], None]
# An operation that takes a write's `If-Match` (None: not sent) and compares it itself,
# inside its own write transaction (api.service.views.CONDITIONAL).
Conditional = Callable[[Service, Principal, dict[str, Any], str | None], Result]
