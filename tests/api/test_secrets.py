"""Seeds and credentials over HTTP: never shown, whatever the call looks like."""

from __future__ import annotations

import binascii
from typing import Any

from tests.api.conftest import POLICY, Harness

SEED = "5e" * 32
CREDENTIAL = "ghp_credential_never_shown"


def test_misnamed_secrets_are_redacted_in_the_log(client: Any, harness: Harness) -> None:
    """A call that names a secret argument in another case, or nests it, is denied for its
    shape, and its arguments are logged as sent: the secret in them as well."""
    calls = [
        ("identities.import", {"Seed": SEED}),
        ("identities.import", {"seed": 5, "label": {"seed": SEED}}),
        ("connections.create", {"name": "n", "toolset": "vault", "CREDENTIAL": CREDENTIAL}),
        ("connections.update", {"id": "c", "credential": [{"Credential": CREDENTIAL}]}),
    ]
    for tool, args in calls:
        answer = client.post(
            "/v1/decisions", json={"agent": "a1", "tool": tool, "args": args},
            headers=harness.auth(harness.decide),
        )  # fmt: skip
        assert answer.json()["effect"] == "deny" and SEED not in answer.text
        assert CREDENTIAL not in answer.text
    log = client.get("/v1/decisions", params={"after_seq": 0}, headers=harness.auth())
    rows = log.json()["decisions"]
    assert len(rows) == 4
    assert SEED not in log.text and CREDENTIAL not in log.text
    assert rows[0]["args"] == {"Seed": "[redacted]"}
    assert rows[1]["args"] == {"seed": "[redacted]", "label": {"seed": "[redacted]"}}
    assert rows[3]["args"]["credential"] == "[redacted]"


def test_secrets_in_a_call_to_a_tool_no_one_has_are_redacted(client: Any, harness: Harness) -> None:
    """A call to a tool the policy does not know (`Identities.import`, a misspelling) is
    denied for its name and logged with its arguments: every name that some tool keeps
    secret is hidden in them, in any case and at any depth. The names of such tools are
    not kept: a caller may send any number of them."""
    from api.service import redaction

    calls = [
        ("Identities.import", {"seed": SEED}),
        ("identities.imports", {"label": "x", "key": {"Seed": SEED}}),
        ("connection.create", {"name": "n", "credential": CREDENTIAL}),
        *((f"nothing.{i}", {"x": i}) for i in range(50)),
    ]
    for tool, args in calls:
        answer = client.post(
            "/v1/decisions", json={"agent": "a1", "tool": tool, "args": args},
            headers=harness.auth(harness.decide),
        )  # fmt: skip
        assert answer.json()["effect"] == "deny", answer.text
        assert SEED not in answer.text and CREDENTIAL not in answer.text
    log = client.get("/v1/decisions", params={"after_seq": 0}, headers=harness.auth())
    rows = log.json()["decisions"]
    assert SEED not in log.text and CREDENTIAL not in log.text
    assert rows[0]["args"] == {"seed": "[redacted]"}
    assert rows[1]["args"] == {"label": "x", "key": {"Seed": "[redacted]"}}
    assert rows[2]["args"] == {"name": "n", "credential": "[redacted]"}
    assert rows[3]["args"] == {"x": 0}
    snapshot = harness.service.current()
    assert redaction.every_secret(snapshot) == {"seed", "credential"}


MAIL = {"to": "a@example.com", "subject": "s", "body": "b"}
AGENT = {"name": "x", "profile": "narrow", "metadata": {}}


