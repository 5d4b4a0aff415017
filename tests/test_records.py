"""The domain records (api/records.py): a stored document reads back as its record and
writes back as itself, hidden fields are never shown nor described, and a document that
is not one of its kind is StoreDamaged, naming fields, never their values."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.records import (
    DOCUMENTS,
    UNSTAMPED_TURN_MS,
    Agent,
    Connection,
    Feed,
    Record,
    Thread,
    Token,
    Turn,
)
from api.service.encoding import dumps
from policy.store import StoreDamaged

SECRET = "s3cret-value-never-shown"

texts = st.text(max_size=12)
ids = st.text(min_size=1, max_size=12)
times = st.integers(min_value=0, max_value=2**53)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts
    | st.decimals(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)  # fmt: skip

agents = st.fixed_dictionaries(
    {
        "id": ids, "name": texts, "identity": ids, "profile": ids,
        "created_at": times, "updated_at": times,
    },
    optional={
        "budget": st.none() | st.fixed_dictionaries(
            {"amount": st.decimals(min_value=0, max_value=10**9, places=6).map(str),
             "period": st.sampled_from(["24h", "7d", "total"])}
        ),
        "metadata": st.dictionaries(texts, values, max_size=4),
        "parent": st.none() | ids,
        "status": st.sampled_from(["idle", "running", "stopped", "error"]),
    },
)  # fmt: skip
threads = st.fixed_dictionaries(
    {
        "id": ids, "agent": ids, "prompt": texts,
        "max_cost": st.none() | st.decimals(min_value=0, max_value=10, places=6).map(str),
        "status": st.sampled_from(["open", "running", "waiting", "done", "failed", "cancelled"]),
        "created_at": times, "updated_at": times,
    },
    optional={"depth": st.integers(min_value=0, max_value=64)},
)  # fmt: skip
connections = st.fixed_dictionaries(
    {
        "id": ids, "name": texts, "toolset": ids, "sealed_credential": st.binary(min_size=1),
        "created_at": times, "updated_at": times,
    },
    optional={"owner": st.none() | ids},
)  # fmt: skip
tokens = st.fixed_dictionaries(
    {
        "id": ids, "hash": st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
        "scope": st.sampled_from(["admin", "decide", "agent"]), "created_at": times,
    },
    optional={"agent": st.none() | ids, "name": texts, "expires_at": st.none() | times,
              "last_used_at": st.none() | times},
)  # fmt: skip
feeds = st.fixed_dictionaries(
    {"id": ids, "name": texts, "last_seq": st.integers(min_value=0, max_value=2**63 - 1),
     "created_at": times, "updated_at": times},
)  # fmt: skip
KINDS: list[tuple[type[Record], st.SearchStrategy[dict[str, Any]]]] = [
    (Agent, agents), (Thread, threads), (Connection, connections), (Token, tokens),
    (Feed, feeds),
]  # fmt: skip


@pytest.mark.parametrize(("record", "docs"), KINDS, ids=[k.__name__ for k, _ in KINDS])
@given(data=st.data())
def test_a_document_reads_as_its_record_and_writes_back_as_itself(
    record: type[Record], docs: st.SearchStrategy[dict[str, Any]], data: st.DataObject
) -> None:
    """Whatever fields a document has (an older one may lack some), its record stores it
    exactly as it was: its entity tag, a digest of the stored document, stays the same."""
    doc = data.draw(docs)
    read = record.read(doc)
    assert read.stored() == doc
    assert record.read(read.stored()) == read
    shown = read.shown()
    assert set(shown) == set(doc) - record.HIDDEN
    assert dumps(read) == dumps(shown)  # (what an answer writes)


def test_hidden_fields_are_never_shown_nor_described() -> None:
    connection = Connection.read(
        {"id": "c", "name": "n", "toolset": "t", "owner": None,
         "sealed_credential": SECRET.encode(), "created_at": 1, "updated_at": 1}
    )  # fmt: skip
    token = Token.read({"id": "t", "hash": SECRET, "scope": "admin", "created_at": 1})
    for record in (connection, token):
        assert SECRET.encode() not in dumps(record) and SECRET.encode() not in dumps([record])
        schema = type(record).model_json_schema(mode="validation")
        assert not set(schema["properties"]) & type(record).HIDDEN


def test_every_stored_kind_has_its_record() -> None:
    assert set(DOCUMENTS) == {
        "agents",
        "threads",
        "turns",
        "connections",
        "approvals",
        "tokens",
        "feeds",
    }
    assert all(kind == record.KIND for kind, record in DOCUMENTS.items())


def test_a_document_that_is_not_its_kind_is_damaged_and_shows_no_value() -> None:
    doc = {"id": "a1", "name": SECRET, "identity": "i", "profile": 7, "created_at": "x"}
    with pytest.raises(StoreDamaged) as damaged:
        Agent.read(doc)
    assert damaged.value.what == "document agents/a1"
    assert "`profile`" in damaged.value.why and "`updated_at`" in damaged.value.why
    assert SECRET not in str(damaged.value)


def test_a_turn_stored_without_its_end_runs_an_hour_and_changes_check_as_new() -> None:
    turn = Turn.read({"id": "t", "agent": "a", "thread": None, "revision": 3, "created_at": 10})
    assert turn.ends_at == 10 + UNSTAMPED_TURN_MS and turn.profile is None
    agent = Agent.read(
        {"id": "a", "name": "a", "identity": "i", "profile": "p", "created_at": 1,
         "updated_at": 1, "budget": {"amount": "1.5", "period": "7d"}}
    )  # fmt: skip
    assert agent.budget is not None and Decimal(agent.budget.amount) == Decimal("1.5")
    renamed = agent.changed(name="b")
    assert (
        renamed.name == "b"
        and agent.name == "a"
        and renamed.stored()["budget"] == {"amount": "1.5", "period": "7d"}
    )
    with pytest.raises(ValueError):
        agent.changed(status="asleep")
