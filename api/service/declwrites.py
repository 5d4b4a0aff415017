"""Roles, profiles, hooks and toolsets written through the API (`roles.create`,
`profiles.update`, `hooks.delete`, ...).

Each one made through the API is one file, `api/<kind>/<name>.charter` (a role's
`api/roles/x.charter`: api.service.rolefiles), added to the latest revision's files; the
result is checked as a whole and becomes a new revision. Every policy keeps such a file to
its one declaration, so changing or deleting it here touches nothing else. Declarations
written in other files are changed by uploading the policy, not here
(`role-not-api-managed`, `profile-not-api-managed`, ...). A change that makes the policy
not check is refused (`policy-invalid`, with the checker's diagnostics), and writes nothing.

Such a declaration's `ETag` is a digest of its file (`own_etag`), not the revision's
number: a change of another makes a new revision but leaves this one as it was, and a
client holding its tag need not read it again (docs/http.md, "Lost updates").

What an agent writes must not widen anyone's access (docs/design.md section 3): a role it
makes fits inside its own access, and a role it changes narrows every profile naming it;
a profile it makes or changes fits inside its own and narrows what it was; a hook it
changes narrows every profile naming it; a toolset it makes, changes or deletes narrows
every profile whose rules reach its tools, before or after (a role's `allow x.*` reaches
a tool a new toolset adds). A hook it makes,
or anything it deletes but a toolset, widens nothing: no profile names a new hook, and a
policy whose profile names a deleted declaration does not check.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, NoReturn

from api import commands as c
from api.service import declsources, fitcheck, inuse, ownfiles
from api.service.core import Service
from api.service.errors import ErrorCode, ServiceError
from api.service.etags import require
from api.service.ops import Conditional, Operation, Outcome, Result
from api.service.rolefiles import DECLS, ONE, own_path
from api.service.solver import key_of
from api.service.tokens import Principal
from api.service.views import view
from engine.compile import Snapshot
from grammar.parser import parse
from policy.diagnostics import CharterError
from policy.store import Doc

Files = list[tuple[str, str]]
KINDS = ("roles", "profiles", "hooks", "toolsets")
_EXISTS: dict[str, ErrorCode] = {
    "roles": "role-exists", "profiles": "profile-exists",
    "hooks": "hook-exists", "toolsets": "toolset-exists",
}  # fmt: skip
_NOT_MANAGED: dict[str, ErrorCode] = {
    "roles": "role-not-api-managed", "profiles": "profile-not-api-managed",
    "hooks": "hook-not-api-managed", "toolsets": "toolset-not-api-managed",
}  # fmt: skip
_NOT_FOUND: dict[str, ErrorCode] = {
    "roles": "role-not-found", "profiles": "profile-not-found",
    "hooks": "hook-not-found", "toolsets": "toolset-not-found",
}  # fmt: skip
_MISMATCH: dict[str, ErrorCode] = {
    "roles": "role-source-mismatch", "hooks": "hook-source-mismatch",
    "toolsets": "toolset-source-mismatch",
}  # fmt: skip


def kind_of(command: c.Command) -> str:
    return command.tool.partition(".")[0]


def _declared(snapshot: Snapshot, kind: str) -> dict[str, Any]:
    ws = snapshot.workspace if kind == "roles" else snapshot.served
    return dict(getattr(ws, kind))


# ---- a declaration's own file ------------------------------------------------------------
_doc = ownfiles.doc
_own_file = ownfiles.own_file
own_etag = ownfiles.own_etag


def _not_api_managed(service: Service, kind: str, name: str) -> NoReturn:
    """A declaration that no request through the API wrote (its file is not its own):
    the API neither changes nor deletes one declared in an uploaded file, nor one that is
    not there."""
    one = ONE[kind]
    if name in _declared(service.current(), kind):
        raise ServiceError(
            _NOT_MANAGED[kind],
            f"{one} `{name}` is defined in an uploaded file; upload the policy to change it",
        )  # fmt: skip
    raise ServiceError(_NOT_FOUND[kind], f"{one} `{name}` not found")


def _own_text(service: Service, files: Files, kind: str, name: str) -> str:
    text = _own_file(files, kind, name)
    if text is None:
        _not_api_managed(service, kind, name)
    return text


def stored(kind: str) -> Callable[[Service, Principal, c.ByName], Doc]:
    """What an `If-Match` of `kind` names, in the latest revision in the store (inside a
    transaction: the true latest): the declaration's own file, which `own_etag` digests."""

    def read(service: Service, actor: Principal, command: c.ByName) -> Doc:
        name = command.name
        _, files = service.files(service.store.latest_revision())
        return _doc(kind, name, _own_text(service, files, kind, name))

    return read