def test_secrets_in_a_call_its_tool_does_not_take_are_redacted(
    client: Any, harness: Harness
) -> None:
    """A call of a tool the policy has, with a secret its tool does not take (the seed
    sent to `identities.create` where `identities.import` was meant, a credential given
    to `connections.get`, a toolset's tool or an agent's create), is denied for its shape
    and logged with its arguments as sent: every name some tool keeps secret is hidden in
    them, as in a call to a tool the policy does not have. Only such calls: a call of the
    right shape keeps its arguments as they were."""
    calls = [
        ("identities.create", {"seed": SEED}),
        ("identities.create", {"label": {"Seed": SEED}}),
        ("connections.get", {"id": "c", "credential": CREDENTIAL}),
        ("mail.send", {**MAIL, "credential": CREDENTIAL}),
        ("agents.create", {**AGENT, "CREDENTIAL": [CREDENTIAL]}),
        ("agents.create", {**AGENT, "metadata": {"seed": 1}}),
    ]
    for tool, args in calls:
        answer = client.post(
            "/v1/decisions", json={"agent": "a1", "tool": tool, "args": args},
            headers=harness.auth(harness.decide),
        )  # fmt: skip
        assert SEED not in answer.text and CREDENTIAL not in answer.text, answer.text
    log = client.get("/v1/decisions", params={"after_seq": 0}, headers=harness.auth())
    assert SEED not in log.text and CREDENTIAL not in log.text
    rows = log.json()["decisions"]
    assert [row["effect"] for row in rows] == ["deny"] * 5 + ["allow"]
    assert rows[0]["args"] == {"seed": "[redacted]"}
    assert rows[1]["args"] == {"label": {"Seed": "[redacted]"}}
    assert rows[2]["args"] == {"id": "c", "credential": "[redacted]"}
    assert rows[3]["args"]["credential"] == "[redacted]"
    assert rows[4]["args"]["CREDENTIAL"] == "[redacted]"
    assert rows[5]["args"]["metadata"] == {"seed": 1}  # (the right shape: not a secret)


PAUSING = """
hook review-secrets on identities.import, connections.create, connections.update {
  pause "a human reviews new keys and credentials"
}
profile reviewed-secrets {
  roles manager, vault-reader
  hooks review-secrets
}
"""


def test_a_seed_and_a_credential_are_never_shown(
    client: Any, harness: Harness, caplog: Any
) -> None:
    """An admin's and an agent's import and connection, paused, listed, approved, refused
    and decided: neither secret in any answer, the log, the metrics, the process's log
    lines or the database's files (sealed there)."""
    with harness.service.store.atomic():
        harness.service.upload([("policy.charter", POLICY + PAUSING)], "test")
    harness.add_agent("rs", "reviewed-secrets")
    agent = harness.auth(harness.token_for("rs"))
    admin = harness.auth()
    seed = bytes(range(100, 132))
    answers = []

    def send(method: str, path: str, headers: Any, **kwargs: Any) -> Any:
        answer = client.request(method, path, headers=headers, **kwargs)
        assert answer.status_code < 500, answer.text
        answers.append(answer.text)
        return answer

    paused = send("POST", "/v1/identities/import", agent, json={"seed": seed.hex()})
    assert paused.status_code == 202
    send("POST", "/v1/identities/import", agent, json={"seed": "00" * 31})  # (paused too)
    conn = send("POST", "/v1/connections", agent,
                json={"name": "c", "toolset": "vault", "credential": CREDENTIAL})  # fmt: skip
    results = []
    for pending in (paused, conn):
        approval = f"/v1/approvals/{pending.json()['approval_id']}"
        send("GET", approval, admin)
        send("GET", "/v1/approvals", admin)
        done = send("POST", approval + "/approve", admin)
        assert done.status_code == 200 and done.json()["decision"]["effect"] == "allow"
        results.append(done.json()["result"])
        send("GET", approval, admin)
    account = results[0]["id"]
    assert account.startswith("z6Mk") and results[1]["owner"] == harness.identity
    send("POST", "/v1/identities/import", admin, json={"seed": base64(seed)})  # (a 409)
    send("POST", "/v1/identities/import", admin, json={"seed": seed.hex(), "x": 1})  # (a 422)
    made = send("POST", "/v1/connections", admin,
                json={"name": "w", "toolset": "vault", "credential": CREDENTIAL})  # fmt: skip
    send("PATCH", f"/v1/connections/{made.json()['id']}", admin, json={"credential": CREDENTIAL})
    send("PATCH", f"/v1/connections/{made.json()['id']}", agent, json={"credential": CREDENTIAL})
    send("POST", "/v1/connections", admin, json={"name": "w", "toolset": "nope",
         "credential": CREDENTIAL})  # fmt: skip
    for path in ("/v1/identities", "/v1/connections", "/v1/approvals"):
        send("GET", path, admin)
        send("GET", path, agent)
    send("GET", f"/v1/identities/{account}", admin)
    send(
        "POST",
        "/v1/decisions",
        harness.auth(harness.decide),
        json={"agent": "rs", "tool": "identities.import", "args": {"seed": seed.hex()}},
    )
    send("GET", "/v1/decisions?after_seq=0", admin)
    send("GET", "/metrics", admin)
    assert sum(a.count(account) for a in answers) > 0  # (the identity is there, by its id)
    shown = "\n".join([*answers, caplog.text])
    for secret in (seed.hex(), seed.hex().upper(), base64(seed), CREDENTIAL):
        assert secret not in shown
    for file in harness.file.parent.iterdir():
        if file.is_file():
            data = file.read_bytes()
            assert seed not in data and seed.hex().encode() not in data, file
            assert CREDENTIAL.encode() not in data, file


