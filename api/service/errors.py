"""The one error the service raises: HTTP turns it into problem+json, nothing else leaks."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A refused request. `code` is stable: api/http/codes.py lists every one (and
    docs/http-reference.md its table); `extra` is JSON; `retry_after`, when set, is sent as the `Retry-After`
    header (seconds: a condition that passes)."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra
        self.retry_after: int | None = None


def not_found(what: str, id: str) -> ServiceError:
    return ServiceError(404, f"{what}-not-found", f"{what} `{id}` not found")


def no_policy() -> ServiceError:
    return ServiceError(409, "no-policy", "no policy has been uploaded yet")


def invalid_token() -> ServiceError:
    return ServiceError(401, "unauthorized", "the token is not valid")
