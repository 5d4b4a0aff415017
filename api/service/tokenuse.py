"""When each token was last used: `last_used_at` of `GET /v1/tokens`, to the minute.

Every request looks its token up (api.service.tokens.TokenCache); writing the time of each
into the store would make every read a write, and every decision two. So a use is noted in
memory, and written at most once a minute for each token, inside the next write
transaction this process begins (its `on_begin` step: no transaction of its own, under the
write lock every writer takes), or before a listing reads the tokens. A transaction that
rolls back drops what it carried: that token's next use after the minute writes it again.
A use is never written to a token that is gone (revoked meanwhile): it updates only.
"""

from __future__ import annotations

import threading

from api.records import Token
from api.service.core import now_ms, token_tag
from policy.store import Store

STEP_MS = 60_000  # how stale a stored `last_used_at` may be, per process


class TokenUses:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[str, int] = {}  # token id -> when it was last used, to be written
        self._written: dict[str, int] = {}  # token id -> the use written last

    def note(self, token_id: str) -> None:
        """A request of token `token_id` now: due to be written when the one written last
        is a minute old (or there is none)."""
        at = now_ms()
        if at - self._written.get(token_id, -STEP_MS) < STEP_MS:
            return
        with self._lock:
            self._due[token_id] = at

    def pending(self) -> bool:
        return bool(self._due)

    def write(self, store: Store) -> None:
        """Inside a write transaction: each due use into its token's document."""
        if not self._due:
            return
        with self._lock:
            due, self._due = self._due, {}
            if len(self._written) > 10_000:
                self._written.clear()
            self._written.update(due)
        for token_id, at in due.items():
            doc = store.get(Token.KIND, token_id)
            if doc is None:  # (revoked: nothing to note)
                continue
            used = max(at, doc.get("last_used_at") or 0)
            changed = {**doc, "last_used_at": used}
            store.update(Token.KIND, token_id, changed, tag=token_tag(changed))
