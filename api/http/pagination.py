"""Query parameters: integers with bounds, and the list ones (`cursor`, `limit`)."""

from __future__ import annotations

from typing import Any, Literal

from starlette.requests import Request

from api.service.errors import ErrorCode, ServiceError

# The integer query parameters, each with the code that refuses it.
IntQuery = Literal["limit", "revision", "after_seq", "wait"]
BAD: dict[IntQuery, ErrorCode] = {
    "limit": "bad-limit",
    "revision": "bad-revision",
    "after_seq": "bad-after-seq",
    "wait": "bad-wait",
}


def query(request: Request, name: str) -> str | None:
    """The query parameter `name` (percent- and `+`-decoded), or None; given twice, a 400
    `repeated-parameter`: this reader keeps the last, a proxy or another reader may keep
    the first, and an agent's list is decided on its parameters (api.http.resources)."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise ServiceError(
            "repeated-parameter", f"the query parameter `{name}` is given {len(values)} times",
            help="give each query parameter once",
        )  # fmt: skip
    return values[0] if values else None


def int_query(
    request: Request, name: IntQuery, default: int, *, minimum: int = 0, maximum: int | None = None
) -> int:
    raw = query(request, name)
    if raw is None or raw == "":
        return default
    # ASCII digits only: str.isdigit() also takes `²`, `１` and `١`, which int() refuses
    # or reads as another number. 18 digits always fit in a signed 64-bit integer.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise ServiceError(BAD[name], f"`{name}` must be an integer")
    value = int(raw)
    if value < minimum or (maximum is not None and value > maximum):
        top = f" to {maximum}" if maximum is not None else " or more"
        raise ServiceError(BAD[name], f"`{name}` must be from {minimum}{top}")
    return value


def list_args(request: Request, *extra: str) -> dict[str, Any]:
    """`cursor` and `limit` (validated later against the cursor's list), plus filters."""
    args: dict[str, Any] = {}
    cursor = query(request, "cursor")
    if cursor:
        args["cursor"] = cursor
    if "limit" in request.query_params:
        args["limit"] = int_query(request, "limit", 50, minimum=1, maximum=200)
    for name in extra:
        value = query(request, name)
        if value:
            args[name] = value
    return args
