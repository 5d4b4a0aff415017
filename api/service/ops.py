"""The shape every management operation shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from api.service.core import Service
from api.service.tokens import Principal


@dataclass(frozen=True, slots=True)
class Result:
    status: int
    body: Any
    etag: str | None = None  # the answer's `ETag`: the resource's as stored (api.service.etags)


Operation = Callable[[Service, Principal, dict[str, Any]], Result]
# What an operation refuses, checked before an agent's request for it is decided
# (api.service.manage.PRECHECKS): it raises the refusal, and returns nothing.
Precheck = Callable[[Service, Principal, dict[str, Any]], None]
# An operation that takes a write's `If-Match` (None: not sent) and compares it itself,
# inside its own write transaction (api.service.views.CONDITIONAL).
Conditional = Callable[[Service, Principal, dict[str, Any], str | None], Result]
