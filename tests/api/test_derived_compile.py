"""A policy change through the service is compiled against the policy it changes
(engine/rebuild.py): what it did not touch is the previous snapshot's very objects, in
the process that made the change and in another that compiles the revision it stored."""

from __future__ import annotations

from api import commands as c
from api.service.core import Service
from api.service.manage import manage
from api.service.tokens import Principal
from engine.compile import Snapshot
from engine.decision import Request
from tests.api.conftest import POLICY, Harness, seen_elsewhere

ADMIN = Principal("t", "admin")
ROLE = "role auditor {\n  allow mail.send\n}\n"


def _shared(before: Snapshot, after: Snapshot) -> set[str]:
    """The profiles whose every plan built so far in `before` is the same object in `after`."""
    return {
        name
        for name, plans in before.profiles.items()
        if plans.plans and all(after.profiles[name].plans.get(tool) is plan
                               for tool, plan in plans.plans.items())
    }  # fmt: skip


def test_a_role_created_keeps_what_it_did_not_touch(harness: Harness, other: Service) -> None:
    service = harness.service
    before = service.current()
    elsewhere = other.current()
    manage(service, ADMIN, c.CreateRole(name="auditor", source=ROLE))
    after = service.current()
    assert after.revision == before.revision + 1
    assert "auditor" in after.workspace.roles
    # No profile selects the new role: every profile keeps its plans, every file its parse.
    assert _shared(before, after) == {n for n, p in before.profiles.items() if p.plans}
    kept = {f.path: f for f in before.workspace.files}
    assert all(kept.get(f.path) is f for f in after.workspace.files if f.path in kept)
    # Another worker compiles the stored revision against the newest it has compiled.
    seen_elsewhere(other).sync()
    there = other.current()
    assert there.revision == after.revision
    assert _shared(elsewhere, there) == {n for n, p in elsewhere.profiles.items() if p.plans}


def test_a_file_changed_recompiles_the_profiles_that_select_its_roles(
    harness: Harness,
) -> None:
    service = harness.service
    extra = "role extra {\n  allow mail.send\n}\n\nprofile extra-p {\n  roles extra, mailer\n}\n"
    with service.store.atomic():
        service.upload([("extra.charter", extra), ("policy.charter", POLICY)], "t")
    before = service.current()
    before.decide(Request("extra-p", "mail.send", {}))  # (a plan of each)
    changed = extra.replace("allow mail.send", "allow mail.*")
    with service.store.atomic():
        service.upload([("extra.charter", changed), ("policy.charter", POLICY)], "t")
    after = service.current()
    unchanged = {n for n, p in before.profiles.items() if p.plans} - {"extra-p"}
    assert _shared(before, after) == unchanged
    assert (
        after.profiles["extra-p"].plans["mail.send"]
        is not before.profiles["extra-p"].plans["mail.send"]
    )
    assert after.workspace.roles["mailer"] is before.workspace.roles["mailer"]