def _require_unchanged(kind: str, name: str, text: str, if_match: str | None) -> None:
    if if_match is not None:
        require(_doc(kind, name, text), if_match, f"{ONE[kind]} `{name}`")


# ---- what a write writes ------------------------------------------------------------------
def _source(service: Service, command: c.Command, files: Files) -> str | None:
    """The file `command` leaves for its declaration, `files` the policy before it (None:
    it deletes it). A profile's is rendered from its fields (an update's over the
    profile's as it is); a toolset's is its source with the `url` put in."""
    kind = kind_of(command)
    if command.tool.endswith(".delete"):
        return None
    name: str = getattr(command, "name")  # noqa: B009 (every write names its declaration)
    if isinstance(command, c.CreateProfile):
        cap, rate = command.budget, command.rate
        return declsources.profile_text(
            name,
            command.roles,
            command.hooks,
            None if cap is None else (cap.amount, cap.period),
            None if rate is None else (rate.calls, rate.period),
        )
    if isinstance(command, c.UpdateProfile):
        text = _own_text(service, files, kind, name)
        roles, hooks, budget, calls = declsources.profile_fields(_parsed_profile(text, name))
        if "budget" in command.model_fields_set:
            given = command.budget
            budget = None if given is None else (given.amount, given.period)
        if "rate" in command.model_fields_set:
            limit = command.rate
            calls = None if limit is None else (limit.calls, limit.period)
        return declsources.profile_text(
            name,
            roles if command.roles is None else command.roles,
            hooks if command.hooks is None else command.hooks,
            budget,
            calls,
        )
    if isinstance(command, c.CreateToolset | c.UpdateToolset):
        source = command.source
        if source is None:
            source = _own_text(service, files, kind, name)
        return declsources.toolset_text(name, source, command.url, own_path(kind, name))
    assert isinstance(command, c.CreateRole | c.UpdateRole | c.CreateHook | c.UpdateHook)
    return command.source


def _parsed_profile(text: str, name: str) -> Any:
    # (its own file, in a policy that checks: it parses and declares the profile)
    parsed = parse(text, own_path("profiles", name))
    return next(d for d in parsed.declarations if isinstance(d, DECLS["profiles"]))


def _one_declaration(kind: str, name: str, source: str) -> None:
    """The source declares exactly one `kind`, `name`, and nothing else; a profile's, which
    the service renders, has its names checked as it is rendered."""
    try:
        parsed = parse(source, own_path(kind, name))
    except CharterError as exc:
        raise ServiceError(
            "policy-invalid", f"the {ONE[kind]} source does not parse",
            diagnostics=[d.to_json() for d in exc.diagnostics],
        ) from None  # fmt: skip
    if kind == "profiles":
        return
    decls = parsed.declarations
    if len(decls) != 1 or not isinstance(decls[0], DECLS[kind]) or decls[0].name != name:
        one = ONE[kind]
        raise ServiceError(_MISMATCH[kind], f"the source must declare exactly one {one}, `{name}`")


def _files_after(files: Files, kind: str, name: str, source: str | None) -> Files:
    """The policy's files once `name`'s own file holds `source` (None: is gone)."""
    path = own_path(kind, name)
    kept = [(p, t) for p, t in files if p != path]
    return kept if source is None else [*kept, (path, source)]


def _compile_ahead(service: Service, files: Files) -> bool:
    """The policy of a change checked and compiled ahead of its upload (`Service.prepare`),
    outside the write transaction: a large policy takes seconds. False for a policy that
    does not check (the operation refuses it, after its own checks)."""
    try:
        service.prepare(files)
    except CharterError:
        return False
    return True


def _commit(service: Service, files: Files, actor: Principal, note: str) -> Snapshot:
    try:
        return service.upload(files, actor.agent or f"token:{actor.token_id}", note)
    except CharterError as exc:
        raise ServiceError(
            "policy-invalid", "the policy does not check",
            diagnostics=[d.to_json() for d in exc.diagnostics],
        ) from None  # fmt: skip


