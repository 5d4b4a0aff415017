"""The policy playground's drafts (api/http/drafts.py), against a live server: checked,
decided, tested and fit-checked as the CLI does it, admin-only, refused as problem+json,
and never stored: the latest revision and the decision log stay as they were."""

from __future__ import annotations

from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from tests.api.conftest import Harness, expect

DRAFT = """toolset mail {
  tool send(to: str, subject: str, body: str)
}
toolset vault {
  tool put(key: str, value: secret str)
}
role mailer {
  allow mail.send where args.to endswith "@example.com"
}
role keeper {
  allow vault.put
}
role wide {
  allow mail.send
}
role never {
  allow mail.send where args.to == "a" and args.to == "b"
}
profile support {
  roles mailer, keeper, never
}
test "mail stays inside" {
  profile support
  expect allow mail.send { to: "bob@example.com", subject: "s", body: "b" }
  expect deny mail.send { to: "eve@elsewhere.net", subject: "s", body: "b" }
}
"""


def _files(text: str = DRAFT) -> list[dict[str, str]]:
    return [{"path": "draft.charter", "text": text}]


def _post(live: httpx.Client, harness: Harness, what: str, body: Any, **kw: Any) -> Any:
    return live.post(f"/v1/drafts/{what}", json=body, headers=kw.get("headers", harness.auth()))


def test_a_draft_is_checked_decided_tested_and_fitted_without_being_stored(
    served: tuple[Harness, httpx.Client],
) -> None:
    harness, live = served
    before = live.get("/v1/policy", headers=harness.auth()).json()
    log_before = live.get("/v1/decisions", headers=harness.auth()).json()["decisions"]

    checked = _post(live, harness, "check", {"files": _files()})
    assert checked.status_code == 200, checked.text
    found = checked.json()
    # the lints run: role `wide` is selected by no profile (W0303), at its line
    assert found["checks"] is True
    unused = [d for d in found["diagnostics"] if d["code"] == "W0303"]
    assert [(d["line"], d["severity"]) for d in unused] == [(13, "warning")]
    # and the solver's, in a process of its own: a `where` that never holds (W0301)
    never = [d for d in found["diagnostics"] if d["code"] == "W0301"]
    assert [d["line"] for d in never] == [17]

    typo = DRAFT.replace("roles mailer, keeper,", "roles mailer, keeperr,")
    bad = _post(live, harness, "check", {"files": _files(typo)}).json()
    assert bad["checks"] is False
    errors = [d for d in bad["diagnostics"] if d["severity"] == "error"]
    assert errors and errors[0]["line"] == 20 and "keeperr" in errors[0]["message"]

    call = {"files": _files(), "profile": "support", "tool": "vault.put",
            "args": {"key": "k", "value": "hunter2-secret"}}  # fmt: skip
    decided = _post(live, harness, "decide", call)
    assert decided.status_code == 200, decided.text
    answer = decided.json()
    assert answer["decision"]["effect"] == "allow"
    assert answer["decision"]["args"]["value"] == "[redacted]"
    assert "role `keeper`" in answer["trace"] and "result: ALLOW" in answer["trace"]
    assert "hunter2" not in decided.text  # (the secret argument, neither shown nor traced)
    outside = {**call, "tool": "mail.send",
               "args": {"to": "eve@elsewhere.net", "subject": "s", "body": "b"}}  # fmt: skip
    denied = _post(live, harness, "decide", outside).json()
    assert denied["decision"]["effect"] == "deny" and "-> false" in denied["trace"]

    tested = _post(live, harness, "test", {"files": _files(), "coverage": True})
    assert tested.status_code == 200, tested.text
    results = tested.json()
    assert (results["passed"], results["failed"]) == (2, 0)
    assert results["coverage"]["rules"] == {"reached": 1, "total": 4}
    failing = DRAFT.replace('expect deny mail.send { to: "eve', 'expect allow mail.send { to: "eve')
    failed = _post(live, harness, "test", {"files": _files(failing)}).json()
    assert failed["failed"] == 1 and "coverage" not in failed
    assert [r["passed"] for r in failed["results"]] == [True, False]

    fits = _post(live, harness, "fit", {"files": _files(), "caller_profile": "support",
                                         "role": "mailer"})  # fmt: skip
    assert fits.status_code == 200, fits.text
    assert fits.json() == {"fits": True, "violations": []}
    wider = _post(live, harness, "fit", {"files": _files(), "caller_profile": "support",
                                          "role": "wide"}).json()  # fmt: skip
    assert wider["fits"] is False and wider["violations"][0]["kind"] == "widens"

    assert live.get("/v1/policy", headers=harness.auth()).json() == before
    log_after = live.get("/v1/decisions", headers=harness.auth()).json()["decisions"]
    assert log_after == log_before


