"""Every name a policy declares can be named in a request: a policy whose role, profile,
hook or toolset name, or a tool's full name, is over MAX_ID characters is refused (422
`policy-invalid`, E0120, nothing written), and one at MAX_ID is served whole: its views
are reached by path, an agent is put on its profile and its tool is called."""

from __future__ import annotations

from typing import Any

from api.commands import MAX_ID
from tests.api.conftest import Harness, expect


def _policy(size: int) -> tuple[dict[str, Any], str, str]:
    """A policy whose every name is `size` characters long (the tool's full name too):
    its role, its profile, its hook, its toolset and its tool's full name."""
    role, profile, hook = "r" * size, "p" * size, "h" * size
    toolset = "s" * (size - 2)
    text = (
        f"toolset {'c' * size} {{\n}}\n"
        f"toolset {toolset} {{\n  tool x(to: str)\n}}\n"
        f"role {role} {{\n  allow {toolset}.x\n}}\n"
        f'hook {hook} on {toolset}.x where args.to == "boss" {{\n  pause\n}}\n'
        f"profile {profile} {{\n  roles {role}\n  hooks {hook}\n}}\n"
    )
    return {"files": [{"path": "long.charter", "text": text}]}, profile, f"{toolset}.x"


def test_a_policy_with_a_name_over_the_cap_is_refused_and_nothing_written(
    client: Any, harness: Harness
) -> None:
    store = harness.service.store
    before = (store.latest_revision(), store.last_seq())
    body, _, _ = _policy(MAX_ID + 1)
    response = client.put("/v1/policy", json=body, headers=harness.auth())
    expect(response, 422, "policy-invalid")
    found = [(d["code"], d["line"], d["column"]) for d in response.json()["diagnostics"]]
    assert found == [
        ("E0120", 1, 9),  # toolset `ccc…`
        ("E0120", 4, 8),  # tool `sss….x`
        ("E0120", 6, 6),  # role
        ("E0120", 9, 6),  # hook
        ("E0120", 12, 9),  # profile
    ]
    first = response.json()["diagnostics"][0]
    assert first["message"] == (
        f"toolset name `{'c' * 32}…` is 257 characters long, over the limit of {MAX_ID}"
    )
    assert (store.latest_revision(), store.last_seq()) == before
    assert client.get(f"/v1/roles/{'r' * MAX_ID}", headers=harness.auth()).status_code == 404


def test_every_name_at_the_cap_can_be_named_in_a_request(client: Any, harness: Harness) -> None:
    body, profile, tool = _policy(MAX_ID)
    assert len(tool) == MAX_ID
    meant = "/v1/policy?remove_in_use=true"  # (a1's profile goes: meant)
    uploaded = client.put(meant, json=body, headers=harness.auth())
    assert uploaded.status_code == 201, uploaded.text
    for kind, letter in (("roles", "r"), ("profiles", "p"), ("hooks", "h"), ("toolsets", "c")):
        view = client.get(f"/v1/{kind}/{letter * MAX_ID}", headers=harness.auth())
        assert view.status_code == 200, (kind, view.text)
    long = {"name": "long", "profile": profile, "identity": harness.identity}
    made = client.post("/v1/agents", json=long, headers=harness.auth())
    assert made.status_code == 201, made.text
    agent = made.json()["id"]
    for to, effect in (("bob", "allow"), ("boss", "pause")):
        call = {"agent": agent, "tool": tool, "args": {"to": to}}
        decided = client.post("/v1/decisions", json=call, headers=harness.auth())
        assert decided.status_code == 200, decided.text
        assert decided.json()["effect"] == effect
