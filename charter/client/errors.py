"""What a call of the client raises: a `ClientError`, one of

- `ProblemError`: the server refused the request, answering problem+json (RFC 9457) with
  a status of 400 or more; its stable `code` is what a caller branches on (the codes are
  listed in docs/http-reference.md). An error answer that is not problem+json (a proxy's
  page) is one too, with the code `http-error` and the status it had;
- `Paused`: an agent's management request (an approval's get, approve or reject with an
  agent's token) that its policy paused, answered 202: it runs once a person approves
  approval `approval_id`;
- `NoAnswer`: no answer to read: the server could not be reached or did not answer in
  time, or answered what the API does not (a body that is not the operation's answer).

None of them holds the bearer token, in its message, its `repr` or its fields.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from pydantic import ValidationError

from api.http.answers import Pending, Problem
from api.service.encoding import loads


class ClientError(Exception):
    """Any failure of a call of the client."""


class ProblemError(ClientError):
    """A refusal: the problem+json answer, its fields as attributes (`problem` is the whole
    of it, with the fields some codes add: `errors`, `diagnostics`, `decision`, ...)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(f"{problem.status} {problem.code}: {problem.detail}")
        self.problem = problem
        self.status = problem.status
        self.code = problem.code
        self.title = problem.title
        self.detail = problem.detail
        self.help = problem.help

    def __repr__(self) -> str:
        return f"ProblemError(status={self.status}, code={self.code!r}, detail={self.detail!r})"


class Paused(ClientError):
    """A management request paused by the agent's policy: `pending` is the 202's answer
    (`approval_id` and the `decision` that paused it)."""

    def __init__(self, pending: Pending) -> None:
        super().__init__(f"paused: awaits approval `{pending.approval_id}`")
        self.pending = pending
        self.approval_id = pending.approval_id

    def __repr__(self) -> str:
        return f"Paused(approval_id={self.approval_id!r})"


class NoAnswer(ClientError):
    """No answer the client can read; `__cause__` is the transport's error, if any."""


def problem_of(status: int, content: bytes) -> ProblemError:
    """The refusal an error answer of `status` says; one that is not problem+json is an
    `http-error` of that status, with its reason phrase."""
    try:
        found = loads(content)
        if isinstance(found, dict) and found.get("status") == status:
            return ProblemError(Problem.model_validate(found))
    except (ValueError, ValidationError):  # (not JSON, or not a problem)
        pass
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    detail = f"the server answered {status} {title}, not a problem+json"
    fields: dict[str, Any] = {"type": "about:blank", "title": title, "status": status}
    return ProblemError(Problem(**fields, code="http-error", detail=detail))
