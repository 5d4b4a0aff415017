"""Agents made and changed from a Seed `AgentDefinition` over HTTP (api.service.definitions):
read back as normalized, refused with Seed's own messages, and decided with its grants
(api.service.seedgrants), by an admin and by an agent's token through `agents.define`."""

from __future__ import annotations

from typing import Any

import pytest

from engine.seed import PUBLISH_REFUSED, RUNS_CODE_REFUSED
from policy import identities
from policy.seed import PROMPT_LIMIT
from tests.api.conftest import POLICY, Harness, code_of

SEEDED = """
toolset scripts {
  runs code
  tool run(source: str)
}
role seeded {
  allow search, web_search, navigate, execute, publish, scripts.run, agents.*
}
profile seeded {
  roles seeded, mailer
  hooks none
}
"""
CALLS: dict[str, dict[str, Any]] = {
    "search": {"query": "q"},
    "web_search": {"query": "q"},
    "navigate": {"url": "https://example.com"},
    "execute": {"source": "1"},
    "publish": {"url": "hm://z6Mk/doc"},
    "scripts.run": {"source": "1"},
    "mail.send": {"to": "a@example.com", "subject": "s", "body": "b"},
}


def definition(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "  Triage bot  ",
        "systemPrompt": "Sort the tickets.",
        "modelProvider": "anthropic",
        "model": "claude-sonnet-4-5",
    }
    raw.update(changes)
    return {k: v for k, v in raw.items() if v is not None}


@pytest.fixture
def seeded(live: Any, harness: Harness) -> Any:
    assert (
        live.put("/v1/policy", content=POLICY + SEEDED, headers=harness.auth()).status_code == 201
    )
    return live


def put(live: Any, harness: Harness, agent: str, body: dict[str, Any], token: str | None = None,
        **headers: str) -> Any:  # fmt: skip
    return live.put(f"/v1/agents/{agent}/definition", json=body,
                    headers={**harness.auth(token), **headers})  # fmt: skip


def effects(live: Any, harness: Harness, agent: str) -> dict[str, tuple[str, list[Any]]]:
    """Each call of CALLS by `agent`, decided: (effect, the reasons' kind and message)."""
    found = {}
    for tool, args in CALLS.items():
        body = {"agent": agent, "tool": tool, "args": args}
        answer = live.post("/v1/decisions", json=body, headers=harness.auth(harness.decide))
        assert answer.status_code == 200, answer.text
        doc = answer.json()
        found[tool] = (doc["effect"], [(r["kind"], r["message"]) for r in doc["reasons"]])
    return found


