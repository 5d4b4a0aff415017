"""The OpenID AuthZEN Authorization API 1.0's information model, as charter reads and
answers it (api/http/authzen.py serves it; charter.client sends and reads it): the
subject, action and resource of an access request, the evaluations' options and the
answers. Unknown members of a request are ignored, as the specification asks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.commands import MAX_ID
from api.http.models import MAX_BATCH


class Open(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Subject(Open):
    type: str = Field(min_length=1, max_length=MAX_ID)
    id: str = Field(min_length=1, max_length=MAX_ID, description="the agent's id")
    properties: dict[str, Any] | None = None


class Resource(Open):
    type: str = Field(min_length=1, max_length=MAX_ID, description="the toolset")
    id: str | None = Field(default=None, max_length=MAX_ID)
    properties: dict[str, Any] | None = None


class Action(Open):
    name: str = Field(min_length=1, max_length=MAX_ID, description="the tool in its toolset")
    properties: dict[str, Any] | None = None


class Evaluation(Open):
    """`POST /access/v1/evaluation`: `context.args` are the call's arguments."""

    subject: Subject
    action: Action
    resource: Resource
    context: dict[str, Any] | None = None


class Partial(Open):
    """One of `evaluations`: what it leaves out, the request's top level gives."""

    subject: Subject | None = None
    action: Action | None = None
    resource: Resource | None = None
    context: dict[str, Any] | None = None


Semantic = Literal["execute_all", "deny_on_first_deny", "permit_on_first_permit"]


class Options(Open):
    evaluations_semantic: Semantic = "execute_all"


class Evaluations(Partial):
    """`POST /access/v1/evaluations`: the top level's members are the defaults of each
    evaluation's; without `evaluations` (or with none) it is one evaluation."""

    evaluations: list[Partial] | None = Field(default=None, max_length=MAX_BATCH)
    options: Options | None = None


class ActionSearch(Open):
    subject: Subject
    resource: Resource
    context: dict[str, Any] | None = None


class Decision(BaseModel):
    decision: bool
    context: dict[str, Any] | None = Field(
        default=None, description="the decision as `POST /v1/decisions` answers it"
    )


class Decisions(BaseModel):
    """The evaluations' decisions in their order; a request without `evaluations` is
    answered as one evaluation (`decision`, `context`)."""

    evaluations: list[Decision] | None = None
    decision: bool | None = None
    context: dict[str, Any] | None = None


class FoundAction(BaseModel):
    name: str
    properties: dict[str, Any] | None = None


class ActionResults(BaseModel):
    results: list[FoundAction]


class Configuration(BaseModel):
    policy_decision_point: str
    access_evaluation_endpoint: str
    access_evaluations_endpoint: str
    search_action_endpoint: str
