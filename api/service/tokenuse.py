"""When each token was last used: `last_used_at` of `GET /v1/tokens`, to the minute.

Every request looks its token up (api.service.tokens.TokenCache); writing the time of each
into the store would make every read a write, and every decision two. So a use is noted in
memory, and written at most once a minute for each token, in a transaction of its own
once a management request that writes has done so (`flush`: api.http.resources), before
its answer; a listing of the tokens shows the uses its own process noted and has yet to
write. A read never writes one, nor does a refused or paused request: what those leave in
the store is their logged decision alone.

A token is immutable but for its `last_used_at`, so a use is written over the token's
record as it was read when the token was first looked up, without reading it again; an
update, it writes nothing for a token that is gone (revoked meanwhile).
"""

from __future__ import annotations

import threading

from api.records import Token
from api.service.core import now_ms, token_tag
from policy.store import Store

STEP_MS = 60_000  # how stale a stored `last_used_at` may be, per process
MAX_KEPT = 10_000  # tokens remembered; past it the memory starts again


class TokenUses:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[str, int] = {}  # token id -> when it was last used, to be written
        self._written: dict[str, int] = {}  # token id -> the use written last
        self._records: dict[str, Token] = {}  # token id -> its record, as first read

    def note(self, token_id: str, record: Token | None = None) -> None:
        """A request of token `token_id` now (`record`: the token as just read): due to be
        written when the one written last is a minute old (or there is none)."""
        at = now_ms()
        if record is not None:
            with self._lock:
                if len(self._records) > MAX_KEPT:
                    self._records.clear()
                self._records[token_id] = record
        if at - self._written.get(token_id, -STEP_MS) < STEP_MS:
            return
        with self._lock:
            self._due[token_id] = at

    def noted(self, token_id: str) -> int | None:
        """The use of `token_id` noted and not yet written (None: none)."""
        return self._due.get(token_id)

    def flush(self, store: Store) -> None:
        """The uses due, each into its token's document, in one transaction of their own."""
        if not self._due:
            return
        with self._lock:
            due, self._due = self._due, {}
            if len(self._written) > MAX_KEPT:
                self._written.clear()
            self._written.update(due)
            records = {token_id: self._records.get(token_id) for token_id in due}
        with store.atomic():
            for token_id, at in due.items():
                record = records[token_id]
                if record is None or (record.last_used_at or 0) >= at:
                    continue
                changed = record.changed(last_used_at=at).stored()
                if store.update(Token.KIND, token_id, changed, tag=token_tag(changed)):
                    with self._lock:
                        self._records[token_id] = record.changed(last_used_at=at)
