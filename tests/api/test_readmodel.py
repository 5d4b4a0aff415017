"""The read model (api/service/readmodel.py): another process's change drops what it
names here, nothing else; a feed that cannot tell what changed drops everything."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from api import commands as c
from api.service import tokens
from api.service.calls import Call
from api.service.connections import connections_create
from api.service.core import Service
from api.service.decide import decide_calls
from api.service.errors import ServiceError
from api.service.resources import agents_update
from api.service.threads import threads_create, threads_delete, threads_update
from api.service.tokens import Principal, TokenCache
from policy.store import changes
from tests.api.conftest import Harness, seen_elsewhere

STORES = ("sqlite", "postgres")
ADMIN = Principal("t", "admin")


def _cached(service: Service, *agents: str) -> dict[str, object]:
    """The agents' records as cached here (each read once, through the cache)."""
    return {agent: service.agent(agent) for agent in agents}


def test_an_agent_changed_elsewhere_drops_that_agent_alone(
    harness: Harness, other: Service
) -> None:
    service = harness.service
    harness.add_agent("b1", "support")
    before = _cached(service, "a1", "b1")
    agents_update(other, ADMIN, c.UpdateAgent(id="b1", profile="narrow"))
    assert seen_elsewhere(service).sync()
    assert service.agent("a1") is before["a1"]  # kept: not named by the change
    assert service.agent("b1").profile == "narrow"  # read again
    assert not service.sync()  # seen once, then nothing new


def test_a_connection_added_elsewhere_drops_its_toolset_alone(
    harness: Harness, other: Service
) -> None:
    service = harness.service
    mail, vault = service.connections_for("mail"), service.connections_for("vault")
    connections_create(other, ADMIN, c.CreateConnection(name="v", toolset="vault", credential="c"))
    seen_elsewhere(service).sync()
    assert service.connections_for("mail") is mail  # kept
    assert vault == [] and len(service.connections_for("vault")) == 1


def test_a_token_revoked_elsewhere_drops_that_token_alone(harness: Harness, other: Service) -> None:
    service = harness.service
    cache = TokenCache(service.store)
    dropped: list[Collection[str] | None] = []
    service.read.on_tokens.append(cache.forget)
    service.read.on_tokens.append(dropped.append)
    doomed, record = tokens.issue(service.store, "decide")
    kept = cache.lookup(harness.decide)
    assert kept is not None and cache.lookup(doomed) is not None
    assert tokens.revoke(other, [record.id])
    seen_elsewhere(service).sync()
    assert dropped == [[record.id]]
    assert cache.lookup(harness.decide) is kept  # still cached: the same object
    assert cache.lookup(doomed) is None


def test_a_thread_deleted_elsewhere_is_dropped_alone(harness: Harness, other: Service) -> None:
    """A thread is read once for the calls made in it; its status moving elsewhere drops
    nothing, and its deletion elsewhere drops that thread alone: a call in it is then
    `thread-not-found`, and nothing is logged for it."""
    service = harness.service
    kept, doomed = (
        threads_create(service, ADMIN, c.CreateThread(agent="a1", prompt="p" * 1000)).body.id
        for _ in range(2)
    )
    call = Call("a1", "mail.send", {"to": "bob@example.com", "subject": "s", "body": "b"})
    for thread in (kept, doomed):
        assert decide_calls(service, [call._replace(thread=thread)])[0]["effect"] == "allow"
    cached = service.read.thread(kept)
    assert cached.prompt == ""  # (kept without it: no decision reads it)
    moves = service.read.moves
    threads_update(other, ADMIN, c.UpdateThread(id=kept, status="running"))
    service.sync()
    assert service.read.thread(kept) is cached and service.read.moves == moves
    threads_delete(other, ADMIN, c.DeleteThread(id=doomed))
    assert seen_elsewhere(service).sync()
    assert service.read.thread(kept) is cached
    last = service.store.last_seq()
    with pytest.raises(ServiceError) as refused:
        decide_calls(service, [call._replace(thread=doomed)])
    assert refused.value.code == "thread-not-found"
    assert service.store.last_seq() == last


def test_a_turn_goes_with_its_agent_deleted_elsewhere(harness: Harness, other: Service) -> None:
    """A turn is read once for the calls made on it and dropped here when its agent
    changes elsewhere: deleted there with its agent, a call naming it is then
    `turn-not-found`, even for a new agent under the same id."""
    from api.service.resources import admit_turn, agents_delete, create_agent

    service = harness.service
    harness.add_agent("b1", "support")
    turn = admit_turn(service, "b1", None, service.current()).id
    other_turn = admit_turn(service, "a1", None, service.current()).id
    call = Call("b1", "mail.send", {"to": "bob@example.com", "subject": "s", "body": "b"})
    assert decide_calls(service, [call._replace(turn=turn)])[0]["effect"] == "allow"
    assert service.read.turn(turn) is service.read.turn(turn)
    kept = service.read.turn(other_turn)
    agents_delete(other, ADMIN, c.DeleteAgent(id="b1"))
    made = c.CreateAgent(name="b1", profile="support", identity=harness.identity)
    create_agent(other, ADMIN, made, "b1")
    assert seen_elsewhere(service).sync()
    assert service.read.turn(other_turn) is kept  # (another agent's)
    with pytest.raises(ServiceError) as refused:
        decide_calls(service, [call._replace(turn=turn)])
    assert refused.value.code == "turn-not-found"


def test_decisions_elsewhere_drop_nothing(harness: Harness, other: Service) -> None:
    """Another process's decisions note no change: nothing cached here is read again."""
    service = harness.service
    before = _cached(service, "a1")
    moves = service.read.moves
    other.store.append_decisions([b'{"effect":"allow"}'])
    service.sync()
    assert service.agent("a1") is before["a1"] and service.read.moves == moves


@pytest.mark.parametrize("why", ["behind", "damaged"])
def test_a_feed_that_cannot_tell_drops_everything(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    """Further behind than the kept changes, or a change row damaged (the store's answer
    is then None: tests/store/test_contract.py): every agent, connection list and token
    is dropped, though the changes left name none of them."""
    service = harness.service
    harness.add_agent("b1", "support")
    before = _cached(service, "a1", "b1")
    dropped: list[Collection[str] | None] = []
    service.read.on_tokens.append(dropped.append)
    if why == "behind":
        monkeypatch.setattr(changes, "KEEP", 2)
    else:
        real = service.store.changes_after

        def damaged(after: int) -> changes.Feed:
            found = real(after)
            return changes.Feed(found.latest, found.version, None)

        monkeypatch.setattr(service.store, "changes_after", damaged)
    for n in range(3):
        other.store.note_change("agent", f"nobody-{n}")
    assert seen_elsewhere(service).sync()
    assert dropped == [None]
    assert service.agent("a1") is not before["a1"] and service.agent("b1") is not before["b1"]
