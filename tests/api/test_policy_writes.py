"""Profiles, hooks and toolsets written through the API (`/v1/profiles`, `/v1/hooks`,
`/v1/toolsets`, api.service.declwrites): over a real server, by an admin's token and as an
agent's built-in tool calls (`profiles.create`, ...), decided by the engine and fit-checked."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.conftest import BOTH, POLICY, Harness, expect

STORES = BOTH

# A profile whose agents may write profiles, hooks and toolsets, and nothing wider than
# mail; the workspace's other profiles are the harness's.
WRITER = """
role policy-writer {
  allow profiles.*, hooks.*, toolsets.*
}
profile writer {
  roles mailer, policy-writer
  hooks none
}
"""
HOOK = 'hook hold on mail.send {\n  pause "held"\n}\n'
TOOLSET = "toolset tickets {\n  tool open(title: str)\n}\n"


def _revision(harness: Harness) -> int:
    return harness.service.store.latest_revision()


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def test_each_kind_is_made_read_paged_changed_and_deleted(
    live: httpx.Client, harness: Harness
) -> None:
    admin = harness.auth()
    made = _ok(live.post("/v1/profiles", json={"name": "triage", "roles": ["mailer"],
               "budget": {"amount": "2.50", "period": "7d"},
               "rate": {"calls": 30, "period": "1h"}}, headers=admin), 201)  # fmt: skip
    assert made["file"] == "api/profiles/triage.charter"
    assert (made["roles"], made["hooks"]) == (["mailer"], ["default"])
    assert made["budget"] == {"amount": "2.50", "period": "7d"}
    assert made["rate"] == {"calls": 30, "period": "1h"}
    assert made["source"] == (
        "profile triage {\n  roles mailer\n  budget 2.50 usd per 7d\n  rate 30 calls per 1h\n}"
    )
    hook = _ok(live.post("/v1/hooks", json={"name": "hold", "source": HOOK}, headers=admin), 201)
    assert hook["file"] == "api/hooks/hold.charter" and hook["source"] == HOOK.rstrip("\n")
    tools = _ok(live.post("/v1/toolsets", json={"name": "tickets", "source": TOOLSET,
                "url": "https://t.example.com/\"x"}, headers=admin), 201)  # fmt: skip
    assert tools["tools"] == ["tickets.open"] and tools["url"] == 'https://t.example.com/"x'
    # read back, with the ETag each write answered with
    for kind, name in (("profiles", "triage"), ("hooks", "hold"), ("toolsets", "tickets")):
        got = live.get(f"/v1/{kind}/{name}", headers=admin)
        assert got.status_code == 200 and got.headers["ETag"], got.text
    # a profile's change: only the fields given; `budget: null` drops the budget
    tag = live.get("/v1/profiles/triage", headers=admin).headers["ETag"]
    changed = live.patch("/v1/profiles/triage", json={"hooks": ["hold"], "budget": None},
                         headers={**admin, "If-Match": tag})  # fmt: skip
    body = _ok(changed)
    assert (body["roles"], body["hooks"], body["budget"]) == (["mailer"], ["hold"], None)
    assert body["rate"] == {"calls": 30, "period": "1h"}  # (not given: kept)
    assert changed.headers["ETag"] != tag
    dropped = live.patch("/v1/profiles/triage", json={"rate": None},
                         headers={**admin, "If-Match": changed.headers["ETag"]})  # fmt: skip
    assert _ok(dropped)["rate"] is None
    # a stale If-Match: 412, nothing written
    before = _revision(harness)
    expect(live.patch("/v1/profiles/triage", json={"roles": []},
                      headers={**admin, "If-Match": tag}), 412, "resource-moved")  # fmt: skip
    assert _revision(harness) == before
    # a toolset's url alone, over the source it has
    moved = _ok(live.patch("/v1/toolsets/tickets", json={"url": "https://t.example.com/y"},
                           headers=admin))  # fmt: skip
    assert moved["url"] == "https://t.example.com/y" and moved["tools"] == ["tickets.open"]
    # a hook's source
    denied = HOOK.replace('pause "held"', 'deny "no mail"')
    assert _ok(live.patch("/v1/hooks/hold", json={"source": denied}, headers=admin))["source"]
    # pages by cursor, one revision throughout
    names, cursor = [], None
    while True:
        query = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = _ok(live.get("/v1/profiles", params=query, headers=admin))
        names += [item["name"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert names == sorted(names) and "triage" in names and len(names) == len(set(names))
    # a hook a profile names cannot go: the policy would not check, nothing changes
    before = _revision(harness)
    refused = live.delete("/v1/hooks/hold", headers=admin)
    expect(refused, 422, "policy-invalid")
    assert refused.json()["diagnostics"] and _revision(harness) == before
    # a profile an agent is on is in use
    harness.add_agent("t1", "triage")
    in_use = live.delete("/v1/profiles/triage", headers=admin)
    expect(in_use, 409, "policy-in-use")
    assert in_use.json()["in_use"][0]["used_by"] == [{"kind": "agent", "id": "t1"}]
    assert _revision(harness) == before
    assert live.delete("/v1/agents/t1", headers=admin).status_code == 204
    for kind, name in (("profiles", "triage"), ("hooks", "hold"), ("toolsets", "tickets")):
        assert live.delete(f"/v1/{kind}/{name}", headers=admin).status_code == 204
        expect(live.get(f"/v1/{kind}/{name}", headers=admin), 404, f"{kind[:-1]}-not-found")


def test_bad_input_is_refused_and_changes_nothing(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    before = _revision(harness)
    bad_dsl = live.post("/v1/hooks", json={"name": "h", "source": "hook h on {"}, headers=admin)
    expect(bad_dsl, 422, "policy-invalid")
    where = bad_dsl.json()["diagnostics"][0]
    assert where["file"] == "api/hooks/h.charter" or "api/hooks/h.charter" in str(where)
    cases: list[tuple[str, str, dict[str, Any], int, str]] = [
        ("POST", "/v1/hooks", {"name": "h", "source": TOOLSET}, 400, "hook-source-mismatch"),
        ("POST", "/v1/toolsets", {"name": "other", "source": TOOLSET}, 400,
         "toolset-source-mismatch"),
        ("POST", "/v1/profiles", {"name": "p", "roles": ["mailer\n}\nrole x {\n  allow *"]},
         400, "invalid-name"),
        ("POST", "/v1/profiles", {"name": "Bad"}, 400, "invalid-name"),
        ("POST", "/v1/profiles", {"name": "p", "roles": ["nope"]}, 422, "policy-invalid"),
        ("POST", "/v1/profiles", {"name": "support"}, 409, "profile-exists"),
        ("POST", "/v1/hooks", {"name": "approve-big", "source": HOOK.replace("hold",
         "approve-big")}, 409, "hook-exists"),
        ("POST", "/v1/profiles", {"name": "p", "roles": "mailer"}, 422, "invalid-body"),
        ("POST", "/v1/profiles", {"name": "p", "extra": 1}, 422, "invalid-body"),
        ("PATCH", "/v1/profiles/support", {"roles": []}, 409, "profile-not-api-managed"),
        ("DELETE", "/v1/hooks/approve-big", {}, 409, "hook-not-api-managed"),
        ("DELETE", "/v1/toolsets/mail", {}, 409, "toolset-not-api-managed"),
        ("PATCH", "/v1/toolsets/nope", {"url": "https://x"}, 404, "toolset-not-found"),
        ("DELETE", "/v1/profiles/nope", {}, 404, "profile-not-found"),
    ]  # fmt: skip
    for method, path, body, status, code in cases:
        sent = live.request(method, path, json=body or None, headers=admin)
        expect(sent, status, code)
    # the scopes: a decide token manages nothing
    decide = harness.auth(harness.decide)
    expect(live.post("/v1/hooks", json={"name": "h", "source": HOOK.replace("hold", "h")},
                     headers=decide), 403, "insufficient-scope")  # fmt: skip
    expect(live.get("/v1/profiles", headers=decide), 403, "insufficient-scope")
    assert _revision(harness) == before


def _writer(live: httpx.Client, harness: Harness) -> dict[str, str]:
    """An agent on profile `writer`, its token's header."""
    admin = harness.auth()
    files = [{"path": "policy.charter", "text": POLICY + WRITER}]
    _ok(live.put("/v1/policy", json={"files": files}, headers=admin), 201)
    harness.add_agent("w1", "writer")
    return harness.auth(harness.token_for("w1"))


