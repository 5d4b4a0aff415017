"""An upload that removes a profile, toolset, tool or API-made role that agents, pending
approvals, connections or profiles still use is refused (409 `policy-in-use`, nothing
changed) unless it says it means it (`?remove_in_use=true`), and then says what it
removed; `charter serve --workspace` refuses to load such a directory (exit 1) unless
`--remove-in-use`. Over a real server on loopback and a real SQLite file."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any
from unittest.mock import patch

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from api.cli import main
from api.http.app import create_app
from api.service import inuse
from tests.api.conftest import POLICY, Harness, expect
from tests.api.start_runs import POLICY as SERVED_POLICY
from tests.api.start_runs import command

SEND = {"tool": "mail.send", "args": {"to": "bob@example.com", "subject": "hi", "body": "x"}}
REFUND = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 80}}
ROLE = "role extra {\n  allow mail.send\n}\n"


def without(policy: str, *names: str) -> str:
    """`policy` without the declarations named (`profile narrow`, `toolset vault`, ...),
    and without their names in the profiles' `roles` lines."""
    for name in names:
        kind, _, ident = name.partition(" ")
        policy = re.sub(rf"\n{kind} {re.escape(ident)} [^{{]*\{{[^}}]*\}}\n", "\n", policy)
        if kind == "role":
            policy = re.sub(rf"(roles [^\n]*?), {re.escape(ident)}\b", r"\1", policy)
    return policy


def latest(client: Any, harness: Harness) -> int:
    return int(client.get("/v1/policy", headers=harness.auth()).json()["revision"])


def decides(client: Any, harness: Harness, agent: str) -> dict[str, Any]:
    answer = client.post("/v1/decisions", json={"agent": agent, **SEND}, headers=harness.auth())
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def upload(client: Any, harness: Harness, policy: str, query: str = "") -> httpx.Response:
    body = {"files": [{"path": "policy.charter", "text": policy}]}
    answer: httpx.Response = client.put(f"/v1/policy{query}", json=body, headers=harness.auth())
    return answer


def refused(client: Any, harness: Harness, answer: httpx.Response, before: int) -> list[Any]:
    """A 409 `policy-in-use` that changed nothing: its `in_use`."""
    expect(answer, 409, "policy-in-use")
    problem = answer.json()
    assert problem["help"] and "remove_in_use=true" in problem["help"]
    assert problem["in_use_more"] == 0
    assert latest(client, harness) == before
    found: list[Any] = problem["in_use"]
    return found


def test_a_profile_an_agent_is_on_is_kept_unless_the_upload_means_it(
    live: httpx.Client, harness: Harness
) -> None:
    harness.add_agent("n1", "narrow")
    before = latest(live, harness)
    smaller = without(POLICY, "profile narrow")
    in_use = refused(live, harness, upload(live, harness, smaller), before)
    assert in_use == [
        {"kind": "profile", "name": "narrow", "used_by": [{"kind": "agent", "id": "n1"}],
         "more": 0},
    ]  # fmt: skip
    answer = upload(live, harness, smaller)
    assert "profile `narrow` (agent `n1`)" in answer.json()["detail"]
    assert decides(live, harness, "n1")["effect"] == "allow"  # (still on its profile)

    spelled = upload(live, harness, smaller, "?remove_in_use=false")  # (as if left out)
    assert refused(live, harness, spelled, before) == in_use

    meant = upload(live, harness, smaller, "?remove_in_use=true")
    assert meant.status_code == 201, meant.text
    assert meant.json()["revision"] == before + 1
    assert meant.json()["removed_in_use"] == in_use
    gone = decides(live, harness, "n1")  # what the caller was told would follow
    assert gone["effect"] == "deny" and "unknown profile" in str(gone["reasons"])


def test_the_dsl_text_body_is_refused_and_overridden_alike(
    live: httpx.Client, harness: Harness
) -> None:
    before = latest(live, harness)
    text = without(POLICY, "profile support")  # (a1 is on it)
    headers = {**harness.auth(), "content-type": "text/plain"}
    answer = live.put("/v1/policy", content=text, headers=headers)
    in_use = refused(live, harness, answer, before)
    assert in_use == [
        {"kind": "profile", "name": "support", "used_by": [{"kind": "agent", "id": "a1"}],
         "more": 0},
    ]  # fmt: skip
    assert decides(live, harness, "a1")["effect"] == "allow"
    meant = live.put("/v1/policy?remove_in_use=true", content=text, headers=headers)
    assert meant.status_code == 201, meant.text
    assert meant.json()["removed_in_use"] == in_use