def test_a_definition_makes_an_agent_reads_back_and_changes_it(
    seeded: Any, harness: Harness
) -> None:
    live = seeded
    key = identities.secret_name(harness.identity)
    sent = definition(tools=["search", "memory_publish_document"], signingKey=f" {key} ",
                      reasoningLevel="medium", metadata={"team": "ops", "ratio": 0.1,
                      "big": 12345678901234567890, "nested": [{"a": None}]})  # fmt: skip
    made = put(live, harness, "triage", {"profile": "seeded", "definition": sent})
    assert made.status_code == 201, made.text
    normalized = {**sent, "name": "Triage bot", "signingKey": key}
    assert made.json() == {
        "id": "triage", "profile": "seeded", "identity": harness.identity,
        "definition": normalized, "grants": ["search", "publish"],
        "role": "role seed-triage {\n  allow search, publish\n}\n",
        "updated_at": made.json()["updated_at"],
    }  # fmt: skip
    read = live.get("/v1/agents/triage/definition", headers=harness.auth())
    assert read.status_code == 200 and read.json() == made.json()
    assert read.headers["ETag"] == made.headers["ETag"]
    agent = live.get("/v1/agents/triage", headers=harness.auth()).json()
    assert (agent["name"], agent["profile"], agent["identity"]) == (
        "Triage bot", "seeded", harness.identity)  # fmt: skip
    # a change: If-Match compares with the agent's ETag; a stale one changes nothing
    block = [{"block": {"id": "b1", "type": "Paragraph", "text": "Be brief."}}]
    changed = definition(name="Triager", systemPrompt=block, tools=["web_search"])
    tag = made.headers["ETag"]
    other = tag[:-2] + ("0" if tag[-2] != "0" else "1") + '"'
    stale = put(live, harness, "triage", {"definition": changed}, **{"If-Match": other})
    assert code_of(stale) == (412, "resource-moved")
    done = put(
        live, harness, "triage", {"definition": changed}, **{"If-Match": made.headers["ETag"]}
    )
    assert done.status_code == 200, done.text
    assert done.json()["definition"] == changed and done.json()["grants"] == ["web_search"]
    assert done.json()["profile"] == "seeded"  # (left out: kept)
    assert live.get("/v1/agents/triage", headers=harness.auth()).json()["name"] == "Triager"
    # a rename renames the definition: one name
    renamed = live.patch("/v1/agents/triage", json={"name": "Sorter"}, headers=harness.auth())
    assert renamed.status_code == 200
    back = live.get("/v1/agents/triage/definition", headers=harness.auth()).json()
    assert back["definition"]["name"] == "Sorter"
    # several keys are `signingKeys`; an agent made otherwise has no definition
    harness.add_agent("plain", "seeded")
    assert code_of(live.get("/v1/agents/plain/definition", headers=harness.auth())) == (
        404, "definition-not-found")  # fmt: skip
    assert code_of(live.get("/v1/agents/nobody/definition", headers=harness.auth())) == (
        404, "agent-not-found")  # fmt: skip


@pytest.mark.parametrize("name", ["publish", "write", "memory_publish_document", "ipfs_write",
                                  "attachment_to_ipfs"])  # fmt: skip
def test_legacy_publish_names_grant_publishing(seeded: Any, harness: Harness, name: str) -> None:
    key = identities.secret_name(harness.identity)
    body = {"profile": "seeded", "definition": definition(tools=[name], signingKey=key)}
    made = put(seeded, harness, "pub", body)
    assert made.status_code == 201 and made.json()["grants"] == ["publish"]
    decided = seeded.post("/v1/decisions", json={"agent": "pub", "tool": "publish",
                          "args": CALLS["publish"]}, headers=harness.auth(harness.decide))  # fmt: skip
    assert decided.json()["effect"] == "allow"


LONG = "x" * 257
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"name": "   "}, "Name is required"),
    ({"name": LONG}, "Name is too large"),
    ({"modelProvider": ""}, "Model provider is required"),
    ({"model": "é" * 129}, "Model is too large"),
    ({"systemPrompt": None}, "System prompt is required"),
    ({"systemPrompt": 7}, "System prompt must be blocks"),
    ({"systemPrompt": [{"block": {"id": "", "type": "Paragraph"}}]}, "System prompt blocks are invalid"),
    ({"systemPrompt": [{"block": {"id": "a", "type": "P", "text": "t"}, "children": {}}]},
     "System prompt block children are invalid"),
    ({"systemPrompt": [{"block": {"id": "a", "type": "P", "text": "  "}}]}, "System prompt is required"),
    ({"systemPrompt": "y" * (PROMPT_LIMIT + 1)}, "System prompt is too large"),
    ({"tools": "search"}, "Tools must be an array"),
    ({"tools": ["search"] * 33}, "Too many tools"),
    ({"tools": [" search"]}, "Tools must be non-empty trimmed strings"),
    ({"tools": [""]}, "Tools must be non-empty trimmed strings"),
    ({"tools": ["t" * 129]}, "Tool name is too large"),
    ({"metadata": []}, "Metadata must be an object"),
    ({"metadata": {"blob": "z" * 16_400}}, "Metadata is too large"),
    ({"reasoningLevel": "max"}, "Reasoning level is invalid"),
    ({"signingKey": " "}, "Signing key is required"),
    ({"signingKeys": ["k" * 257]}, "Signing key is too large"),
]  # fmt: skip