def _require_unused(service: Service, files: Files, kind: str, name: str) -> None:
    """409 `policy-in-use` when the change removes what is still in use (api.service.inuse):
    a profile an agent is on, a toolset a connection holds a credential for, a tool a
    pending approval paused a call of. The declaration a `DELETE` removes is not in use
    for being made through the API, only for its users. Inside the write transaction."""
    try:
        workspace = service.prepare(files).workspace
    except CharterError:
        return  # (`_commit` refuses it with the checker's diagnostics)
    own = (ONE[kind], name)
    found = [e for e in inuse.in_use(service, workspace) if e.count or (e.kind, e.name) != own]
    if found:
        raise inuse.refusal(found, UPLOAD_ANYWAY)


# How a removal of what is in use is made anyway: by the policy's upload.
UPLOAD_ANYWAY = "upload the policy with `PUT /v1/policy?remove_in_use=true`"


def _digest(text: str | None) -> str:
    return hashlib.sha256((text or "").encode("utf-8", "surrogatepass")).hexdigest()


# ---- what an agent's write must keep: nobody's access wider --------------------------------
def _require_narrows(
    service: Service, actor: Principal, command: c.Command, before: Files, source: str | None
) -> None:
    """An agent's write (`before` the policy's files, `source` the declaration's file after
    it) widens nothing: see the module's doc. Policy text that does not check passes
    here: the operation refuses it with the checker's diagnostics."""
    if actor.agent is None:
        return
    kind, name = kind_of(command), getattr(command, "name")  # noqa: B009
    after = _files_after(before, kind, name, source)
    create, delete = command.tool.endswith(".create"), command.tool.endswith(".delete")
    served = service.current().served
    whose = key_of(actor)
    if kind == "roles" and source is not None:
        fitcheck.require_source_fits(service, service.agent(actor.agent), source, "role")
        if not create:
            fitcheck.require_role_change_narrows(service, name, after, source, whose)
    elif kind == "profiles" and source is not None:
        caller = service.agent(actor.agent)
        fitcheck.require_written_profile_fits(service, caller, name, after, source)
        if not create:
            fitcheck.require_profiles_narrow(
                service, f"profile `{name}`", "", [name], after, _digest(source), whose
            )
    elif kind == "hooks" and not create and not delete:
        users = sorted(p.name for p in served.profiles.values() if name in p.hooks)
        fitcheck.require_profiles_narrow(
            service, f"hook `{name}`", ", which names it", users, after, _digest(source), whose
        )
    elif kind == "toolsets":
        change = f"{command.tool}:{_digest(source)}"
        users = _reaching(service, name, after)
        fitcheck.require_profiles_narrow(
            service, f"toolset `{name}`", ", whose rules reach its tools", users, after,
            change, whose,
        )  # fmt: skip


def _reaching(service: Service, toolset: str, after: Files) -> list[str]:
    """The profiles a change of `toolset` (`after`: the policy's files after it) may widen:
    those with a role's rule or a hook whose patterns match one of its tools, before or
    after the change; a profile whose rules reach none of them decides as it did. (Every
    profile, checked, took seconds each on a large policy.)"""
    before = service.current().served
    try:
        changed = service.prepare(after).workspace
    except CharterError:
        return []  # (the operation refuses it with the checker's diagnostics)
    found: set[str] = set()
    for ws in (before, changed):
        for profile in ws.profiles.values():
            patterns = [p for role in profile.roles if role in ws.roles
                        for rule in ws.roles[role].rules for p in rule.patterns]  # fmt: skip
            patterns += [p for hook in ws.profile_hooks(profile) for p in hook.patterns]
            if any(tool.toolset == toolset for tool in ws.matching_tools(patterns)):
                found.add(profile.name)
    return sorted(found)


