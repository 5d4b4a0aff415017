"""The webhooks' deliverer: a thread of each serving process that has webhooks
(`charter serve --approval-webhook URL`) and sends the outbox's due rows
(api/service/webhookoutbox.py), off every request's path: an approval opened or
decided waits on nothing of it.

Each round claims up to `BATCH` due rows (a write transaction: one process claims a
row, whatever the number of workers and nodes), POSTs each to its URL at once on a
small pool of threads, signed afresh (api/service/webhooksign.py), and settles each
in a write transaction: deleted when the receiver answered 2xx, else due again after
its backoff, or `failed` after its last attempt. A redirect is a failure (it is not
followed: the signed body goes where it was configured to, nowhere else). The thread
reads the pending rows at once after a commit of this process that opened or decided an
approval (`poke`), when the next row comes due, when the store's data version says
another process committed (it looks every `POLL` seconds), and every `RESCAN` seconds. A process that stops with rows claimed leaves them to their lease's end;
a delivery may then be made twice, with the same `webhook-id`.

What is logged of an attempt names the event's id and the URL's scheme, host and port
(`webhookoutbox.shown`), never its path or query, and the failure as a status or an
error's kind: a URL may carry a credential, and a body is not logged.
"""

from __future__ import annotations

import http.client
import logging
import os
import secrets
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from api.service.metrics import Metrics
from api.service.readmodel import ReadModel
from api.service.webhookoutbox import FAILED, Claimed, Outbox, WebhookConfig, now_ms
from api.service.webhooksign import sign
from policy.secrets import Sealer
from policy.serverkeys import ServerKeys
from policy.store import Store

POLL = 1.0  # seconds between looks at the store's data version, for other processes' rows
RESCAN = 30.0  # seconds after which the pending rows are read again whatever else
BATCH = 16  # rows claimed at once
SENDERS = 8  # attempts made at once
TIMEOUT = 10.0  # seconds an attempt may take (well within the claim's lease)
USER_AGENT = "charter-webhooks"

_logger = logging.getLogger("charter.webhooks")


def failure_of(exc: BaseException) -> str:
    """An attempt's error as a log line may show it: its kind and the system's reason,
    never its text (which may quote the URL)."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"tls: {(exc.reason or 'handshake failed').lower()}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return type(exc).__name__


def post(url: str, body: bytes, headers: dict[str, str], timeout: float = TIMEOUT) -> str | None:
    """POST `body` to `url`: None when it answered 2xx, else why not (`HTTP 503`, ...)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        context = ssl.create_default_context()
        connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    sent = {**headers, "Content-Type": "application/json", "User-Agent": USER_AGENT}
    try:
        connection.request("POST", target, body, sent)
        answer = connection.getresponse()  # (its body is not read: the status says it)
        return None if 200 <= answer.status < 300 else f"HTTP {answer.status}"
    except (OSError, http.client.HTTPException) as exc:
        return failure_of(exc)
    finally:
        connection.close()


class Deliverer:
    """Delivers one outbox's rows, signed with `keys`, on a thread of its own (`start`)
    or a round at a time (`round`)."""

    def __init__(
        self, outbox: Outbox, keys: ServerKeys, metrics: Metrics, *, poll: float = POLL
    ) -> None:
        self.outbox = outbox
        self._keys = keys
        self._metrics = metrics
        self._poll = poll
        self._kick = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._senders: ThreadPoolExecutor | None = None
        # What the last read of the pending rows saw: the store's data version, when
        # (ms), and when the earliest row left comes due (None: none was left).
        self._version: int | None = None
        self._read_at = 0
        self._next_at: int | None = None

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._senders = ThreadPoolExecutor(SENDERS, thread_name_prefix="charter-webhook")
            self._thread = threading.Thread(target=self._run, daemon=True, name="charter-webhooks")
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread once its round ends (a round's attempts end within TIMEOUT)."""
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(timeout=TIMEOUT + 5)
            self._thread = None
        if self._senders is not None:
            self._senders.shutdown(wait=False)
            self._senders = None

    def poke(self) -> None:
        """From any thread: look at once (a commit of this process queued rows)."""
        self._kick.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            kicked = self._kick.is_set()
            self._kick.clear()
            try:
                wait = self.round(kicked)
            except Exception as exc:  # (a store unavailable a moment: the next round tries)
                _logger.warning("webhooks: a round of deliveries failed: %s", type(exc).__name__)
                self._next_at = 0
                wait = self._poll
            if wait > 0:
                self._kick.wait(wait)

    def round(self, kicked: bool = True) -> float:
        """Claim the due rows, attempt each and settle it; the seconds until the next
        round is worth making (0: at once). The pending rows are read when `kicked`, when
        one comes due, when another process committed since the last read (the store's
        data version moved: a row queued there) and every `RESCAN` seconds; else the
        round reads nothing."""
        now = now_ms()
        version = self.outbox.store.data_version()
        if not (
            kicked
            or version != self._version
            or (self._next_at is not None and self._next_at <= now)
            or now - self._read_at >= RESCAN * 1000
        ):
            return self._wait(now)
        self._version, self._read_at = version, now
        holder = f"{os.getpid()}.{secrets.token_hex(8)}"
        claimed, self._next_at = self.outbox.claim(holder, now, BATCH)
        if not claimed:
            return self._wait(now)
        senders = self._senders
        if senders is None:
            failures = [self._attempt(row) for row in claimed]
        else:
            failures = list(senders.map(self._attempt, claimed))
        for row, failure in zip(claimed, failures, strict=True):
            state = self.outbox.settle(row, failure, now_ms())
            if state is not None:
                self._metrics.webhook("given-up" if state == FAILED else state)
            if state == FAILED:
                _logger.warning(
                    "webhooks: event %s to %s given up after %d attempts: %s",
                    row.row["event"], row.row["target"], self.outbox.config.backoff.attempts,
                    failure,
                )  # fmt: skip
        self._next_at = 0  # (more may be due: those past BATCH, those just failed)
        return 0.0

    def _wait(self, now: int) -> float:
        if self._next_at is None:
            return self._poll
        return min(max(self._next_at - now, 0) / 1000, self._poll)

    def _attempt(self, claimed: Claimed) -> str | None:
        try:
            url = self.outbox.url(claimed)
            stamp = int(time.time())
            headers = sign(
                self._keys.signing(), str(claimed.row["event"]), bytes(claimed.row["body"]), stamp
            )
            return post(url, bytes(claimed.row["body"]), headers)
        except Exception as exc:  # (a key that does not open: tried again, logged at the end)
            return failure_of(exc)


def deliverer(
    store: Store,
    sealer: Sealer,
    keys: ServerKeys,
    read: ReadModel,
    config: WebhookConfig,
    metrics: Metrics,
) -> Deliverer:
    """The deliverer of `config`'s webhooks: every approval opened or decided through
    `read` queues its rows in its transaction and, once committed, wakes it; each
    attempt is counted in `metrics`."""
    found = Deliverer(Outbox(store, sealer, config), keys, metrics)
    read.on_approval_events.append(found.outbox.add)
    read.on_approvals.append(found.poke)
    return found