def test_a_definition_seed_refuses_is_400_with_its_message_and_writes_nothing(
    seeded: Any, harness: Harness
) -> None:
    key = identities.secret_name(harness.identity)
    before = harness.service.store.last_seq()
    for change, message in REFUSED:
        body = {"profile": "seeded", "definition": definition(**{"signingKey": key, **change})}
        refused = put(seeded, harness, "bad", body)
        assert code_of(refused) == (400, "invalid-definition"), (change, refused.text)
        assert refused.json()["detail"] == message
    missing = put(seeded, harness, "bad", {"profile": "seeded",
                  "definition": definition(signingKey="hm-account-zNOPE")})  # fmt: skip
    assert code_of(missing) == (400, "unknown-identity")
    assert missing.json()["detail"] == "Signing key not found"
    assert code_of(put(seeded, harness, "bad", {"definition": definition(signingKey=key)})) == (
        400, "profile-required")  # fmt: skip
    assert code_of(put(seeded, harness, "bad", {"profile": "seeded", "definition": definition()})) == (
        400, "identity-required")  # fmt: skip
    assert code_of(put(seeded, harness, "bad", {"profile": "seeded", "definition": "x"})) == (
        422, "invalid-body")  # fmt: skip
    assert code_of(put(seeded, harness, "bad", {"profile": "nope",
                       "definition": definition(signingKey=key)})) == (400, "unknown-profile")  # fmt: skip
    assert harness.service.store.get("agents", "bad") is None
    assert harness.service.store.last_seq() == before


LEVELS: list[tuple[str, str, str, str | None]] = [
    ("openai", "o3", "high", None),
    ("openai", "o1-mini", "minimal",
     "Model o1-mini does not support reasoning level 'minimal' (valid: low, medium, high)"),
    ("openai", "gpt-5", "minimal", None),
    ("openai", "gpt-5-chat-latest", "low", "Model gpt-5-chat-latest does not support a reasoning level"),
    ("openai", "gpt-5.1", "minimal",
     "Model gpt-5.1 does not support reasoning level 'minimal' (valid: low, medium, high)"),
    ("openai", "gpt-5.2", "xhigh", None),
    ("openai", "gpt-4o", "low", "Model gpt-4o does not support a reasoning level"),
    ("anthropic", "claude-3-7-sonnet-20250219", "minimal", None),
    ("anthropic", "claude-3-5-sonnet-20241022", "low",
     "Model claude-3-5-sonnet-20241022 does not support a reasoning level"),
    ("anthropic", "claude-sonnet-4-5", "xhigh",
     "Model claude-sonnet-4-5 does not support reasoning level 'xhigh' (valid: minimal, low, medium, high)"),
    ("google", "gemini-2.5-pro", "high", None),
    ("google", "gemini-2.0-flash", "low", "Model gemini-2.0-flash does not support a reasoning level"),
    ("mistral", "large", "low", "Model large does not support a reasoning level"),
]  # fmt: skip


def test_the_reasoning_level_table_over_http(seeded: Any, harness: Harness) -> None:
    key = identities.secret_name(harness.identity)
    for i, (provider, model, level, message) in enumerate(LEVELS):
        raw = definition(modelProvider=provider, model=model, reasoningLevel=level, signingKey=key)
        answer = put(seeded, harness, f"r{i}", {"profile": "seeded", "definition": raw})
        if message is None:
            assert answer.status_code == 201, (model, answer.text)
            assert answer.json()["definition"]["reasoningLevel"] == level
        else:
            assert code_of(answer) == (400, "invalid-definition"), model
            assert answer.json()["detail"] == message


