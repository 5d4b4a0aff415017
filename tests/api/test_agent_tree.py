"""An agent's tree in the store: each agent is tagged with its parent (and each agent
token with its agent), so "has it children?" and "which are its tokens?" are index
look-ups, on a database written before the tags too; a tree grows no deeper than the
walks up it go; a deleted agent's id and tokens do not pass to a later agent; and the root
an approval's tree check compares is found however deep the tree or gone its top."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from api import commands as c
from api.http.errors import status_of
from api.http.resources import STATUS
from api.service import tokens
from api.service.approvals import _root
from api.service.budget import MAX_CHAIN, ancestors
from api.service.core import TAGGED, tag_documents
from api.service.errors import ServiceError
from api.service.resources import agents_delete, agents_update, create_agent
from api.service.threads import threads_create, threads_delete
from api.service.tokens import Principal
from policy.store import Doc, Store
from tests.api.conftest import Harness, make_harness, opened_again

ADMIN = Principal("t", "admin")


def _tags(store: Store, parent: str) -> list[str]:
    return [row.id for row in store.page("agents", 0, 100, tag=parent)]


def _token_ids(store: Store, agent: str) -> list[str]:
    return [row.id for row in store.page("tokens", 0, 100, tag=agent)]


def _delete_as(harness: Harness, agent: str, target: str) -> int:
    try:
        done = agents_delete(
            harness.service, Principal("t", "agent", agent), c.DeleteAgent(id=target)
        )
    except ServiceError as refused:
        assert refused.code == "agent-has-children", refused.message
        return status_of(refused.code)
    return STATUS[done.outcome]


def test_whether_an_agent_has_children_is_a_look_up_by_tag(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, store = harness.service, harness.service.store
    kid = create_agent(service, Principal("t", "agent", "a1"),
                       c.CreateAgent(name="kid", profile="support-child"))  # fmt: skip
    assert _tags(store, "a1") == [kid.id]
    # an update rewrites the document and keeps its tag (an untagged write would
    # make the parent look childless)
    agents_update(service, ADMIN, c.UpdateAgent(id=kid.id, name="kid-renamed"))
    assert _tags(store, "a1") == [kid.id]

    scan = store.scan

    def no_scan(kind: str, tag: str | None = None) -> Any:
        if tag is None:  # (a scan by tag reads the tag's index, not every row)
            raise AssertionError(f"scanned every one of {kind}")
        return scan(kind, tag)

    monkeypatch.setattr(store, "scan", no_scan)
    assert _delete_as(harness, "a1", "a1") == 409
    assert _delete_as(harness, "a1", kid.id) == 204
    assert _tags(store, "a1") == []
    assert _delete_as(harness, "a1", "a1") == 204


def _untagged_child(store: Store, agent_id: str, parent: str) -> Doc:
    """A child as charter wrote it before agents were tagged: no tag."""
    doc = {**(store.get("agents", parent) or {}), "id": agent_id, "name": agent_id,
           "parent": parent}  # fmt: skip
    assert store.insert("agents", agent_id, doc)
    return doc


def test_a_database_from_before_the_tags_gets_them_when_opened(tmp_path: Path) -> None:
    old = make_harness(tmp_path)
    store = old.service.store
    old.add_agent("root2", "narrow")
    written = {"kid": _untagged_child(store, "kid", "a1"),
               "grandkid": _untagged_child(store, "grandkid", "kid")}  # fmt: skip
    kid_token = tokens.issue(store, "agent", "kid")[1]
    assert store.update("tokens", kid_token.id, kid_token.stored())  # (untagged, as before)
    store.set_meta(TAGGED, None)  # (as a database that never had them)
    assert _tags(store, "a1") == [] and _tags(store, "kid") == []
    assert _token_ids(store, "kid") == []
    store.close()
    with opened_again(old.db, old.key_file) as service:  # a charter with the tags opens the file
        harness = Harness(service, old.admin, old.decide, old.agent_token, old.identity, old.db)
        store = harness.service.store
        assert _tags(store, "a1") == ["kid"] and _tags(store, "kid") == ["grandkid"]
        assert _tags(store, "root2") == []
        for agent_id, doc in written.items():  # the documents themselves are as they were
            assert store.get("agents", agent_id) == doc
        assert _token_ids(store, "kid") == [kid_token.id]
        assert store.get_meta(TAGGED) is True
        assert _delete_as(harness, "a1", "kid") == 409
        assert _delete_as(harness, "a1", "grandkid") == 204

        def no_scan(kind: str, tag: str | None = None) -> Any:
            raise AssertionError(f"scanned every one of {kind}")

        store.scan = no_scan  # type: ignore[method-assign]
        tag_documents(store)  # done once: a later open reads one meta value


# Why approvals._root walks parents itself rather than through budget.ancestors (which
# stops after MAX_CHAIN agents and at a parent that is gone): the root is what two agents
# of one tree share, however deep the tree, even when its top was deleted.
def _chain(
    store: Store, ids: list[str], top_parent: str | None = None, identity: str | None = None
) -> None:
    """Agents each the parent of the next (identities `id-<agent>` unless `identity`)."""
    for parent, agent_id in zip([top_parent, *ids], ids, strict=False):
        doc = {"id": agent_id, "name": agent_id, "identity": identity or f"id-{agent_id}",
               "profile": "narrow", "parent": parent, "created_at": 1, "updated_at": 1}  # fmt: skip
        store.insert("agents", agent_id, doc, tag=parent)


def test_a_deleted_parent_is_the_root_its_children_share(harness: Harness) -> None:
    store = harness.service.store
    _chain(store, ["top", "k1", "g1"])
    _chain(store, ["k2"], top_parent="top")
    store.delete("agents", "top")
    harness.service.read.forget_agent("top")
    assert _root(harness.service, "g1") == ("top", "id-g1")
    assert _root(harness.service, "k2") == ("top", "id-k2")


def test_the_root_of_a_tree_deeper_than_max_chain_is_its_top(harness: Harness) -> None:
    ids = [f"n{i}" for i in range(MAX_CHAIN + 6)]
    _chain(harness.service.store, ids)
    assert _root(harness.service, ids[-1]) == ("n0", f"id-{ids[-1]}")
    assert _root(harness.service, ids[3])[0] == "n0"


def test_a_tree_grows_no_deeper_than_the_walks_up_it(harness: Harness) -> None:
    """A child more than MAX_CHAIN agents below its root would escape its root's budget
    caps (they are found by walking up at most MAX_CHAIN agents), so it is never made."""
    service = harness.service
    ids = [f"n{i}" for i in range(MAX_CHAIN)]  # n0 (a root) ... n63: 64 agents deep
    _chain(service.store, ids, identity=harness.identity)
    with pytest.raises(ServiceError) as refused:
        create_agent(
            service, Principal("t", "agent", ids[-1]),
            c.CreateAgent(name="one-too-deep", profile="narrow"),
        )  # fmt: skip
    assert (status_of(refused.value.code), refused.value.code) == (409, "agent-too-deep")
    assert _tags(service.store, ids[-1]) == []
    deepest = create_agent(
        service, Principal("t", "agent", ids[-2]), c.CreateAgent(name="deepest", profile="narrow")
    )
    assert [node.id for node in ancestors(deepest, service.find_agent)][-1] == "n0"


def _id_refused(harness: Harness, agent_id: str, agent: Principal, profile: str, why: str) -> None:
    """Neither an admin nor `agent` (making a child on `profile`) may create an agent
    under `agent_id`: 409 `agent-exists`, saying `why`, and nothing made."""
    service = harness.service
    for actor, body in ((ADMIN, {"identity": harness.identity, "profile": "narrow"}),
                        (agent, {"profile": profile})):  # fmt: skip
        with pytest.raises(ServiceError) as refused:
            made = c.CreateAgent.model_validate({"name": agent_id, **body})
            create_agent(service, actor, made, agent_id)
        assert (status_of(refused.value.code), refused.value.code) == (409, "agent-exists")
        assert why in refused.value.message
    assert service.store.get("agents", agent_id) is None


def test_an_id_a_deleted_agents_children_still_name_is_not_given_again(
    harness: Harness,
) -> None:
    """An agent made under it would manage those children and be charged their spending,
    and one of them making it would close a cycle."""
    service = harness.service
    _chain(service.store, ["top", "kid"], identity=harness.identity)
    agents_delete(service, ADMIN, c.DeleteAgent(id="top"))  # an admin may delete a parent
    _id_refused(harness, "top", Principal("t", "agent", "kid"), "narrow",
                "still name it as their parent")  # fmt: skip


def test_an_id_a_deleted_agents_threads_still_name_is_not_given_again(
    harness: Harness,
) -> None:
    """A deleted agent's threads stay (for an admin): an agent made under its id owned
    them, though it is another agent, maybe in another tree: it read their prompts,
    spent under their `max_cost`, and its parent managed them."""
    service = harness.service
    _chain(service.store, ["top", "kid"], identity=harness.identity)
    thread = threads_create(service, ADMIN, c.CreateThread(agent="kid", prompt="top's secret")).body
    agents_delete(service, ADMIN, c.DeleteAgent(id="kid"))
    harness.add_agent("other-root", "support")
    _id_refused(harness, "kid", Principal("t", "agent", "other-root"), "support-child",
                "its threads still name it")  # fmt: skip
    threads_delete(
        service, ADMIN, c.DeleteThread(id=thread.id)
    )  # the admin's choice: then it is free
    made = c.CreateAgent(name="kid", profile="narrow", identity=harness.identity)
    assert create_agent(service, ADMIN, made, "kid").parent is None


def test_deleting_an_agent_revokes_its_tokens(live: Any, harness: Harness) -> None:
    """A deleted agent's tokens are gone (401, not a 404 for its agent), and an agent made
    later under the same id (the HTTP API draws ids; the service lets a caller choose one)
    is another agent: the old tokens must not act as it."""
    harness.add_agent("a2", "support")
    old = harness.auth(harness.token_for("a2"))
    body = {"agent": "a2", "tool": "mail.send", "args": {"to": "a@example.com"}}
    assert live.post("/v1/decisions", json=body, headers=old).status_code == 200
    assert live.delete("/v1/agents/a2", headers=harness.auth()).status_code == 204
    assert _token_ids(harness.service.store, "a2") == []
    refused = live.post("/v1/decisions", json=body, headers=old)
    assert (refused.status_code, refused.json()["code"]) == (401, "unauthorized")
    harness.add_agent("a2", "support")
    refused = live.post("/v1/decisions", json=body, headers=old)
    assert (refused.status_code, refused.json()["code"]) == (401, "unauthorized")
    # other agents' tokens are untouched
    mine = {**body, "agent": "a1"}
    mine_headers = harness.auth(harness.agent_token)
    assert live.post("/v1/decisions", json=mine, headers=mine_headers).status_code == 200


def test_a_child_past_the_depth_is_refused_before_it_is_decided(harness: Harness) -> None:
    """Checked before the decision, like the other rules of what an agent makes: its
    profile here grants no `agents.create` (a deny would be logged), and a profile that
    paused it would have asked a human about a call that could only fail."""
    from api.service.manage import manage

    service = harness.service
    ids = [f"n{i}" for i in range(MAX_CHAIN)]
    _chain(service.store, ids, identity=harness.identity)
    seq = service.store.last_seq()
    with pytest.raises(ServiceError) as refused:
        manage(service, Principal("t", "agent", ids[-1]),
               c.CreateAgent(name="one-too-deep", profile="narrow"))  # fmt: skip
    assert (status_of(refused.value.code), refused.value.code) == (409, "agent-too-deep")
    assert service.store.last_seq() == seq
