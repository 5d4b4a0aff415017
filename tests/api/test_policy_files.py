"""`PUT /v1/policy` and the files it holds: the API's own role files under `api/roles/`,
what a refused upload leaves, the read views' sources and the revision query."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from api import commands as c
from api.service.core import Service
from api.service.declwrites import OPERATIONS
from api.service.errors import ServiceError
from api.service.snapshots import CACHE_SIZE
from api.service.tokens import Principal
from policy.diagnostics import CharterError
from tests.api.conftest import (
    POLICY,
    Harness,
    code_of,
    expect,
    opened_again,
    seen_elsewhere,
    slow_compiles,
)

MAIL = {"to": "bob@example.com", "subject": "hi", "body": "hello"}

# Profile `side`, declared in a file under `api/roles/` next to the role it names.
SIDE = "role helper {\n  allow mail.send\n}\nprofile side {\n  roles helper, refunder\n  hooks none\n}\n"
OTHER = "role other {\n  allow mail.send\n}\n"


def _put(client: Any, harness: Harness, files: dict[str, str]) -> Any:
    body = {"files": [{"path": path, "text": text} for path, text in files.items()]}
    return client.put("/v1/policy", json=body, headers=harness.auth())


def test_a_file_under_api_roles_holds_its_own_role_alone(client: Any, harness: Harness) -> None:
    """`roles.update` and `roles.delete` replace or drop the role's whole file: a file
    under `api/roles/` that held a profile lost it to an agent's `roles.delete helper`
    (an agent with no `profiles.*` grant; the agents on the profile were then denied
    everything), and one named for role `x` that declared `other` lost `other` to a
    `roles.create` of `x`. Such a policy is refused (E0118), each wrong declaration
    with its location, and with the other errors of the upload."""
    refused = _put(client, harness, {"main.charter": POLICY, "api/roles/helper.charter": SIDE,
                                     "api/roles/x.charter": OTHER})  # fmt: skip
    expect(refused, 422, "policy-invalid")
    found = [(d["code"], d["file"], d["line"], d["column"]) for d in refused.json()["diagnostics"]]
    assert found == [
        ("E0118", "api/roles/helper.charter", 4, 1),  # profile `side`
        ("E0118", "api/roles/x.charter", 1, 1),  # role `other`
        ("E0118", "api/roles/x.charter", 1, 1),  # no role `x`
    ]
    assert (
        "profile `side` in `api/roles/helper.charter`"
        in refused.json()["diagnostics"][0]["message"]
    )
    # with a syntax error elsewhere, both are reported at once
    broken = {"main.charter": POLICY + "role {", "api/roles/x.charter": OTHER}
    found_files = {d["file"] for d in _put(client, harness, broken).json()["diagnostics"]}
    assert found_files == {"main.charter", "api/roles/x.charter"}
    for path in ("api/roles/sub/x.charter", "api/roles/x.y.charter", "api/roles/X.charter"):
        response = _put(client, harness, {"main.charter": POLICY, path: "role x {\n}\n"})
        expect(response, 422, "policy-invalid")
        assert [d["code"] for d in response.json()["diagnostics"]] == ["E0118"], path
    assert harness.service.store.latest_revision() == 1
    # a role's own file, as the API writes it, is taken; elsewhere the same text is too
    fine = {"main.charter": POLICY, "api/roles/helper.charter": "role helper {\n}\n",
            "api/side.charter": SIDE.replace("helper", "aide")}  # fmt: skip
    assert _put(client, harness, fine).status_code == 201


def test_an_agent_role_change_touches_its_role_alone(live: Any, harness: Harness) -> None:
    """The agent's `roles.delete` and `roles.create` change what its role's file held,
    nothing else: profile `side` (in a file of its own) and its agents stay."""
    files = {"main.charter": POLICY, "side.charter": SIDE.replace("helper", "aide"),
             "api/roles/helper.charter": "role helper {\n  allow mail.send\n}\n"}  # fmt: skip
    assert _put(live, harness, files).status_code == 201
    harness.add_agent("b1", "side")
    agent = harness.auth(harness.agent_token)
    assert live.delete("/v1/roles/helper", headers=agent).status_code == 204
    call = {"agent": "b1", "tool": "billing.refund", "args": {"amount": 1}}
    assert live.post("/v1/decisions", json=call, headers=harness.auth()).json()["effect"] == "allow"
    made = live.post("/v1/roles", json={"name": "x", "source": "role x {\n}\n"}, headers=agent)
    assert made.status_code == 201, made.text
    kept = live.get("/v1/policy", headers=harness.auth()).json()["files"]
    assert [f["path"] for f in kept] == ["main.charter", "side.charter", "api/roles/x.charter"]
    assert code_of(live.get("/v1/profiles/side", headers=harness.auth()))[0] == 200


class _FailingCommit:
    """The store's cursor, but its next COMMIT fails as SQLite's does on a full disk (the
    transaction's rows were written; its commit was not)."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.failed = False

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and not self.failed:
            self.failed = True
            full = sqlite3.OperationalError("database or disk is full")
            full.sqlite_errorcode = sqlite3.SQLITE_FULL
            full.sqlite_errorname = "SQLITE_FULL"
            raise full
        return self.cursor.execute(sql, *args)


def test_an_upload_whose_commit_fails_is_not_served(client: Any, harness: Harness) -> None:
    """A 503 upload wrote nothing: this process goes on deciding on the revision before it,
    never on the new one compiled and cached before the COMMIT (decisions logged under a
    revision the store never kept, a `GET /v1/policy` 404, the next upload's number naming
    other files)."""
    store = harness.sqlite  # (its cursor or its timeout is set here)
    real = store._cursor
    store._cursor = _FailingCommit(real)  # type: ignore[assignment]
    try:
        meant = "/v1/policy?remove_in_use=true"  # (a1's profile goes: meant)
        empty = client.put(meant, content="# nothing\n", headers=harness.auth())
    finally:
        store._cursor = real
    expect(empty, 503, "store-unavailable")
    assert store.latest_revision() == 1
    call = {"agent": "a1", "tool": "mail.send", "args": MAIL}
    decided = client.post("/v1/decisions", json=call, headers=harness.auth()).json()
    assert (decided["effect"], decided["revision"]) == ("allow", 1)
    assert client.get("/v1/policy", headers=harness.auth()).json()["revision"] == 1
    # an agent's role change, committed with its decision, is served once committed
    made = client.post("/v1/roles", json={"name": "x", "source": "role x {\n}\n"},
                       headers=harness.auth(harness.agent_token))  # fmt: skip
    assert (made.status_code, made.json()["revision"]) == (201, 2)
    assert client.get("/v1/roles/x", headers=harness.auth()).json()["revision"] == 2


def test_a_read_view_shows_the_declaration_alone(client: Any, harness: Harness) -> None:
    """A view's `source` is its declaration's text from its first column to its last: a
    role on the line of another showed both, and a default approval hook showed none."""
    two = POLICY + "role x { allow mail.send }  role y {\r\n  allow billing.refund\r\n}  # y\n"
    assert client.put("/v1/policy", content=two, headers=harness.auth()).status_code == 201
    view = client.get("/v1/roles/y", headers=harness.auth()).json()
    assert (view["line"], view["source"]) == (50, "role y {\n  allow billing.refund\n}")
    assert client.get("/v1/roles/x", headers=harness.auth()).json()["source"] == (
        "role x { allow mail.send }"
    )
    hook = client.get("/v1/hooks/approve-mail-send", headers=harness.auth()).json()
    assert hook["file"] == "<default hooks>"
    assert (
        hook["source"]
        == 'hook approve-mail-send on gmail.send {\n  pause "a human approves sending mail"\n}'
    )


def test_the_revision_query(client: Any, harness: Harness) -> None:
    """Revisions count from 1: `?revision=0` answered the latest (under its number) as if
    it were a revision; past the end is a 404; each upload is a revision of its own,
    the same files again too (the history records each upload)."""
    auth = harness.auth()
    for _ in range(2):
        assert client.put("/v1/policy", content=POLICY, headers=auth).json()["revision"] > 1
    expect(client.get("/v1/policy?revision=0", headers=auth), 400, "bad-revision")
    expect(client.get("/v1/policy?revision=4", headers=auth), 404, "revision-not-found")
    texts = [client.get(f"/v1/policy?revision={n}", headers=auth).json() for n in (1, 2, 3)]
    assert [t["revision"] for t in texts] == [1, 2, 3]
    assert len({t["files"][0]["text"] for t in texts}) == 1
    assert client.get("/v1/policy?revision=", headers=auth).json()["revision"] == 3
    page = client.get("/v1/revisions?limit=2", headers=auth).json()
    rest = client.get(f"/v1/revisions?cursor={page['next_cursor']}", headers=auth).json()
    assert [r["revision"] for r in page["items"] + rest["items"]] == [1, 2, 3]
    assert rest["next_cursor"] is None


BAD_PATHS = [
    "../x.charter", "/etc/p.charter", "a\\b.charter", "a\x00b.charter", "a\nb.charter",
    "x.txt", "a/../policy.charter", "./policy.charter", "a//b.charter", "a/.charter",
    "<default hooks>", "dir/", ".charter",
]  # fmt: skip


def test_a_file_path_is_one_a_policy_directory_holds(client: Any, harness: Harness) -> None:
    """A revision's files can be written into a directory and read back as the same
    policy (`charter check`, `charter serve --workspace`): a path that leads out of it,
    that two names share there, that the CLI skips or that names a built-in source is
    a 400 `bad-path`, and nothing is written."""
    for path in BAD_PATHS:
        response = _put(client, harness, {"main.charter": POLICY, path: ""})
        expect(response, 400, "bad-path")
        assert "\x00" not in response.json()["detail"], path
    assert harness.service.store.latest_revision() == 1
    fine = {"main.charter": POLICY, "teams/a b/é.charter": "", "x.y.charter": ""}
    assert _put(client, harness, fine).status_code == 201


def test_a_turn_decides_on_its_revision_after_the_cache_let_it_go(
    client: Any, harness: Harness
) -> None:
    """More uploads than the snapshot cache keeps (`CACHE_SIZE`): a turn admitted before
    them still decides on its revision, compiled again from the store."""
    auth = harness.auth()
    turn = client.post("/v1/turns", json={"agent": "a1"}, headers=auth).json()
    no_mail = POLICY.replace('  allow mail.send where args.to endswith "@example.com"\n', "")
    for n in range(CACHE_SIZE + 2):
        assert (
            client.put("/v1/policy", content=f"{no_mail}# {n}\n", headers=auth).status_code == 201
        )
    assert turn["revision"] not in harness.service.snapshots._cache
    call = {"agent": "a1", "tool": "mail.send", "args": MAIL}
    assert client.post("/v1/decisions", json=call, headers=auth).json()["effect"] == "deny"
    pinned = client.post("/v1/decisions", json={**call, "turn": turn["id"]}, headers=auth).json()
    assert (pinned["effect"], pinned["revision"]) == ("allow", turn["revision"])


def test_serving_a_workspace_again_keeps_the_roles_made_through_the_api(
    harness: Harness, tmp_path: Path
) -> None:
    """`charter serve --workspace DIR` (every `make serve`) made the directory's files the
    policy and nothing else: a restart deleted every role the API had made. They are kept,
    and a restart with nothing new makes no revision; a directory with an `api/roles/` of
    its own gives them all."""
    from api.cli_serve import prepare

    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "policy.charter").write_text(POLICY, encoding="utf-8")
    service = harness.service
    made = c.CreateRole(name="x", source="role x {\n}\n")
    OPERATIONS["roles.create"](service, Principal("t", "admin"), made)
    prepare(service, str(harness.db), str(folder))
    assert service.files()[1] == [
        ("policy.charter", POLICY),
        ("api/roles/x.charter", "role x {\n}\n"),
    ]
    revision = service.snapshots.latest
    prepare(service, str(harness.db), str(folder))
    assert service.snapshots.latest == revision
    (folder / "api" / "roles").mkdir(parents=True)
    (folder / "api" / "roles" / "y.charter").write_text("role y {\n}\n", encoding="utf-8")
    with pytest.raises(ServiceError) as refused:  # (role `x` is the API's: not without a word)
        prepare(service, str(harness.db), str(folder))
    assert refused.value.code == "policy-in-use" and service.snapshots.latest == revision
    prepare(service, str(harness.db), str(folder), remove_in_use=True)
    assert "x" not in service.current().workspace.roles
    assert "y" in service.current().workspace.roles


