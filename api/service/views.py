"""Read views of the policy: its history, and its profiles, roles, hooks and toolsets.

A list is read on one revision: the first page on the latest, and the next pages on the
revision the first one was (the cursor pins it), so a listing is one consistent snapshot
even while declarations are added, changed or deleted meanwhile. Items come sorted by
name. One made through the API answers with its `ETag` (api.service.ownfiles); its writes
are api.service.declwrites.
"""

from __future__ import annotations

from typing import Any

from api import commands as c
from api.records import Revision
from api.service import pages
from api.service.core import Service
from api.service.errors import ErrorCode, ServiceError
from api.service.ops import Operation, Outcome, Result
from api.service.ownfiles import snapshot_etag
from api.service.tokens import Principal
from engine.builtins import default_hook_names
from engine.compile import Snapshot
from policy import ast
from policy.catalogue import DEFAULT_HOOKS_SOURCE
from policy.diagnostics import source_lines


def revision_history(service: Service, cursor: str | None, limit: int) -> Result:
    """A page of the policy's revisions in order, each as its Revision record: its paths
    and summary, without its texts (a revision of a large policy holds MiBs)."""
    after = pages.decode("revisions", cursor)
    rows = service.store.list_revisions(after, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    items = [Revision.read({**body, "revision": n}) for n, body in rows]
    next_cursor = pages.encode("revisions", rows[-1][0]) if more and rows else None
    return Result(Outcome.DONE, {"items": items, "next_cursor": next_cursor})


KINDS = {"roles": "role", "profiles": "profile", "hooks": "hook", "toolsets": "toolset"}
_NOT_FOUND: dict[str, ErrorCode] = {
    "roles": "role-not-found",
    "profiles": "profile-not-found",
    "hooks": "hook-not-found",
    "toolsets": "toolset-not-found",
}


def _source(snapshot: Snapshot, kind: str, decl: Any) -> str:
    """The declaration's own text: from its first column to its last, not the whole
    lines (a role on the line of another showed both). A default approval hook's is in
    the built-in text (no uploaded hook takes one's name: E0107)."""
    span: ast.Span = decl.span
    if kind == "hooks" and decl.name in default_hook_names():
        text = DEFAULT_HOOKS_SOURCE
    else:
        text = snapshot.served.sources.get(span.file, "")
    lines = source_lines(text)[span.line - 1 : span.end_line]
    if not lines:
        return ""
    lines[-1] = lines[-1][: span.end_col - 1]  # (the last line first: it may be the first)
    lines[0] = lines[0][span.col - 1 :]
    return "\n".join(lines)


def _decls(snapshot: Snapshot, kind: str) -> dict[str, Any]:
    # (every role is the whole workspace's; the rest, the served one holds them all)
    ws = snapshot.workspace if kind == "roles" else snapshot.served
    table: dict[str, Any] = {
        "roles": ws.roles, "profiles": ws.profiles, "hooks": ws.hooks, "toolsets": ws.toolsets,
    }  # fmt: skip
    return dict(table[kind])


def view(snapshot: Snapshot, kind: str, decl: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": decl.name,
        "file": decl.span.file,
        "line": decl.span.line,
        "source": _source(snapshot, kind, decl),
        "revision": snapshot.revision,
    }
    if kind == "profiles":
        out["roles"] = list(decl.roles)
        out["hooks"] = list(decl.hooks)
        out["budget"] = (
            None
            if decl.budget is None
            else {"amount": str(decl.budget.amount), "period": decl.budget.period}
        )
        out["rate"] = (
            None if decl.rate is None else {"calls": decl.rate.calls, "period": decl.rate.period}
        )
    elif kind == "toolsets":
        out["tools"] = [f"{decl.name}.{t.name}" for t in decl.tools]
        out["url"] = decl.url
        out["connection_required"] = decl.connection_required
        out["runs_code"] = decl.runs_code
    return out


def _pinned(service: Service, kind: str, cursor: Any) -> tuple[Snapshot, int]:
    """The revision a list is read on and how many of its items earlier pages showed: the
    latest for a first page, else the revision its cursor pinned (one that exists)."""
    found = pages.decode_pinned(kind, cursor)
    if found is None:
        return service.current(), 0
    revision, shown = found
    if revision > service.snapshots.latest:
        raise pages.bad_cursor()
    try:
        return service.snapshots.get(revision), shown
    except ServiceError as exc:
        if exc.code == "revision-not-found":
            raise pages.bad_cursor() from None
        raise


def _lister(kind: str) -> Operation:
    def list_op(service: Service, actor: Principal, command: c.Listing) -> Result:
        snapshot, shown = _pinned(service, kind, command.cursor)
        limit = pages.limit_of(command.limit)
        decls = _decls(snapshot, kind)
        names = sorted(decls)[shown : shown + limit + 1]
        page = names[:limit]
        more = len(names) > limit
        cursor = pages.encode(kind, shown + len(page), snapshot.revision) if more else None
        items = [view(snapshot, kind, decls[n]) for n in page]
        return Result(Outcome.DONE, {"items": items, "next_cursor": cursor})

    return list_op


def _getter(kind: str) -> Operation:
    def get_op(service: Service, actor: Principal, command: c.ByName) -> Result:
        snapshot = service.current()
        decl = _decls(snapshot, kind).get(command.name)
        if decl is None:
            raise ServiceError(_NOT_FOUND[kind], f"{KINDS[kind]} `{command.name}` not found")
        tag = snapshot_etag(snapshot, kind, decl.name)
        return Result(Outcome.DONE, view(snapshot, kind, decl), tag)

    return get_op


OPERATIONS: dict[str, Operation] = {}
for _kind in KINDS:
    OPERATIONS[f"{_kind}.list"] = _lister(_kind)
    OPERATIONS[f"{_kind}.get"] = _getter(_kind)