def test_calls_are_decided_with_the_definitions_grants(seeded: Any, harness: Harness) -> None:
    live = seeded
    key = identities.secret_name(harness.identity)
    made = put(live, harness, "s1", {"profile": "seeded",
               "definition": definition(tools=["search", "write"], signingKey=key)})  # fmt: skip
    assert made.status_code == 201, made.text
    found = effects(live, harness, "s1")
    assert found["search"][0] == found["publish"][0] == found["mail.send"][0] == "allow"
    for tool in ("web_search", "navigate", "execute"):
        assert found[tool] == (
            "deny",
            [("definition", f"Tool {tool} is not enabled for this agent")],
        )
    assert found["scripts.run"] == (
        "deny",
        [("definition", RUNS_CODE_REFUSED.format(name="scripts.run"))],
    )
    # `execute_code` is `execute`; no publish grant
    changed = put(
        live, harness, "s1", {"definition": definition(tools=["execute_code"], signingKey=key)}
    )
    assert changed.status_code == 200 and changed.json()["grants"] == ["execute"]
    found = effects(live, harness, "s1")
    assert found["execute"][0] == found["scripts.run"][0] == found["mail.send"][0] == "allow"
    assert found["publish"] == ("deny", [("definition", PUBLISH_REFUSED)])
    assert found["search"][0] == "deny"
    # `tools` left out: every callable and publishing, as the profile allows them
    everything = put(live, harness, "s1", {"definition": definition(signingKey=key)})
    assert everything.json()["grants"] == ["execute", "navigate", "search", "web_search", "publish"]
    assert {effect for effect, _ in effects(live, harness, "s1").values()} == {"allow"}
    # the agent's tool listing says the same
    listed = live.get("/v1/agents/s1/tools", headers=harness.auth(harness.decide)).json()
    status = {t["tool"]: t["status"] for t in listed["tools"]}
    assert [status[t] for t in ("search", "execute", "publish", "scripts.run", "mail.send")] == [
        "allow", "allow", "allow", "allow", "narrow"]  # fmt: skip
    put(live, harness, "s1", {"definition": definition(tools=["search"], signingKey=key)})
    listed = live.get("/v1/agents/s1/tools", headers=harness.auth(harness.decide)).json()
    status = {t["tool"]: t["status"] for t in listed["tools"]}
    assert [status[t] for t in ("search", "execute", "publish", "scripts.run", "mail.send")] == [
        "allow", "deny", "deny", "deny", "narrow"]  # fmt: skip
    # the profile still decides: a definition never allows what it does not
    narrow = put(
        live, harness, "n1", {"profile": "narrow", "definition": definition(signingKey=key)}
    )
    assert narrow.status_code == 201
    assert effects(live, harness, "n1")["search"][0] == "deny"


