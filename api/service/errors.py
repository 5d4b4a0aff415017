"""The one error the service raises: a refusal with a stable code, and no HTTP status.

The HTTP layer gives each code its status (api.http.codes, the live table) when it
writes the problem+json answer; the service says only what was refused and why.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

# Every code a ServiceError carries. A code outside this list does not type-check, and
# tests/api/test_error_codes.py checks that api.http.codes gives each one a status.
ErrorCode = Literal[
    # the request: its headers, body and query
    "bad-content-length", "body-too-large", "malformed-json", "duplicate-key", "too-deep",
    "invalid-body", "number-out-of-range", "batch-too-large", "repeated-parameter",
    "repeated-header", "bad-cursor", "bad-limit", "bad-after-seq", "bad-log-filter", "bad-if-match",
    "bad-revision", "id-too-long", "empty-policy", "not-utf8", "unsupported-charset",
    "duplicate-path", "bad-path", "fit-needs-candidate", "bad-remove-in-use", "bad-wait",
    "bad-last-event-id", "authzen-bad-request", "bad-receipt", "bad-memory-path", "invalid-cron",
    # who may
    "unauthorized", "token-expired", "insufficient-scope", "denied-by-policy", "invalid-rewrite",
    "does-not-fit", "budget-looser", "agent-attribute-differs", "identity-not-inherited",
    "not-managed-agent", "not-own-agent", "not-own-identity", "self-approval",
    "definition-widens",
    # a resource's fields
    "invalid-name", "identity-required", "invalid-seed",
    "unknown-profile", "unknown-identity", "invalid-budget", "invalid-max-cost",
    "invalid-status", "agent-required", "agent-not-allowed", "unknown-toolset",
    "credential-required", "metadata-too-large", "role-source-mismatch",
    "invalid-definition", "profile-required",
    "hook-source-mismatch", "toolset-source-mismatch", "invalid-expiry",
    # not there
    "agent-not-found", "turn-not-found", "thread-not-found", "approval-not-found",
    "connection-not-found", "identity-not-found", "token-not-found", "revision-not-found",
    "role-not-found", "profile-not-found", "hook-not-found", "toolset-not-found",
    "definition-not-found",
    "decision-not-found", "memory-entry-not-found", "schedule-not-found", "feed-not-found",
    # conflicts
    "no-policy", "agent-exists", "agent-too-deep", "agent-has-children", "identity-exists",
    "identity-has-connections", "request-id-reused", "role-exists", "role-not-api-managed",
    "profile-exists", "profile-not-api-managed", "hook-exists", "hook-not-api-managed",
    "toolset-exists", "toolset-not-api-managed",
    "approval-not-pending", "turn-ended", "turn-agent-mismatch", "turn-thread-mismatch",
    "thread-agent-mismatch", "resource-moved", "policy-in-use", "decision-not-allowed",
    "cost-already-reported",
    # the policy
    "policy-invalid", "revision-moved", "policy-too-large", "revision-does-not-check",
    "signature-required", "bundle-unsigned", "bundle-malformed", "bundle-unknown-key",
    "bundle-key-expired", "bundle-bad-signature", "bundle-file-unlisted",
    "bundle-file-missing", "bundle-digest-mismatch",
    # the server: a condition that passes
    "fit-unavailable", "solver-busy", "unavailable",
]  # fmt: skip
ERROR_CODES: frozenset[str] = frozenset(get_args(ErrorCode))

# What a document is, by its not-found code.
Thing = Literal["agent", "turn", "thread", "approval", "connection", "feed"]
NOT_FOUND: dict[Thing, ErrorCode] = {
    "agent": "agent-not-found",
    "turn": "turn-not-found",
    "thread": "thread-not-found",
    "approval": "approval-not-found",
    "connection": "connection-not-found",
    "feed": "feed-not-found",
}


class ServiceError(Exception):
    """A refused request. `code` is stable (api.http.codes gives its status, and
    docs/http-reference.md its row); `extra` is JSON; `retry_after`, when set, is how many
    seconds until the condition may have passed (HTTP sends it as `Retry-After`)."""

    def __init__(self, code: ErrorCode, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.extra = extra
        self.retry_after: int | None = None


def not_found(what: Thing, id: str) -> ServiceError:
    return ServiceError(NOT_FOUND[what], f"{what} `{id}` not found")


def no_policy() -> ServiceError:
    return ServiceError("no-policy", "no policy has been uploaded yet")


def invalid_token() -> ServiceError:
    return ServiceError("unauthorized", "the token is not valid")
