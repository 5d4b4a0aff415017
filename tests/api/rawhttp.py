"""HTTP/1.1 on a raw socket, for what a client library would not send as written: a
header twice, a byte it would refuse or re-encode, requests pipelined on one connection."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

Header = tuple[str | bytes, str | bytes]


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("latin-1")


def request(
    method: str, path: str, headers: tuple[Header, ...] = (), body: bytes | None = None
) -> bytes:
    """One request as written: `headers` in order, as given (twice, if given twice), and a
    `Content-Length` for `body` when there is one."""
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: charter.test"]
    lines += [_bytes(name) + b": " + _bytes(value) for name, value in headers]
    if body is not None:
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def code(self) -> tuple[int, str]:
        """The status and the problem's `code` ("" for an answer that is not a problem)."""
        problem = self.header("content-type") == ["application/problem+json"]
        return self.status, self.json()["code"] if problem else ""


def exchange(port: int, data: bytes, answers: int = 1, timeout: float = 30) -> list[Answer]:
    """Send `data` (requests, maybe several pipelined) on one connection to loopback `port`
    and read `answers` answers, each with a `Content-Length` (every answer of the app has
    one, but a 204). `timeout`: the longest wait for a byte, so a broken server fails."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return read_answers(sock, answers)


def read_answers(sock: socket.socket, answers: int) -> list[Answer]:
    buffer = b""
    got: list[Answer] = []
    while len(got) < answers:
        head, found, rest = buffer.partition(b"\r\n\r\n")
        if found:
            status_line, *lines = head.decode("latin-1").split("\r\n")
            status = int(status_line.split(" ")[1])
            if status == 100:  # (an interim answer, without a body: the final one follows)
                buffer = rest
                continue
            fields = (line.partition(":") for line in lines)
            headers = [(name.strip().lower(), value.strip()) for name, _, value in fields]
            length = int(next((v for k, v in headers if k == "content-length"), 0))  # (204)
            if len(rest) >= length:
                got.append(Answer(status, headers, rest[:length]))
                buffer = rest[length:]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {len(got)} answer(s): {buffer[:200]!r}")
        buffer += chunk
    return got
