"""What a human's approval covers when its call is decided again (`Approved`).

An approval is asked for the hooks that paused its call. Approving re-checks the call
on the current revision: a pause by those hooks alone becomes the allow the human
granted (the roles allow the call, or the re-check denies it). A pause by a hook added
since, or by one of those hooks changed since (its tools, its condition, its message),
which that human never saw, stays a pause and opens an approval of its own. So an
approval keeps a digest of each pausing hook as it was (`hook_digests`, taken when the
call paused): a hook's AST, whose positions take no part in its `repr`, so moving it in
its file or into another file changes nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from api.records import Approval
from api.service import threadevents
from api.service.core import Service, now_ms
from engine.compile import Snapshot
from engine.decision import Decision
from policy.store.changes import APPROVAL_DECIDED


def hook_digest(snapshot: Snapshot, name: str) -> str:
    """A digest of hook `name` as `snapshot` declares it ("" when it declares none)."""
    hook = snapshot.served.hooks.get(name)
    return "" if hook is None else hashlib.sha256(repr(hook).encode()).hexdigest()[:32]


def hook_digests(snapshot: Snapshot, decision: Decision) -> dict[str, str]:
    """The digest of each hook that paused `decision`, on the snapshot that decided it."""
    return {
        r.hook: hook_digest(snapshot, r.hook)
        for r in decision.reasons
        if r.kind == "hook-pause" and r.hook
    }


@dataclass(frozen=True)
class Approved:
    """The approval a human granted, for the re-check of its call (api.service.decisionlog
    `draft`): `hooks`, the hooks whose pause it was asked for, and `digests`, each as it
    was then (none in an approval stored before they were kept: names alone decide)."""

    id: str
    hooks: frozenset[str]
    digests: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, approval: Approval) -> Approved:
        """From an approval as stored (its reasons those of the pause that opened it)."""
        hooks = {r.hook for r in approval.reasons if r.kind == "hook-pause" and r.hook}
        digests = approval.hook_digests or {}
        return cls(approval.id, frozenset(hooks), tuple(sorted(digests.items())))

    def lifts(self, decision: Decision, snapshot: Snapshot) -> bool:
        """Whether every pause of `decision` (decided on `snapshot`) is by a hook this
        approval was asked for, unchanged since."""
        was = dict(self.digests)
        for reason in decision.reasons:
            if reason.kind != "hook-pause":
                continue
            if reason.hook not in self.hooks:
                return False
            digest = was.get(reason.hook)
            if digest is not None and digest != hook_digest(snapshot, reason.hook):
                return False
        return True


def rejected_by_charter(approval: Approval, why: str) -> Approval:
    """`approval` closed as rejected by charter itself, `why` its reason: one no human
    could approve any more (its agent or its thread is gone)."""
    return approval.changed(
        status="rejected", reason=why, decided_at=now_ms(), decided_by="charter"
    )


def reject_orphans(
    service: Service, field: Literal["agent", "thread"], value: str, why: str
) -> None:
    """Inside the transaction that deletes an agent (`field` "agent") or a thread
    ("thread"): its pending approvals are rejected, `why` their reason. Approving one
    could only fail (the call's agent or thread is gone), and it stayed pending for ever,
    where a human looks for what is left to decide."""
    pending = [Approval.read(row.body) for row in service.store.scan(Approval.KIND, tag="pending")]
    for approval in pending:
        if getattr(approval, field) == value:
            closed = rejected_by_charter(approval, why)
            service.store.update(Approval.KIND, closed.id, closed.stored(), tag=closed.status)
            service.read.note_approval(APPROVAL_DECIDED, closed)
            if field == "agent":  # (a deleted thread's events went with it)
                threadevents.answered(service.store, closed)
