"""Every stable `code` a problem+json answer of the HTTP service can carry, with its
status and when it is given: the live table. The problem+json writer (api.http.errors)
reads a code's status here when it answers, and docs/http-reference.md's "Error codes"
is generated from it (api.http.docgen), so the answer and the reference are one thing.

A code is one of the service's (`ErrorCode`, what a ServiceError carries) or one the
HTTP layer gives on its own (`HttpCode`); tests/api/test_error_codes.py checks that this
table has each of both, and nothing else.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from api.service.errors import ErrorCode

# The codes the HTTP layer answers with on its own: the connection's, the router's, and
# those of the exceptions its handlers turn into problems (api.http.errors).
HttpCode = Literal[
    "headers-too-large", "request-timeout", "route-not-found", "method-not-allowed",
    "internal-error", "store-unavailable", "secret-key-mismatch", "store-damaged",
    "store-too-new", "too-many-connections", "http-error", "csrf-refused",
]  # fmt: skip
AnyCode = ErrorCode | HttpCode


class Code(NamedTuple):
    # The status the code is answered with; None for `http-error` alone, which carries
    # the status starlette raised (an HTTP matter: none of Charter's routes raises one).
    status: int | None
    when: str


# Grouped as docs/http-reference.md's tables are (GROUPS, below).
CODES: dict[AnyCode, Code] = {
    # ---- the request: its headers, body and query ----------------------------------------
    "bad-content-length": Code(400, "the `Content-Length` header is not a number"),
    "headers-too-large": Code(
        431,
        "the request line and headers are over 64 KiB together (the connection is closed)",
    ),
    "request-timeout": Code(
        408,
        "the request's headers did not arrive within `charter serve --header-timeout` of its "
        "first byte, or its body within `--body-timeout` of its headers (the connection is "
        "closed)",
    ),
    "body-too-large": Code(
        413,
        "the body is over 1 MiB, whether or not `Content-Length` said so",
    ),
    "malformed-json": Code(
        400, "the body is not valid JSON (`NaN`, `Infinity` and `-Infinity` included)"
    ),
    "duplicate-key": Code(
        400,
        "an object in a JSON body (a call's `args`, a role's body, ...) has a key twice "
        '(`{"agent": "a", "agent": "b"}`)',
    ),
    "too-deep": Code(
        400,
        "the body (or a call's `args` or `context`) is nested more than 32 levels deep",
    ),
    "invalid-body": Code(
        422,
        "the body does not match the endpoint's schema; `errors` lists each mismatch (`loc`, "
        "`message`, `type`)",
    ),
    "number-out-of-range": Code(
        422,
        "a number in a JSON body (a decision's, an agent's `metadata`, ...) that a double "
        "cannot hold (it would round to 0 or to infinity), an integer from about 1.8e308 up "
        "(309 digits or more) among them",
    ),
    "batch-too-large": Code(413, "a `POST /v1/decisions/batch` of over 1,000 calls"),
    "repeated-parameter": Code(
        400,
        "a query parameter the endpoint reads is given more than once (`?limit=1&limit=1000`)",
    ),
    "repeated-header": Code(
        400,
        "a header that HTTP allows once is given more than once: `Authorization` (any endpoint "
        "that takes a token; checked before the token), or `Content-Type` (`PUT /v1/policy`)",
    ),
    "bad-cursor": Code(
        400, "a `cursor` this list did not return ([pagination](http.md#pagination))"
    ),
    "bad-limit": Code(400, "`limit` is not 1 to 18 ASCII digits, or is out of its range"),
    "bad-after-seq": Code(400, "`after_seq` (`GET /v1/decisions`) is not 1 to 18 ASCII digits"),
    "bad-log-filter": Code(
        400,
        "a filter of `GET /v1/decisions` cannot be read: `effect` not `allow`, `deny` or "
        "`pause`, `since`/`until` not 1 to 18 ASCII digits, `tool` over 256 characters",
    ),
    "bad-remove-in-use": Code(400, "`remove_in_use` (`PUT /v1/policy`) is not `true` or `false`"),
    "bad-receipt": Code(
        400,
        "`receipt` (`POST /v1/decisions`, `/v1/decisions/batch`) is not `true` or `false`; nothing was decided",
    ),
    "bad-memory-path": Code(
        400,
        "a memory `path` (`/v1/memory`) is not `/` then 1 to 32 non-empty segments joined by "
        "`/`, each at most 256 characters with no control character, 1,024 in all",
    ),
    "invalid-cron": Code(
        400,
        "a schedule's `cron` is not 5 fields (minute hour day-of-month month day-of-week) of "
        "`*`, numbers, ranges `a-b`, lists `a,b` and steps `/n` within each field's bounds",
    ),
    "bad-wait": Code(
        400, "`wait` (`GET /v1/approvals/{id}`) is not 0 to 60 seconds in ASCII digits"
    ),
    "authzen-bad-request": Code(
        400,
        "an AuthZEN request (`/access/v1/...`) that its specification's model refuses: a "
        "required member missing, a member of the wrong type, `context.args` not an object",
    ),
    "bad-last-event-id": Code(
        400, "`Last-Event-ID` (`GET /v1/approvals/events`) is not 1 to 18 ASCII digits"
    ),
    "bad-if-match": Code(
        400,
        '`If-Match` is not `*` or one strong entity tag in double quotes (a revision\'s, `"7"`, '
        "for `PUT /v1/policy`); a weak (`W/`) tag or a list of tags is refused too",
    ),
    "bad-revision": Code(
        400,
        "`revision` (`GET /v1/policy`) or the path's `{n}` (`GET /v1/revisions/{n}/diff`) is "
        "not 1 to 18 ASCII digits, or is 0 (revisions count from 1; without `revision`, the "
        "latest); or that diff's `against` is not 1 to 18 ASCII digits",
    ),
    "id-too-long": Code(
        400,
        "an id or name in the path (`/v1/agents/{id}`, `/v1/roles/{name}`, ...) or the `agent` "
        "query parameter of `GET /v1/threads` or `GET /v1/decisions` is over 256 characters, as no id or name in a "
        "body may be; `detail` shows its first 32 characters only",
    ),
    "empty-policy": Code(
        400,
        "a `PUT /v1/policy` DSL-text body is empty or only white space (a bare `curl -X PUT` "
        "would have replaced every file with nothing)",
    ),
    "not-utf8": Code(
        400,
        "a `PUT /v1/policy` DSL-text body (any non-JSON content type) is not UTF-8; `diagnostics`"
        " says where",
    ),
    "unsupported-charset": Code(
        415,
        "a `PUT /v1/policy` DSL-text body whose `Content-Type` names a charset other than "
        "UTF-8 (or US-ASCII)",
    ),
    "duplicate-path": Code(
        400,
        "a `PUT /v1/policy` JSON upload (or a draft) lists two files with one `path`",
    ),
    "bad-path": Code(
        400,
        "a `PUT /v1/policy` JSON upload (or a draft) names a file by a path that a directory cannot hold on "
        "every file system (a relative `<name>.charter` path, unique but for case, no Windows "
        "device name or character: [policy paths](http.md#policy-paths)); the message names "
        "the part or both paths",
    ),
    "fit-needs-candidate": Code(
        400,
        "a `POST /v1/fit` body with neither `source` nor `profile`",
    ),
    # ---- who may: the token, and the policy for an agent's token -------------------------
    "unauthorized": Code(
        401,
        "no `Authorization: Bearer <token>`, or a token that is not valid (never issued or "
        "revoked; the token is all that follows `Bearer `, but for spaces and tabs around it: "
        "a no-break space is part of it)",
    ),
    "token-expired": Code(
        401,
        "the token's `expires_at` (set when it was issued: `expires_in` or `expires_at`) has "
        "passed; issue a new one",
    ),
    "insufficient-scope": Code(
        403,
        "the token's scope does not reach the endpoint (an admin-only one, or a `decide` token on"
        " a resource), or an agent's token acts for another agent",
    ),
    "csrf-refused": Code(
        403,
        "a request made with the console's session cookie that changes something lacks the "
        "session's `X-Charter-CSRF` token or an `Origin` of the server's own, or a sign-in "
        "comes from another origin ([the console](console.md#sessions))",
    ),
    "denied-by-policy": Code(
        403,
        "an agent's management request was decided `deny`; `decision` is the logged decision",
    ),
    "invalid-rewrite": Code(
        403,
        "an agent's management request (or the approval of one) was allowed with arguments "
        "that a rewrite hook of its profile set to values the tool does not take (a `status` "
        "of no such state, a `max_cost` over 10^9); `errors` lists each mismatch (`loc`, "
        "`message`, `type`); nothing is logged or written",
    ),
    "does-not-fit": Code(
        403,
        "a role or profile an agent's token creates or sets would reach beyond the caller's "
        "access, or a role it changes or deletes would widen a profile that names it; `fit` "
        "has the violations",
    ),
    "definition-widens": Code(
        403,
        "an agent's token gives its own agent a Seed definition that grants a callable or "
        "publishing beyond what its definitions grant it",
    ),
    "budget-looser": Code(
        403,
        "an agent's token sets a budget looser than a cap above it; `violation` says which",
    ),
    "agent-attribute-differs": Code(
        403,
        "an agent's token gives an agent an `agent.*` attribute that a condition reads and that "
        "differs from its own; `attributes` names them",
    ),
    "identity-not-inherited": Code(
        403,
        "an agent's token creates a child with an identity other than its own",
    ),
    "not-managed-agent": Code(
        403,
        "an agent's token updates or deletes an agent, or reads, lists, changes or deletes the "
        "threads or schedules of an agent, that is neither itself nor one of its descendants",
    ),
    "not-own-agent": Code(
        403,
        "an agent's token opens a thread or makes a schedule for another agent, or names "
        "another agent's memory",
    ),
    "not-own-identity": Code(
        403,
        "an agent's token reads, changes or deletes an identity other than its own, creates a "
        "connection for another owner, or changes or deletes one its identity does not own",
    ),
    "self-approval": Code(
        403,
        "an agent's token approves or rejects an approval raised in its own tree or by its own "
        "identity, or one that decides such an approval (another agent's paused "
        "`approvals.approve` or `approvals.reject` of it)",
    ),
    # ---- a resource's fields -------------------------------------------------------------
    "invalid-name": Code(
        400,
        "an agent's `name` is missing or blank (\"Name is required\"), or a profile's name, "
        "one of its `roles` or one of its `hooks` is not a name",
    ),
    "identity-required": Code(400, "an admin's `POST /v1/agents` names no `identity`"),
    "invalid-seed": Code(
        400,
        "`POST /v1/identities/import`: the seed is not 32 bytes as 64 hex digits or base64",
    ),
    "unknown-profile": Code(400, "an agent's `profile` is not in the latest revision"),
    "unknown-identity": Code(
        400,
        "an agent's `identity` or a connection's `owner` is no signing identity (\"Signing key "
        'not found")',
    ),
    "invalid-budget": Code(
        400,
        "an agent's `budget` is not `{amount, period}` with a period of `1m`, `1h`, `24h`, `7d` or `total` "
        "and an amount from 0 to 1,000,000,000 USD",
    ),
    "invalid-max-cost": Code(
        400,
        "a thread's `max_cost` is not a number from 0 to 1,000,000,000 USD",
    ),
    "invalid-status": Code(
        400,
        "the `GET /v1/approvals?status=` filter is not an approval's status (`pending`, "
        "`approved`, `rejected`)",
    ),
    "agent-required": Code(
        400,
        "a `POST /v1/tokens` of scope `agent` without `agent`, or a `POST /v1/threads`, a "
        "`POST /v1/schedules` or a `/v1/memory` request (admin token) without `agent`",
    ),
    "agent-not-allowed": Code(
        400,
        "a `POST /v1/tokens` names an `agent` for a scope other than `agent`",
    ),
    "unknown-toolset": Code(400, "a connection's `toolset` is not in the latest revision"),
    "invalid-expiry": Code(
        400,
        "a `POST /v1/tokens` gives both `expires_in` and `expires_at`, or an expiry that is not "
        "after now and within ten years",
    ),
    "credential-required": Code(400, "a connection without a `credential` (missing or empty)"),
    "metadata-too-large": Code(
        422,
        "a `PATCH /v1/identities/{id}` or `/v1/agents/{id}` would leave the `metadata` "
        "(merged with what is there), or a `POST /v1/agents` would make it, over 16 KiB as "
        "CBOR or more than 32 levels deep",
    ),
    "role-source-mismatch": Code(
        400,
        "a role written through the API does not declare exactly one role, the one named",
    ),
    "invalid-definition": Code(
        400,
        "a Seed `AgentDefinition` that Seed refuses; the message is Seed's, verbatim (\"Name is "
        'required", "Too many tools", ...: [the Seed agent definition](http.md#the-seed-agent-definition))',
    ),
    "profile-required": Code(
        400, "a `PUT /v1/agents/{id}/definition` makes the agent and names no `profile`"
    ),
    "hook-source-mismatch": Code(
        400,
        "a hook written through the API does not declare exactly one hook, the one named",
    ),
    "toolset-source-mismatch": Code(
        400,
        "a toolset written through the API does not declare exactly one toolset, the one named",
    ),
    # ---- not there -----------------------------------------------------------------------
    "route-not-found": Code(404, "no endpoint has this path"),
    "method-not-allowed": Code(
        405, "the path has no endpoint for this method; `Allow` lists the methods it takes"
    ),
    "agent-not-found": Code(
        404,
        "no agent `{id}`: in the path, or the `agent` a decision, turn, thread, fit check or "
        "token names",
    ),
    "turn-not-found": Code(
        404, "a decision's `turn` does not exist (a deleted agent's turns are deleted with it)"
    ),
    "thread-not-found": Code(
        404,
        "no thread `{id}`: in the path, or a decision's or turn's `thread`",
    ),
    "approval-not-found": Code(404, "no approval `{id}`"),
    "decision-not-found": Code(
        404,
        "the decision log has no decision `{id}` at the body's `seq`, or none at the path's `{seq}`",
    ),
    "connection-not-found": Code(404, "no connection `{id}`"),
    "identity-not-found": Code(
        404, 'no signing identity `{id}` (`/v1/identities/{id}`, "Signing identity not found")'
    ),
    "token-not-found": Code(
        404,
        "`DELETE /v1/tokens/{id}` of a token that does not exist (or is already revoked)",
    ),
    "revision-not-found": Code(
        404,
        "`GET /v1/policy?revision=` or `GET /v1/revisions/{n}/diff` (its `{n}` or `against`) names"
        " a revision that does not exist",
    ),
    "role-not-found": Code(
        404,
        "no role `{name}` in the latest revision, or a `POST /v1/drafts/fit` `role` not in the "
        "draft",
    ),
    "profile-not-found": Code(
        404,
        "no profile `{name}` in the latest revision, or a `POST /v1/fit` `profile` that is not in"
        " it, or the agent's own profile is not in it (its listing, fit checks and what its "
        "token makes), or a `POST /v1/drafts/fit` `caller_profile` not in the draft",
    ),
    "hook-not-found": Code(404, "no hook `{name}` in the latest revision"),
    "definition-not-found": Code(404, "agent `{id}` has no Seed definition"),
    "schedule-not-found": Code(404, "no schedule `{id}`"),
    "memory-entry-not-found": Code(404, "the agent has no memory entry at the `path` named"),
    "feed-not-found": Code(404, "no feed `{id}`"),
    "toolset-not-found": Code(404, "no toolset `{name}` in the latest revision"),
    # ---- conflicts -----------------------------------------------------------------------
    "no-policy": Code(409, "no policy has been uploaded yet, and the request needs one"),
    "agent-exists": Code(
        409,
        "a `POST /v1/agents` with an `id` that is taken, or that a deleted agent's children "
        "still name as their parent, or its threads as their agent",
    ),
    "agent-too-deep": Code(
        409,
        "an agent's token creates an agent where its tree would be over 64 agents deep",
    ),
    "agent-has-children": Code(409, "an agent's token deletes an agent that has children"),
    "identity-exists": Code(409, "`POST /v1/identities/import` of a key already on the server"),
    "identity-has-connections": Code(
        409,
        "a `DELETE /v1/identities/{id}` of an identity that owns connections (`detail` says "
        "how many): delete them first; the agents that act as it do not stop it",
    ),
    "request-id-reused": Code(
        409,
        "a `POST /v1/identities` whose `request_id` an earlier create of the same caller used "
        "with another body (another `label`)",
    ),
    "role-exists": Code(409, "a `POST /v1/roles` for a role the latest revision declares"),
    "role-not-api-managed": Code(
        409,
        "a `PATCH` or `DELETE /v1/roles/{name}` of a role declared in an uploaded file (upload "
        "the policy to change it)",
    ),
    "profile-exists": Code(409, "a `POST /v1/profiles` for a profile the latest revision declares"),
    "hook-exists": Code(409, "a `POST /v1/hooks` for a hook the latest revision declares"),
    "toolset-exists": Code(409, "a `POST /v1/toolsets` for a toolset the latest revision declares"),
    "profile-not-api-managed": Code(
        409,
        "a `PATCH` or `DELETE /v1/profiles/{name}` of a profile declared in an uploaded file "
        "(upload the policy to change it)",
    ),
    "hook-not-api-managed": Code(
        409,
        "a `PATCH` or `DELETE /v1/hooks/{name}` of a hook declared in an uploaded file "
        "(upload the policy to change it)",
    ),
    "toolset-not-api-managed": Code(
        409,
        "a `PATCH` or `DELETE /v1/toolsets/{name}` of a toolset declared in an uploaded file "
        "(upload the policy to change it)",
    ),
    "approval-not-pending": Code(409, "the approval was already approved or rejected"),
    "decision-not-allowed": Code(
        409, "a cost reported for a decision that did not allow its call (it did not run)"
    ),
    "cost-already-reported": Code(409, "the decision's cost was reported and charged already"),
    "turn-ended": Code(
        409,
        "a decision's `turn` has ended (an hour after it was admitted, by default): admit a "
        "new one",
    ),
    "turn-agent-mismatch": Code(409, "a decision's `turn` belongs to another agent"),
    "turn-thread-mismatch": Code(
        409, "a decision names a `thread` other than the one its `turn` was admitted in"
    ),
    "thread-agent-mismatch": Code(
        409,
        "a decision's or turn's `thread` belongs to another agent",
    ),
    "resource-moved": Code(
        412,
        "a `PATCH` or `DELETE` whose `If-Match` is no longer the resource's `ETag`, or the "
        "approval of such a paused request whose resource changed meanwhile (it stays "
        "pending): nothing written ([lost updates](http.md#lost-updates))",
    ),
    # ---- the policy ----------------------------------------------------------------------
    "policy-invalid": Code(
        422,
        "the policy (`PUT /v1/policy`), a role (`/v1/roles`), a source (`POST /v1/fit`) or a "
        "draft (`/v1/drafts/*` but `check`) does not parse or check; `diagnostics` lists why",
    ),
    "revision-moved": Code(
        412,
        "a `PUT /v1/policy` whose `If-Match` names a revision that is no longer the latest "
        "(`latest` says which is): the upload would drop what came since",
    ),
    "policy-in-use": Code(
        409,
        "a `PUT /v1/policy` would remove a profile, toolset, tool or API-made role that agents, "
        "pending approvals, connections or profiles still use, or a `DELETE /v1/profiles/{name}`"
        " or a toolset's `PATCH` or `DELETE` would remove one; `in_use` names them (nothing "
        "changed: an upload with `?remove_in_use=true` removes them anyway)",
    ),
    "policy-too-large": Code(
        413,
        "a new revision (an upload, a role's `POST` or `PATCH`, an approved one) or a draft would hold "
        "more text than `charter serve --max-policy-mib` and more than the latest revision; "
        "`bytes` and `max_bytes` say how much",
    ),
    "revision-does-not-check": Code(
        409,
        "a stored revision that a decision, a pinned turn or a view needs does not check with "
        "this version of charter (a rule added since it was uploaded)",
    ),
    "signature-required": Code(
        403,
        "a server started with `charter serve --trusted-keys` takes the policy only as a signed "
        "bundle (`PUT /v1/policy/bundle`): a `PUT /v1/policy`, or a role's change through "
        "`/v1/roles` (an approved one too), is refused; nothing written",
    ),
    "bundle-unsigned": Code(
        422, "a bundle with no signature, on a server with `--trusted-keys`; nothing written"
    ),
    "bundle-malformed": Code(
        422,
        "a bundle whose manifest is not sorted by path, each once, or a signature that is not "
        "64 bytes of base64; nothing written",
    ),
    "bundle-unknown-key": Code(
        422,
        "a bundle signed by no key the trusted-keys file lists (its key ids are named); "
        "nothing written",
    ),
    "bundle-key-expired": Code(
        422,
        "a bundle signed only by listed keys whose `expires` has passed; nothing written",
    ),
    "bundle-bad-signature": Code(
        422,
        "a signature by a listed key that does not verify: the manifest was changed after "
        "signing, or the signature is over other files; nothing written",
    ),
    "bundle-file-unlisted": Code(
        422, "a bundle file that its manifest does not list: added after signing; nothing written"
    ),
    "bundle-file-missing": Code(
        422, "a file the bundle's manifest lists that the bundle does not hold; nothing written"
    ),
    "bundle-digest-mismatch": Code(
        422,
        "a bundle file whose SHA-256 is not its manifest's: changed after signing; nothing written",
    ),
    # ---- the server ----------------------------------------------------------------------
    "internal-error": Code(
        500,
        "an unexpected exception; the answer says nothing more, only the exception's type is "
        "logged",
    ),
    "store-unavailable": Code(
        503,
        "with `Retry-After: 1`: another writer held the database past the 30-second timeout, the "
        "disk is full, or an I/O error",
    ),
    "secret-key-mismatch": Code(
        503,
        "a stored secret (an approval's sealed call, an identity's seed) does not open with the "
        "server's key: a worker serves with another key than the one that sealed it",
    ),
    "store-damaged": Code(
        503,
        "a stored row the request reads (`damaged` names it: an agent, a revision, a token ...)"
        " fails its checksum or does not decode; nothing was changed (docs/operations.md)",
    ),
    "store-too-new": Code(
        503,
        "a newer charter migrated the database (its schema version) while this server served it;"
        " nothing was changed",
    ),
    "fit-unavailable": Code(
        503,
        "the fit checker (`engine.fit`) cannot be imported, so nothing an agent's token makes can"
        " be shown to fit",
    ),
    "solver-busy": Code(
        503,
        "with `Retry-After: 2`: a fit check could not start: 4 of its token's are waiting "
        "already, or 16 in all, or none started within 6 s ([fit checks](operations.md#fit-checks))",
    ),
    "too-many-connections": Code(
        503,
        "with `Retry-After: 1`: a request on a connection over the worker's "
        "`charter serve --max-connections` (the connection is closed)",
    ),
    "unavailable": Code(
        503,
        "`GET /v1/agents/{id}/tools`, `POST /v1/fit` or `/v1/drafts/fit`: the module it needs (`engine.listing`, "
        "`engine.fit`) cannot be imported; or `GET /v1/revisions/{n}/diff` did not finish within 30 s",
    ),
    "http-error": Code(
        None,
        "an error starlette raises on its own, with its status (none of Charter's routes leads to"
        " one today: its router raises only the 404 and 405 above)",
    ),
}

# The catalogue's groups, by the code each starts with, and what each groups: the headings
# of docs/http-reference.md's "Error codes".
GROUPS: dict[str, str] = {
    "bad-content-length": "The request: its headers, path, body and query string",
    "unauthorized": "Who may: the token; for an agent's token, also its policy and the agents "
    "it acts on",
    "invalid-name": "A resource's fields: `POST` and `PATCH` bodies, and the `/v1/approvals` "
    "filter",
    "route-not-found": "Not there: the path, or what it or the body names",
    "no-policy": "Conflicts with what is stored",
    "policy-invalid": "The policy",
    "internal-error": "The server",
}

# The operations (by operation id) that give each code beyond those every operation of its
# shape gives (api.http.docgen, `by_shape`: a token's, a body's, a query's, a path's, an
# `If-Match`'s); a code of neither kind can come from any request (`ANYWHERE`).
# tests/api/test_http_reference.py checks each against the operation's statuses in
# `/openapi.json`, both ways.
_DECIDING = ("decide", "decideBatch")
_ACCESS = ("decideAccess", "decideAccesses")  # (AuthZEN's: no thread, turn or connection)
_AGENT_WRITES = ("createAgent", "updateAgent", "defineAgent", "approve")
_ROLE_WRITES = tuple(op for kind in ("Role", "Profile", "Hook", "Toolset")
                     for op in (f"create{kind}", f"update{kind}", f"delete{kind}"))  # fmt: skip
# (the writes that change what a profile grants: a hook made, or a role, profile or hook
# deleted, cannot: api.service.declwrites)
_FITTED = ("createRole", "updateRole", "createProfile", "updateProfile", "updateHook",
           "createToolset", "updateToolset", "deleteToolset")  # fmt: skip
_DRAFTS = ("checkDraft", "decideDraft", "runDraftTests", "checkDraftFit")
_VIEWS = tuple(op for kind in ("Role", "Profile", "Hook", "Toolset")
               for op in (f"get{kind}", f"list{kind}s"))  # fmt: skip
ANYWHERE = frozenset({
    "route-not-found", "method-not-allowed", "internal-error", "http-error",
    "headers-too-large", "request-timeout", "too-many-connections",  # (the connection's)
    "csrf-refused",  # (a request made with the console's session cookie)
})  # fmt: skip
WHERE: dict[str, tuple[str, ...]] = {
    "authzen-bad-request": ("decideAccess", "decideAccesses", "listAccessActions"),
    "bad-last-event-id": ("readApprovalEvents",),
    "batch-too-large": ("decideBatch",),
    "empty-policy": ("uploadPolicy",),
    "not-utf8": ("uploadPolicy",),
    "unsupported-charset": ("uploadPolicy",),
    "duplicate-path": ("uploadPolicy", "uploadBundle", *_DRAFTS),
    "bad-path": ("uploadPolicy", "uploadBundle", *_DRAFTS),
    "fit-needs-candidate": ("checkFit",),
    "does-not-fit": (*_AGENT_WRITES, *_ROLE_WRITES),
    "budget-looser": _AGENT_WRITES,
    "definition-widens": ("defineAgent", "approve"),
    "agent-attribute-differs": _AGENT_WRITES,
    "identity-not-inherited": ("createAgent", "defineAgent", "approve"),
    "not-managed-agent": (
        "updateAgent",
        "defineAgent",
        "deleteAgent",
        "listThreads",
        "getThread",
        "getThreadSpending",
        "updateThread",
        "deleteThread",
        "waitThread",
        "listThreadEvents",
        "listSchedules",
        "getSchedule",
        "updateSchedule",
        "deleteSchedule",
        "runSchedule",
        "approve",
    ),
    "not-own-agent": (
        "createThread",
        "createSchedule",
        "approve",
        "listMemory",
        "readMemory",
        "writeMemory",
        "deleteMemory",
    ),
    "not-own-identity": (
        "getIdentity",
        "updateIdentity",
        "deleteIdentity",
        "createConnection",
        "updateConnection",
        "deleteConnection",
        "approve",
    ),
    "self-approval": ("approve", "reject"),
    "invalid-name": ("createAgent", "updateAgent", "createProfile", "updateProfile"),
    "identity-required": ("createAgent", "defineAgent"),
    "invalid-seed": ("importIdentity",),
    "unknown-profile": _AGENT_WRITES,
    "unknown-identity": ("createAgent", "defineAgent", "createConnection"),
    "invalid-budget": ("createAgent", "updateAgent"),
    "invalid-max-cost": ("createThread",),
    "invalid-status": ("listApprovals",),
    "agent-required": (
        "issueToken",
        "createThread",
        "createSchedule",
        "listMemory",
        "readMemory",
        "writeMemory",
        "deleteMemory",
    ),
    "agent-not-allowed": ("issueToken",),
    "invalid-expiry": ("issueToken",),
    "unknown-toolset": ("createConnection",),
    "credential-required": ("createConnection",),
    "metadata-too-large": ("createAgent", "updateAgent", "updateIdentity"),
    "role-source-mismatch": ("createRole", "updateRole"),
    "invalid-definition": ("defineAgent", "approve"),
    "profile-required": ("defineAgent", "approve"),
    "hook-source-mismatch": ("createHook", "updateHook"),
    "toolset-source-mismatch": ("createToolset", "updateToolset"),
    "agent-not-found": (
        *_DECIDING,
        *_ACCESS,
        "listAgentTools",
        "listAccessActions",
        "checkFit",
        "admitTurn",
        "getAgent",
        "updateAgent",
        "defineAgent",
        "getAgentDefinition",
        "deleteAgent",
        "getAgentSpending",
        "createThread",
        "createSchedule",
        "issueToken",
        "listMemory",
        "readMemory",
        "writeMemory",
        "deleteMemory",
    ),
    "turn-not-found": _DECIDING,
    "thread-not-found": (
        *_DECIDING,
        "admitTurn",
        "getThread",
        "updateThread",
        "deleteThread",
        "getThreadSpending",
        "waitThread",
        "listThreadEvents",
    ),
    "approval-not-found": ("getApproval", "approve", "reject"),
    "decision-not-found": ("reportCost", "explainLoggedDecision"),
    "decision-not-allowed": ("reportCost",),
    "cost-already-reported": ("reportCost",),
    "connection-not-found": ("getConnection", "updateConnection", "deleteConnection"),
    "identity-not-found": ("getIdentity", "updateIdentity", "deleteIdentity", "createIdentity"),
    "token-not-found": ("revokeToken",),
    "revision-not-found": ("getPolicy", "getRevisionDiff"),
    "role-not-found": ("getRole", "updateRole", "deleteRole", "checkDraftFit"),
    "profile-not-found": (
        "getProfile",
        "checkDraftFit",
        "checkFit",
        "listAgentTools",
        "listAccessActions",
        *_AGENT_WRITES,
        *_ROLE_WRITES,
    ),
    "hook-not-found": ("getHook", "updateHook", "deleteHook"),
    "definition-not-found": ("getAgentDefinition",),
    "memory-entry-not-found": ("readMemory", "deleteMemory", "approve"),
    "schedule-not-found": (
        "getSchedule",
        "updateSchedule",
        "deleteSchedule",
        "runSchedule",
        "approve",
    ),
    "invalid-cron": ("createSchedule", "updateSchedule", "approve"),
    "feed-not-found": (
        "getFeed",
        "updateFeed",
        "deleteFeed",
        "publishMessage",
        "readMessages",
        "approve",
    ),
    "bad-memory-path": ("listMemory", "readMemory", "writeMemory", "deleteMemory"),
    "toolset-not-found": ("getToolset", "updateToolset", "deleteToolset"),
    "no-policy": (
        *_DECIDING,
        *_ACCESS,
        "listAgentTools",
        "listAccessActions",
        "checkFit",
        "admitTurn",
        *_VIEWS,
        *_ROLE_WRITES,
        *_AGENT_WRITES,
        "createConnection",
    ),
    "agent-exists": ("createAgent", "defineAgent"),
    "agent-too-deep": ("createAgent", "defineAgent"),
    "agent-has-children": ("deleteAgent",),
    "identity-exists": ("importIdentity",),
    "identity-has-connections": ("deleteIdentity",),
    "request-id-reused": ("createIdentity",),
    "role-exists": ("createRole",),
    "role-not-api-managed": ("updateRole", "deleteRole"),
    **{f"{one.lower()}-exists": (f"create{one}",) for one in ("Profile", "Hook", "Toolset")},
    **{
        f"{one.lower()}-not-api-managed": (f"update{one}", f"delete{one}")
        for one in ("Profile", "Hook", "Toolset")
    },
    "approval-not-pending": ("approve", "reject"),
    "turn-ended": _DECIDING,
    "turn-agent-mismatch": _DECIDING,
    "turn-thread-mismatch": _DECIDING,
    "thread-agent-mismatch": (*_DECIDING, "admitTurn"),
    "resource-moved": ("approve",),
    "policy-invalid": (
        "uploadPolicy",
        "uploadBundle",
        "checkFit",
        *_ROLE_WRITES,
        "approve",
        "decideDraft",
        "runDraftTests",
        "checkDraftFit",
    ),
    "revision-moved": ("uploadPolicy", "uploadBundle"),
    "policy-in-use": (
        "uploadPolicy",
        "uploadBundle",
        "deleteProfile",
        "updateToolset",
        "deleteToolset",
        "approve",
    ),
    "policy-too-large": (
        "uploadPolicy",
        "uploadBundle",
        *(op for op in _ROLE_WRITES if "delete" not in op),
        "approve",
        *_DRAFTS,
    ),
    "revision-does-not-check": (
        *_DECIDING,
        *_ACCESS,
        "listAgentTools",
        "listAccessActions",
        "checkFit",
        "admitTurn",
        *_VIEWS,
        *_AGENT_WRITES,
        "createConnection",
        "getRevisionDiff",
    ),
    "signature-required": ("uploadPolicy", *_ROLE_WRITES, "approve"),
    **{
        code: ("uploadBundle",)
        for code in (
            "bundle-unsigned",
            "bundle-malformed",
            "bundle-unknown-key",
            "bundle-key-expired",
            "bundle-bad-signature",
            "bundle-file-unlisted",
            "bundle-file-missing",
            "bundle-digest-mismatch",
        )
    },
    # (the one that opens a sealed call; and the server's signing key, for a receipt)
    "secret-key-mismatch": ("approve", *_DECIDING),
    "fit-unavailable": (*_AGENT_WRITES, *_ROLE_WRITES),
    "solver-busy": (
        "checkFit",
        "getRevisionDiff",
        "checkDraftFit",
        "createAgent",
        "updateAgent",
        "defineAgent",
        *_FITTED,
    ),
    "unavailable": (
        "listAgentTools",
        "listAccessActions",
        "checkFit",
        "checkDraftFit",
        "getRevisionDiff",
    ),
    "store-unavailable": ("readMetrics",),
    "store-damaged": ("readMetrics",),
    "store-too-new": ("readMetrics",),
}
