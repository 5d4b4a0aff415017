"""Reading a JSON body: at most 1 MiB, parsed by a pydantic model, nested at most 32 deep,
its numbers exact.

Every JSON body goes through `body` (or `parse`), but for the decisions' (api.http.calls,
a fast path of its own that keeps these rules). The models read a number with a fraction
or an exponent as a float (a `Decimal` field as the Decimal of that float), and a float
is not exact: an agent's `metadata.limit` of `100.000000000000000000000001` would be kept
as 100.0, which a condition `agent.metadata.limit <= 100.00` lets through. So the body is
parsed a second time by jiter keeping such numbers' text (`float_mode="lossless-float"`);
when it has any, each gets its exact value (`api.service.encoding.exact_number`: the
float when that is exactly the number its text says, else the Decimal of the text, and
a 422 `number-out-of-range` past a double's range) and the model is built again from the
exact values, so its bounds are checked on them too.

A key given twice in one object (`{"agent": "a", "agent": "b"}`, in a call's `args`, in a
role's body) is a 400 `duplicate-key`, in every body (`strict_json`): the parsers here keep
the last, but parsers elsewhere keep the first, so a client, a proxy or a tool that runs
the call could read another call than the one decided and logged. jiter finds it as it
parses (about 0.2 µs a single decision's body, 0.15 µs a call of a batch:
docs/design-notes.md, "Reading a request").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

import jiter
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope

from api.service.encoding import LOSSLESS, check_depth, digits_out_of_range, exact_in_place
from api.service.errors import ServiceError

MAX_BODY = 1 << 20
# JSON's white space: a body of nothing else is empty. (Not bytes.strip(), which also
# strips \v and \f: they are not JSON, and such a body must not read as `{}`.)
JSON_SPACE = b" \t\n\r"
M = TypeVar("M", bound=BaseModel)


def scope_header(scope: Scope, name: bytes) -> str | None:
    """A request header's first value (`name` in lower case, as ASGI gives names), read
    straight from the scope: what `request.headers.get` gives, without building Headers."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def single_header(scope: Scope, name: bytes) -> str | None:
    """A header that HTTP allows once (`name` in lower case): its value, None when it is
    not sent, and 400 `repeated-header` when it is sent more than once. Readers differ on
    which of two they take (starlette and `scope_header` the first, others the last), so
    a proxy that checks one could pass the request on to be read by the other: of two
    `Authorization` headers, an agent's token and an admin's, the proxy could check the
    agent's while the admin's is acted on here."""
    found = None
    for key, value in scope["headers"]:
        if key == name:
            if found is not None:
                shown = name.decode("latin-1").title()
                raise ServiceError(
                    "repeated-header", f"the header `{shown}` is given more than once",
                    help=f"send `{shown}` once",
                )  # fmt: skip
            found = value
    return None if found is None else str(found.decode("latin-1"))


async def read_body(request: Request) -> bytes:
    return await receive_body(request.scope, request.receive)


async def receive_body(scope: Scope, receive: Receive) -> bytes:
    """The request's body, at most MAX_BODY bytes (413 past it, whether or not a
    Content-Length said so); ClientDisconnect if the client went away meanwhile."""
    length = scope_header(scope, b"content-length")
    if length is not None:
        # ASCII digits only: str.isdigit() takes `²`, which int() refuses.
        if not (length.isascii() and length.isdigit()):
            raise ServiceError("bad-content-length", "Content-Length is not a number")
        if len(length) > 18:  # (bounded before int(), which refuses 4,300 digits)
            length = length.lstrip("0") or "0"  # zeros ahead say nothing: `00…02` is 2
            if len(length) > 18:
                raise _too_large()
        if int(length) > MAX_BODY:
            raise _too_large()
    # The ASGI messages read directly (what request.stream() does, without its async
    # generator): a small body is one message.
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect()
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise _too_large()
        if not message.get("more_body", False):
            if not chunks:
                return chunk
            chunks.append(chunk)
            return b"".join(chunks)
        chunks.append(chunk)


def _too_large() -> ServiceError:
    return ServiceError("body-too-large", f"the body is over {MAX_BODY} bytes (1 MiB)")


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(p) for p in e["loc"]], "message": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_input=False)
    ]