def test_what_nothing_uses_is_removed_without_a_word(live: httpx.Client, harness: Harness) -> None:
    before = latest(live, harness)
    answer = upload(live, harness, without(POLICY, "profile wide", "profile careful"))
    assert answer.status_code == 201, answer.text
    assert answer.json()["revision"] == before + 1
    assert answer.json()["removed_in_use"] == []


def test_a_bad_value_is_refused_before_anything(live: httpx.Client, harness: Harness) -> None:
    harness.add_agent("n1", "narrow")
    before = latest(live, harness)
    smaller = without(POLICY, "profile narrow")
    for query in ("?remove_in_use=yes", "?remove_in_use=True", "?remove_in_use=1"):
        answer = upload(live, harness, smaller, query)
        expect(answer, 400, "bad-remove-in-use")
        assert "yes" not in answer.json()["detail"]
    twice = upload(live, harness, smaller, "?remove_in_use=true&remove_in_use=true")
    expect(twice, 400, "repeated-parameter")
    assert latest(live, harness) == before


def test_a_pending_approval_keeps_its_toolset_and_its_tool(
    live: httpx.Client, harness: Harness
) -> None:
    paused = live.post("/v1/decisions", json=REFUND, headers=harness.auth()).json()
    approval = str(paused["approval_id"])
    before = latest(live, harness)
    # The whole toolset, with what names it (the role, the hook on its tool).
    no_billing = re.sub(r"\nhook approve-big [^}]*\}\n", "\n", POLICY).replace(
        "hooks approve-big", "hooks none"
    )
    no_billing = without(no_billing, "toolset billing", "role refunder")
    in_use = refused(live, harness, upload(live, harness, no_billing), before)
    assert in_use == [
        {"kind": "toolset", "name": "billing",
         "used_by": [{"kind": "approval", "id": approval}], "more": 0},
    ]  # fmt: skip
    # One tool of a toolset the policy keeps.
    other_tool = POLICY.replace('tool refund(amount: int, reason: str = "")', "tool void(n: int)")
    other_tool = other_tool.replace("allow billing.refund", "allow billing.void").replace(
        "on billing.refund where args.amount > 50", "on billing.void where args.n > 50"
    )
    in_use = refused(live, harness, upload(live, harness, other_tool), before)
    assert in_use == [
        {"kind": "tool", "name": "billing.refund",
         "used_by": [{"kind": "approval", "id": approval}], "more": 0},
    ]  # fmt: skip
    # Decided, it uses nothing: the same upload goes through.
    rejected = live.post(f"/v1/approvals/{approval}/reject", json={}, headers=harness.auth())
    assert rejected.status_code == 200, rejected.text
    answer = upload(live, harness, other_tool)
    assert answer.status_code == 201 and answer.json()["removed_in_use"] == []


def test_an_approval_of_an_agent_whose_profile_goes_is_named(
    live: httpx.Client, harness: Harness
) -> None:
    harness.add_agent("w1", "wide")
    paused = live.post("/v1/decisions", json={**REFUND, "agent": "w1"}, headers=harness.auth())
    assert paused.status_code == 200, paused.text
    assert paused.json()["effect"] == "allow"  # (wide has no hooks: no approval)
    harness.add_agent("s2", "support")
    refund = live.post("/v1/decisions", json={**REFUND, "agent": "s2"}, headers=harness.auth())
    approval = str(refund.json()["approval_id"])
    before = latest(live, harness)
    # s2 moves to `wide` (its approval stays pending), then `wide` is to go.
    moved = live.patch("/v1/agents/s2", json={"profile": "wide"}, headers=harness.auth())
    assert moved.status_code == 200, moved.text
    in_use = refused(live, harness, upload(live, harness, without(POLICY, "profile wide")), before)
    assert in_use == [
        {"kind": "profile", "name": "wide",
         "used_by": [{"kind": "agent", "id": "w1"}, {"kind": "agent", "id": "s2"},
                     {"kind": "approval", "id": approval}],
         "more": 0},
    ]  # fmt: skip


