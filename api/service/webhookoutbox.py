"""The webhooks' outbox: one stored row for each approval event and each URL it goes to
(`charter serve --approval-webhook URL`), written in the transaction that opens or
decides the approval, so an event is queued exactly when it is committed, and a row
outlives any process that would deliver it (api/service/webhookdelivery.py).

A row is a document of kind `webhook-deliveries` (both stores keep documents, with a tag
indexed with its kind: no table of its own, no migration), tagged `pending` until it is
delivered (then deleted) or given up on (then tagged `failed`, and kept). It holds the
event's body, made once as the row is written (every attempt sends the same bytes), its
URL sealed with the store's secret key (a URL may carry a credential: the database
shows none), and its lease: a deliverer claims due rows in a write transaction, which
both stores run one at a time (SQLite's file lock, PostgreSQL's writer lock), so two
processes, or two nodes on one PostgreSQL, never claim one row at once; a claim whose
holder dies ends with its lease (`LEASE_MS`), and the row is claimed again.

The body is the approval as `GET /v1/approvals/{id}` shows it: its arguments as logged,
each secret argument of its tool replaced by the redaction mark, never sealed data.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from api.records import Approval
from api.service.encoding import dumps
from policy.secrets import Sealer
from policy.store import Doc, Store
from policy.store.changes import APPROVAL_OPENED

KIND = "webhook-deliveries"
PENDING = "pending"
FAILED = "failed"
LEASE_MS = 60_000  # how long a claim holds a row: longer than an attempt may take
ATTEMPTS = 12  # attempts before a row is given up on
FIRST_RETRY_MS = 1000  # the delay after the first failed attempt (then doubled)
MAX_DOUBLINGS = 9  # the delay doubles at most this often: 512 times the first at most
MAX_URL = 2048  # characters a URL may have


def now_ms() -> int:
    return int(time.time() * 1000)


def url_problem(text: str) -> str | None:
    """Why `text` is no URL a webhook can be delivered to (None: it is one). Never quotes
    the URL: one may carry a credential."""
    if len(text) > MAX_URL:
        return f"a webhook URL has at most {MAX_URL} characters"
    if not text.isascii() or not text.isprintable() or " " in text:
        return "a webhook URL is printable ASCII, without spaces"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError:
        return "a webhook URL has a host and, if any, a port from 1 to 65535"
    if parts.port == 0:
        return "a webhook URL has a host and, if any, a port from 1 to 65535"
    if parts.scheme not in ("http", "https"):
        return "a webhook URL starts with `http://` or `https://`"
    if not parts.hostname:
        return "a webhook URL names a host"
    if parts.fragment:
        return "a webhook URL has no `#` fragment"
    if parts.username is not None or parts.password is not None:
        return "a webhook URL has no user or password: a receiver's token goes in its path or query"
    return None


def shown(url: str) -> str:
    """What a log line may say of a URL: its scheme, host and port (no path, query or
    user: any may carry a credential)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}"


@dataclass(frozen=True, slots=True)
class Backoff:
    """When a failed row is tried again: after `first_ms`, doubled with each attempt up to
    `MAX_DOUBLINGS` times, each delay drawn from its upper half (jitter: rows that failed
    together do not come due together); given up on after `attempts` attempts."""

    first_ms: int = FIRST_RETRY_MS
    attempts: int = ATTEMPTS

    def delay_ms(self, failed: int, draw: Callable[[], float] = random.random) -> int:
        """The delay after the `failed`-th failed attempt (1 for the first)."""
        full = self.first_ms << min(failed - 1, MAX_DOUBLINGS)
        return full // 2 + int(draw() * (full - full // 2))


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """`charter serve --approval-webhook URL ... --approval-webhook-retry-ms MS`."""

    urls: tuple[str, ...]
    backoff: Backoff = Backoff()


def config_text(config: WebhookConfig) -> str:
    """`config` as the environment hands it to `--workers N`' processes."""
    backoff = config.backoff
    return json.dumps(
        {"urls": list(config.urls), "first_ms": backoff.first_ms, "attempts": backoff.attempts}
    )


def config_from_env(text: str) -> WebhookConfig:
    """What `config_text` wrote (by `charter serve`, its URLs checked)."""
    doc = json.loads(text)
    return WebhookConfig(
        tuple(str(url) for url in doc["urls"]),
        Backoff(int(doc["first_ms"]), int(doc["attempts"])),
    )