def validate(model: type[M], raw: bytes) -> M:
    """The model of a JSON body as pydantic reads it (numbers with a fraction or an
    exponent as floats), or its 400/413/422."""
    if not raw.strip(JSON_SPACE):
        raw = b"{}"  # an empty body is an empty object: required fields still fail
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = _errors(exc)
        if any(e["type"] == "json_invalid" for e in errors):
            if any("recursion" in e["message"] for e in errors):
                raise ServiceError("too-deep", "the JSON is nested too deep") from None
            # (the parser's word for an integer part past 4,300 digits: valid JSON)
            past = [e["message"] for e in errors if "number out of range" in e["message"]]
            if past:
                raise digits_out_of_range(raw, past[0]) from None
            raise ServiceError("malformed-json", "the body is not valid JSON") from None
        if any(e["type"] == "too_long" and e["loc"][:1] == ["calls"] for e in errors):
            raise ServiceError("batch-too-large", "a batch holds at most 1000 calls") from None
        raise _invalid(errors) from None


def unreadable() -> ServiceError:
    return ServiceError("malformed-json", "the body's numbers could not be read exactly")


def not_json_numbers() -> ServiceError:
    """A body the models read but a strict JSON parser does not: the models' parser takes
    NaN and Infinity, which JSON has no place for, and which no condition compares as a
    number (`NaN > 100` and `NaN <= 100` are both false): refused, never decided."""
    return ServiceError(
        "malformed-json",
        "the body is not valid JSON: `NaN`, `Infinity` and `-Infinity` are not JSON numbers",
    )  # fmt: skip


def _invalid(errors: list[dict[str, Any]]) -> ServiceError:
    return ServiceError("invalid-body", "the body does not match the schema", errors=errors)


def checked(command: type[M], fields: Mapping[str, Any]) -> M:
    """A management tool's command of a request's body fields (read by `body` with the
    body's own model), query and path (bounded by their readers, api.http.pagination
    and api.http.routing): what the body's model took, the command takes; anything else
    is refused as a body is, 422 `invalid-body`."""
    try:
        return command.model_validate(fields)
    except ValidationError as exc:
        raise _invalid(_errors(exc)) from None


def strict_json(raw: bytes) -> Any:
    """`raw` parsed by jiter as the readers need it: a number with a fraction or an
    exponent kept as its text (a LosslessFloat), NaN and Infinity refused, and a key
    given twice in one object the 400 `duplicate-key`; ValueError for a body that is not
    JSON (then the models say why, or it holds a NaN or an Infinity). (The decisions'
    reader, api.http.calls, makes the same call with `cache_mode="keys"`.)"""
    try:
        return jiter.from_json(
            raw, allow_inf_nan=False, float_mode="lossless-float", catch_duplicate_keys=True
        )
    except ValueError as exc:
        refused = duplicate_refusal(raw, exc)
        if refused is None:
            raise
        raise refused from None


def duplicate_refusal(raw: bytes, exc: ValueError) -> ServiceError | None:
    """Why jiter refused `raw` (`exc`) where a key given twice is refused: the 400
    `duplicate-key` for a body that is JSON but for that, else None (not JSON). A refused
    body only is parsed again, without the keys' check."""
    try:
        jiter.from_json(raw, allow_inf_nan=False, float_mode="lossless-float")
    except ValueError:
        return None
    return duplicate_key(str(exc))


_DUPLICATE = re.compile(r'duplicate key "(.*)" at line (\d+) column (\d+)$', re.DOTALL)


def duplicate_key(message: str) -> ServiceError:
    """The 400 for a key twice in one object, from jiter's message (the key as jiter
    writes it, escaped; where it was found)."""
    found = _DUPLICATE.search(message)
    where = "" if found is None else (
        f": `{_shown(found.group(1))}` (line {found.group(2)}, column {found.group(3)})"
    )  # fmt: skip
    return ServiceError(
        "duplicate-key", f"an object in the body has a key twice{where}",
        help="send each key once: JSON parsers differ on which of the two they keep",
    )  # fmt: skip


def _shown(text: str) -> str:
    return text[:40] + ("..." if len(text) > 40 else "")


def parse(model: type[M], raw: bytes) -> M:
    """The model of a JSON body with every number exact (module docstring): the models'
    422 first, then a key given twice or a body nested more than 32 deep is a 400 and a
    number past a double's range a 422 (the order of the decisions' reader)."""
    item = validate(model, raw)
    try:
        tree = strict_json(raw if raw.strip(JSON_SPACE) else b"{}")
    except ValueError:  # the models read it, so it holds a NaN or an Infinity
        raise not_json_numbers() from None
    if check_depth(tree, "the body", LOSSLESS):
        exact_in_place(tree)
        try:
            item = model.model_validate(tree)
        except ValidationError as exc:  # a bound the float was within, the number is not
            raise _invalid(_errors(exc)) from None
    return item


async def body(request: Request, model: type[M]) -> M:
    return parse(model, await read_body(request))
