"""What both clients are made with: the server's base URL, the bearer token (sent in
each request's `Authorization` header, kept nowhere else: not in an attribute, a `repr`
or an error) and the timeout."""

from __future__ import annotations

from typing import Any

import httpx

from charter import __version__
from charter.client.ask import Ask

TIMEOUT = 30.0  # seconds: to connect, and between two reads of an answer


def checked_token(token: str) -> str:
    """`token` if it can be sent in a header as it is; else ValueError, which does not
    show it (a token pasted with a line break would else be echoed by the HTTP library's
    refusal of the header)."""
    if not token or not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError("a token is printable ASCII without spaces, as `charter token` gives")
    return token


def options(base_url: str, token: str, timeout: float) -> dict[str, Any]:
    """httpx's arguments for a client of `base_url` (a path after the host, a proxy's
    prefix, is kept: the API's paths go under it)."""
    return {
        "base_url": base_url.rstrip("/"),
        "headers": {
            "Authorization": f"Bearer {checked_token(token)}",
            "User-Agent": f"charter-client/{__version__}",
        },
        "timeout": timeout,
        "follow_redirects": False,
    }


def timeout_for(timeout: float, ask: Ask[Any]) -> httpx.Timeout:
    """The request's timeouts: `timeout` for each, and for reading its answer, that plus
    the time the server may hold it back (a long poll's `wait`)."""
    return httpx.Timeout(timeout, read=timeout + ask.waits)


def headers_for(ask: Ask[Any]) -> dict[str, str]:
    """The request's own headers (the token is the client's)."""
    found = dict(ask.headers)
    if ask.body is not None:
        found["Content-Type"] = "application/json"
    return found


def shown(kind: str, base_url: str) -> str:
    return f"{kind}({base_url.rstrip('/')!r})"