def event(kind: str, approval: Approval) -> tuple[str, bytes]:
    """(the event's id, its body): `kind` (`approval.opened`, `approval.decided`) of
    `approval` as written then. The id is the kind and the approval's id: each approval
    opens once and is decided once. `at` is when it opened, or was decided."""
    event_id = f"{kind}:{approval.id}"
    at = approval.created_at if kind == APPROVAL_OPENED else approval.decided_at
    body = {"id": event_id, "type": kind, "at": at or approval.created_at, "approval": approval}
    return event_id, dumps(body)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A row this process holds: its id, the claim's holder and the row as claimed."""

    id: str
    holder: str
    row: Doc


def _ready(doc: Doc, now: int) -> bool:
    return int(doc["due"]) <= now and int(doc["lease"]) <= now


class Outbox:
    """The rows of one store, their URLs sealed with `sealer`."""

    def __init__(self, store: Store, sealer: Sealer, config: WebhookConfig) -> None:
        self.store = store
        self.sealer = sealer
        self.config = config
        # (a URL's digest names its rows: each URL once per event, the URL not shown)
        self._urls = [
            (hashlib.sha256(url.encode()).hexdigest()[:16], url, shown(url)) for url in config.urls
        ]

    def add(self, kind: str, approval: Approval) -> None:
        """In the transaction that noted `kind` of `approval`: a row for each URL."""
        event_id, body = event(kind, approval)
        at = now_ms()
        for digest, url, target in self._urls:
            row = {
                "event": event_id, "url": self.sealer.seal(url.encode()), "target": target,
                "body": body, "attempts": 0, "due": at, "lease": 0, "holder": "",
                "last": None, "created_at": at,
            }  # fmt: skip
            self.store.insert(KIND, f"{event_id}|{digest}", row, tag=PENDING)

    def url(self, claimed: Claimed) -> str:
        return self.sealer.open(bytes(claimed.row["url"])).decode()

    def claim(self, holder: str, now: int, most: int) -> tuple[list[Claimed], int | None]:
        """Up to `most` due rows, held by `holder` until `now + LEASE_MS`, and when the
        earliest row left comes due, or its lease ends (ms; None: no row is left). The
        rows are looked for outside any transaction (one read of the pending rows), and
        each is read again and claimed inside one, so a row another claimed meanwhile
        is left to it."""
        due: list[str] = []
        later: int | None = None
        for row in self.store.scan(KIND, tag=PENDING):
            if _ready(row.body, now) and len(due) < most:
                due.append(row.id)
            else:
                at = max(int(row.body["due"]), int(row.body["lease"]), now)
                later = at if later is None else min(later, at)
        claimed: list[Claimed] = []
        if due:
            with self.store.atomic():
                for row_id in due:
                    doc = self.store.get(KIND, row_id)
                    if doc is None or not _ready(doc, now):
                        continue
                    doc = {**doc, "lease": now + LEASE_MS, "holder": holder}
                    if self.store.update(KIND, row_id, doc, tag=PENDING):
                        claimed.append(Claimed(row_id, holder, doc))
        return claimed, later

    def settle(self, claimed: Claimed, failure: str | None, now: int) -> str | None:
        """After an attempt: a row delivered (`failure` None) is deleted; a failed one is
        due again after its backoff, or tagged `failed` after its last attempt, `failure`
        (no URL, no body) kept as its `last`. What became of it (`delivered`, `retry`,
        `failed`), or None for a row whose claim another took since (its lease ran out),
        left to that one."""
        with self.store.atomic():
            doc = self.store.get(KIND, claimed.id)
            if doc is None or doc.get("holder") != claimed.holder:
                return None
            if failure is None:
                self.store.delete(KIND, claimed.id)
                return "delivered"
            failed = int(doc["attempts"]) + 1
            backoff = self.config.backoff
            doc = {**doc, "attempts": failed, "lease": 0, "holder": "", "last": failure}
            if failed >= backoff.attempts:
                self.store.update(KIND, claimed.id, doc, tag=FAILED)
                return FAILED
            doc["due"] = now + backoff.delay_ms(failed)
            self.store.update(KIND, claimed.id, doc, tag=PENDING)
            return "retry"
