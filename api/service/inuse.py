"""What a new policy would remove that is still in use: a policy's upload (`PUT
/v1/policy`) and `charter serve --workspace` refuse it (409 `policy-in-use`, or exit 1)
unless told to remove it anyway.

A use is what the latest revision declares, the new policy does not, and the store still
names:

- a profile that an agent is on (its decisions would all be `deny`, "unknown profile"),
  or that the agent of a pending approval is on;
- a toolset, or one tool of a toolset the new policy keeps, that a pending approval
  paused a call of (approving it could only deny it), or a toolset a connection holds a
  credential for (no call could use it);
- a role, profile, hook or toolset made through the API (its file
  `api/<kind>/<name>.charter`), which the new policy declares nowhere: it is the
  server's, as its agents are, and an upload made from an older copy of the files
  dropped it without a word. A role's or hook's users are the profiles of the latest
  revision that name it; a profile's and a toolset's, those above.

A running turn is not a use: it decides on the revision and profile it pinned, which the
upload does not change, until it ends (`charter serve --turn-lifetime`). Its agent is,
while that agent is on the profile. A latest revision that does not check with this
charter decides nothing (409 `revision-does-not-check`), so replacing it strands nothing.

Read inside the upload's write transaction: an agent, approval or connection made by
another process meanwhile cannot slip in between the look and the new revision.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from api.records import Approval
from api.service.core import Service
from api.service.errors import ServiceError
from api.service.rolefiles import ONE, OWN_DIRS, kind_of, own_path
from engine.workspace import Workspace

SHOWN_USERS = 10  # the users listed for each removed name (`more` counts the rest)
SHOWN_NAMES = 100  # the removed names listed (`in_use_more` counts the rest)
NAMED = 5  # the removed names the message names
KINDS = ("profile", "toolset", "tool", "role", "hook")  # in the order they are listed


@dataclass
class InUse:
    """A name the new policy removes (`kind`: profile, toolset, tool, role) and who uses
    it: the first SHOWN_USERS as (kind, id), and how many there are in all."""

    kind: str
    name: str
    users: list[tuple[str, str]] = field(default_factory=list)
    count: int = 0
    api: bool = False  # made through the API (its own file under `api/`)

    def add(self, kind: str, id: str) -> None:
        if len(self.users) < SHOWN_USERS:
            self.users.append((kind, id))
        self.count += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "used_by": [{"kind": kind, "id": id} for kind, id in self.users],
            "more": self.count - len(self.users),
        }

    def said(self) -> str:
        """`profile `support` (agent `a1`, approval `x` and 3 more)`."""
        shown = ", ".join(f"{kind} `{id}`" for kind, id in self.users[:3])
        rest = self.count - min(len(self.users), 3)
        if rest:
            shown += f" and {rest} more"
        what = f"{self.kind} `{self.name}`"
        if self.api:
            what += " made through the API"
        return f"{what} ({shown})" if shown else what


def api_made(workspace: Workspace) -> list[tuple[str, str]]:
    """The roles, profiles, hooks and toolsets made through the API in `workspace`, as
    (kind, name): each file `api/<kind>/<name>.charter` that declares its own `name`."""
    found = []
    for source in workspace.files:
        kind = kind_of(source.path)
        if kind is None:
            continue
        name = source.path[len(OWN_DIRS[kind]) :].removesuffix(".charter")
        if own_path(kind, name) == source.path and name in getattr(workspace, kind):
            found.append((ONE[kind], name))
    return sorted(found)


def find(service: Service, old: Workspace, new: Workspace) -> list[InUse]:
    """Every name `old` declares and `new` does not that the store still uses, in KINDS
    order then by name; one that nothing uses is not listed."""
    found: dict[tuple[str, str], InUse] = {}

    def use(kind: str, name: str, user_kind: str, user: str) -> None:
        entry = found.setdefault((kind, name), InUse(kind, name))
        entry.add(user_kind, user)

    profiles = set(old.profiles) - set(new.profiles)
    toolsets = set(old.toolsets) - set(new.toolsets)
    tools = {name for name in old.tools if name not in new.tools}
    store = service.store
    on: dict[str, str] = {}  # agent id -> its profile, when that is removed
    if profiles:
        for row in store.scan("agents"):
            profile = row.body.get("profile")
            if profile in profiles:
                on[row.id] = str(profile)
                use("profile", str(profile), "agent", row.id)
    if on or tools:
        for row in store.scan(Approval.KIND, tag="pending"):
            approval = Approval.read(row.body)
            if approval.agent in on:
                use("profile", on[approval.agent], "approval", approval.id)
            if approval.tool in tools:
                toolset = old.tools[approval.tool].toolset or ""
                if toolset in toolsets:
                    use("toolset", toolset, "approval", approval.id)
                else:
                    use("tool", approval.tool, "approval", approval.id)
    for toolset in sorted(toolsets):
        for row in store.scan("connections", tag=toolset):
            use("toolset", toolset, "connection", row.id)
    for kind, name in api_made(old):
        if name in getattr(new, f"{kind}s"):
            continue
        entry = found.setdefault((kind, name), InUse(kind, name))
        entry.api = True
        if kind not in ("role", "hook"):  # (a profile's, a toolset's users: found above)
            continue
        for profile in sorted(old.profiles.values(), key=lambda p: p.name):
            if name in (profile.roles if kind == "role" else profile.hooks):
                entry.add("profile", profile.name)
    return sorted(found.values(), key=lambda e: (KINDS.index(e.kind), e.name))


def latest_workspace(service: Service) -> Workspace | None:
    """The latest revision's workspace, inside the caller's transaction (None: there is
    none, or it does not check with this charter)."""
    latest = service.store.latest_revision()
    if latest == 0:
        return None
    try:
        return service.snapshots.get(latest).workspace
    except ServiceError:  # (`revision-does-not-check`: it decides nothing as it is)
        return None


def in_use(service: Service, new: Workspace) -> list[InUse]:
    """What `new`, to be the next revision, removes that is still in use (see `find`)."""
    old = latest_workspace(service)
    return [] if old is None else find(service, old, new)


def listing(found: Iterable[InUse]) -> list[dict[str, Any]]:
    return [entry.to_json() for entry in found]


def summary(found: list[InUse]) -> str:
    """`profile `support` (agent `a1`), toolset `vault` (connection `c1`)`: NAMED at most."""
    said = ", ".join(entry.said() for entry in found[:NAMED])
    if len(found) > NAMED:
        said += f" and {len(found) - NAMED} more"
    return said


def refusal(found: list[InUse], override: str) -> ServiceError:
    """409 `policy-in-use`: what is removed and who uses it; `override` is how to say
    it is meant (`?remove_in_use=true`, `--remove-in-use`)."""
    return ServiceError(
        "policy-in-use",
        f"the policy removes what is still in use: {summary(found)}",
        help="keep them in the policy, or first move their users off them (agents to another "
        "profile, approvals decided, connections deleted, roles deleted with `DELETE "
        f"/v1/roles/{{name}}`); to remove them anyway, {override}",
        in_use=listing(found[:SHOWN_NAMES]), in_use_more=max(0, len(found) - SHOWN_NAMES),
    )  # fmt: skip


def require_unused(service: Service, new: Workspace, remove: bool, override: str) -> list[InUse]:
    """Inside the write transaction of the revision `new` is to be: what it removes that
    is in use, when `remove` says to remove it anyway; else 409 `policy-in-use` if it
    removes any."""
    found = in_use(service, new)
    if found and not remove:
        raise refusal(found, override)
    return found