def test_a_connection_keeps_its_toolset_and_its_credential_is_never_shown(
    live: httpx.Client, harness: Harness
) -> None:
    made = live.post(
        "/v1/connections", json={"name": "v", "toolset": "vault", "credential": "s3cr3t-vault"},
        headers=harness.auth(),
    )  # fmt: skip
    assert made.status_code == 201, made.text
    before = latest(live, harness)
    no_vault = without(POLICY, "toolset vault", "role vault-reader")
    answer = upload(live, harness, no_vault)
    in_use = refused(live, harness, answer, before)
    assert in_use == [
        {"kind": "toolset", "name": "vault",
         "used_by": [{"kind": "connection", "id": made.json()["id"]}], "more": 0},
    ]  # fmt: skip
    meant = upload(live, harness, no_vault, "?remove_in_use=true")
    assert meant.status_code == 201 and meant.json()["removed_in_use"] == in_use
    assert "s3cr3t" not in answer.text + meant.text


def test_a_role_made_through_the_api_is_kept(live: httpx.Client, harness: Harness) -> None:
    made = live.post("/v1/roles", json={"name": "extra", "source": ROLE}, headers=harness.auth())
    assert made.status_code == 201, made.text
    before = latest(live, harness)
    answer = upload(live, harness, POLICY)  # (from a copy of the files older than the role)
    in_use = refused(live, harness, answer, before)
    assert in_use == [{"kind": "role", "name": "extra", "used_by": [], "more": 0}]
    assert "role `extra` made through the API" in answer.json()["detail"]
    # Uploaded with its file, or declared in another one, it is not removed.
    files = {"files": [{"path": "policy.charter", "text": POLICY},
                       {"path": "api/roles/extra.charter", "text": ROLE}]}  # fmt: skip
    kept = live.put("/v1/policy", json=files, headers=harness.auth())
    assert kept.status_code == 201 and kept.json()["removed_in_use"] == []
    moved = upload(live, harness, POLICY + ROLE)
    assert moved.status_code == 201 and moved.json()["removed_in_use"] == []
    # A role's own `DELETE` is how it goes (no override needed there).
    again = live.post("/v1/roles", json={"name": "other", "source": ROLE.replace("extra", "other")},
                      headers=harness.auth())  # fmt: skip
    assert again.status_code == 201, again.text
    deleted = live.delete("/v1/roles/other", headers=harness.auth())
    assert deleted.status_code == 204, deleted.text


def test_the_profiles_that_name_an_api_role_are_its_users(
    live: httpx.Client, harness: Harness
) -> None:
    made = live.post("/v1/roles", json={"name": "extra", "source": ROLE}, headers=harness.auth())
    assert made.status_code == 201, made.text
    naming = POLICY + "profile extra-user {\n  roles extra\n  hooks none\n}\n"
    files = {"files": [{"path": "policy.charter", "text": naming},
                       {"path": "api/roles/extra.charter", "text": ROLE}]}  # fmt: skip
    assert live.put("/v1/policy", json=files, headers=harness.auth()).status_code == 201
    before = latest(live, harness)
    in_use = refused(live, harness, upload(live, harness, POLICY), before)
    assert in_use == [
        {"kind": "role", "name": "extra", "used_by": [{"kind": "profile", "id": "extra-user"}],
         "more": 0},
    ]  # fmt: skip


def test_users_are_capped_and_counted(live: httpx.Client, harness: Harness) -> None:
    for n in range(13):
        harness.add_agent(f"n{n:02}", "narrow")
    before = latest(live, harness)
    answer = upload(live, harness, without(POLICY, "profile narrow"))
    (entry,) = refused(live, harness, answer, before)
    assert entry["used_by"] == [{"kind": "agent", "id": f"n{n:02}"} for n in range(10)]
    assert entry["more"] == 3
    assert "(agent `n00`, agent `n01`, agent `n02` and 10 more)" in answer.json()["detail"]


def test_an_agent_made_by_another_process_is_seen(
    live: httpx.Client, harness: Harness, other: Any
) -> None:
    from api.commands import CreateAgent
    from api.service.resources import create_agent
    from api.service.tokens import Principal

    before = latest(live, harness)
    live.get("/v1/agents", headers=harness.auth())  # (this process's caches warm)
    made = CreateAgent(name="e", profile="careful", identity=harness.identity)
    create_agent(other, Principal("t", "admin"), made, "elsewhere")
    in_use = refused(
        live, harness, upload(live, harness, without(POLICY, "profile careful")), before
    )
    assert in_use[0]["used_by"] == [{"kind": "agent", "id": "elsewhere"}]


