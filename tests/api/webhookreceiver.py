"""A webhook receiver on loopback: a real HTTP server (or HTTPS, with a certificate made
by `self_signed`), in a thread of the test's process, that keeps every request it is
sent and answers the first `fail_first` of them 500."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

PATH = "/hooks/Qw7Zx3Kv9Jp2"  # (a path a log line must never show)


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered
    at: float  # time.monotonic() when it came
    path: str


class Receiver:
    def __init__(self, fail_first: int = 0, tls: tuple[Path, Path] | None = None) -> None:
        """`tls`: (certificate, key) files: served over HTTPS with them."""
        self.fail_first = fail_first
        self.got: list[Received] = []
        self._changed = threading.Condition()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with owner._changed:
                    status = 500 if len(owner.got) < owner.fail_first else 204
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    owner.got.append(Received(headers, body, status, time.monotonic(), self.path))
                    owner._changed.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}{PATH}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def accepted(self) -> list[Received]:
        with self._changed:
            return [r for r in self.got if r.status == 204]

    def wait_for(self, accepted: int, seconds: float = 10.0) -> list[Received]:
        """Once at least `accepted` requests were answered 204: every one accepted."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while sum(r.status == 204 for r in self.got) < accepted:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.got)} requests came, {accepted} accepted awaited"
                self._changed.wait(left)
            return [r for r in self.got if r.status == 204]


def self_signed(where: Path) -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1, self-signed, made by the `openssl` command (the
    test is skipped without it)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate with")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
