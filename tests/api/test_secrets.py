"""Seeds and credentials over HTTP: never shown, whatever the call looks like."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Harness

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
