"""The shape every management operation shares."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import ValidationError

from api.commands import COMMANDS, Command
from api.service.core import Service
from api.service.errors import ServiceError
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


# An operation runs its tool's command (api.commands.COMMANDS: each function takes its own
# class of it, which api.service.manage looks up by the command's `tool`, and
# tests/api/test_commands.py checks that each table pairs a tool with the function of its
# class), so the tables hold functions of any command.
Operation = Callable[[Service, Principal, Any], Result]
# What an operation refuses, checked before an agent's request for it is decided
# (api.service.manage.PRECHECKS): it raises the refusal, and returns nothing.
Precheck = Callable[[Service, Principal, Any], None]
# An operation that takes a write's `If-Match` (None: not sent) and compares it itself,
# inside its own write transaction (api.service.views.CONDITIONAL).
Conditional = Callable[[Service, Principal, Any, str | None], Result]


def command_of(tool: str, args: Mapping[str, Any]) -> Command:
    """`tool`'s command of the arguments it was decided with: a rewrite hook's, or those
    of the call an approval holds. A rewrite may set a value of the argument's type that
    the command does not take (a `status` of no such state, an amount over its cap): refused,
    `invalid-rewrite`, with each mismatch (where and what, never a value: the arguments
    may hold a secret)."""
    try:
        return COMMANDS[tool].model_validate(args)
    except ValidationError as exc:
        errors = [
            {"loc": [str(p) for p in e["loc"]], "message": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
        raise ServiceError(
            "invalid-rewrite",
            f"`{tool}` was decided with arguments it does not take",
            help="a rewrite hook of the agent's profile sets them: make it set values the "
            "tool's schema allows",
            errors=errors,
        ) from None