def test_an_agents_token_defines_through_its_tool_and_only_narrows(
    seeded: Any, harness: Harness
) -> None:
    live = seeded
    key = identities.secret_name(harness.identity)
    harness.add_agent("parent", "seeded")
    assert put(live, harness, "parent", {"definition": definition(tools=["search"], signingKey=key)}
               ).status_code == 200  # fmt: skip
    token = harness.token_for("parent")
    asked = {"profile": "seeded", "definition": definition(tools=["search", "web_search"])}
    child = put(live, harness, "kid", asked, token)
    assert child.status_code == 201, child.text
    assert child.json()["identity"] == harness.identity and child.json()["grants"] == ["search"]
    assert harness.service.store.get("agents", "kid")["parent"] == "parent"  # type: ignore[index]
    found = effects(live, harness, "kid")
    assert found["search"][0] == "allow" and found["web_search"][0] == "deny"
    # decided by the engine as `agents.define`, and logged
    log = live.get("/v1/decisions", params={"after_seq": 0}, headers=harness.auth()).json()
    defined = [d for d in log["decisions"] if d["tool"] == "agents.define"]
    assert [(d["agent"], d["effect"], d["args"]["id"]) for d in defined] == [
        ("parent", "allow", "kid")
    ]
    read = live.get("/v1/agents/kid/definition", headers=harness.auth(token))
    assert read.status_code == 200 and read.json()["grants"] == ["search"]
    # a child made with `agents.create` is bounded by its parent's grants too
    plain = live.post("/v1/agents", json={"name": "p", "profile": "seeded"},
                      headers=harness.auth(token)).json()["id"]  # fmt: skip
    assert effects(live, harness, plain)["web_search"][0] == "deny"
    # its own definition only narrows; a descendant's may be anything within its own
    widened = put(live, harness, "parent", {"definition": definition(tools=["search", "publish"])},
                  token)  # fmt: skip
    assert code_of(widened) == (403, "definition-widens") and widened.json()["gained"] == [
        "publish"
    ]
    assert code_of(put(live, harness, "parent", {"definition": definition()}, token)) == (
        403, "definition-widens")  # fmt: skip
    assert put(live, harness, "parent", {"definition": definition(tools=["search"])},
               token).status_code == 200  # fmt: skip
    kid_wide = put(live, harness, "kid", {"definition": definition()}, token)
    assert kid_wide.status_code == 200 and kid_wide.json()["grants"] == ["search"]
    # another identity's key, another tree's agent: refused before anything is decided
    stranger = live.post("/v1/identities", json={}, headers=harness.auth()).json()
    foreign = {"profile": "seeded", "definition": definition(signingKey=stranger["secret_name"])}
    assert code_of(put(live, harness, "kid2", foreign, token)) == (403, "identity-not-inherited")
    harness.add_agent("other", "seeded", identity=stranger["id"])
    assert code_of(put(live, harness, "other", {"definition": definition()}, token)) == (
        403, "not-managed-agent")  # fmt: skip
    # a profile that does not grant `agents.define` denies it
    harness.add_agent("small", "narrow")
    small = harness.token_for("small")
    denied = put(live, harness, "small", {"definition": definition()}, small)
    assert code_of(denied) == (403, "denied-by-policy")
    assert code_of(live.get("/v1/agents/kid/definition", headers=harness.auth(small))) == (
        403, "denied-by-policy")  # fmt: skip


def test_scopes(seeded: Any, harness: Harness) -> None:
    body = {"profile": "seeded", "definition": definition()}
    assert code_of(put(seeded, harness, "x", body, harness.decide)) == (403, "insufficient-scope")
    got = seeded.get("/v1/agents/x/definition", headers=harness.auth(harness.decide))
    assert code_of(got) == (403, "insufficient-scope")
    assert code_of(seeded.put("/v1/agents/x/definition", json=body)) == (401, "unauthorized")


REVIEWED_DEFINES = """
hook review-defines on agents.define {
  pause "a human reviews definitions"
}
profile reviewed-seed {
  roles seeded
  hooks review-defines
}
"""


def test_a_paused_define_runs_when_approved_and_a_wider_profile_does_not_fit(
    live: Any, harness: Harness
) -> None:
    admin = harness.auth()
    policy = POLICY + SEEDED + REVIEWED_DEFINES
    assert live.put("/v1/policy", content=policy, headers=admin).status_code == 201
    harness.add_agent("rev", "reviewed-seed")
    token = harness.token_for("rev")
    body = {"profile": "reviewed-seed", "definition": definition(tools=["navigate"])}
    paused = put(live, harness, "rkid", body, token)
    assert paused.status_code == 202, paused.text
    assert harness.service.store.get("agents", "rkid") is None  # (nothing made yet)
    approval = paused.json()["approval_id"]
    approved = live.post(f"/v1/approvals/{approval}/approve", headers=admin)
    assert approved.status_code == 200, approved.text
    assert approved.json()["result"]["grants"] == ["navigate"]
    made = live.get("/v1/agents/rkid/definition", headers=admin).json()
    assert made["definition"]["tools"] == ["navigate"] and made["profile"] == "reviewed-seed"
    assert harness.service.store.get("agents", "rkid")["parent"] == "rev"  # type: ignore[index]
    # a child under a profile wider than the caller's does not fit, whatever its tools
    harness.add_agent("nar", "seeded")
    wider = {"profile": "support", "definition": definition(tools=["search"])}
    refused = put(live, harness, "nkid", wider, harness.token_for("nar"))
    assert code_of(refused) == (403, "does-not-fit"), refused.text
    assert harness.service.store.get("agents", "nkid") is None
