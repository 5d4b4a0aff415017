"""The world the API's fuzz (tests/api/test_api_fuzz.py) sends its requests into: a real
service on a real SQLite file with a few of everything to name (agents on profiles that
allow, deny and pause their management requests, a thread, connections, approvals, an
API role, a turn, a token to revoke; a policy cap one more long role reaches; a second
service on the same file, another worker of `--workers 2`), a fingerprint of what the
database holds, and what a refused request may have changed of it (nothing, but for the
decision a deny or a pause logs and the approval a pause opens).

The world is shared by the examples of a test, for speed (a fresh one costs ~100 ms). A
request that succeeds may delete or change what the others name: after each example
`heal` puts back what went missing, and builds a new world when the core of it changed
(an agent deleted or moved to another profile, its identity deleted, the policy replaced)
or after REBUILD_EVERY requests, which also bounds what the fingerprint reads.
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from starlette.testclient import TestClient

from api import commands as c
from api.http.app import create_app, open_service
from api.http.codes import CODES
from api.service import tokens
from api.service.resources import create_agent
from api.service.tokens import Principal
from policy import identities
from tests.api.conftest import POLICY, REVIEWED
from tests.api.fuzzschema import ROLE, Ref, encode

PROBLEM = "application/problem+json"
REBUILD_EVERY = 400  # requests
MORE_POLICY = 3000  # bytes of policy text the API's roles may add: one role with LONG_COMMENT
# A profile whose rules and hooks read the agent's attributes and the management calls'
# arguments, and rewrite them (so the operation runs on other arguments than were sent).
TIERED = """
role tiered {
  allow agents.*, threads.*, identities.*, connections.* where agent.metadata.tier != "blocked"
  allow roles.create, roles.update, roles.delete, approvals.* where agent.name != "root"
  deny agents.delete where args.id == "t1"
}
hook costly-threads on threads.create where args.max_cost > 100 or agent.metadata.limit < 5 {
  pause "a human approves costly threads"
}
hook page-large on agents.list, threads.list where args.limit > 100 {
  rewrite args.limit = 1000
}
hook quiet-prompts on threads.create where args.prompt contains "secret" {
  rewrite args.prompt = ""
}
hook big-threads on threads.create where args.prompt == "big" {
  rewrite args.max_cost = 2000000000
}
hook relabel on identities.update where has(args.label) {
  rewrite args.name = "reviewed"
}
profile tiered {
  roles tiered, mailer
  hooks costly-threads, page-large, quiet-prompts, big-threads, relabel
  budget 100 usd per 7d
}
"""
# The agents with tokens, and the profile each is on: what their management requests meet.
# a1: allowed (but `agents.delete`); n1: denied; c1: `roles.create` paused (default hooks);
# r1: `agents.update` paused; t1: decided on its attributes, some calls rewritten. v1 has
# no token: something to delete and change.
PROFILES = {"a1": "support", "n1": "narrow", "c1": "careful", "r1": "reviewed", "t1": "tiered",
            "v1": "narrow"}  # fmt: skip
METADATA = {"t1": {"tier": "gold", "limit": 10}}
# What a create made, by its collection, for later requests to name (World.ids).
CREATED = {"agents": "last-agent", "threads": "last-thread", "connections": "last-connection",
           "identities": "last-identity"}  # fmt: skip
SEED = "11" * 32  # identity2's, imported: importing it again is a 409
# What logging a decision writes: its row, and its reasons' document when no decision
# before it gave the same reasons (api.service.decisionlog; the documents' AUTOINCREMENT
# counter in sqlite_sequence with it).
LOGGED = {"decisions", "documents:reasons", "sqlite_sequence"}
REFUND = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 100, "reason": "r"}}


@dataclass
class Sent:
    """A request as sent, for the checks and for a failure's message."""

    principal: str
    method: str
    url: str
    headers: dict[str, Any]
    body: bytes | None
    chunked: bool = False  # the body sent in pieces, without a Content-Length
    other: bool = False  # sent to the other worker

    def __str__(self) -> str:
        shown = self.body if self.body is None or len(self.body) < 600 else self.body[:600]
        how = " (chunked)" * self.chunked + " (the other worker)" * self.other
        return f"{self.principal}: {self.method} {self.url} {self.headers} {shown!r}{how}"