def base64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode()


def test_a_named_connection_is_eligible_or_denied(client: Any, harness: Harness) -> None:
    """A call names the connection it will use: another identity's, another toolset's or
    one that is not there is denied for a toolset without `connection required` too."""
    other = client.post("/v1/identities", json={"label": "other"}, headers=harness.auth())
    made = {}
    for name, toolset, owner in (("theirs", "billing", other.json()["id"]),
                                 ("vault", "vault", None), ("mine", "billing", None)):  # fmt: skip
        made[name] = client.post(
            "/v1/connections", headers=harness.auth(),
            json={"name": name, "toolset": toolset, "credential": CREDENTIAL,
                  **({"owner": owner} if owner else {})},
        ).json()["id"]  # fmt: skip
    refund = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 1}}
    decide = harness.auth(harness.decide)
    for connection in (made["theirs"], made["vault"], "nope"):
        answer = client.post("/v1/decisions", json={**refund, "connection": connection},
                             headers=decide).json()  # fmt: skip
        assert answer["effect"] == "deny", connection
        assert answer["reasons"][-1] == {
            "kind": "connection",
            "message": f"connection `{connection}` is not eligible for toolset `billing`",
        }
    for named in ({"connection": made["mine"]}, {}):
        answer = client.post("/v1/decisions", json={**refund, **named}, headers=decide).json()
        assert answer["effect"] == "allow"


def test_a_built_in_tool_call_naming_a_connection_is_denied(client: Any, harness: Harness) -> None:
    """A built-in tool has no toolset, so no connection is for it: a call naming one, an
    eligible workspace connection or one that is not there, was allowed and logged with
    that connection, unchecked. Now a deny with the reason, a pause's too (fail closed);
    without the connection the same call is decided as before."""
    made = client.post(
        "/v1/connections", headers=harness.auth(),
        json={"name": "mine", "toolset": "billing", "credential": CREDENTIAL},
    ).json()["id"]  # fmt: skip
    harness.add_agent("c1", "careful")  # default hooks: `roles.create` pauses
    decide = harness.auth(harness.decide)
    role = {"name": "x", "source": "role x {\n}\n"}
    for call in ({"agent": "a1", "tool": "agents.list", "args": {}},
                 {"agent": "c1", "tool": "roles.create", "args": role}):  # fmt: skip
        plain = client.post("/v1/decisions", json=call, headers=decide).json()
        assert plain["effect"] == ("allow" if call["agent"] == "a1" else "pause")
        for connection in (made, "nope"):
            answer = client.post("/v1/decisions", json={**call, "connection": connection},
                                 headers=decide).json()  # fmt: skip
            assert answer["effect"] == "deny", answer
            assert answer["reasons"][-1] == {
                "kind": "connection",
                "message": f"built-in tool `{call['tool']}` takes no connection, and the "
                f"call names `{connection}`",
            }


def test_a_connection_keeps_a_name(client: Any, harness: Harness) -> None:
    """A create refuses an empty name; an update gave one all the same."""
    made = client.post(
        "/v1/connections",
        headers=harness.auth(),
        json={"name": "c", "toolset": "vault", "credential": CREDENTIAL},
    )
    path = f"/v1/connections/{made.json()['id']}"
    refused = client.patch(path, json={"name": ""}, headers=harness.auth())
    assert refused.status_code == 422 and refused.json()["code"] == "invalid-body"
    assert client.get(path, headers=harness.auth()).json()["name"] == "c"