def precheck(
    service: Service, actor: Principal, command: c.Command, effect: Callable[[], str | None]
) -> None:
    """Before an agent's write is decided, outside the write lock (compiling and the solver
    may take a while): what it widens refused, and its policy compiled ahead when it runs
    at once (`effect()` is `allow`, or None: decided in the transaction; for a denied
    request compiling is work for nothing). A request the policy denies is left to be
    answered so (`denied-by-policy`), revealing nothing of the declaration it names. The
    operation checks again on the policy it changes, a look-up unless it moved."""
    service.require_signed()
    if actor.agent is not None:  # (its profile gone: nothing to check against, 404)
        service.agent_profile(service.agent(actor.agent))
    found = effect()
    if found == "deny":
        return
    runs = found in (None, "allow")
    kind, name = kind_of(command), getattr(command, "name")  # noqa: B009
    files = service.working_files()[1]
    if not command.tool.endswith(".create"):
        # (one of an uploaded file, which only an upload changes: refused before its fit
        # checks)
        _own_text(service, files, kind, name)
    source = _source(service, command, files)
    if source is not None:
        _one_declaration(kind, name, source)
    _require_narrows(service, actor, command, files, source)
    if runs:
        _compile_ahead(service, _files_after(files, kind, name, source))


# ---- the operations --------------------------------------------------------------------------
def _files_ahead(service: Service, kind: str, name: str, if_match: str | None) -> Files:
    """The latest files, read once for the work a write does ahead of its transaction;
    a stale `If-Match` is refused first, as that work could only be wasted on it. Compared
    again inside the transaction, where the file may have moved since."""
    _, files = service.working_files(service.store.latest_revision())
    if if_match is not None:
        _require_unchanged(kind, name, _own_text(service, files, kind, name), if_match)
    return files


def _write(
    service: Service, actor: Principal, command: c.Command, if_match: str | None = None
) -> Result:
    kind, name = kind_of(command), getattr(command, "name")  # noqa: B009
    create = command.tool.endswith(".create")
    delete = command.tool.endswith(".delete")
    one = ONE[kind]
    files = _files_ahead(service, kind, name, if_match)
    source = _source(service, command, files)
    if source is not None:
        _one_declaration(kind, name, source)
    _require_narrows(service, actor, command, files, source)  # (before the write lock)
    _compile_ahead(service, _files_after(files, kind, name, source))  # (or a look-up)
    with service.store.atomic():
        service.snapshots.refresh()  # inside the write lock: the true latest
        _, files = service.working_files()
        if create and name in _declared(service.current(), kind):
            raise ServiceError(_EXISTS[kind], f"{one} `{name}` already exists")
        if not create:
            # (compared here, where no other writer can change it before the write)
            _require_unchanged(kind, name, _own_text(service, files, kind, name), if_match)
        source = _source(service, command, files)  # (an update's, over the latest)
        if source is not None:
            _one_declaration(kind, name, source)
        _require_narrows(service, actor, command, files, source)  # (a look-up, unless moved)
        after = _files_after(files, kind, name, source)
        if kind != "roles":  # (a role a profile names cannot go: the policy would not check)
            _require_unused(service, after, kind, name)
        verb = "create" if create else "delete" if delete else "update"
        # (the new revision's own snapshot: an agent's request commits it later, with its
        # decision, and only then is it the service's latest)
        snapshot = _commit(service, after, actor, f"{verb} {one} {name}")
    if source is None:
        return Result(Outcome.REMOVED, None)
    body = view(snapshot, kind, _declared(snapshot, kind)[name])
    outcome = Outcome.CREATED if create else Outcome.DONE
    return Result(outcome, body, own_etag(kind, name, source))


def _create(service: Service, actor: Principal, command: c.Command) -> Result:
    return _write(service, actor, command)


def _change(
    service: Service, actor: Principal, command: c.Command, if_match: str | None = None
) -> Result:
    return _write(service, actor, command, if_match)


# The writes that take an `If-Match` themselves, and compare it inside their own write
# transaction: the work they do before it (a fit check, compiling the changed policy:
# seconds for a large one) would hold every writer off inside a transaction around them.
CONDITIONAL: dict[str, Conditional] = {}
OPERATIONS: dict[str, Operation] = {}
for _kind in KINDS:
    OPERATIONS[f"{_kind}.create"] = _create
    for _verb in ("update", "delete"):
        OPERATIONS[f"{_kind}.{_verb}"] = CONDITIONAL[f"{_kind}.{_verb}"] = _change
# The management tools that write policy files: refused on a server that takes only
# signed bundles (`Service.require_signed`), before anything is decided, and again as an
# approved one runs (its precheck).
POLICY_WRITES = frozenset(OPERATIONS)
