"""What the endpoints that are not management tools read: the request models (pydantic
v2) of decisions, fit checks, turns, policy uploads and tokens, which `/openapi.json`
gives with the answers' (api.http.answers). The management tools' bodies are the core's
(api.commands)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, field_validator

from api.commands import MAX_ID, Id, OptionalId, Strict, exact
from api.service.budget import MAX_USD
from api.service.tokens import MAX_LIFETIME_MS
from api.service.tokens import MAX_NAME as MAX_TOKEN_NAME

MAX_BATCH = 1000  # calls in one batch
MAX_COST = int(MAX_USD)  # USD: the largest `expected_cost`, as an int for a fast comparison


class DecisionRequest(Strict):
    agent: str = Id
    tool: str = Field(min_length=1, max_length=MAX_ID)
    args: dict[str, Any] = Field(default_factory=dict)
    thread: str | None = OptionalId
    turn: str | None = OptionalId
    context: dict[str, Any] | None = None
    expected_cost: Decimal | None = Field(
        default=None, ge=0, le=MAX_USD, allow_inf_nan=False, description="USD, 0 to 10^9"
    )
    connection: str | None = OptionalId

    _exact_cost = field_validator("expected_cost", mode="before")(exact)


class CostReport(Strict):
    """What an allowed call cost once it ran (`POST /v1/decisions/{id}/cost`)."""

    seq: int = Field(ge=1, le=(1 << 63) - 1, description="the decision's `seq` in the log")
    amount: Decimal = Field(ge=0, le=MAX_USD, allow_inf_nan=False, description="USD, 0 to 10^9")

    _exact_amount = field_validator("amount", mode="before")(exact)


class BatchRequest(Strict):
    calls: list[DecisionRequest] = Field(min_length=1, max_length=MAX_BATCH)


class FitRequest(Strict):
    agent: str = Id
    kind: Literal["role", "profile"] = "role"
    source: str | None = Field(default=None, max_length=256_000)
    profile: str | None = Field(default=None, max_length=MAX_ID)


class TurnRequest(Strict):
    agent: str = Id
    thread: str | None = OptionalId


class PolicyFile(Strict):
    path: str = Field(min_length=1, max_length=512)
    text: str


class PolicyUpload(Strict):
    files: list[PolicyFile] = Field(min_length=1, max_length=10_000)
    note: str = ""


class BundleEntry(Strict):
    path: str = Field(min_length=1, max_length=512)
    sha256: str = Field(pattern="^[0-9a-f]{64}$", description="SHA-256 of its UTF-8 text, hex")


class BundleManifest(Strict):
    format: Literal["charter-bundle/1"]
    revision: str = Field(max_length=200, description="the author's label")
    files: list[BundleEntry] = Field(max_length=10_000, description="sorted by path")


class BundleSignature(Strict):
    key_id: str = Field(pattern="^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    signature: str = Field(max_length=100, description="Ed25519, base64")


class PolicyBundle(Strict):
    """A bundle file (`charter bundle build DIR -o FILE`, then `charter bundle sign`)."""

    manifest: BundleManifest
    signatures: list[BundleSignature] = Field(default_factory=list, max_length=16)
    files: list[PolicyFile] = Field(min_length=1, max_length=10_000)


class TokenCreate(Strict):
    scope: Literal["admin", "decide", "agent"]
    agent: str | None = Field(default=None, max_length=MAX_ID)
    name: str = Field(default="", max_length=MAX_TOKEN_NAME)
    expires_in: int | None = Field(
        default=None, ge=1, le=MAX_LIFETIME_MS // 1000, description="seconds from now"
    )
    expires_at: int | None = Field(default=None, ge=1, description="ms since the epoch")


class Draft(Strict):
    """A workspace the policy playground sends whole (`/v1/drafts/*`): never stored."""

    files: list[PolicyFile] = Field(min_length=1, max_length=10_000)


class DraftDecision(Draft):
    profile: str = Field(min_length=1, max_length=MAX_ID)
    tool: str = Field(min_length=1, max_length=MAX_ID)
    args: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] | None = None


class DraftTests(Draft):
    coverage: bool = False


class DraftFit(Draft):
    caller_profile: str = Field(min_length=1, max_length=MAX_ID)
    role: str = Field(min_length=1, max_length=MAX_ID)
