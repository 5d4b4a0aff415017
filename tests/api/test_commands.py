"""The management tools' commands (api.commands): one for each operation, each the tool's
arguments as an agent's request is decided on them."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from api import commands as c
from api.service import declwrites
from api.service.manage import OPERATIONS, PRECHECKS
from tests.api.conftest import POLICY, Harness, expect


def test_every_operation_has_its_command() -> None:
    assert set(c.COMMANDS) == set(OPERATIONS)
    assert all(command.tool == tool for tool, command in c.COMMANDS.items())


def _taken(run: Callable[..., Any]) -> Any:
    """The class of command a function takes: its third parameter's annotation."""
    return list(inspect.signature(run, eval_str=True).parameters.values())[2].annotation


@pytest.mark.parametrize("table", [OPERATIONS, PRECHECKS, declwrites.CONDITIONAL])
def test_each_function_takes_its_tools_command(table: Mapping[str, Callable[..., Any]]) -> None:
    """The tables hold functions of any command (api.service.ops): each takes its own
    tool's, or a class that one extends."""
    for tool, run in table.items():
        assert issubclass(c.COMMANDS[tool], _taken(run)), tool


def test_a_commands_arguments_are_what_was_given_but_nulls() -> None:
    command = c.UpdateAgent.model_validate(
        {"id": "a1", "name": " b ", "profile": None, "budget": {"amount": 1, "period": "7d"}}
    )
    assert command.args() == {
        "name": "b", "budget": {"amount": Decimal(1), "period": "7d"}, "id": "a1",
    }  # fmt: skip
    assert list(command.args()) == ["name", "budget", "id"]  # (the body's fields first)
    assert command.given("name") and not command.given("profile", "metadata")
    assert c.CreateThread().args() == {}  # (a default is not given)


def test_a_command_is_frozen_and_takes_no_other_field() -> None:
    command = c.GetAgent(id="a1")
    with pytest.raises(ValidationError):
        command.id = "a2"
    with pytest.raises(ValidationError):
        c.CreateRole.model_validate({"name": "r", "source": "role r {}", "id": "x"})


def test_the_bodies_schemas_are_their_own() -> None:
    """A command adds the path's and the query's fields to its body's model, which stays
    what `/openapi.json` gives."""
    assert "id" not in c.AgentUpdate.model_fields
    assert c.UpdateAgent.model_fields.keys() == {*c.AgentUpdate.model_fields, "id"}


REWRITES = """
role opener {
  allow threads.create, threads.update
}
hook huge-threads on threads.create where args.prompt == "big" {
  rewrite args.max_cost = 2000000000
}
hook no-such-state on threads.update where has(args.status) {
  rewrite args.status = "bogus"
}
profile rewriting {
  roles opener
  hooks huge-threads, no-such-state
}
"""


def test_a_rewrite_the_command_does_not_take_is_refused(live: Any, harness: Harness) -> None:
    """A rewrite hook sets an argument to a value of its type that the tool's command does
    not take: 403 `invalid-rewrite`, saying where, and nothing logged or written."""
    admin = harness.auth()
    assert live.put("/v1/policy", content=POLICY + REWRITES, headers=admin).status_code == 201
    agent = harness.auth(harness.token_for(harness.add_agent("w1", "rewriting")))
    made = live.post("/v1/threads", json={"prompt": "small"}, headers=agent)
    assert made.status_code == 201, made.text
    logged, stored = harness.service.store.last_seq(), made.json()
    refused = live.post("/v1/threads", json={"prompt": "big"}, headers=agent)
    expect(refused, 403, "invalid-rewrite")
    assert [e["loc"] for e in refused.json()["errors"]] == [["max_cost"]]
    refused = live.patch(f"/v1/threads/{stored['id']}", json={"status": "done"}, headers=agent)
    expect(refused, 403, "invalid-rewrite")
    assert [e["loc"] for e in refused.json()["errors"]] == [["status"]]
    assert harness.service.store.last_seq() == logged
    threads = live.get("/v1/threads", params={"agent": "w1"}, headers=admin).json()["items"]
    assert threads == [stored]
