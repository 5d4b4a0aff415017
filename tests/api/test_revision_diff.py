"""`GET /v1/revisions/{n}/diff` (api/http/revisiondiff.py), against a live server: per
profile what widened or narrowed between two stored revisions, as `charter diff` finds it
(engine.diff, compared here on the same workspaces); admin-only, and refused as
problem+json for an unknown or a malformed revision, changing nothing."""

from __future__ import annotations

import httpx

from engine.check import check_sources
from engine.diff import diff_workspaces
from tests.api.conftest import POLICY, Harness, expect

WIDER = POLICY.replace('allow mail.send where args.to endswith "@example.com"', "allow mail.send")
NARROWER = WIDER.replace("budget 10 usd per 24h", "budget 5 usd per 24h")


def _upload(live: httpx.Client, harness: Harness, text: str) -> int:
    answer = live.put("/v1/policy", content=text, headers=harness.auth())
    assert answer.status_code == 201, answer.text
    revision: int = answer.json()["revision"]
    return revision


def test_a_revisions_diff_names_what_widened_and_narrowed(
    live: httpx.Client, harness: Harness
) -> None:
    first = live.get("/v1/policy", headers=harness.auth()).json()["revision"]
    wider = _upload(live, harness, WIDER)
    narrower = _upload(live, harness, NARROWER)

    answer = live.get(f"/v1/revisions/{wider}/diff", headers=harness.auth())
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["revision"], body["against"]) == (wider, first)
    assert body["widened"] is True and body["narrowed"] is False
    # every profile with role `mailer` may send mail to anyone
    assert {c["profile"] for c in body["changes"]} == {
        "support",
        "support-child",
        "careful",
        "narrow",
        "wide",
    }
    for change in body["changes"]:
        assert change["tool"] == "mail.send" and change["role"] == "mailer"
        assert (change["direction"], change["kind"]) == ("wider", "allow")
        assert not change["counterexample"]["args"]["to"].endswith("@example.com")
    # the CLI's answer for the same two workspaces, word for word
    files = live.get("/v1/policy", params={"revision": first}, headers=harness.auth()).json()
    old = check_sources([(f["path"], f["text"]) for f in files["files"]])
    new = check_sources([("policy.charter", WIDER)])
    expected = diff_workspaces(old, new, timeout_ms=2000).to_json()
    assert [(c["profile"], c["message"]) for c in body["changes"]] == [
        (c["profile"], c["message"]) for c in expected["changes"]
    ]

    budget = live.get(f"/v1/revisions/{narrower}/diff", headers=harness.auth()).json()
    assert budget["against"] == wider and budget["narrowed"] and not budget["widened"]
    [cut] = budget["changes"]
    assert cut["kind"] == "budget" and cut["direction"] == "narrower"
    assert cut["budget"]["old"]["period"] == "24h" and str(cut["budget"]["new"]["amount"]) == "5"

    # `against` any revision: both changes at once, and the way back is the mirror
    wanted = {("allow", "wider"), ("budget", "narrower")}
    both = live.get(
        f"/v1/revisions/{narrower}/diff", params={"against": first}, headers=harness.auth()
    ).json()
    assert {(c["kind"], c["direction"]) for c in both["changes"]} == wanted
    back = live.get(
        f"/v1/revisions/{first}/diff", params={"against": narrower}, headers=harness.auth()
    ).json()
    assert {(c["kind"], c["direction"]) for c in back["changes"]} == {
        ("allow", "narrower"),
        ("budget", "wider"),
    }
    # revision 1 against the empty policy before it: every profile added, all wider
    one = live.get("/v1/revisions/1/diff", headers=harness.auth()).json()
    assert one["against"] == 0 and one["widened"] and one["changes"]
    assert {c["direction"] for c in one["changes"]} == {"wider"}


def test_a_bad_or_unknown_revision_is_refused(live: httpx.Client, harness: Harness) -> None:
    latest = live.get("/v1/policy", headers=harness.auth()).json()["revision"]
    before = live.get("/v1/revisions", headers=harness.auth()).json()
    admin = harness.auth()
    expect(live.get(f"/v1/revisions/{latest + 1}/diff", headers=admin), 404, "revision-not-found")
    expect(
        live.get(f"/v1/revisions/{latest}/diff?against={latest + 7}", headers=admin),
        404, "revision-not-found",
    )  # fmt: skip
    for bad in ("0", "-1", "x", "1.5", "١", "9" * 19):
        expect(live.get(f"/v1/revisions/{bad}/diff", headers=admin), 400, "bad-revision")
    for bad in ("-1", "x", "1e3", "9" * 19):
        expect(
            live.get(f"/v1/revisions/{latest}/diff", params={"against": bad}, headers=admin),
            400, "bad-revision",
        )  # fmt: skip
    expect(
        live.get(f"/v1/revisions/{latest}/diff?against=1&against=1", headers=admin),
        400, "repeated-parameter",
    )  # fmt: skip
    expect(live.get(f"/v1/revisions/{latest}/diff", headers=harness.auth(harness.decide)),
           403, "insufficient-scope")  # fmt: skip
    expect(live.get(f"/v1/revisions/{latest}/diff"), 401, "unauthorized")
    assert live.get("/v1/revisions", headers=harness.auth()).json() == before
