"""`GET /v1/log/{seq}/explain` (api/http/logexplain.py) against a live server: a logged
decision's trace made again on the revision it was decided on, its effect compared with
the logged one (a budget's deny and an approval's allow said as such), and a plain
refusal, in place of a trace, where the log does not keep what a condition reads (the
call's context, a secret argument); secrets stay redacted; admin-only; 404 for a seq the
log does not have."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.cli import main
from tests.api.conftest import POLICY, Harness, expect

SECRET = "s3cr3t-value-9f81"
MORE = """
toolset keys {
  tool put(key: str, value: secret str)
  tool check(key: str, value: secret str)
}
toolset net {
  tool ping(host: str)
  tool trace(host: str)
  tool whois(host: str)
}
role keeper {
  allow keys.put where args.key != "root"
  allow keys.check where args.value != "guess"
}
role pinger {
  allow net.ping where context.ip == "10.0.0.1"
  allow net.trace where thread.cost < 5
  allow net.whois where agent.metadata.team == "blue"
}
hook check-keys on keys.put where args.key == "prod" {
  pause "a human checks writes of production keys"
}
"""
LATER = POLICY.replace(
    "roles mailer, refunder, manager, vault-reader\n  hooks approve-big",
    "roles mailer, refunder, manager, vault-reader, keeper, pinger\n  hooks approve-big, check-keys",
) + MORE  # fmt: skip


def _decide(live: httpx.Client, harness: Harness, tool: str, args: Any, **extra: Any) -> Any:
    body = {"agent": "a1", "tool": tool, "args": args, **extra}
    answer = live.post("/v1/decisions", json=body, headers=harness.auth(harness.decide))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _explain(live: httpx.Client, harness: Harness, seq: int) -> Any:
    answer = live.get(f"/v1/log/{seq}/explain", headers=harness.auth())
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_logged_decision_is_explained_on_its_revision(
    live: httpx.Client, harness: Harness
) -> None:
    allowed = _decide(live, harness, "billing.refund", {"amount": 10})
    paused = _decide(live, harness, "billing.refund", {"amount": 80}, expected_cost="0.5")
    over = _decide(live, harness, "billing.refund", {"amount": 5}, expected_cost="11")
    assert (allowed["effect"], paused["effect"], over["effect"]) == ("allow", "pause", "deny")
    approved = live.post(f"/v1/approvals/{paused['approval_id']}/approve", headers=harness.auth())
    assert approved.status_code == 200, approved.text
    recheck = approved.json()["decision"]

    # A later revision takes the role away: the decisions made before are explained on
    # the revision they were decided on, which still grants it.
    later = POLICY.replace(
        "roles mailer, refunder, manager, vault-reader",
        "roles mailer, manager, vault-reader, keeper, pinger",
    ) + MORE  # fmt: skip
    files = {"files": [{"path": "policy.charter", "text": later}]}
    uploaded = live.put("/v1/policy", json=files, headers=harness.auth())
    assert uploaded.status_code == 201, uploaded.text

    found = _explain(live, harness, allowed["seq"])
    assert found["revision"] == 1 and found["logged_effect"] == "allow"
    assert found["effect"] == "allow" and found["same_effect"] is True
    assert found["inputs"] == "log" and found["unavailable"] is None and found["note"] is None
    assert "role `refunder`" in found["trace"] and "result: ALLOW" in found["trace"]

    found = _explain(live, harness, paused["seq"])  # (its approval's sealed call)
    assert found["effect"] == "pause" and found["same_effect"] and found["inputs"] == "approval"
    assert "hook `approve-big`" in found["trace"] and "-> true" in found["trace"]

    found = _explain(live, harness, recheck["seq"])  # the approved re-check: an allow
    assert found["logged_effect"] == "allow" and found["effect"] == "pause"
    assert found["same_effect"] is False and "a person's approval made it allow" in found["note"]

    found = _explain(live, harness, over["seq"])  # denied by the budget after the engine
    assert (found["effect"], found["logged_effect"], found["same_effect"]) == (
        "allow",
        "deny",
        False,
    )
    assert "a budget (step 6) made it deny" in found["note"] and "24h" in found["note"]


def test_what_the_log_does_not_keep_is_said_plainly(live: httpx.Client, harness: Harness) -> None:
    assert LATER.count("check-keys") == 2
    files = {"files": [{"path": "policy.charter", "text": LATER}]}
    assert live.put("/v1/policy", json=files, headers=harness.auth()).status_code == 201

    # A secret argument no condition reads: the trace, the secret redacted in it.
    put = _decide(live, harness, "keys.put", {"key": "app", "value": SECRET})
    answer = live.get(f"/v1/log/{put['seq']}/explain", headers=harness.auth())
    assert SECRET not in answer.text
    found = answer.json()
    assert found["same_effect"] and '"value":"[redacted]"' in found["trace"].replace(" ", "")

    # One a condition reads: no trace, and why.
    check = _decide(live, harness, "keys.check", {"key": "app", "value": SECRET})
    answer = live.get(f"/v1/log/{check['seq']}/explain", headers=harness.auth())
    assert SECRET not in answer.text
    found = answer.json()
    assert found["trace"] is None and found["effect"] is None
    assert found["unavailable"]["why"] == "arguments-redacted"
    assert "`args.value`" in found["unavailable"]["message"]

    # The call's context, which the log does not keep.
    ping = _decide(live, harness, "net.ping", {"host": "h"}, context={"ip": "10.0.0.1"})
    found = _explain(live, harness, ping["seq"])
    assert found["trace"] is None and found["unavailable"]["why"] == "context-not-logged"
    assert "`context.ip`" in found["unavailable"]["message"]

    # A paused call is explained from its approval's sealed call: the secret stays hidden.
    paused = _decide(live, harness, "keys.put", {"key": "prod", "value": SECRET})
    assert paused["effect"] == "pause"
    answer = live.get(f"/v1/log/{paused['seq']}/explain", headers=harness.auth())
    assert SECRET not in answer.text
    found = answer.json()
    assert found["inputs"] == "approval" and found["same_effect"] is True
    assert "hook `check-keys` (pause)" in found["trace"] and "[redacted]" in found["trace"]

    # What the thread had spent, which the log does not keep.
    thread = live.post("/v1/threads", json={"agent": "a1", "prompt": "p"}, headers=harness.auth())
    assert thread.status_code == 201, thread.text
    traced = _decide(live, harness, "net.trace", {"host": "h"}, thread=thread.json()["id"])
    assert traced["effect"] == "allow"
    found = _explain(live, harness, traced["seq"])
    assert found["trace"] is None and found["unavailable"]["why"] == "thread-cost-not-logged"

    # An agent's attribute, as it was until the agent changed.
    whois = _decide(live, harness, "net.whois", {"host": "h"})
    assert whois["effect"] == "deny"
    found = _explain(live, harness, whois["seq"])
    assert found["effect"] == "deny" and found["same_effect"] is True
    assert "agent.metadata.team" in found["trace"]
    # its status, and its metadata set to what it holds: nothing a condition reads changed
    for same in ({"status": "running"}, {"metadata": (held := _metadata(live, harness))}):
        kept = live.patch("/v1/agents/a1", json=same, headers=harness.auth())
        assert kept.status_code == 200, kept.text
        again = _explain(live, harness, whois["seq"])
        assert again["trace"] == found["trace"], (same, again)
    assert held.get("team") != "blue"
    patch = {"metadata": {"team": "blue"}}
    changed = live.patch("/v1/agents/a1", json=patch, headers=harness.auth())
    assert changed.status_code == 200, changed.text
    found = _explain(live, harness, whois["seq"])
    assert found["trace"] is None and found["unavailable"]["why"] == "agent-changed"


def _metadata(live: httpx.Client, harness: Harness) -> dict[str, Any]:
    agent = live.get("/v1/agents/a1", headers=harness.auth())
    assert agent.status_code == 200 and "context_at" not in agent.json(), agent.text
    found: dict[str, Any] = agent.json()["metadata"]
    return found


def test_only_an_admin_reads_it_and_an_unknown_seq_is_404(
    live: httpx.Client, harness: Harness
) -> None:
    seq = _decide(live, harness, "billing.refund", {"amount": 1})["seq"]
    expect(live.get(f"/v1/log/{seq}/explain", headers=harness.auth(harness.decide)), 403,
           "insufficient-scope")  # fmt: skip
    expect(live.get(f"/v1/log/{seq}/explain", headers=harness.auth(harness.agent_token)), 403,
           "insufficient-scope")  # fmt: skip
    for bad in ("0", str(seq + 1), "abc", "1" * 19, "-1"):
        expect(
            live.get(f"/v1/log/{bad}/explain", headers=harness.auth()), 404, "decision-not-found"
        )


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(amount=st.one_of(st.sampled_from([50, 51, 0, -1, 2**31]), st.integers(-100, 200)),
       reason=st.one_of(st.none(), st.text(max_size=8)))  # fmt: skip
def test_a_re_explained_call_has_its_logged_effect(
    live: httpx.Client, harness: Harness, amount: int, reason: str | None
) -> None:
    """Whatever the arguments (the hook's edge, a wrong type), the trace made again ends in
    the effect that was logged, and says it."""
    args: dict[str, Any] = (
        {"amount": amount} if reason is None else {"amount": amount, "reason": reason}
    )
    logged = _decide(live, harness, "billing.refund", args)
    found = _explain(live, harness, logged["seq"])
    assert found["same_effect"] is True, found
    assert f"\nresult: {logged['effect'].upper()}\n" in found["trace"]


def test_a_condition_on_the_time_reads_the_moment_the_call_was_logged(
    live: httpx.Client, harness: Harness
) -> None:
    # A grant that starts a second from now (this process and the server read one
    # clock): a call made before is denied, and its trace, made once the grant has
    # started, still shows the deny (`time.ms` as the row has it, not as it is when
    # explained). On a machine so slow that the call came after the start, both are
    # allows, which still checks that the trace ends in the logged effect.
    start = int(time.time() * 1000) + 1000
    policy = LATER.replace(
        "allow net.ping where", f"allow net.whois where time.ms >= {start}\n  allow net.ping where"
    )
    files = {"files": [{"path": "policy.charter", "text": policy}]}
    assert live.put("/v1/policy", json=files, headers=harness.auth()).status_code == 201
    logged = _decide(live, harness, "net.whois", {"host": "h"})
    time.sleep(max(0.0, (start - time.time() * 1000) / 1000) + 0.05)
    assert _decide(live, harness, "net.whois", {"host": "h"})["effect"] == "allow"
    found = _explain(live, harness, logged["seq"])
    assert found["effect"] == logged["effect"] and found["same_effect"] is True, found
    assert "time.ms" in found["trace"]


def test_the_command_line_explains_from_the_database(
    live: httpx.Client, harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    """`charter log explain SEQ --db DB`: the same answer as the endpoint, from the
    database and its key file (a paused call's approval opens with it)."""
    db = [str(harness.db)] + (
        [] if harness.key_file is None else ["--key-file", str(harness.key_file)]
    )
    allowed = _decide(live, harness, "billing.refund", {"amount": 10})
    paused = _decide(live, harness, "billing.refund", {"amount": 80})
    files = {"files": [{"path": "policy.charter", "text": LATER}]}
    assert live.put("/v1/policy", json=files, headers=harness.auth()).status_code == 201
    ping = _decide(live, harness, "net.ping", {"host": "h"}, context={"ip": "10.0.0.1"})
    capsys.readouterr()

    assert main(["log", "explain", str(allowed["seq"]), "--db", *db]) == 0
    out = capsys.readouterr().out
    assert "role `refunder`" in out and "result: ALLOW" in out
    assert out.rstrip().endswith("logged: allow on revision 1; the policy decides allow")

    assert main(["log", "explain", str(paused["seq"]), "--db", *db, "--format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer == _explain(live, harness, paused["seq"]) and answer["inputs"] == "approval"

    assert main(["log", "explain", str(ping["seq"]), "--db", *db]) == 1
    err = capsys.readouterr().err
    assert f"decision {ping['seq']}: no trace (context-not-logged)" in err

    assert main(["log", "explain", str(ping["seq"] + 1), "--db", *db]) == 2
    assert "has no decision at seq" in capsys.readouterr().err
    assert main(["log", "explain", "1", "--db", str(harness.db) + ".missing"]) == 2
    refused = capsys.readouterr().err
    if isinstance(harness.db, Path):
        assert "no database file" in refused
    else:  # (a PostgreSQL URL named without its `--key-file`: refused before it connects)
        assert "error[D0203]" in refused
