"""The console's sessions: a token, given once at sign-in, exchanged for a cookie that
acts for it on the API, and the checks that keep another site from acting with it.

The cookie holds the token sealed with the node's secret key (XSalsa20-Poly1305, as the
store's secrets: policy/secrets.py) beside a random session id, a CSRF secret and an
expiry. The browser's scripts cannot read it (`HttpOnly`), nor send it from another site
(`SameSite=Strict`), nor over plain HTTP once it was set over TLS (`Secure`); no answer
echoes the token, and the cookie opens on every worker and node that shares the key.

A request to the API (`/v1/...`) that carries the cookie and no `Authorization` header
is served as if it had sent the sealed token as its bearer token: the session may see
and do exactly what its token may, agent tokens included, and a revoked token ends every
session made from it at once. A request that may change something (any method but GET,
HEAD and OPTIONS) must also send the session's CSRF secret in `X-Charter-CSRF` and an
`Origin` of this server's own; else 403 `csrf-refused`, before anything is read or done.
A cookie that does not open (expired, signed out, sealed with another key, tampered
with) acts for nobody: the request passes as if it had none.
Signing out forgets the session id in this process (`ENDED`) and clears the cookie.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from api.http.errors import count_refusal, problem
from api.http.routing import SAFE_METHODS
from policy.secrets import Sealer, SecretKeyError

COOKIE = "charter_session"
CSRF_HEADER = b"x-charter-csrf"
LIFETIME = 8 * 3600  # seconds a session lasts from its sign-in
# What a sealed session starts with once opened: a value sealed for anything else with
# the same key (a stored secret) is never taken for a session.
MAGIC = b"charter-console-session/1\n"
BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
MAX_COOKIE = 4096  # characters of a cookie value read at most (browsers keep no more)


@dataclass(frozen=True, slots=True)
class Session:
    id: str  # random: what signing out forgets
    token: str = field(repr=False)  # never answered, logged or readable by the page's scripts
    csrf: str = field(repr=False)  # what a state-changing request sends in `X-Charter-CSRF`
    expires: int  # seconds since the epoch


class Ended:
    """The ids of sessions signed out in this process, until each would have expired."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, session: Session) -> None:
        now = int(time.time())
        with self._lock:
            for old in [k for k, until in self._ids.items() if until < now]:
                del self._ids[old]
            self._ids[session.id] = session.expires

    def __contains__(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._ids


ENDED = Ended()


def new_session(token: str) -> Session:
    return Session(
        secrets.token_urlsafe(16), token, secrets.token_urlsafe(24), int(time.time()) + LIFETIME
    )


def seal(sealer: Sealer, session: Session) -> str:
    body = json.dumps(
        {"i": session.id, "t": session.token, "c": session.csrf, "x": session.expires}
    )
    sealed = sealer.seal(MAGIC + body.encode())
    return base64.urlsafe_b64encode(sealed).decode().rstrip("=")


def unseal(sealer: Sealer, value: str) -> Session | None:
    """The session a cookie's value holds; None when it is not one this key sealed, is
    malformed, has expired or was signed out."""
    if not value or len(value) > MAX_COOKIE or not BASE64URL.fullmatch(value):
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        # (only the value `seal` wrote: base64's decoder lets other spellings of it by)
        if base64.urlsafe_b64encode(raw).decode().rstrip("=") != value:
            return None
        plain = sealer.open(raw)
    except (ValueError, SecretKeyError):
        return None
    if not plain.startswith(MAGIC):
        return None
    try:
        fields = json.loads(plain[len(MAGIC) :])
        session = Session(str(fields["i"]), str(fields["t"]), str(fields["c"]), int(fields["x"]))
    except (ValueError, KeyError, TypeError):
        return None
    if session.expires < time.time() or session.id in ENDED:
        return None
    return session


def cookie_value(scope: Scope) -> str | None:
    """The session cookie's value ("" when it is given twice: neither is taken)."""
    found: str | None = None
    for key, value in scope["headers"]:
        if key != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            name, _, content = part.strip().partition("=")
            if name == COOKIE:
                found = "" if found is not None else content
    return found


def secure(scope: Scope) -> bool:
    return scope.get("scheme") in ("https", "wss")


def set_cookie(response: Response, scope: Scope, value: str) -> None:
    response.set_cookie(
        COOKIE, value, max_age=LIFETIME, path="/", httponly=True, secure=secure(scope),
        samesite="strict",
    )  # fmt: skip


def clear_cookie(response: Response, scope: Scope) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, secure=secure(scope), samesite="strict")


def own_origin(scope: Scope) -> str | None:
    """`scheme://host[:port]` as the request reached this server (its `Host` header)."""
    hosts = [v for k, v in scope["headers"] if k == b"host"]
    if len(hosts) != 1:
        return None
    return f"{'https' if secure(scope) else 'http'}://{hosts[0].decode('latin-1').lower()}"


def origin_refusal(scope: Scope) -> str | None:
    """Why the request's `Origin` is not this server's own (None: it is)."""
    origins = [v for k, v in scope["headers"] if k == b"origin"]
    if len(origins) != 1:
        return "a console request that changes something must send one `Origin` header"
    origin = origins[0].decode("latin-1").lower()
    if origin != own_origin(scope):
        return "the request comes from another origin than this server's"
    return None


def csrf_refusal(scope: Scope, session: Session) -> str | None:
    """Why a state-changing request made with `session` is refused (None: it is not)."""
    if scope["method"] in SAFE_METHODS:
        return None
    given = [v for k, v in scope["headers"] if k == CSRF_HEADER]
    if len(given) != 1 or not hmac.compare_digest(given[0], session.csrf.encode()):
        return "the request lacks the session's CSRF token in `X-Charter-CSRF`"
    return origin_refusal(scope)


def refused(scope: Scope, detail: str) -> Response:
    count_refusal(scope, 403, "csrf-refused")
    return problem(
        "csrf-refused", detail, help="send it from the console's own page, signed in"
    )  # fmt: skip


class ConsoleSession:
    """The middleware that serves an API request made with a session cookie as its
    token's (see the module's docstring). A request with an `Authorization` header, or
    without the cookie, passes as it is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        if any(k == b"authorization" for k, _ in headers):
            await self.app(scope, receive, send)
            return
        value = cookie_value(scope)
        if value is None:
            await self.app(scope, receive, send)
            return
        session = unseal(scope["app"].charter.service.sealer, value)
        if session is None:  # (as if it had no cookie: the route asks for a token, or not)
            await self.app(scope, receive, send)
            return
        why = csrf_refusal(scope, session)
        if why is not None:
            await refused(scope, why)(scope, receive, send)
            return
        bearer = (b"authorization", b"Bearer " + session.token.encode())
        # (in place, not in a copy: the connection ends a waiting answer through this
        # scope at shutdown, api/http/approvalwatch.py's `closing`)
        scope["headers"] = [*headers, bearer]
        await self.app(scope, receive, send)
