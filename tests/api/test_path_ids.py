"""Ids and names outside a body (a path's `{id}` or `{name}`, `GET /v1/threads?agent=`)
are at most MAX_ID characters, as a body's are: a 60 KB id was looked up and echoed whole
in its 404 (or an agent's 403). Over the cap: 400 `id-too-long`, showing a short prefix."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from api.commands import MAX_ID
from api.http.app import TABLE
from api.http.routing import SHOWN
from tests.api.conftest import Harness, expect

PATHS = sorted({(spec.method, spec.path) for spec, _ in TABLE if "{" in spec.path})


def _long(size: int) -> str:
    # What may be shown, then a letter that the answer never holds otherwise.
    return "q" * SHOWN + "Z" * (size - SHOWN)


def _request(live: httpx.Client, method: str, path: str, auth: dict[str, str]) -> Any:
    name = path.rpartition("/")[2]
    sources = {  # (a PATCH whose body needs one)
        "/roles/": f"role {name} {{\n  allow mail.send\n}}\n",
        "/hooks/": f"hook {name} on mail.send {{\n  pause\n}}\n",
    }
    source = next((text for part, text in sources.items() if part in path), None)
    sent: dict[str, Any] = {"source": source} if method == "PATCH" and source is not None else {}
    if path.endswith("/cost"):
        sent = {"seq": 1, "amount": 0}
    if path.endswith("/messages"):  # (a feed's publish)
        sent = {"message": "m"}
    body: dict[str, Any] | None = sent if method in ("POST", "PATCH") else None
    if path.endswith("/definition") and method == "PUT":
        # (a PUT makes the agent it names: `If-Match: *` asks that it be there, found or not)
        seed = {"name": "n", "systemPrompt": "p", "modelProvider": "x", "model": "y"}
        body, auth = {"definition": seed}, {**auth, "If-Match": "*"}
    return live.request(method, path, headers=auth, json=body)


def _refused_short(response: httpx.Response, size: int) -> None:
    expect(response, 400, "id-too-long")
    assert "Z" not in response.text and len(response.content) < 600, response.text
    detail = response.json()["detail"]
    assert f"`{'q' * SHOWN}…`" in detail and f"{size} characters" in detail


def test_every_route_with_a_path_parameter_is_covered() -> None:
    assert ("GET", "/v1/agents/{id}/tools") in PATHS and ("DELETE", "/v1/tokens/{id}") in PATHS
    assert ("GET", "/v1/profiles/{name}") in PATHS and len(PATHS) >= 23


@pytest.mark.parametrize(("method", "path"), PATHS)
@pytest.mark.parametrize("size", [MAX_ID + 1, 60_000])
def test_a_path_id_over_the_cap_is_refused_without_echo(
    served: tuple[Harness, httpx.Client], method: str, path: str, size: int
) -> None:
    harness, live = served
    store = harness.service.store
    before = (store.last_seq(), [r.id for r in store.scan("agents")])
    url = re.sub(r"\{[a-z]+\}", _long(size), path)
    _refused_short(_request(live, method, url, harness.auth()), size)
    assert (store.last_seq(), [r.id for r in store.scan("agents")]) == before


@pytest.mark.parametrize(("method", "path"), PATHS)
def test_a_path_id_at_the_cap_is_looked_up(
    served: tuple[Harness, httpx.Client], method: str, path: str
) -> None:
    harness, live = served
    url = re.sub(r"\{[a-z]+\}", "q" * MAX_ID, path)
    response = _request(live, method, url, harness.auth())
    if "{n}" in path:  # (a revision's number, not an id: read as one, and it is none)
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "bad-revision" and len(response.content) < 600
        return
    assert response.status_code == 404, response.text  # (no such id: looked up)
    assert response.json()["code"].endswith("-not-found") and len(response.content) < 600


def test_an_agent_token_is_refused_before_its_request_is_decided(
    live: httpx.Client, harness: Harness
) -> None:
    auth = harness.auth(harness.agent_token)
    for url in (f"/v1/agents/{_long(60_000)}", f"/v1/agents/{_long(60_000)}/tools",
                f"/v1/threads/{_long(60_000)}", f"/v1/roles/{_long(60_000)}"):  # fmt: skip
        _refused_short(live.get(url, headers=auth), 60_000)
    listed = live.get("/v1/threads", params={"agent": _long(60_000)}, headers=auth)
    _refused_short(listed, 60_000)
    assert "the query's `agent`" in listed.json()["detail"]
    _refused_short(live.get("/v1/threads", params={"agent": _long(300)}, headers=harness.auth()),
                   300)  # fmt: skip
    assert harness.service.store.last_seq() == 0  # nothing decided, nothing logged


def test_ids_in_a_body_are_capped_wherever_they_are(live: httpx.Client, harness: Harness) -> None:
    """Body ids that had no cap: looked up and echoed whole in a 404 or a 400."""
    auth = harness.auth()
    big = _long(60_000)
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/v1/fit", {"agent": "a1", "profile": big}),
        ("POST", "/v1/tokens", {"scope": "agent", "agent": big}),
        ("POST", "/v1/threads", {"agent": big}),
        ("PATCH", "/v1/agents/a1", {"profile": big}),
        ("POST", "/v1/agents", {"name": "b", "profile": "wide", "identity": big}),
        ("POST", "/v1/connections", {"name": "c", "toolset": "vault", "credential": "s",
                                     "owner": big}),
    ]  # fmt: skip
    for method, path, body in cases:
        response = live.request(method, path, json=body, headers=auth)
        expect(response, 422, "invalid-body")
        assert "Z" not in response.text and len(response.content) < 600, (path, response.text)
    store = harness.service.store
    assert store.last_seq() == 0 and [r.id for r in store.scan("agents")] == ["a1"]
    assert not list(store.scan("threads")) and not list(store.scan("connections"))


def test_the_openapi_document_gives_the_cap(live: httpx.Client) -> None:
    document = live.get("/openapi.json").json()
    for method, path in PATHS:
        operation = document["paths"][path][method.lower()]
        params = [p for p in operation["parameters"] if p["in"] == "path"]
        assert params and all(p["schema"]["maxLength"] == MAX_ID for p in params)
        assert "400" in operation["responses"] and "404" in operation["responses"]
