"""`PUT /v1/policy` refuses a policy whose test calls do not fit their tools (E0121,
E0122, E0211, E0123), as `charter check` does: 422 with every diagnostic, nothing stored."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import POLICY, Harness, expect

TESTS = """
test "mail" {
  profile narrow
  expect deny mail.send { too: "eve@elsewhere.net", subject: "hi", body: "x" }
  expect deny mail.send { to: "eve@elsewhere.net", subject: "hi" }
  expect deny billing.refund { amount: 1.5 }
  expect invalid mail.send { to: "bob@example.com", subject: "hi", body: "x" }
}
"""


def test_a_policy_whose_test_calls_do_not_fit_is_refused(client: Any, harness: Harness) -> None:
    auth = harness.auth()
    refused = client.put("/v1/policy", content=POLICY + TESTS, headers=auth)
    expect(refused, 422, "policy-invalid")
    line = POLICY.count("\n") + 4
    found = [(d["code"], d["line"], d["column"]) for d in refused.json()["diagnostics"]]
    assert found == [
        ("E0121", line, 27),
        ("E0122", line + 1, 25),
        ("E0211", line + 2, 40),
        ("E0123", line + 3, 10),
    ]
    assert harness.service.store.latest_revision() == 1
    fixed = TESTS.replace("expect deny", "expect invalid").replace(
        'expect invalid mail.send { to: "bob', 'expect allow mail.send { to: "bob'
    )
    stored = client.put("/v1/policy", content=POLICY + fixed, headers=auth)
    assert stored.status_code == 201, stored.text
