"""Several serving processes on one file (`charter serve --workers N`), here two services on
the harness's database: a change one makes is never decided around by the other, and a
change that fails leaves no process's caches behind the store."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from api import commands as c
from api.http.errors import status_of
from api.service import tokens
from api.service.calls import Call
from api.service.connections import connections_create, connections_delete, connections_update
from api.service.core import Service
from api.service.decide import decide_calls
from api.service.errors import ServiceError
from api.service.groupcommit import GroupCommit
from api.service.resources import agents_delete, agents_update, create_agent
from api.service.threads import threads_create
from api.service.tokens import Principal, TokenCache
from policy import identities
from policy.secrets import Sealer
from policy.store import StoreUnavailable
from policy.store.sqlite import SqliteStore
from tests.api.conftest import POLICY, Harness, opened_again, seen_elsewhere

ADMIN = Principal("t", "admin")
# b1 has no token: deleting a1 revokes its token, noted in the feed with the deletion
REFUND = Call("b1", "billing.refund", {"amount": 5})
VAULT = Call("b1", "vault.read", {"key": "k"})


def _decided(commit: GroupCommit, call: Call) -> str:
    effect: str = asyncio.run(commit.decide([call]))[0]["effect"]
    return effect


def _add_connection(service: Service) -> None:
    made = c.CreateConnection(name="v", toolset="vault", credential="c")
    connections_create(service, ADMIN, made)


def _remove_connection(service: Service) -> None:
    (row,) = service.store.scan("connections")
    connections_delete(service, ADMIN, c.DeleteConnection(id=row.id))


# (what another process does, a call this one decides, its effect before and after)
CHANGES: dict[str, tuple[Callable[[Service], Any], Call, str, str]] = {
    "agent narrowed": (
        lambda s: agents_update(s, ADMIN, c.UpdateAgent(id="b1", profile="narrow")), REFUND, "allow",
        "deny",
    ),
    "agent deleted": (lambda s: agents_delete(s, ADMIN, c.DeleteAgent(id="b1")), REFUND, "allow", "404"),
    "connection added": (_add_connection, VAULT, "deny", "allow"),
    "connection removed": (_remove_connection, VAULT, "allow", "deny"),
}  # fmt: skip


def _effect(commit: GroupCommit, call: Call) -> str:
    try:
        return _decided(commit, call)
    except ServiceError as exc:  # an unknown agent: its 404
        return str(status_of(exc.code))


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_whose_note_cannot_be_written_is_not_committed(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """The change and its note in the change feed are one transaction: when the note's
    write fails (a full disk), the change is not committed either. Were they two, the
    change would stay while no other process ever dropped its cached agent or
    connections, and kept deciding on them (an agent narrowed or deleted allowed on)."""
    act, call, before, _ = CHANGES[change]
    harness.add_agent("b1", "support")
    if change == "connection removed":
        _add_connection(other)
    commit = GroupCommit(harness.service)
    assert _effect(commit, call) == before  # cached here
    real = other.store.note_change

    def full(kind: str, key: str) -> None:
        raise StoreUnavailable("the database is unavailable (SQLITE_FULL)")

    monkeypatch.setattr(other.store, "note_change", full)
    with pytest.raises(StoreUnavailable):
        act(other)
    monkeypatch.setattr(other.store, "note_change", real)
    assert _effect(commit, call) == before
    assert _effect(GroupCommit(other), call) == before  # what the store holds says the same
    act(other)  # once the disk has room, the change is made and seen here at once
    assert _effect(commit, call) == CHANGES[change][3]


def _narrower_policy(service: Service) -> None:
    with service.store.atomic():  # profile support without role refunder
        service.upload([("policy.charter", POLICY.replace("mailer, refunder,", "mailer,"))], "t")


SEEN = {**CHANGES, "revision uploaded": (_narrower_policy, REFUND, "allow", "deny")}


def _meanwhile(monkeypatch: pytest.MonkeyPatch, service: Service, act: Callable[[], Any]) -> None:
    """`act` runs once the group was prepared and drafted, before its write transaction
    begins, as another thread of this process (a management request's) may."""
    store = service.store
    real = store.atomic
    pending = [act]

    def atomic() -> Any:
        if pending:
            pending.pop()()
        return real()

    monkeypatch.setattr(store, "atomic", atomic)


@pytest.mark.parametrize("change", SEEN)
def test_a_change_another_thread_saw_first_is_decided_on(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """Another process's change, seen by another thread of this process between the
    group's preparation and its write transaction: that thread's look at the store took
    the news, so the group's own look inside the transaction found nothing new, and the
    group was logged on what it was prepared on (an allow for a narrowed or deleted agent,
    on the old revision, without the new connection)."""
    act, call, before, after = SEEN[change]
    harness.add_agent("b1", "support")
    if change == "connection removed":
        _add_connection(other)
    commit = GroupCommit(harness.service)
    assert _effect(commit, call) == before
    _meanwhile(
        monkeypatch, harness.service, lambda: (act(other), seen_elsewhere(harness.service).sync())
    )
    assert _effect(commit, call) == after


@pytest.mark.parametrize("change", SEEN)
def test_a_change_this_process_made_meanwhile_is_decided_on(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """The same change made by this process (a management request runs in a thread)
    while the group waits for its transaction: the data version moves only for other
    processes' commits, so nothing told the group."""
    act, call, before, after = SEEN[change]
    service = harness.service
    harness.add_agent("b1", "support")
    if change == "connection removed":
        _add_connection(service)
    commit = GroupCommit(service)
    assert _effect(commit, call) == before
    _meanwhile(monkeypatch, service, lambda: act(service))
    assert _effect(commit, call) == after


def test_an_agent_changed_elsewhere_is_changed_here_on_what_was_committed(
    harness: Harness, other: Service
) -> None:
    """An admin's change reads the agent inside its transaction, as committed: the agent
    this process had cached (its request looked at the store before another process's
    change committed) was written back, undoing the other change (here, the profile)."""
    service = harness.service
    service.agent("a1")  # cached here
    agents_update(other, ADMIN, c.UpdateAgent(id="a1", profile="narrow"))
    agents_update(service, ADMIN, c.UpdateAgent(id="a1", metadata={"team": "x"}))
    doc = other.store.get("agents", "a1")
    assert doc is not None and (doc["profile"], doc["metadata"]) == ("narrow", {"team": "x"})


@pytest.mark.parametrize("operation", ["agents.update", "agents.delete", "threads.create"])
def test_an_agent_deleted_elsewhere_is_not_found_here(
    harness: Harness, other: Service, operation: str
) -> None:
    """An agent another process deleted is 404 here too, though cached here: an update
    answered 200 and a delete 204 (a second delete of one agent) having written nothing,
    and a thread was opened for the deleted agent."""
    service = harness.service
    service.agent("a1")  # cached here
    agents_delete(other, ADMIN, c.DeleteAgent(id="a1"))
    runs: dict[str, Callable[[], Any]] = {
        "agents.update": lambda: agents_update(
            service, ADMIN, c.UpdateAgent(id="a1", name="renamed")
        ),
        "agents.delete": lambda: agents_delete(service, ADMIN, c.DeleteAgent(id="a1")),
        "threads.create": lambda: threads_create(service, ADMIN, c.CreateThread(agent="a1")),
    }
    with pytest.raises(ServiceError) as refused:
        runs[operation]()
    assert (status_of(refused.value.code), refused.value.code) == (404, "agent-not-found")
    assert list(other.store.scan("threads")) == []


def _while_read(
    monkeypatch: pytest.MonkeyPatch,
    service: Service,
    kind: str,
    act: Callable[[], Any],
    method: str = "get",
) -> list[Callable[[], Any]]:
    """`act` runs once, right after the store's `method` read documents of `kind` and
    before the reader has them, as another thread of this process may; what is left to
    run (empty once it ran)."""
    real = getattr(service.store, method)
    pending = [act]

    def read(read: str, *args: Any, **kwargs: Any) -> Any:
        found = real(read, *args, **kwargs)
        if read == kind and pending:
            pending.pop()()
        return found

    monkeypatch.setattr(service.store, method, read)
    return pending


def test_an_agent_changed_while_it_was_read_is_not_kept(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process changes the agent and a thread here sees it (the caches dropped)
    while this look-up reads the agent: what it read is its answer, but is not kept, or
    the cache held the old agent until the next change anywhere."""
    service = harness.service

    def narrowed() -> None:
        agents_update(other, ADMIN, c.UpdateAgent(id="b1", profile="narrow"))
        seen_elsewhere(service).sync()

    harness.add_agent("b1", "support")
    pending = _while_read(monkeypatch, service, "agents", narrowed)
    assert service.agent("b1").profile == "support"
    assert pending == []
    assert service.agent("b1").profile == "narrow"


def test_connections_changed_while_they_were_read_are_not_kept(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a toolset's connections (read a page at a time)."""
    service = harness.service

    def added() -> None:
        _add_connection(other)
        seen_elsewhere(service).sync()

    pending = _while_read(monkeypatch, service, "connections", added, method="page")
    assert service.connections_for("vault") == []
    assert pending == []
    assert len(service.connections_for("vault")) == 1


def test_caps_made_from_a_parent_read_while_it_changed_are_not_kept(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step 6's parts (caps, connection, secret names) are kept between requests for a
    call outside a thread, dropped whenever an agent changes. A parent given a budget by
    another thread of this process (a `PATCH` runs in one) while a child's call read the
    parent for its caps: the caps made from the parent as it was were kept after that
    drop, so every later call of the child spent past the parent's new budget."""
    service = harness.service
    harness.add_agent("kid", "wide")  # (a profile without a budget of its own)
    kid = dict(service.store.get("agents", "kid") or {})
    kid["parent"] = "a1"
    service.store.update("agents", "kid", kid, tag=kid["parent"])
    service.read.forget_agent("kid")
    service.read.forget_agent("a1")
    service.agent("kid")  # cached: the parent is the first agent its call reads

    def capped() -> None:  # the parent's own cap: 1 USD in all
        budget = c.Budget(amount=Decimal(1), period="total")
        agents_update(service, ADMIN, c.UpdateAgent(id="a1", budget=budget))

    pending = _while_read(monkeypatch, service, "agents", capped)
    commit = GroupCommit(service)
    call = Call("kid", "billing.refund", {"amount": 1}, expected_cost=Decimal(2))
    assert _decided(commit, call) == "deny"  # prepared again: the change came before it
    assert pending == []
    assert _decided(commit, call) == "deny"
    assert service.store.spent("agent:a1", 0) == 0


def test_a_token_revoked_while_it_was_looked_up_is_not_kept(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a token revoked by another process while this process looks it up:
    kept, the revoked token went on working here (a group commit looks it up again after
    the cache was dropped, and found it in the cache)."""
    service = harness.service
    cache = TokenCache(service.store)
    service.read.on_tokens.append(cache.forget)  # as create_app registers it
    token = harness.token_for("a1")
    (token_id,) = tokens.agent_tokens(service.store, "a1")[-1:]

    def revoked() -> None:
        tokens.revoke(other, [token_id])
        seen_elsewhere(service).sync()

    pending = _while_read(monkeypatch, service, "tokens", revoked)
    assert cache.lookup(token) is not None  # there when it was read
    assert pending == []
    assert cache.lookup(token) is None


def test_a_look_at_the_store_another_thread_has_begun_is_not_taken_as_done(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One thread's `sync` has found that another process committed and is reading what
    changed when another thread (a management request's, in its write transaction) looks
    too: that one must see the change, not take the first one's find as done while its
    caches still hold the agent as it was (the data version was taken as seen as it was
    read, so the second look found nothing new and decided on the old profile)."""
    service = harness.service
    harness.add_agent("b1", "support")
    assert decide_calls(service, [REFUND])[0]["effect"] == "allow"  # b1 cached here
    agents_update(other, ADMIN, c.UpdateAgent(id="b1", profile="narrow"))
    real = service.store.changes_after
    decided: list[str] = []
    pending = [lambda: decided.append(decide_calls(service, [REFUND])[0]["effect"])]

    def meanwhile(after: int) -> Any:
        if pending:
            pending.pop()()
        return real(after)

    monkeypatch.setattr(service.store, "changes_after", meanwhile)
    seen_elsewhere(service).sync()
    assert decided == ["deny"]


def test_a_connection_changed_in_two_processes_at_once_keeps_both_changes(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection's update reads it and writes it in one transaction: another process's
    update of its name, committed while this one sealed a new credential, was written
    over with the name as this one had read it."""
    service = harness.service
    _add_connection(service)
    (row,) = service.store.scan("connections")
    renamed = threading.Thread(
        target=connections_update,
        args=(other, ADMIN, c.UpdateConnection(id=row.id, name="renamed")),
    )

    class Meanwhile:  # the sealer, but another process renames the connection first
        def __init__(self, sealer: Sealer) -> None:
            self.open = sealer.open
            self._seal = sealer.seal

        def seal(self, plain: bytes) -> bytes:
            renamed.start()
            renamed.join(0.5)  # done by now, unless it waits for this one's transaction
            return self._seal(plain)

    monkeypatch.setattr(service, "sealer", Meanwhile(service.sealer))
    connections_update(service, ADMIN, c.UpdateConnection(id=row.id, credential="new"))
    renamed.join(10)
    doc = other.store.get("connections", row.id)
    assert doc is not None and doc["name"] == "renamed"
    assert service.sealer.open(doc["sealed_credential"]) == b"new"


def test_a_group_refused_on_what_it_had_not_seen_is_logged_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group all refused on its caches (no policy yet, here) that another process's
    commit answers (its first upload) is prepared again outside any transaction and then
    logged in one: the second look, inside it, finds nothing new."""
    with opened_again(tmp_path / "c.db") as here, opened_again(tmp_path / "c.db") as there:
        with there.store.atomic():
            there.upload([("policy.charter", POLICY)], "t")
        key, _ = identities.create(there.store, there.sealer, "key")
        made = c.CreateAgent(name="b1", profile="support", identity=key["id"])
        create_agent(there, ADMIN, made, "b1")
        store = here.store
        assert isinstance(store, SqliteStore)
        began = []
        real = store.atomic

        def atomic() -> Any:
            began.append(store._depth == 0)  # (an outermost transaction)
            return real()

        monkeypatch.setattr(store, "atomic", atomic)
        assert _decided(GroupCommit(here), REFUND) == "allow"
        assert began.count(True) == 1