class World:
    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="charter-fuzz-")
        self.built = 0
        self._open()

    # ---- making it -------------------------------------------------------------------------

    def _open(self) -> None:
        self.built += 1
        where = Path(self._dir.name) / f"w{self.built}"
        where.mkdir()
        self.db = where / "charter.db"
        # A policy cap a few roles reach (`--max-policy-mib` in bytes): past it, a role's
        # create or change is a 413, for an admin, an agent, an approval alike.
        cap = len((POLICY + REVIEWED + TIERED).encode()) + MORE_POLICY
        self.service = service = open_service(self.db)
        service.max_policy_bytes = cap
        with service.store.atomic():
            service.upload([("policy.charter", POLICY + REVIEWED + TIERED)], "fuzz")
        self.ids: dict[str, str] = {
            "identity": identities.create(service.store, service.sealer, "fuzz")[0]["id"],
            "policy-text": POLICY + REVIEWED + TIERED,
            "seed": SEED,
        }
        self.tokens = {"admin": tokens.issue(service.store, "admin")[0],
                       "decide": tokens.issue(service.store, "decide")[0]}  # fmt: skip
        for agent in PROFILES:
            self._agent(agent)
            if agent != "v1":
                self.tokens[agent] = tokens.issue(service.store, "agent", agent)[0]
        self.app = create_app(service)
        self.client = TestClient(self.app, raise_server_exceptions=False)
        self.client.__enter__()
        # Another process's service on the same file (`charter serve --workers 2`): some
        # requests go there, on caches that another worker's changes left behind.
        self.other = open_service(self.db)
        self.other.max_policy_bytes = cap
        self.other_client = TestClient(create_app(self.other), raise_server_exceptions=False)
        self.other_client.__enter__()
        self.reader = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, isolation_level=None)
        self.sent = 0
        self.tokens["minted"] = tokens.issue(service.store, "agent", "v1")[0]  # (till one is)
        self.minted_agent = True
        identity2 = self._admin("POST", "/v1/identities/import", {"seed": SEED})
        self.ids["identity2"] = identity2["id"]
        self.ids["cursor"] = self._admin("GET", "/v1/agents?limit=1")["next_cursor"]
        self.heal()
        turn = {"agent": "a1", "thread": self.ids["thread"]}
        self.ids["turn"] = self._admin("POST", "/v1/turns", turn)["id"]

    def _agent(self, agent: str) -> None:
        made = c.CreateAgent(
            name=agent, profile=PROFILES[agent], identity=self.ids["identity"],
            metadata=METADATA.get(agent, {}),
        )  # fmt: skip
        create_agent(self.service, Principal("fuzz", "admin"), made, agent)

    def _admin(self, method: str, path: str, body: Any = None, ok: int = 299) -> Any:
        auth = {"Authorization": f"Bearer {self.tokens['admin']}"}
        response = self.client.request(method, path, json=body, headers=auth)
        assert response.status_code <= ok, (method, path, response.text)
        return response.json() if response.content else None

    def _gone(self, path: str, pending: bool = False) -> bool:
        """Whether `path` is no longer there (`pending`: or no longer a pending approval)."""
        response = self.client.get(path, headers=self.auth("admin"))
        if response.status_code == 404:
            return True
        return pending and response.json()["status"] != "pending"

    def heal(self) -> None:
        """Put back what the last requests deleted or used up; a new world when its core
        changed (a missing one of these is then a 404, still a fine request to send)."""
        if self.sent > REBUILD_EVERY or not self._core_intact():
            self.close()
            self._open()
            return
        ids = self.ids
        if "thread" not in ids or self._gone(f"/v1/threads/{ids['thread']}"):
            ids["thread"] = self._admin("POST", "/v1/threads", {"agent": "a1"})["id"]
        for name, owner in (("connection", ids["identity"]), ("connection2", None)):
            if name not in ids or self._gone(f"/v1/connections/{ids[name]}"):
                body = {"name": name, "toolset": "vault", "credential": "s", "owner": owner}
                ids[name] = self._admin("POST", "/v1/connections", body)["id"]
        if "approval" not in ids or self._gone(f"/v1/approvals/{ids['approval']}", True):
            ids["approval"] = self._admin("POST", "/v1/decisions", REFUND)["approval_id"]
        if "approval-management" not in ids or self._gone(
            f"/v1/approvals/{ids['approval-management']}", True
        ):
            paused = self.client.patch("/v1/agents/r1", json={"name": "r1"},
                                       headers=self.auth("r1"))  # fmt: skip
            assert paused.status_code == 202, paused.text
            ids["approval-management"] = paused.json()["approval_id"]
        ids.setdefault("last-pause", ids["approval-management"])
        for last, first in (
            ("last-agent", "v1"),
            ("last-identity", "identity2"),
            ("last-thread", "thread"),
            ("last-connection", "connection2"),
        ):
            ids.setdefault(last, ids.get(first, first))  # (until a create makes one)
        if self._gone("/v1/roles/fz"):
            self._admin("POST", "/v1/roles", {"name": "fz", "source": ROLE.format(n="")})
        if "spare-token" not in ids or self.service.store.get("tokens", ids["spare-token"]) is None:
            ids["spare-token"] = tokens.issue(self.service.store, "decide")[1].id
        if self._gone("/v1/agents/v1"):
            self._agent("v1")

    def _core_intact(self) -> bool:
        """The agents with tokens on their profiles, their identity, the profiles."""
        auth = self.auth("admin")
        for agent, profile in PROFILES.items():
            found = self.client.get(f"/v1/agents/{agent}", headers=auth)
            if agent != "v1" and (found.status_code != 200 or found.json()["profile"] != profile):
                return False
        listed = self.client.get("/v1/profiles?limit=200", headers=auth)
        found = self.client.get(f"/v1/identities/{self.ids['identity']}", headers=auth)
        if listed.status_code != 200 or found.status_code != 200:
            return False
        return set(PROFILES.values()) <= {p["name"] for p in listed.json()["items"]}

    def close(self) -> None:
        self.client.__exit__(None, None, None)
        self.other_client.__exit__(None, None, None)
        self.other.store.close()
        self.reader.close()
        self.service.store.close()

    def destroy(self) -> None:
        self.close()
        self._dir.cleanup()

    # ---- sending ---------------------------------------------------------------------------

    def auth(self, principal: str) -> dict[str, str]:
        if principal == "nobody":
            return {}
        return {"Authorization": f"Bearer {self.tokens.get(principal, 'not-a-token')}"}

    def is_agent(self, principal: str) -> bool:
        """Whether `principal`'s token is an agent's (its management requests decided)."""
        return principal in PROFILES or (principal == "minted" and self.minted_agent)

    def remember(self, sent: Sent, response: httpx.Response) -> None:
        """What a request made, for later ones to name: a pause's approval, a create's
        id, an issued token (then a principal of its own)."""
        status, path = response.status_code, sent.url.split("?")[0]
        if status == 202:
            self.ids["last-pause"] = response.json()["approval_id"]
        elif status in (200, 201) and sent.method == "POST" and path.count("/") == 2:
            kind = path.split("/")[2]
            if kind == "tokens":
                self.tokens["minted"] = response.json()["token"]
                self.minted_agent = response.json()["scope"] == "agent"
            elif kind in CREATED:
                self.ids[CREATED[kind]] = response.json()["id"]

    def resolve(self, value: Any) -> Any:
        """A `Ref`'s id in this world (anything else as it is)."""
        if not isinstance(value, Ref):
            return value
        if value.name in PROFILES:
            return value.name
        if value.name == "revision":
            return f'"{self.service.store.latest_revision()}"'
        return self.ids[value.name]

    def etag(self, path: str) -> str:
        """The `ETag` of what `path` names now, as the admin reads it."""
        found = self.client.get(path, headers=self.auth("admin"))
        return str(found.headers.get("etag", '"' + "0" * 32 + '"'))

    def prepare(self, request: dict[str, Any]) -> Sent:
        """The request drawn (test_api_fuzz.requests) made concrete in this world."""
        path = request["path"]
        for name, value in request["params"].items():
            path = path.replace(f"{{{name}}}", quote(str(self.resolve(value)), safe=""))
        query = "&".join(f"{k}={quote(str(self.resolve(v)), safe='')}" for k, v in request["query"])
        headers: dict[str, Any] = self.auth(request["principal"])
        if request["if_match"] is not None:
            tag = request["if_match"]
            headers["If-Match"] = self.etag(path) if tag == Ref("etag") else self.resolve(tag)
        body = request["body"]
        if body is not None and not isinstance(body, bytes):
            body = encode(body, self.resolve, request["ascii"])
        if request["content_type"] is not None:
            headers["Content-Type"] = request["content_type"]
        url = path + (f"?{query}" if query else "")
        chunked = request.get("chunked", False) and body is not None
        other = request.get("other", False)
        return Sent(request["principal"], request["method"], url, headers, body, chunked, other)

    def send(self, sent: Sent, client: Any = None) -> httpx.Response:
        self.sent += 1
        content: Any = sent.body
        if sent.chunked and sent.body is not None:  # (a few bytes a piece, then the rest)
            content = iter([sent.body[i : i + 7] for i in range(0, 21, 7)] + [sent.body[21:]])
        if client is None:
            client = self.other_client if sent.other else self.client
        response: httpx.Response = client.request(
            sent.method, sent.url, content=content, headers=sent.headers
        )
        return response

    # ---- what the database holds -----------------------------------------------------------

    def fingerprint(self) -> dict[str, tuple[Any, ...]]:
        """Each table's rows as a digest (the append-only log and ledger by their counts
        and last rows); the documents by kind. Read on a connection of its own, so it sees
        what was committed, whatever the service's connection holds."""
        out: dict[str, tuple[Any, ...]] = {}
        tables = [row[0] for row in self.reader.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        )]  # fmt: skip
        for table in tables:
            if table == "decisions":
                query = "SELECT count(*), max(seq), total(count) FROM decisions"
                out[table] = tuple(self.reader.execute(query).fetchone())
            elif table == "ledger":
                query = "SELECT count(*), max(rowid), total(micros) FROM ledger"
                out[table] = tuple(self.reader.execute(query).fetchone())
            elif table == "documents":
                for kind, count, digest in self._documents():
                    out[f"documents:{kind}"] = (count, digest)
            elif table == "changes":
                # (an approval's notes are written with its document, which the checks
                # follow: `documents:approvals`; the others are what caches drop)
                rows = self.reader.execute(
                    "SELECT * FROM changes WHERE kind NOT LIKE 'approval.%' ORDER BY 1"
                ).fetchall()
                out[table] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
            else:
                rows = self.reader.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
                out[table] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
        return out

    def _documents(self) -> list[tuple[str, int, str]]:
        found: dict[str, tuple[int, Any]] = {}
        query = "SELECT kind, id, tag, body FROM documents ORDER BY kind, pos"
        for kind, *row in self.reader.execute(query):
            count, digest = found.get(kind, (0, hashlib.sha256()))
            digest.update(repr(row).encode())
            found[kind] = (count + 1, digest)
        return [(kind, count, digest.hexdigest()) for kind, (count, digest) in found.items()]


