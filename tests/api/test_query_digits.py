"""Integer query parameters (`limit`, `after_seq`, `revision`) and Content-Length: ASCII
digits only, a bounded number of them, else a 400 with the parameter's code, never a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import LISTS, Harness, expect

# `²` and `³` (superscripts), fullwidth `１`, Arabic-Indic `١`, Devanagari `५`: each is
# str.isdigit(), and int() refuses the first two and reads the others as 1 or 5.
UNICODE_DIGITS = ["\u00b2", "\u00b3", "\uff11", "\u0661", "\u096b", "1\u00b2", "\uff11\uff10"]


@pytest.mark.parametrize("path", [*LISTS, "/v1/decisions"])
def test_unicode_digits_in_limit_are_bad_limit(
    live: httpx.Client, harness: Harness, path: str
) -> None:
    for digits in UNICODE_DIGITS:
        expect(live.get(path, params={"limit": digits}, headers=harness.auth()), 400,
               "bad-limit")  # fmt: skip
    expect(live.get(path, params={"limit": "1" * 19}, headers=harness.auth()), 400, "bad-limit")


def test_unicode_digits_in_after_seq_and_revision(live: httpx.Client, harness: Harness) -> None:
    auth = harness.auth()
    for digits in UNICODE_DIGITS:
        expect(live.get("/v1/decisions", params={"after_seq": digits}, headers=auth), 400,
               "bad-after-seq")  # fmt: skip
        expect(live.get("/v1/policy", params={"revision": digits}, headers=auth), 400,
               "bad-revision")  # fmt: skip
    expect(live.get("/v1/policy", params={"revision": "9" * 40}, headers=auth), 400,
           "bad-revision")  # fmt: skip
    assert live.get("/v1/policy", params={"revision": "1"}, headers=auth).status_code == 200


def test_unicode_digits_in_content_length_are_bad_content_length() -> None:
    import asyncio

    from starlette.requests import Request

    from api.http.body import read_body
    from api.service.errors import ServiceError

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    for length, code in ((b"\xb2", "bad-content-length"), (b"9" * 5000, "body-too-large")):
        scope = {"type": "http", "method": "POST", "path": "/", "headers": [
            (b"content-length", length)]}  # fmt: skip
        with pytest.raises(ServiceError) as refused:
            asyncio.run(read_body(Request(scope, receive)))
        assert refused.value.code == code