def test_an_agents_writes_are_decided_and_fit_checked(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    writer = _writer(live, harness)
    # an uploaded hook is changed by an upload, whatever the agent's access
    expect(live.patch("/v1/hooks/approve-big", json={"source": HOOK}, headers=writer), 409,
           "hook-not-api-managed")  # fmt: skip
    # decided by the engine: `support` grants none of these tools
    support = harness.auth(harness.agent_token)
    hook = {"name": "h", "source": HOOK.replace("hold", "h")}
    expect(live.post("/v1/hooks", json=hook, headers=support), 403, "denied-by-policy")
    # an agent the policy denies learns nothing of what an upload declared
    expect(live.patch("/v1/profiles/support", json={"roles": []}, headers=support), 403,
           "denied-by-policy")  # fmt: skip
    expect(live.patch("/v1/toolsets/mail", json={"url": "https://x.example.com"},
                      headers=support), 403, "denied-by-policy")  # fmt: skip
    # a profile inside its own access fits; one granting more does not
    made = live.post("/v1/profiles", json={"name": "p", "roles": ["mailer"]}, headers=writer)
    assert made.status_code == 201, made.text
    before = _revision(harness)
    wider = live.post("/v1/profiles", json={"name": "q", "roles": ["refunder"]}, headers=writer)
    expect(wider, 403, "does-not-fit")
    assert wider.json()["fit"]["violations"]
    # a change that widens the profile it changes, even inside the writer's own access
    expect(live.patch("/v1/profiles/p", json={"roles": ["mailer", "policy-writer"]},
                      headers=writer), 403, "does-not-fit")  # fmt: skip
    assert _revision(harness) == before
    # a hook's change that lifts a pause from a profile naming it
    _ok(live.post("/v1/hooks", json={"name": "hold", "source": HOOK}, headers=admin), 201)
    # (dropping the default hooks it has widens it: they are kept)
    expect(live.patch("/v1/profiles/p", json={"hooks": ["hold"]}, headers=writer), 403,
           "does-not-fit")  # fmt: skip
    _ok(live.patch("/v1/profiles/p", json={"hooks": ["default", "hold"]}, headers=writer))
    before = _revision(harness)
    lifted = HOOK.replace("mail.send", "billing.refund")
    expect(live.patch("/v1/hooks/hold", json={"source": lifted}, headers=writer), 403,
           "does-not-fit")  # fmt: skip
    assert _revision(harness) == before
    # a toolset whose new tool a profile's role would grant
    _ok(live.post("/v1/toolsets", json={"name": "tickets", "source": TOOLSET}, headers=writer),
        201)  # fmt: skip
    role = {"name": "ticketer", "source": "role ticketer {\n  allow tickets.*\n}\n"}
    _ok(live.post("/v1/roles", json=role, headers=admin), 201)
    _ok(live.post("/v1/profiles", json={"name": "tix", "roles": ["ticketer"]}, headers=admin), 201)
    before = _revision(harness)
    more = TOOLSET.replace("}\n", "  tool purge(all: bool)\n}\n")
    widened = live.patch("/v1/toolsets/tickets", json={"source": more}, headers=writer)
    expect(widened, 403, "does-not-fit")
    assert "profile `tix`, whose rules reach its tools" in widened.json()["detail"]
    assert _revision(harness) == before
    # what narrows is allowed, and logged as the tool call it is
    assert live.delete("/v1/profiles/p", headers=writer).status_code == 204
    logged = _ok(live.get("/v1/decisions", params={"after_seq": "0", "limit": "200"},
                          headers=admin))["decisions"]  # fmt: skip
    tools = {(d["tool"], d["effect"]) for d in logged}
    assert ("profiles.delete", "allow") in tools and ("hooks.create", "deny") in tools


def test_an_upload_that_drops_one_made_through_the_api_is_refused(
    live: httpx.Client, harness: Harness
) -> None:
    """Made through the API, it is the server's, as an API-made role is: an upload made
    from an older copy of the files is refused (409 `policy-in-use`) until it says so."""
    admin = harness.auth()
    _ok(live.post("/v1/hooks", json={"name": "hold", "source": HOOK}, headers=admin), 201)
    _ok(live.post("/v1/toolsets", json={"name": "tickets", "source": TOOLSET}, headers=admin),
        201)  # fmt: skip
    before = _revision(harness)
    files = {"files": [{"path": "policy.charter", "text": POLICY}]}
    refused = live.put("/v1/policy", json=files, headers=admin)
    expect(refused, 409, "policy-in-use")
    kinds = {(e["kind"], e["name"]) for e in refused.json()["in_use"]}
    assert kinds == {("hook", "hold"), ("toolset", "tickets")}
    assert "hook `hold` made through the API" in refused.json()["detail"]
    assert _revision(harness) == before
    forced = live.put("/v1/policy?remove_in_use=true", json=files, headers=admin)
    assert forced.status_code == 201, forced.text
    expect(live.get("/v1/hooks/hold", headers=admin), 404, "hook-not-found")