def check(
    sent: Sent,
    response: httpx.Response,
    before: dict[str, Any],
    after: dict[str, Any],
    agent: bool,
) -> None:
    """What every answer keeps to: never a 5xx but a busy store's 503 with Retry-After;
    a refusal is problem+json with a catalogued code and status, and wrote nothing but
    what its code says it writes; a read writes nothing but an agent's logged decision."""
    status = response.status_code
    where = f"{status} {response.text[:800]}\n{sent}"
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    logged = after["decisions"][2] - before["decisions"][2]
    if sent.method == "HEAD":  # a GET's answer without its body: a read
        assert status < 500, where
        assert changed <= (LOGGED if agent else set()) and logged <= int(agent), (changed, where)
        return
    if sent.method == "GET" and sent.url.split("?")[0] == "/readyz" and status == 503:
        # Not ready, said in the documented NotReady body, not as a problem: a worker that
        # has yet to compile a revision uploaded a moment ago (through the other worker),
        # until its compile on a thread is done. A probe writes nothing.
        assert response.json()["status"] == "unavailable", where
        assert not changed and not logged, (changed, where)
        return
    if status >= 500:
        assert status == 503 and response.headers.get("retry-after"), where
        assert response.json()["code"] == "store-unavailable", where
    if 400 <= status < 500 or status == 503:
        assert response.headers["content-type"].startswith(PROBLEM), where
        problem = response.json()
        code = CODES.get(problem.get("code"))
        assert code is not None, where
        assert code.status == status, where
        assert problem["status"] == status, where
        if status == 403 and problem["code"] == "denied-by-policy" and agent:
            # The deny is logged (by design, docs/http.md "Errors"), and nothing else; and
            # never for the request's shape: the body passed its schema to be decided,
            # and each built-in tool takes what its endpoint passes (docs/http.md, "Agents'
            # own requests").
            # (An agent whose profile an upload took away is denied every call, as such.)
            assert "decisions" in changed <= LOGGED and logged == 1, (changed, where)
            assert problem["decision"]["effect"] == "deny", where
            shape = [r["message"] for r in problem["decision"]["reasons"] if r["kind"] == "shape"]
            assert all(m.startswith("unknown profile") for m in shape), where
        else:
            assert not changed, (changed, where)
    elif status == 202 and agent:
        # A pause: its decision is logged and its approval opened, nothing else.
        assert "documents:approvals" in changed <= {*LOGGED, "documents:approvals"}, where
        assert logged == 1, where
        opened = after["documents:approvals"][0] - before.get("documents:approvals", (0,))[0]
        assert opened == 1, where
    elif sent.method == "GET" or sent.url.startswith("/v1/fit"):
        # A read (a fit check is one): an agent's is decided and logged as its built-in
        # tool's call (`GET /v1/agents/{id}/tools` is not: it decides nothing).
        assert changed <= (LOGGED if agent else set()) and logged <= int(agent), (changed, where)
    elif sent.url.startswith("/v1/decisions"):
        # Every decision answered is logged (once), and only those.
        answered = response.json().get("decisions", [None])
        assert logged == len(answered), where
