"""One request through an app's ASGI interface, for the replay of saved requests: an
answer that streams (`text/event-stream`) is read to its start and its first part, then
the client goes away, as a real client's read of the head does.

starlette's TestClient reads an answer to its end before it returns, and an event
stream has none: a saved request of a stream operation would hang the test that sends
it. Run inside the TestClient's own event loop (`client.portal.call`), so the app's
lifespan state and loop-bound objects are the ones its requests use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import anyio
from starlette.types import ASGIApp, Message

STREAMING = b"text/event-stream"
# Past this an exchange is a hang: the test fails instead of waiting for ever.
LIMIT_SECONDS = 30.0


@dataclass
class Answer:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    streamed: bool = False  # an event stream, read up to its first part

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


async def exchange(
    app: ASGIApp,
    method: str,
    target: str,
    headers: dict[str, str],
    body: bytes | None,
    state: dict[str, object],
) -> Answer:
    """`method target` with `headers` and `body`; the answer as far as it was read."""
    parts = urlsplit(target)
    answer = Answer()
    chunks: list[bytes] = []
    read = anyio.Event()
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body or b"", "more_body": False}
        await read.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = int(message["status"])
            answer.headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message["headers"]
            }
            answer.streamed = answer.headers.get("content-type", "").encode().startswith(STREAMING)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if answer.streamed or not message.get("more_body", False):
                read.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method.upper(),
        "scheme": "http",
        "path": unquote(parts.path),
        "raw_path": parts.path.encode(),
        "root_path": "",
        "query_string": parts.query.encode(),
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        + [(b"host", b"testserver"), (b"content-length", str(len(body or b"")).encode())],
        "client": ("testclient", 50000),
        "server": ("testserver", 80),
        "extensions": {},
        "state": dict(state),
    }
    with anyio.fail_after(LIMIT_SECONDS):
        await app(scope, receive, send)
    answer.body = b"".join(chunks)
    return answer
