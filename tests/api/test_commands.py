"""The management tools' commands (api.commands): one for each operation, each the tool's
arguments as an agent's request is decided on them."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError

from api import commands as c
from api.service.manage import OPERATIONS


def test_every_operation_has_its_command() -> None:
    assert set(c.COMMANDS) == set(OPERATIONS)
    assert all(command.tool == tool for tool, command in c.COMMANDS.items())


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