def test_drafts_are_refused_as_problems_and_change_nothing(
    served: tuple[Harness, httpx.Client],
) -> None:
    harness, live = served
    before = live.get("/v1/policy", headers=harness.auth()).json()["revision"]
    call = {"profile": "support", "tool": "mail.send", "args": {}}
    # admin-only, as an upload is
    for what in ("check", "decide", "test", "fit"):
        body = {"files": _files(), **call, "caller_profile": "support", "role": "mailer"}
        body = {k: v for k, v in body.items() if what != "check" or k == "files"}
        refused = _post(live, harness, what, body, headers=harness.auth(harness.decide))
        expect(refused, 403, "insufficient-scope")
        expect(live.post(f"/v1/drafts/{what}", json=body), 401, "unauthorized")
    # a draft that does not check: the upload's 422, with its diagnostics
    broken = _post(live, harness, "decide", {"files": _files("role r {"), **call})
    expect(broken, 422, "policy-invalid")
    assert broken.json()["diagnostics"][0]["file"] == "draft.charter"
    expect(_post(live, harness, "test", {"files": _files("role r {")}), 422, "policy-invalid")
    # the upload's path rules
    outside = [{"path": "../x.charter", "text": DRAFT}]
    expect(_post(live, harness, "check", {"files": outside}), 400, "bad-path")
    twice = _files() + _files()
    expect(_post(live, harness, "test", {"files": twice}), 400, "duplicate-path")
    expect(_post(live, harness, "check", {"files": []}), 422, "invalid-body")
    huge = {"files": _files("#" + "x" * (2 << 20))}
    expect(_post(live, harness, "check", huge), 413, "body-too-large")
    # what the fit check names must be in the draft
    fit = {"files": _files(), "caller_profile": "nope", "role": "mailer"}
    expect(_post(live, harness, "fit", fit), 404, "profile-not-found")
    expect(_post(live, harness, "fit", {**fit, "caller_profile": "support", "role": "nope"}),
           404, "role-not-found")  # fmt: skip
    assert live.get("/v1/policy", headers=harness.auth()).json()["revision"] == before


# What an author may type anywhere in a draft: the DSL's own tokens, and what breaks it.
PIECES = st.sampled_from(
    ["{", "}", "(", ")", '"', "\\", "\n", " ", "where", "args.", "==", "*", "role", "allow",
     "profile", "expect", "secret", "é", "\U0001f600", "\x00", "#", "0.1", "-"]
)  # fmt: skip


@given(
    start=st.integers(0, len(DRAFT)),
    length=st.integers(0, 40),
    typed=st.lists(PIECES, max_size=6).map("".join),
)
def test_any_edit_of_a_draft_is_answered_and_stores_nothing(
    served: tuple[Harness, httpx.Client], start: int, length: int, typed: str
) -> None:
    """A draft cut and typed into anywhere is checked (200, its diagnostics inside its
    text) and decided or refused as `policy-invalid`, never a 500; the revision stays."""
    harness, live = served
    before = live.get("/v1/policy", headers=harness.auth()).json()["revision"]
    text = DRAFT[:start] + typed + DRAFT[start + length :]
    checked = _post(live, harness, "check", {"files": _files(text)})
    assert checked.status_code == 200, checked.text
    lines = text.count("\n") + 2
    for found in checked.json()["diagnostics"]:
        assert found["file"] == "draft.charter" and 1 <= found["line"] <= lines, found
    call = {"files": _files(text), "profile": "support", "tool": "mail.send",
            "args": {"to": "bob@example.com", "subject": "s", "body": "b"}}  # fmt: skip
    decided = _post(live, harness, "decide", call)
    if checked.json()["checks"]:
        assert decided.status_code == 200, decided.text
        assert decided.json()["decision"]["effect"] in ("allow", "deny", "pause")
    else:
        expect(decided, 422, "policy-invalid")
    assert live.get("/v1/policy", headers=harness.auth()).json()["revision"] == before