REMOVABLE = ("support-child", "careful", "narrow", "wide")


def test_an_upload_is_refused_exactly_when_a_removed_profile_is_in_use(
    harness: Harness,
) -> None:
    """For any profiles removed and any with an agent on them: refused exactly when the
    two meet, naming exactly those; with the override, taken and naming the same."""
    with TestClient(create_app(harness.service)) as client:

        @settings(suppress_health_check=[HealthCheck.too_slow])
        @given(
            removed=st.sets(st.sampled_from(REMOVABLE)),
            used=st.sets(st.sampled_from(REMOVABLE)),
            remove=st.booleans(),
        )
        def check(removed: set[str], used: set[str], remove: bool) -> None:
            for profile in REMOVABLE:
                agent = f"on-{profile}"
                there = harness.service.store.get("agents", agent) is not None
                if profile in used and not there:
                    harness.add_agent(agent, profile)
                elif profile not in used and there:
                    gone = client.delete(f"/v1/agents/{agent}", headers=harness.auth())
                    assert gone.status_code == 204, gone.text
            before = latest(client, harness)
            query = "?remove_in_use=true" if remove else ""
            smaller = without(POLICY, *(f"profile {p}" for p in removed))
            answer = upload(client, harness, smaller, query)
            expected = [
                {"kind": "profile", "name": p, "used_by": [{"kind": "agent", "id": f"on-{p}"}],
                 "more": 0}
                for p in sorted(removed & used)
            ]  # fmt: skip
            if removed & used and not remove:
                assert refused(client, harness, answer, before) == expected
                return
            assert answer.status_code == 201, answer.text
            assert answer.json()["removed_in_use"] == expected
            if removed:  # (adds them back: nothing removed)
                restored = upload(client, harness, POLICY)
                assert restored.status_code == 201 and restored.json()["removed_in_use"] == []

        check()


# ---- `charter serve --workspace` -----------------------------------------------------------


def serve(db: Path, *more: str) -> tuple[int, str, str]:
    """`charter serve` run in this process, up to where it would serve (not served):
    (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        redirect_stdout(out), redirect_stderr(err),
        patch("api.cli_serve.run_uvicorn", lambda *args, **kwargs: None),
    ):  # fmt: skip
        code = main(command(db, *more)[3:])
    return code, out.getvalue(), err.getvalue()


def revision_of(db: Path) -> int:
    from api.http.app import open_service

    service = open_service(db)
    try:
        return service.store.latest_revision()
    finally:
        service.store.close()


@pytest.mark.parametrize("flag", [False, True])
def test_a_changed_workspace_that_removes_what_is_in_use(tmp_path: Path, flag: bool) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "policy.charter").write_text(SERVED_POLICY)
    db = tmp_path / "x.db"
    code, out, err = serve(db, "--workspace", str(folder))  # seeds `demo-support`, `demo-vault`
    assert code == 0, err
    assert "demo agent: demo-support" in out
    before = revision_of(db)
    # `support` renamed, `vault` dropped: the demo agent and its connection are stranded.
    changed = SERVED_POLICY.replace("profile support", "profile helpdesk")
    (folder / "policy.charter").write_text(without(changed, "toolset vault"))
    more = ("--remove-in-use",) if flag else ()
    code, out, err = serve(db, "--workspace", str(folder), *more)
    if not flag:
        assert code == 1 and "serving" not in out, out
        assert "profile `support` (agent `demo-support`)" in err
        assert re.search(r"toolset `vault` \(connection `[0-9a-f-]+`\)", err)
        assert "help:" in err and "--remove-in-use" in err
        assert "demo-placeholder" not in out + err  # (the connection's credential)
        assert revision_of(db) == before
        code, out, err = serve(db, "--workspace", str(folder))  # (refused again: not loaded)
        assert code == 1 and revision_of(db) == before
    else:
        assert code == 0, err
        assert f"policy: revision {before + 1} from" in out
        assert "removed what was in use (--remove-in-use): profile `support`" in out
        assert revision_of(db) == before + 1
        code, out, err = serve(db, "--workspace", str(folder))  # (loaded: kept as it is)
        assert code == 0 and "has not changed" in out


def test_the_summary_caps_the_names() -> None:
    found = [inuse.InUse("profile", f"p{n}", [("agent", "a")], 1) for n in range(7)]
    assert inuse.summary(found).endswith("profile `p4` (agent `a`) and 2 more")
