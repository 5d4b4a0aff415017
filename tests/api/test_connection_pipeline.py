"""Pipelined requests through the bounded protocol (api/http/connection.py): however the
requests are cut into sends and however large their bodies, every one is answered, in
order, once, while the connection is held and released over and over (a pipeline of 2,
bodies past the 1 KiB the parser is fed at a time and past uvicorn's 64 KiB pause)."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.http.app import create_app
from api.http.connection import GuardedHttpTools, Limits
from tests.api import rawhttp
from tests.api.conftest import Harness, LiveServer


class Tight(GuardedHttpTools):
    """Held after two waiting requests."""

    LIMITS = Limits(max_pipeline=2)


CALL = {"agent": "a1", "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip
# A request: a health probe, or a decision whose JSON body is padded with white space.
REQUEST = st.one_of(
    st.just(None),
    st.integers(0, 3000) | st.integers(60_000, 140_000),
)
# The sizes of the sends, taken in turn (but no more than 200 sends a connection).
CUTS = st.lists(st.integers(1, 100) | st.integers(1000, 70_000), min_size=1, max_size=12)


def _bytes(request: int | None, token: str) -> bytes:
    if request is None:
        return rawhttp.request("GET", "/healthz")
    body = json.dumps(CALL).encode() + b" " * request
    headers = (("Authorization", f"Bearer {token}"), ("Content-Type", "application/json"))
    return rawhttp.request("POST", "/v1/decisions", headers, body)


def test_pipelined_requests_are_all_answered_in_order(harness: Harness) -> None:
    with LiveServer(create_app(harness.service), http=Tight) as url:
        port = int(url.rsplit(":", 1)[1])

        @settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
        @given(requests=st.lists(REQUEST, min_size=1, max_size=16), cuts=CUTS)
        def check(requests: list[int | None], cuts: list[int]) -> None:
            data = b"".join(_bytes(r, harness.admin) for r in requests)
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:

                def send() -> None:  # in pieces of the drawn sizes, over and over
                    at, turn = 0, 0
                    while at < len(data):
                        size = max(cuts[turn % len(cuts)], len(data) // 200)
                        sock.sendall(data[at : at + size])
                        at, turn = at + size, turn + 1

                sender = threading.Thread(target=send)
                sender.start()
                answers = rawhttp.read_answers(sock, len(requests))
                sender.join(30)
            seqs: list[Any] = []
            for request, answer in zip(requests, answers, strict=True):
                assert answer.status == 200, (request, answer)
                if request is None:
                    assert answer.json() == {"status": "ok"}
                else:
                    assert answer.json()["effect"] == "allow"
                    seqs.append(answer.json()["seq"])
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

        check()