def test_a_compile_waits_for_no_transaction(harness: Harness, other: Service) -> None:
    """Another process's upload, not compiled here, wanted at once by a thread inside a
    write transaction (an agent's role change, an approval) and by one outside it (a
    decision group compiling off the event loop). The one outside took the compile lock
    and then read the revision's files, waiting on the store's lock; the one inside held
    that and waited on the compile lock: both for ever, and with them every request of the
    process. Nothing under the compile lock may wait on the store."""
    with other.store.atomic():
        other.upload([("policy.charter", f"{POLICY}# elsewhere\n")], "t")
    service = harness.service
    seen_elsewhere(service).sync()
    snapshots, revision = service.snapshots, service.snapshots.latest
    assert revision not in snapshots._cache
    started = threading.Event()
    got: dict[str, int] = {}

    def inside() -> None:
        with service.store.atomic():
            started.set()
            deadline = time.monotonic() + 1  # until the other compile has begun, if it can
            while not snapshots._compiling.locked() and time.monotonic() < deadline:
                time.sleep(0.001)
            got["inside"] = snapshots.get(revision).revision

    def outside() -> None:
        started.wait()
        got["outside"] = snapshots.get(revision).revision

    threads = [threading.Thread(target=run, daemon=True) for run in (inside, outside)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    stuck = any(thread.is_alive() for thread in threads)
    if stuck:  # let them go (a plain lock opens from any thread), so the store can close
        snapshots._compiling.release()
        for thread in threads:
            thread.join(10)
    assert not stuck and got == {"inside": revision, "outside": revision}


def test_a_stored_revision_that_no_longer_checks_is_a_409(
    client: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A revision stored by an older charter that this one reads otherwise (simulated: text
    that does not check, stored as it was): decisions and turns on it are a 409 that says
    what to do, never an internal error, and nothing is logged."""
    turn = client.post("/v1/turns", json={"agent": "a1"}, headers=harness.auth()).json()
    store = harness.service.store
    seq = store.last_seq()
    body = {"files": [["policy.charter", POLICY + "\nrole broken {\n  allow nope.nothing\n}\n"]],
            "author": "old charter", "note": "", "created_at": 0, "summary": {}}  # fmt: skip
    with opened_again(
        harness.db, harness.key_file
    ) as other:  # (another process: the cache of this one is cold)
        other.store.add_revision(body)
    call = {"agent": "a1", "tool": "mail.send", "args": MAIL}
    refused = client.post("/v1/decisions", json=call, headers=harness.auth())
    expect(refused, 409, "revision-does-not-check")
    assert "upload the policy again" in refused.json()["help"]
    on_a_loop = slow_compiles(monkeypatch, 0)
    again = client.post("/v1/decisions", json=call, headers=harness.auth())
    expect(again, 409, "revision-does-not-check")
    assert on_a_loop == []  # it never changes: not checked again for every request
    pinned = client.post("/v1/decisions", json={**call, "turn": turn["id"]}, headers=harness.auth())
    assert pinned.status_code == 200 and pinned.json()["revision"] == turn["revision"]
    assert store.last_seq() == seq + 1  # the pinned one alone


def test_an_upload_made_from_an_older_revision_is_refused_with_if_match(
    client: Any, harness: Harness
) -> None:
    """An upload replaces every file: one edited from revision 1 after an agent's role
    made revision 2 would drop that role. With the ETag it was read with as `If-Match`,
    it is a 412 that names the latest, and nothing is written."""
    admin = harness.auth()
    read = client.get("/v1/policy", headers=admin)
    assert read.headers["etag"] == '"1"'
    edited = POLICY + "\nrole extra {\n  allow mail.send\n}\n"
    OPERATIONS["roles.create"](harness.service, Principal("t", "admin"),
                 c.CreateRole(name="r9", source="role r9 {\n  allow mail.send\n}\n"))  # fmt: skip
    stale = client.put("/v1/policy", content=edited, headers={**admin, "if-match": '"1"'})
    expect(stale, 412, "revision-moved")
    assert stale.json()["latest"] == 2 and 'If-Match: "2"' in stale.json()["help"]
    assert harness.service.store.latest_revision() == 2
    fresh = client.get("/v1/policy", headers=admin)
    assert fresh.headers["etag"] == '"2"'
    files = [{"path": f["path"], "text": f["text"]} for f in fresh.json()["files"]]
    files[0]["text"] += "\nrole extra {\n  allow mail.send\n}\n"
    again = client.put("/v1/policy", json={"files": files}, headers={**admin, "if-match": '"2"'})
    assert again.status_code == 201 and again.json()["revision"] == 3
    # (`*`: whatever the latest; it drops role `r9`, which the API made: meant)
    anyway = client.put(
        "/v1/policy?remove_in_use=true", content=edited, headers={**admin, "if-match": "*"}
    )
    assert anyway.status_code == 201, anyway.text
    for bad in ("2", 'W/"2"', '"2", "3"', '"-1"', ""):
        expect(client.put("/v1/policy", content=edited, headers={**admin, "if-match": bad}),
               400, "bad-if-match")  # fmt: skip
    assert harness.service.store.latest_revision() == 4


def test_paths_that_differ_only_in_case_are_refused(
    client: Any, harness: Harness, tmp_path: Path
) -> None:
    """`A.charter` and `a.charter` are two files here and one on a case-insensitive file
    system (macOS, a Windows checkout), where a revision written out lost one of them:
    an upload naming both is a 400 `bad-path` that names both (so is `é` composed and
    decomposed, one name on APFS), and nothing is written; so is a role made through the
    API whose file an uploaded file spells otherwise (422, E0119), and a `--workspace`
    holding both (E0119, exit 1)."""
    from api.cli_serve import prepare

    extra = "role side {\n  allow mail.send\n}\n"
    for first, second in (("teams/A.charter", "Teams/a.charter"),
                          ("caf\u00e9.charter", "CAFE\u0301.charter")):  # fmt: skip
        refused = _put(client, harness, {"main.charter": POLICY, first: extra, second: OTHER})
        expect(refused, 400, "bad-path")
        assert f"`{first}` and `{second}`" in refused.json()["detail"], refused.text
        assert refused.json()["help"]
    assert harness.service.store.latest_revision() == 1
    # a role's own file against an uploaded one spelled otherwise
    assert (
        _put(client, harness, {"main.charter": POLICY, "API/roles/x.charter": extra}).status_code
        == 201
    )
    made = client.post("/v1/roles", json={"name": "x", "source": "role x {\n}\n"},
                       headers=harness.auth())  # fmt: skip
    expect(made, 422, "policy-invalid")
    (found,) = made.json()["diagnostics"]
    assert (found["code"], found["file"]) == ("E0119", "api/roles/x.charter")
    assert "`API/roles/x.charter` and `api/roles/x.charter`" in found["message"]
    assert harness.service.store.latest_revision() == 2
    # a directory of a case-sensitive file system holding both
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "Main.charter").write_text(POLICY, "utf-8")
    (tmp_path / "ws" / "main.charter").write_text(extra, "utf-8")
    with pytest.raises(CharterError) as loaded:
        prepare(harness.service, str(harness.db), str(tmp_path / "ws"))
    assert [d.code for d in loaded.value.diagnostics] == ["E0119"]
    assert harness.service.store.latest_revision() == 2
