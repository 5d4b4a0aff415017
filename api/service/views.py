"""Read views of the policy (its history, profiles, roles, hooks, toolsets) and role
management.

A role created through the API is one file, `api/roles/<name>.charter`, added to the
latest revision's files; the result is checked as a whole and becomes a new revision.
Every policy keeps such a file to that one role (api.service.rolefiles), so changing or
deleting it here touches nothing else. Roles written in other files are changed by
uploading the policy, not here.

Such a role's `ETag` is a digest of its file (`role_etag`), not the revision's number: a
change of another role makes a new revision but leaves this one as it was, and a client
holding its tag need not read it again (docs/http.md, "Lost updates"). A role declared
in an uploaded file has none: no write here takes it (`role-not-api-managed`); the
policy's upload, which changes it, takes the revision's.

A list is read on one revision: the first page on the latest, and the next pages on the
revision the first one was (the cursor pins it), so a listing is one consistent snapshot
even while roles are added, changed or deleted meanwhile. Items come sorted by name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

from api import commands as c
from api.records import Revision
from api.service import fitcheck, pages
from api.service.core import Service
from api.service.errors import ErrorCode, ServiceError
from api.service.etags import etag, require
from api.service.ops import Conditional, Operation, Outcome, Result
from api.service.rolefiles import role_path
from api.service.solver import key_of
from api.service.tokens import Principal
from engine.builtins import default_hook_names
from engine.compile import Snapshot
from grammar.parser import parse
from policy import ast
from policy.catalogue import DEFAULT_HOOKS_SOURCE
from policy.diagnostics import CharterError, source_lines
from policy.store import Doc


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


def _view(snapshot: Snapshot, kind: str, decl: Any) -> dict[str, Any]:
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
        items = [_view(snapshot, kind, decls[n]) for n in page]
        return Result(Outcome.DONE, {"items": items, "next_cursor": cursor})

    return list_op


def _getter(kind: str) -> Operation:
    def get_op(service: Service, actor: Principal, command: c.ByName) -> Result:
        snapshot = service.current()
        decl = _decls(snapshot, kind).get(command.name)
        if decl is None:
            raise ServiceError(_NOT_FOUND[kind], f"{KINDS[kind]} `{command.name}` not found")
        tag = _own_etag(snapshot, decl.name) if kind == "roles" else None
        return Result(Outcome.DONE, _view(snapshot, kind, decl), tag)

    return get_op


def role_etag(name: str, text: str) -> str:
    """The `ETag` of role `name` made through the API: a digest of its own file, `text`."""
    return etag(_role_doc(name, text))


def _role_doc(name: str, text: str) -> Doc:
    return {"path": role_path(name), "text": text}


def _own_file(files: Iterable[tuple[str, str]], name: str) -> str | None:
    """The text of role `name`'s own file among `files` (path, text); None without one."""
    path = role_path(name)
    return next((text for p, text in files if p == path), None)


def _own_etag(snapshot: Snapshot, name: str) -> str | None:
    """Role `name`'s `ETag` in `snapshot`, when it has its own file (the test the writes
    below make); None for a role declared in an uploaded file."""
    text = _own_file(((f.path, f.text) for f in snapshot.served.files), name)
    return None if text is None else role_etag(name, text)


def _own_text(service: Service, files: list[tuple[str, str]], name: str) -> str:
    """Role `name`'s own file's text in `files`: the refusal of `_not_api_managed`
    when it has none."""
    text = _own_file(files, name)
    if text is None:
        _not_api_managed(service, name)
    return text


def role_stored(service: Service, actor: Principal, command: c.ByName) -> Doc:
    """What a role's `If-Match` names, in the latest revision in the store (inside a
    transaction: the true latest): its own file, which `role_etag` digests."""
    name = command.name
    _, files = service.files(service.store.latest_revision())
    return _role_doc(name, _own_text(service, files, name))


def _require_unchanged(name: str, text: str, if_match: str | None) -> None:
    if if_match is not None:
        require(_role_doc(name, text), if_match, f"role `{name}`")


def _files_ahead(service: Service, name: str, if_match: str | None) -> list[tuple[str, str]]:
    """The latest files, read once for the work a write does ahead of its transaction
    (an agent's fit check, compiling the changed policy: seconds for a large one); a
    stale `If-Match` is refused first, as that work could only be wasted on it, or answer
    with its own refusal. Compared again inside the transaction, where the file may have
    moved since."""
    _, files = service.working_files(service.store.latest_revision())
    if if_match is not None:
        _require_unchanged(name, _own_text(service, files, name), if_match)
    return files


def _files_after(
    files: list[tuple[str, str]], name: str, source: str | None
) -> list[tuple[str, str]]:
    """The policy's files once role `name`'s own file holds `source` (None: is gone)."""
    path = role_path(name)
    kept = [(p, t) for p, t in files if p != path]
    return kept if source is None else [*kept, (path, source)]


def _compile_ahead(service: Service, files: list[tuple[str, str]]) -> bool:
    """The policy of a role's change checked and compiled ahead of its upload
    (`Service.prepare`), outside the write transaction: a large policy takes seconds.
    False for a policy that does not check (the operation refuses it, after its own
    checks)."""
    try:
        service.prepare(files)
    except CharterError:
        return False
    return True


