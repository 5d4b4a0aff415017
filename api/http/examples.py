"""An example request and answer for each operation, by its operation id: what
docs/http-reference.md shows (api.http.docgen). tests/api/test_http_reference.py reads
each through the models the operation's Spec names (a request through its request model,
an answer through its answer model, with no field the model lacks), so an example that
no longer fits its schema fails there."""

from __future__ import annotations

import json
from typing import Any, NamedTuple


def _compact(value: Any) -> str:
    """JSON as the server writes it: no spaces."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Example(NamedTuple):
    body: Any = None  # the request's JSON body (None: no body)
    answer: Any = None  # the success answer's JSON (None: no body, a 204)
    query: str = ""  # the query string, without its `?`
    path: dict[str, str] = {}  # noqa: RUF012 (the path's parameters; never mutated)
    text: str = ""  # a text answer (`/metrics`)


IDENTITY = "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
AT = 1_764_806_400_000  # ms since the epoch
DECISION_ID = "5f0c2a9e7b1d4c3a8e6f9b21"  # (24 hex digits; other ids are UUIDs)
MEMORY: dict[str, Any] = {
    "agent": "triage-bot",
    "path": "/notes/today",
    "content": "ticket 1234 is waiting",
    "created_at": AT,
    "updated_at": AT,
}
SCHEDULE: dict[str, Any] = {
    "id": "4d2b7c1e-8f3a-4e6b-9c0d-2a1f5e7b3c9d",
    "agent": "triage-bot",
    "name": "morning-triage",
    "cron": "0 9 * * 1-5",
    "prompt": "triage the new tickets",
    "created_at": AT,
    "updated_at": AT,
    "next_run": AT + 32_400_000,
    "last_run": None,
    "last_thread": None,
}
FEED: dict[str, Any] = {
    "id": "0193d9a6-4444-7000-8000-000000000004",
    "name": "releases",
    "last_seq": 3,
    "created_at": AT,
    "updated_at": AT + 60_000,
}
MESSAGE: dict[str, Any] = {"seq": 3, "message": "v2.1 is out", "published_at": AT + 60_000}
ARGS: dict[str, Any] = {"to": "bob@example.com", "subject": "hi", "body": "hello"}
CALL: dict[str, Any] = {"agent": "demo-support", "tool": "mail.send", "args": ARGS}
REASON: dict[str, Any] = {
    "kind": "allow",
    "message": "allowed by role `mail-support`",
    "role": "mail-support",
    "location": "roles.charter:4:3",
}
DECISION: dict[str, Any] = {
    "id": DECISION_ID,
    "seq": 42,
    "effect": "allow",
    "args": {**ARGS, "cc": [], "priority": 3},  # (with the signature's defaults)
    "reasons": [REASON],
    "errors": [],
    "near_misses": [],
    "revision": 3,
}
KEY_ID = "UDDReOZl1ipXAfp9wYsm13sDBMK5og--QWdBjzuf6o4"  # (the JWK thumbprint of `x`)
KEY: dict[str, Any] = {
    "kty": "OKP", "crv": "Ed25519", "x": "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w",
    "kid": KEY_ID, "alg": "EdDSA", "use": "sig", "not_before": AT, "not_after": None,
}  # fmt: skip
KEY_SET: dict[str, Any] = {"keys": [KEY], "current": KEY_ID}
NEW_KEY: dict[str, Any] = {
    **KEY, "x": "gTl3Dqh9F19Wo1Rmw0x-zMuNipG07jeiXfYPW4_Js5Q",
    "kid": "aVBtapLd11SUVKIMGJfPzOEDuN0sXcmzJQNVT-_sKEU", "not_before": AT + 86_400_000,
}  # fmt: skip
ROTATED: dict[str, Any] = {
    "keys": [{**KEY, "not_after": AT + 86_400_000}, NEW_KEY],
    "current": NEW_KEY["kid"],
}
LOG_FINDING: dict[str, Any] = {
    "seq": 1017, "last_seq": 1017, "why": "checksum-mismatch",
    "detail": "it does not match its checksum",
}  # fmt: skip
REFUND = {"order": "A-1001", "amount": 80, "reason": "damaged", "currency": "USD"}
PAUSED: dict[str, Any] = {
    **DECISION,
    "effect": "pause",
    "args": REFUND,
    "reasons": [
        {
            "kind": "allow",
            "message": "allowed by role `finance`",
            "role": "finance",
            "location": "roles.charter:50:3",
        },
        {
            "kind": "hook-pause",
            "message": "hook `approve-big-refund`: a human approves refunds over 50 USD",
            "hook": "approve-big-refund",
            "location": "hooks.charter:8:1",
        },
    ],
    "approval_id": "0193d9a3-1111-7000-8000-000000000001",
}
APPROVAL: dict[str, Any] = {
    "id": "0193d9a3-1111-7000-8000-000000000001",
    "status": "pending",
    "agent": "refund-bot",
    "tool": "billing.refund",
    "args": REFUND,
    "thread": None,
    "turn": None,
    "connection": None,
    "revision": 3,
    "reasons": PAUSED["reasons"],
    "management": False,
    "expected_cost": "0.4",
    "created_at": AT,
    "decided_at": None,
    "decided_by": None,
    "final": None,
}
DECIDED: dict[str, Any] = {
    **APPROVAL,
    "status": "approved",
    "decided_at": AT + 60_000,
    "decided_by": "token:3f9a1c0d5e7b2a46",
    "final": {
        **PAUSED,
        "id": "5f0c2a9e7b1d4c3a8e6f9b23",
        "effect": "allow",
        "seq": 43,
        "approval_id": None,
        "reasons": [
            *PAUSED["reasons"],
            {
                "kind": "approved",
                "message": "approved in approval `0193d9a3-1111-7000-8000-000000000001`",
            },
        ],
    },
}
BUDGET: dict[str, Any] = {"amount": "25", "period": "24h"}
AGENT: dict[str, Any] = {
    "id": "triage-bot",
    "name": "Triage bot",
    "identity": IDENTITY,
    "profile": "support",
    "budget": BUDGET,
    "metadata": {"tier": "gold"},
    "parent": None,
    "status": "idle",
    "created_at": AT,
    "updated_at": AT,
}
SEED_DEFINITION: dict[str, Any] = {
    "name": "Triage bot",
    "systemPrompt": "Sort today's tickets by urgency.",
    "modelProvider": "anthropic",
    "model": "claude-sonnet-4-5",
    "reasoningLevel": "medium",
    "tools": ["search", "memory_publish_document"],
    "signingKey": "hm-account-z6MkhaXgBZDvotDk",
}
DEFINITION_VIEW: dict[str, Any] = {
    "id": "triage-bot",
    "profile": "support",
    "identity": IDENTITY,
    "definition": SEED_DEFINITION,
    "grants": ["search", "publish"],
    "role": "role seed-triage-bot {\n  allow search, publish\n}\n",
    "updated_at": AT,
}
IDENTITY_VIEW: dict[str, Any] = {
    "id": IDENTITY,
    "account_id": IDENTITY,
    "secret_name": "hm-account-z6MkhaXgBZDvotDk",
    "name": "support",
    "label": "support",
    "metadata": {"kind": "hm-account-key", "accountId": IDENTITY, "label": "support"},
    "created_at": AT,
    "updated_at": AT,
}
THREAD: dict[str, Any] = {
    "id": "0193d9a4-2222-7000-8000-000000000002",
    "agent": "triage-bot",
    "prompt": "sort today's tickets",
    "max_cost": "5",
    "depth": 0,
    "status": "open",
    "created_at": AT,
    "updated_at": AT,
}
CONNECTION: dict[str, Any] = {
    "id": "0193d9a5-3333-7000-8000-000000000003",
    "name": "gmail-support",
    "toolset": "gmail",
    "owner": None,
    "created_at": AT,
    "updated_at": AT,
}
ROLE_SOURCE = 'role mail-triage {\n  allow mail.send where args.to endswith "@example.com"\n}\n'
ROLE: dict[str, Any] = {
    "name": "mail-triage",
    "file": "api/roles/mail-triage.charter",
    "line": 1,
    "source": ROLE_SOURCE.rstrip("\n"),
    "revision": 4,
}
PROFILE: dict[str, Any] = {
    "name": "support",
    "file": "profiles.charter",
    "line": 3,
    "source": "profile support {\n  roles mail-support\n  budget 10 usd per 24h\n  rate 600 calls per 1h\n}",
    "revision": 3,
    "roles": ["mail-support"],
    "hooks": ["approve-big-refund"],
    "budget": {"amount": "10", "period": "24h"},
    "rate": {"calls": 600, "period": "1h"},
}
HOOK: dict[str, Any] = {
    "name": "approve-big-refund",
    "file": "hooks.charter",
    "line": 8,
    "source": 'hook approve-big-refund on billing.refund where args.amount > 50 {\n  pause "a '
    'human approves refunds over 50 USD"\n}',
    "revision": 3,
}
TOOLSET: dict[str, Any] = {
    "name": "mail",
    "file": "toolsets.charter",
    "line": 1,
    "source": 'toolset mail {\n  url "https://tools.example.com/mail"\n  connection required\n'
    "  tool send(to: str, subject: str, body: str, cc: list[str] = [], priority: int = 3)\n"
    "  tool search(query: str, limit: int = 20, folder?: str)\n  tool read(id: str)\n"
    "  tool delete(id: str)\n}",
    "revision": 3,
    "tools": ["mail.send", "mail.search", "mail.read", "mail.delete"],
    "url": "https://tools.example.com/mail",
    "connection_required": True,
    "runs_code": False,
}
TOKEN: dict[str, Any] = {
    "id": "8c1e4f2a9b3d7e60",
    "scope": "agent",
    "agent": "triage-bot",
    "name": "triage",
    "created_at": AT,
    "expires_at": AT + 86_400_000,
}
# A profile, hook and toolset made through the API (`POST /v1/profiles`, ...).
API_PROFILE: dict[str, Any] = {
    "name": "triage",
    "file": "api/profiles/triage.charter",
    "line": 1,
    "source": "profile triage {\n  roles mail-triage\n  budget 5 usd per 24h\n}",
    "revision": 5,
    "roles": ["mail-triage"],
    "hooks": ["default"],
    "budget": {"amount": "5", "period": "24h"},
    "rate": None,
}
HOOK_SOURCE = "hook hold-refunds on billing.refund where args.amount > 100 {\n  pause\n}\n"
API_HOOK: dict[str, Any] = {
    "name": "hold-refunds",
    "file": "api/hooks/hold-refunds.charter",
    "line": 1,
    "source": HOOK_SOURCE.rstrip("\n"),
    "revision": 5,
}
TOOLSET_SOURCE = "toolset tickets {\n  tool open(title: str)\n  tool close(id: str)\n}\n"
API_TOOLSET: dict[str, Any] = {
    "name": "tickets",
    "file": "api/toolsets/tickets.charter",
    "line": 1,
    "source": "toolset tickets {\n  tool open(title: str)\n  tool close(id: str)\n\n  url "
    '"https://tools.example.com/t"\n}',
    "revision": 5,
    "tools": ["tickets.open", "tickets.close"],
    "url": "https://tools.example.com/t",
    "connection_required": False,
    "runs_code": False,
}
REVISION: dict[str, Any] = {
    "revision": 3,
    "author": "token:3f9a1c0d5e7b2a46",
    "note": "refunds over 50 need a human",
    "created_at": AT,
    "summary": {"toolsets": [], "roles": [], "hooks": ["approve-big-refund"], "profiles": [],
                "tests": 0},
    "files": ["hooks.charter", "profiles.charter", "roles.charter", "toolsets.charter"],
}  # fmt: skip
POLICY_FILES = [{"path": "roles.charter", "text": "role mail-support {\n  allow mail.send\n}\n"}]
POLICY_DIGEST = "d3c9c33a962d022cb291a4508376da3456bb23761cd21081c324ac78d63e7b0a"
POLICY_SIGNATURE = (
    "5acXoh9eleWYAhvWbrjomLzTMt7uoVtUjEKYlcEU+r70buN1hsPOrjAaP1G/lD0rX2eEKkPxGQn4uKxJiQCUBQ=="
)
ID: dict[str, Any] = {"id": "triage-bot"}
# The policy playground's draft (`/v1/drafts/*`): one file, a role no profile selects.
DRAFT_FILES = [
    {
        "path": "draft.charter",
        "text": "toolset mail {\n  tool send(to: str, subject: str, body: str)\n}\n"
        'role mail-support {\n  allow mail.send where args.to endswith "@example.com"\n}\n'
        "role mail-any {\n  allow mail.send\n}\n"
        "profile support {\n  roles mail-support\n  hooks none\n}\n"
        'test "mail" {\n  profile support\n'
        '  expect allow mail.send { to: "bob@example.com", subject: "hi", body: "x" }\n}\n',
    }
]
UNUSED_ROLE: dict[str, Any] = {
    "code": "W0303", "severity": "warning", "message": "role `mail-any` is selected by no profile",
    "file": "draft.charter", "line": 7, "column": 6, "end_line": 7, "end_column": 14,
    "help": "list it in a profile's `roles` line, or remove it",
}  # fmt: skip
DRAFT_REASON: dict[str, Any] = {
    "kind": "allow",
    "message": "allowed by role `mail-support`",
    "role": "mail-support",
    "location": "draft.charter:5:3",
}
DRAFT_TRACE = "\n".join([
    "decide `mail.send` for profile `support`",
    '  1. shape: ok, arguments {"to":"eve@elsewhere.net","subject":"hi","body":"x"}',
    "  2. denies win:",
    "     (no deny rule matches `mail.send`)",
    "  3. allows add up:",
    '     - role `mail-support` draft.charter:5:3: allow where args.to endswith "@example.com"'
    " -> false",
    "  4. hooks:",
    "     (no hook of this profile matches)",
    "result: DENY",
    "  because no rule grants `mail.send`",
    "  near miss: allowed by role `mail-support` at draft.charter:5:3 (its condition did not hold)",
])  # fmt: skip


LOGGED_TRACE = DRAFT_TRACE.replace("draft.charter", "policy.charter")


def _page(item: dict[str, Any]) -> dict[str, Any]:
    return {"items": [item], "next_cursor": None}


def _crud(
    one: str, plural: str, item: dict[str, Any], key: dict[str, str],
    create: dict[str, Any] | None = None, update: dict[str, Any] | None = None,
) -> dict[str, Example]:  # fmt: skip
    found = {
        f"list{plural}": Example(answer=_page(item), query="limit=50"),
        f"get{one}": Example(answer=item, path=key),
    }
    if create is not None:
        found[f"create{one}"] = Example(body=create, answer=item)
    if update is not None:
        found[f"update{one}"] = Example(body=update, answer={**item, **update}, path=key)
        found[f"delete{one}"] = Example(path=key)
    return found


EXAMPLES: dict[str, Example] = {
    "decide": Example(body=CALL, answer=DECISION),
    "decideBatch": Example(
        body={"calls": [CALL, {**CALL, "args": {**ARGS, "to": "eve@elsewhere.net"}}]},
        answer={
            "decisions": [
                DECISION,
                {
                    **DECISION,
                    "id": "5f0c2a9e7b1d4c3a8e6f9b22",
                    "seq": 43,
                    "effect": "deny",
                    "args": None,
                    "reasons": [{"kind": "not-granted", "message": "no rule grants `mail.send`"}],
                    "near_misses": [REASON],
                },
            ]
        },
    ),
    "readDecisionLog": Example(
        query="after_seq=41&limit=1",
        answer={
            "decisions": [
                {
                    **{k: v for k, v in DECISION.items() if k != "approval_id"},
                    "at": AT,
                    "agent": "demo-support",
                    "profile": "support",
                    "tool": "mail.send",
                    "final_args": DECISION["args"],
                    "thread": None,
                    "turn": None,
                    "expected_cost": None,
                    "approval": None,
                }
            ],
            "next_after_seq": 42,
        },
    ),
    "listAgentTools": Example(
        path={"id": "demo-support"},
        answer={
            "agent": "demo-support",
            "profile": "support",
            "revision": 3,
            "tools": [
                {
                    "tool": "mail.send",
                    "status": "narrow",
                    "condition": 'args.to endswith "@example.com" and len(args.body) <= 10000',
                    "exact": True,
                    "hooks": [],
                },
                {
                    "tool": "mail.search",
                    "status": "narrow",
                    "condition": "args.limit <= 50",
                    "exact": True,
                    "hooks": [
                        {
                            "name": "clamp-mail-search",
                            "kind": "rewrite",
                            "condition": "args.limit > 20",
                            "location": "hooks.charter:4:1",
                        }
                    ],
                },
            ],
        },
    ),
    "checkFit": Example(
        body={"agent": "demo-support", "kind": "role", "source": "role r {\n  allow mail.send\n}"},
        answer={
            "revision": 3,
            "fits": False,
            "violations": [
                {
                    "tool": "mail.send",
                    "kind": "widens",
                    "message": "role `r` allows `mail.send` calls that the agent may not make",
                    "grant": "allow mail.send",
                    "location": "<source>:2:3",
                    "counterexample": {"to": "eve@elsewhere.net", "subject": "", "body": ""},
                }
            ],
        },
    ),
    "explainLoggedDecision": Example(
        path={"seq": "1042"},
        answer={
            "seq": 1042,
            "revision": 7,
            "logged_effect": "deny",
            "trace": LOGGED_TRACE,
            "effect": "deny",
            "same_effect": True,
            "note": None,
            "inputs": "log",
            "unavailable": None,
        },
    ),
    "reportCost": Example(
        body={"seq": 1042, "amount": "0.12"},
        path={"id": DECISION_ID},
        answer={
            "decision": DECISION_ID,
            "seq": 1042,
            "agent": "demo-support",
            "amount": "0.12",
            "micros": 120000,
            "charged": ["agent:demo-support", "thread:0193d9a6-3333-7000-8000-000000000003"],
            "at": AT,
            "by": "0193d9a6-5555-7000-8000-000000000005",
        },
    ),
    "admitTurn": Example(
        body={"agent": "demo-support"},
        answer={
            "id": "0193d9a6-4444-7000-8000-000000000004",
            "agent": "demo-support",
            "thread": None,
            "revision": 3,
            "profile": "support",
            "created_at": AT,
            "ends_at": AT + 3_600_000,
        },
    ),
    "readKeys": Example(answer=KEY_SET),
    "rotateKeys": Example(answer=ROTATED),
    "verifyLog": Example(
        answer={
            "sound": False,
            "head": 1042,
            "covered_through": 960,
            "checkpoints": 16,
            "last_checkpoint": {
                "seq": 960,
                "digest": "5be0f0c1d2a4e6b89a7c3e1f20d4b6a8",
                "at": AT,
                "kid": KEY_ID,
            },
            "first_bad": LOG_FINDING,
            "found": 1,
            "findings": [LOG_FINDING],
        }
    ),
    "checkHealth": Example(answer={"status": "ok"}),
    "checkReadiness": Example(answer={"status": "ready", "revision": 3}),
    "readMetrics": Example(
        text='# TYPE charter_decisions_total counter\ncharter_decisions_total{effect="allow"} 42'
    ),
    "getOpenApi": Example(
        answer={"openapi": "3.1.0", "info": {"title": "Charter decision service"}, "paths": {}}
    ),
    "uploadPolicy": Example(
        body={"files": POLICY_FILES, "note": "refunds over 50 need a human"},
        answer={"revision": 4, "warnings": [], "removed_in_use": []},
    ),
    "uploadBundle": Example(
        body={
            # (signed by `release-2026 ed25519 MInN7BsB6haNWSUqPvs4q/wWJe3QBe3DGQnuwuoUKd4=`)
            "manifest": {
                "format": "charter-bundle/1",
                "revision": "v4",
                "files": [{"path": "roles.charter", "sha256": POLICY_DIGEST}],
            },
            "signatures": [{"key_id": "release-2026", "signature": POLICY_SIGNATURE}],
            "files": POLICY_FILES,
        },
        answer={"revision": 4, "warnings": [], "removed_in_use": []},
    ),
    "getPolicy": Example(query="revision=4", answer={"revision": 4, "files": POLICY_FILES}),
    "listRevisions": Example(query="limit=50", answer=_page(REVISION)),
    "getRevisionDiff": Example(
        path={"n": "5"},
        query="against=4",
        answer={
            "revision": 5,
            "against": 4,
            "widened": True,
            "narrowed": True,
            "changes": [
                {
                    "profile": "support",
                    "tool": "mail.send",
                    "direction": "wider",
                    "message": "`mail.send`: role `mail-support` now allows calls it did not",
                    "role": "mail-support",
                    "location": "policy.charter:5:3",
                    "counterexample": {
                        "tool": "mail.send",
                        "args": {"to": " ", "subject": "x", "body": "x"},
                        "context": None,
                        "agent": None,
                        "thread": None,
                    },
                    "kind": "allow",
                    "widens": True,
                    "hook": None,
                    "budget": None,
                },
                {
                    "profile": "support",
                    "tool": None,
                    "direction": "narrower",
                    "message": "the budget is tighter: `10 usd per 24h` becomes `5 usd per 24h`",
                    "role": None,
                    "location": "policy.charter:9:3",
                    "counterexample": None,
                    "kind": "budget",
                    "widens": False,
                    "hook": None,
                    "budget": {
                        "old": {"amount": 10, "period": "24h"},
                        "new": {"amount": 5, "period": "24h"},
                    },
                },
            ],
        },
    ),
    "checkDraft": Example(
        body={"files": DRAFT_FILES},
        answer={"checks": True, "diagnostics": [UNUSED_ROLE]},
    ),
    "decideDraft": Example(
        body={
            "files": DRAFT_FILES,
            "profile": "support",
            "tool": "mail.send",
            "args": {"to": "eve@elsewhere.net", "subject": "hi", "body": "x"},
        },
        answer={
            "decision": {
                "effect": "deny",
                "args": None,
                "reasons": [{"kind": "not-granted", "message": "no rule grants `mail.send`"}],
                "errors": [],
                "near_misses": [DRAFT_REASON],
            },
            "trace": DRAFT_TRACE,
        },
    ),
    "runDraftTests": Example(
        body={"files": DRAFT_FILES, "coverage": True},
        answer={
            "passed": 1,
            "failed": 0,
            "results": [
                {
                    "test": "mail",
                    "location": "draft.charter:16:3",
                    "expected": "allow",
                    "tool": "mail.send",
                    "actual": "allow",
                    "passed": True,
                    "failure": None,
                    "decision": {
                        "effect": "allow",
                        "args": {"to": "bob@example.com", "subject": "hi", "body": "x"},
                        "reasons": [DRAFT_REASON],
                        "errors": [],
                        "near_misses": [],
                    },
                }
            ],
            "coverage": {
                "rules": {"reached": 1, "total": 2},
                "hooks": {"reached": 0, "total": 0},
                "unreached": [
                    {
                        "kind": "rule",
                        "name": "mail-any",
                        "location": "draft.charter:8:3",
                        "text": "allow mail.send",
                    }
                ],
            },
            "warnings": [],
        },
    ),
    "checkDraftFit": Example(
        body={"files": DRAFT_FILES, "caller_profile": "support", "role": "mail-any"},
        answer={
            "fits": False,
            "violations": [
                {
                    "tool": "mail.send",
                    "kind": "widens",
                    "message": "role `mail-any` allows `mail.send` calls that `support` may not "
                    "make",
                    "grant": "mail-any",
                    "location": "draft.charter:8:3",
                    "counterexample": {
                        "tool": "mail.send",
                        "args": {"to": " ", "subject": "x", "body": "x"},
                        "context": None,
                        "agent": None,
                        "thread": None,
                    },
                }
            ],
        },
    ),
    **_crud(
        "Identity",
        "Identities",
        IDENTITY_VIEW,
        {"id": IDENTITY},
        {"label": "support", "request_id": "setup-1"},
        {"label": "support desk"},
    ),
    "importIdentity": Example(
        body={
            "seed": "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "label": "support",
        },
        answer=IDENTITY_VIEW,
    ),
    **_crud(
        "Agent",
        "Agents",
        AGENT,
        ID,
        {
            "name": "Triage bot",
            "profile": "support",
            "identity": IDENTITY,
            "budget": BUDGET,
            "metadata": {"tier": "gold"},
        },
        {"status": "running"},
    ),
    "defineAgent": Example(
        body={"profile": "support", "definition": SEED_DEFINITION},
        answer=DEFINITION_VIEW,
        path=ID,
    ),
    "getAgentDefinition": Example(answer=DEFINITION_VIEW, path=ID),
    **_crud(
        "Thread",
        "Threads",
        THREAD,
        {"id": THREAD["id"]},
        {"agent": "triage-bot", "prompt": "sort today's tickets", "max_cost": "5"},
        {"status": "done"},
    ),
    **_crud(
        "Connection",
        "Connections",
        CONNECTION,
        {"id": CONNECTION["id"]},
        {"name": "gmail-support", "toolset": "gmail", "credential": "…"},
        {"name": "gmail-support-2"},
    ),
    **_crud(
        "Role",
        "Roles",
        ROLE,
        {"name": "mail-triage"},
        {"name": "mail-triage", "source": ROLE_SOURCE},
        None,
    ),
    "updateRole": Example(
        body={"source": ROLE_SOURCE.replace("send", "search")},
        answer={**ROLE, "source": ROLE["source"].replace("send", "search"), "revision": 5},
        path={"name": "mail-triage"},
    ),
    "deleteRole": Example(path={"name": "mail-triage"}),
    **_crud("Profile", "Profiles", PROFILE, {"name": "support"}),
    "createProfile": Example(
        body={
            "name": "triage",
            "roles": ["mail-triage"],
            "budget": {"amount": "5", "period": "24h"},
        },
        answer=API_PROFILE,
    ),
    "updateProfile": Example(
        body={"hooks": ["default", "approve-big-refund"]},
        answer={
            **API_PROFILE,
            "source": API_PROFILE["source"].replace(
                "\n  budget", "\n  hooks default, approve-big-refund\n  budget"
            ),
            "hooks": ["default", "approve-big-refund"],
            "revision": 6,
        },
        path={"name": "triage"},
    ),
    "deleteProfile": Example(path={"name": "triage"}),
    **_crud("Hook", "Hooks", HOOK, {"name": "approve-big-refund"}),
    "createHook": Example(body={"name": "hold-refunds", "source": HOOK_SOURCE}, answer=API_HOOK),
    "updateHook": Example(
        body={"source": HOOK_SOURCE.replace("100", "50")},
        answer={**API_HOOK, "source": API_HOOK["source"].replace("100", "50"), "revision": 6},
        path={"name": "hold-refunds"},
    ),
    "deleteHook": Example(path={"name": "hold-refunds"}),
    **_crud("Toolset", "Toolsets", TOOLSET, {"name": "mail"}),
    "createToolset": Example(
        body={"name": "tickets", "source": TOOLSET_SOURCE, "url": "https://tools.example.com/t"},
        answer=API_TOOLSET,
    ),
    "updateToolset": Example(
        body={"url": "https://tools.example.com/tickets"},
        answer={
            **API_TOOLSET,
            "source": API_TOOLSET["source"].replace('/t"', '/tickets"'),
            "url": "https://tools.example.com/tickets",
            "revision": 6,
        },
        path={"name": "tickets"},
    ),
    "deleteToolset": Example(path={"name": "tickets"}),
    "listApprovals": Example(query="status=pending", answer=_page(APPROVAL)),
    "readApprovalEvents": Example(
        text=(
            'retry: 2000\n\nevent: ready\nid: 118\ndata: {"after":118}\n\n'
            f"event: approval.opened\nid: 119\ndata: {_compact(APPROVAL)}\n\n"
            f"event: approval.decided\nid: 121\ndata: {_compact(DECIDED)}\n\n"
            ": keep-alive\nid: 121\n\n"
        )
    ),
    "getApproval": Example(answer=DECIDED, path={"id": APPROVAL["id"]}, query="wait=30"),
    "approve": Example(
        answer={"approval": DECIDED, "decision": DECIDED["final"]}, path={"id": APPROVAL["id"]}
    ),
    "reject": Example(
        body={"reason": "not for this customer"},
        answer={
            "approval": {
                **APPROVAL,
                "status": "rejected",
                "decided_at": AT + 60_000,
                "decided_by": "token:3f9a1c0d5e7b2a46",
                "reason": "not for this customer",
            }
        },
        path={"id": APPROVAL["id"]},
    ),
    "issueToken": Example(
        body={"scope": "agent", "agent": "triage-bot", "name": "triage", "expires_in": 86400},
        answer={**TOKEN, "last_used_at": None, "token": "chr_…"},
    ),
    "getAgentSpending": Example(
        answer={
            "agent": "triage-bot",
            "windows": {
                "24h": {"spent": "1.25", "cap": "10", "remaining": "8.75"},
                "7d": {"spent": "4.5", "cap": None, "remaining": None},
                "total": {"spent": "12.75", "cap": None, "remaining": None},
            },
        },
        path={"id": "triage-bot"},
    ),
    "waitThread": Example(
        body={"timeout": 30},
        answer={**THREAD, "status": "done"},
        path={"id": THREAD["id"]},
    ),
    "listThreadEvents": Example(
        query="limit=50",
        answer={
            "items": [
                {
                    "id": "9b1f3c2e-5a4d-4e8f-8c7b-1d2e3f4a5b6c",
                    "thread": THREAD["id"],
                    "event": "created",
                    "at": AT,
                    "agent": "triage-bot",
                    "by": "token:admin-1",
                    "max_cost": "5",
                },
                {
                    "id": "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f",
                    "thread": THREAD["id"],
                    "event": "turn",
                    "at": AT + 1_000,
                    "turn": "0193d9a6-4444-7000-8000-000000000004",
                    "revision": 3,
                    "profile": "support",
                    "ends_at": AT + 3_601_000,
                },
                {
                    "id": "6f7a8b9c-0d1e-4f2a-8b3c-4d5e6f7a8b9c",
                    "thread": THREAD["id"],
                    "event": "call",
                    "at": AT + 2_000,
                    "tool": "mail.send",
                    "turn": "0193d9a6-4444-7000-8000-000000000004",
                    "seq": 41,
                    "decision": "5f0c9a1b2d3e4f5a6b7c8d9e",
                    "effect": "allow",
                    "charged": "0.02",
                },
                {
                    "id": "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d",
                    "thread": THREAD["id"],
                    "event": "status",
                    "at": AT + 3_000,
                    "status": "done",
                    "was": "open",
                    "by": "triage-bot",
                },
            ],
            "next_cursor": None,
            "tail_cursor": "eyJrIjoidGhyZWFkLWV2ZW50cyIsImEiOjQsImYiOiI5NzMwOWZkYWJhMTIifQ",
        },
        path={"id": THREAD["id"]},
    ),
    "getThreadSpending": Example(
        answer={
            "thread": THREAD["id"],
            "agent": "triage-bot",
            "windows": {
                "24h": {"spent": "0.6", "cap": None, "remaining": None},
                "7d": {"spent": "0.6", "cap": None, "remaining": None},
                "total": {"spent": "0.6", "cap": "5", "remaining": "4.4"},
            },
        },
        path={"id": THREAD["id"]},
    ),
    "listSchedules": Example(query="agent=triage-bot&limit=50", answer=_page(SCHEDULE)),
    "getSchedule": Example(answer=SCHEDULE, path={"id": SCHEDULE["id"]}),
    "createSchedule": Example(
        body={key: SCHEDULE[key] for key in ("name", "cron", "prompt", "agent")},
        answer=SCHEDULE,
    ),
    "updateSchedule": Example(
        body={"cron": "30 8 * * 1-5"},
        answer={**SCHEDULE, "cron": "30 8 * * 1-5", "next_run": AT + 30_600_000},
        path={"id": SCHEDULE["id"]},
    ),
    "deleteSchedule": Example(path={"id": SCHEDULE["id"]}),
    "runSchedule": Example(
        answer={
            "schedule": {**SCHEDULE, "last_run": AT + 60_000, "last_thread": THREAD["id"]},
            "thread": {**THREAD, "prompt": SCHEDULE["prompt"], "max_cost": None},
        },
        path={"id": SCHEDULE["id"]},
    ),
    "listMemory": Example(
        query="agent=triage-bot&path=/notes&limit=50",
        answer=_page({"path": "/notes/today", "chars": 22, "updated_at": AT}),
    ),
    "readMemory": Example(query="agent=triage-bot&path=/notes/today", answer=MEMORY),
    "writeMemory": Example(
        body={"agent": "triage-bot", "path": "/notes/today", "content": MEMORY["content"]},
        answer=MEMORY,
    ),
    "deleteMemory": Example(query="agent=triage-bot&path=/notes/today"),
    **_crud(
        "Feed",
        "Feeds",
        FEED,
        {"id": FEED["id"]},
        {"name": "releases"},
        {"name": "release notes"},
    ),
    "publishMessage": Example(
        body={"message": MESSAGE["message"]}, answer=MESSAGE, path={"feed": FEED["id"]}
    ),
    "readMessages": Example(
        query="after_seq=1&limit=50",
        answer={
            "items": [{"seq": 2, "message": "v2.0.1 is out", "published_at": AT}, MESSAGE],
            "next_after_seq": 3,
        },
        path={"feed": FEED["id"]},
    ),
    "listTokens": Example(
        query="limit=50",
        answer=_page({**TOKEN, "last_used_at": AT + 3_600_000}),
    ),
    "revokeToken": Example(path={"id": "8c1e4f2a9b3d7e60"}),
    "decideAccess": Example(
        body={
            "subject": {"type": "agent", "id": "refund-bot"},
            "action": {"name": "refund"},
            "resource": {"type": "billing", "id": "A-1001"},
            "context": {"args": REFUND},
        },
        answer={"decision": False, "context": PAUSED},
    ),
    "decideAccesses": Example(
        body={
            "subject": {"type": "agent", "id": "demo-support"},
            "resource": {"type": "mail"},
            "options": {"evaluations_semantic": "deny_on_first_deny"},
            "evaluations": [{"action": {"name": "send"}, "context": {"args": ARGS}}],
        },
        answer={"evaluations": [{"decision": True, "context": DECISION}]},
    ),
    "listAccessActions": Example(
        body={"subject": {"type": "agent", "id": "demo-support"}, "resource": {"type": "mail"}},
        answer={
            "results": [
                {"name": "search", "properties": {"status": "allow", "hooks": []}},
                {
                    "name": "send",
                    "properties": {
                        "status": "narrow",
                        "condition": 'args.to endswith "@example.com"',
                        "exact": True,
                        "hooks": [],
                    },
                },
            ]
        },
    ),
    "getAuthzenConfiguration": Example(
        answer={
            "policy_decision_point": "https://charter.example.com",
            "access_evaluation_endpoint": "https://charter.example.com/access/v1/evaluation",
            "access_evaluations_endpoint": "https://charter.example.com/access/v1/evaluations",
            "search_action_endpoint": "https://charter.example.com/access/v1/search/action",
        }
    ),
}
