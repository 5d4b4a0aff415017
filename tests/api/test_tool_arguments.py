"""Every management endpoint passes its built-in tool exactly the arguments the catalogue
declares: the same names, the same ones required, the same defaults, values of the
declared types. A request the HTTP models accept is then never a `shape` deny for an
agent's token (policy/catalogue.py's `CATALOGUE_SOURCE` against api/commands.py's body
models, the query parameters and the path's)."""

from __future__ import annotations

import types
from decimal import Decimal
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from api.commands import COMMANDS
from api.http.app import TABLE
from api.http.approvals import NOT_ARGUMENTS
from api.http.openapi import openapi
from api.http.resources import INT_QUERY
from api.http.routing import Spec
from api.service.pages import DEFAULT_LIMIT
from engine.builtins import builtin_tools
from engine.reference import validate
from engine.shape import literal
from tests.api.conftest import Harness

MANAGED = [spec for spec, _ in TABLE if spec.tool is not None]


def _sample(annotation: Any) -> Any:
    """A JSON value of the annotation's type, as a client would send it."""
    if get_origin(annotation) in (Union, types.UnionType):
        return _sample(next(a for a in get_args(annotation) if a is not type(None)))
    if get_origin(annotation) is Literal:
        return get_args(annotation)[0]
    if get_origin(annotation) is Annotated:
        return _sample(get_args(annotation)[0])
    if get_origin(annotation) is list:
        return [_sample(get_args(annotation)[0])]
    if annotation is str:
        return "x"
    if annotation is int:
        return 1
    if annotation is Decimal:
        return "1.5"
    if annotation is dict or get_origin(annotation) is dict:
        return {"k": "v"}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {name: _sample(f.annotation) for name, f in annotation.model_fields.items()}
    raise AssertionError(f"no sample for {annotation!r}: add one")


def _default(field: FieldInfo) -> Any:
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return field.default


def _http_arguments(spec: Spec) -> dict[str, tuple[bool, Any, Any]]:
    """What the endpoint can pass: name -> (always passed, default when not, a sample)."""
    out: dict[str, tuple[bool, Any, Any]] = {}
    for part in spec.path.split("/"):
        if part.startswith("{"):
            out[part.strip("{}")] = (True, None, "x")
    command = COMMANDS[spec.tool] if spec.tool is not None else None
    for name in spec.query:  # passed only when given (api.http.pagination.list_args)
        if name in NOT_ARGUMENTS:
            continue
        field = command.model_fields.get(name) if command is not None else None
        if field is not None and field.is_required():  # (a memory entry's `path`)
            out[name] = (True, None, "/x")
            continue
        if name == "limit":
            out[name] = (False, DEFAULT_LIMIT, 1)
        else:  # (an integer's: a feed's `after_seq`)
            out[name] = (False, None, 1 if name in INT_QUERY else "x")
    if spec.request is not None:
        for name, field in spec.request.model_fields.items():
            out[name] = (field.is_required(), _default(field), _sample(field.annotation))
    return out


def _route(spec: Spec) -> str:
    return f"{spec.method} {spec.path} ({spec.tool})"


@pytest.mark.parametrize("spec", MANAGED, ids=_route)
def test_the_http_arguments_are_the_tools_signature(spec: Spec) -> None:
    assert spec.tool is not None
    tool = builtin_tools()[spec.tool]
    http = _http_arguments(spec)
    assert set(http) == {p.name for p in tool.params}, _route(spec)
    for param in tool.params:
        always, default, _ = http[param.name]
        assert param.required == always, f"{_route(spec)}: `{param.name}` required?"
        if param.default is not None:  # the default the tool gets is the model's
            assert literal(param.default) == default, f"{_route(spec)}: `{param.name}`"
        elif not always:
            assert default is None, f"{_route(spec)}: `{param.name}` has a default"


@pytest.mark.parametrize("spec", MANAGED, ids=_route)
def test_what_the_models_accept_has_the_tools_shape(spec: Spec) -> None:
    """All the arguments, and only the required ones, as the endpoint builds them (the
    body through its model, then the tool's command: `args()`), pass the tool's shape
    check."""
    assert spec.tool is not None
    tool = builtin_tools()[spec.tool]
    http = _http_arguments(spec)
    body = set(spec.request.model_fields) if spec.request is not None else set()
    for chosen in (set(http), {name for name, (always, _, _) in http.items() if always}):
        sent = {name: http[name][2] for name in chosen}
        fields = {k: v for k, v in sent.items() if k not in body}
        if spec.request is not None:
            read = spec.request.model_validate({k: sent[k] for k in body & chosen})
            fields |= read.model_dump(exclude_unset=True)
        args = COMMANDS[spec.tool].model_validate(fields).args()
        shaped = validate(tool, args)
        assert not isinstance(shaped, str), f"{_route(spec)} {sorted(chosen)}: {shaped}"


def test_openapi_names_each_management_endpoints_tool() -> None:
    paths = openapi(TABLE)["paths"]
    named = {
        (method.upper(), path): op["x-charter-tool"]
        for path, ops in paths.items()
        for method, op in ops.items()
        if "x-charter-tool" in op
    }
    assert named == {(spec.method, spec.path): spec.tool for spec in MANAGED}
    assert len(named) == len(MANAGED) >= 30 and set(named.values()) <= set(builtin_tools())


def test_the_reported_requests_are_decided_on_their_merits(live: Any, harness: Harness) -> None:
    """Each of these was a `shape` deny, logged, for an agent's token (allowed by its
    role `manager`), though the models took it and an admin's ran."""
    agent = harness.auth(harness.agent_token)
    made = live.post("/v1/threads", json={}, headers=agent)  # the model defaults `prompt`
    assert made.status_code == 201, made.text
    assert made.json()["prompt"] == ""
    listed = live.get("/v1/threads", params={"agent": "a1"}, headers=agent)
    assert listed.status_code == 200, listed.text
    assert [t["id"] for t in listed.json()["items"]] == [made.json()["id"]]
    renamed = live.patch(f"/v1/identities/{harness.identity}", json={"name": "a1's key"},
                         headers=agent)  # fmt: skip
    assert (renamed.status_code, renamed.json()["name"]) == (200, "a1's key"), renamed.text
    created = live.post("/v1/identities", json={"request_id": "r-1"}, headers=agent)
    assert created.status_code == 201, created.text
    log = live.get("/v1/decisions", headers=harness.auth()).json()["decisions"]
    assert [(d["tool"], d["effect"]) for d in log] == [
        ("threads.create", "allow"),
        ("threads.list", "allow"),
        ("identities.update", "allow"),
        ("identities.create", "allow"),
    ]
    assert log[0]["final_args"]["prompt"] == "" and log[1]["args"]["agent"] == "a1"