def prepare_role_change(
    service: Service, actor: Principal, command: c.CreateRole | c.DeleteRole
) -> None:
    """Before a `roles.create` or `roles.delete` is decided: its policy compiled ahead."""
    source = command.source if isinstance(command, c.CreateRole) else None
    _compile_ahead(service, _files_after(service.working_files()[1], command.name, source))


def check_role_change(service: Service, actor: Principal, command: c.UpdateRole) -> None:
    """Before an agent's `roles.update` is decided, outside the write lock (compiling and
    the solver may take a while): the profiles naming the role narrow at most. The
    operation checks again on the policy it changes, a look-up unless it moved. (A role
    a profile names cannot be deleted: the policy would not check.)"""
    name, source = command.name, command.source
    files = service.working_files()[1]
    changed = _files_after(files, name, source)
    if _compile_ahead(service, changed) and any(p == role_path(name) for p, _ in files):
        fitcheck.require_role_change_narrows(service, name, changed, source, key_of(actor))


def _one_role(name: str, source: str) -> None:
    try:
        parsed = parse(source, role_path(name))
    except CharterError as exc:
        raise ServiceError(
            "policy-invalid", "the role source does not parse",
            diagnostics=[d.to_json() for d in exc.diagnostics],
        ) from None  # fmt: skip
    decls = parsed.declarations
    if len(decls) != 1 or not isinstance(decls[0], ast.Role) or decls[0].name != name:
        raise ServiceError(
            "role-source-mismatch", f"the source must declare exactly one role, `{name}`"
        )


def _commit(
    service: Service, files: list[tuple[str, str]], actor: Principal, note: str
) -> Snapshot:
    try:
        return service.upload(files, actor.agent or f"token:{actor.token_id}", note)
    except CharterError as exc:
        raise ServiceError(
            "policy-invalid", "the policy does not check",
            diagnostics=[d.to_json() for d in exc.diagnostics],
        ) from None  # fmt: skip


def _write_role(
    service: Service, actor: Principal, command: c.CreateRole | c.UpdateRole, create: bool,
    if_match: str | None = None,
) -> Result:  # fmt: skip
    name, source = command.name, command.source
    _one_role(name, source)
    files = _files_ahead(service, name, if_match)
    if actor.agent is not None:  # before the write lock: the solver may take a while
        fitcheck.require_source_fits(service, service.agent(actor.agent), source, "role")
    _compile_ahead(service, _files_after(files, name, source))  # (or a look-up)
    with service.store.atomic():
        service.snapshots.refresh()  # inside the write lock: the true latest
        _, files = service.working_files()
        existing = name in service.current().workspace.roles
        if create and existing:
            raise ServiceError("role-exists", f"role `{name}` already exists")
        if not create:
            # (compared here, where no other writer can change it before the write)
            _require_unchanged(name, _own_text(service, files, name), if_match)
        files = _files_after(files, name, source)
        if actor.agent is not None and not create:  # (after its precheck: a look-up)
            fitcheck.require_role_change_narrows(service, name, files, source, key_of(actor))
        # (the new revision's own snapshot: an agent's request commits it later, with its
        # decision, and only then is it the service's latest)
        snapshot = _commit(service, files, actor, f"{'create' if create else 'update'} role {name}")
    body = _view(snapshot, "roles", snapshot.workspace.roles[name])
    return Result(Outcome.CREATED if create else Outcome.DONE, body, role_etag(name, source))


def _not_api_managed(service: Service, name: str) -> NoReturn:
    """A role that no `/v1/roles` request wrote (its file is not a role's own): the API
    neither changes nor deletes one declared in an uploaded file (`role-not-api-managed`), nor one
    that is not there (`role-not-found`)."""
    if name in service.current().workspace.roles:
        raise ServiceError(
            "role-not-api-managed",
            f"role `{name}` is defined in an uploaded file; upload the policy to change it",
        )  # fmt: skip
    raise ServiceError("role-not-found", f"role `{name}` not found")


def roles_create(service: Service, actor: Principal, command: c.CreateRole) -> Result:
    return _write_role(service, actor, command, create=True)


def roles_update(
    service: Service, actor: Principal, command: c.UpdateRole, if_match: str | None = None
) -> Result:
    return _write_role(service, actor, command, create=False, if_match=if_match)


def roles_delete(
    service: Service, actor: Principal, command: c.DeleteRole, if_match: str | None = None
) -> Result:
    name = command.name
    _compile_ahead(service, _files_after(_files_ahead(service, name, if_match), name, None))
    with service.store.atomic():
        service.snapshots.refresh()  # inside the write lock: the true latest
        _, files = service.working_files()
        _require_unchanged(name, _own_text(service, files, name), if_match)
        # (a role a profile names cannot go: the policy would not check: `policy-invalid`)
        _commit(service, _files_after(files, name, None), actor, f"delete role {name}")
    return Result(Outcome.REMOVED, None)


# The writes that take an `If-Match` themselves, and compare it inside their own write
# transaction: the work they do before it (a fit check, compiling the changed policy:
# seconds for a large one) would hold every writer off inside a transaction around them.
CONDITIONAL: dict[str, Conditional] = {"roles.update": roles_update, "roles.delete": roles_delete}

OPERATIONS: dict[str, Operation] = {
    "roles.create": roles_create,
    "roles.update": roles_update,
    "roles.delete": roles_delete,
}
for _kind in KINDS:
    OPERATIONS[f"{_kind}.list"] = _lister(_kind)
    OPERATIONS[f"{_kind}.get"] = _getter(_kind)
