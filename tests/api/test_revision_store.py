"""Revisions through the API: role changes store each text once, a revision an older
charter stored reads as it did, the history lists paths without reading texts, and a
policy over `max_policy_bytes` is refused with nothing written."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import cbor2
import pytest

from api.cli import main
from api.http.app import MAX_POLICY_ENV, app_from_env
from api.service.core import MAX_POLICY_BYTES, policy_bytes
from policy.store.rowsum import row_digest
from tests.api.conftest import POLICY, Harness, expect, opened_again
from tests.store.tables import table_size


def _role(name: str, size: int) -> str:
    """Role `name`'s source (what an agent's mailer role lets it grant), padded to about
    `size` bytes by a comment."""
    return (
        f'role {name} {{\n  allow mail.send where args.to endswith "@example.com"\n}}\n'
        f"# {name} {'x' * size}\n"
    )


def _history_as_it_was(harness: Harness, numbers: range) -> list[dict[str, Any]]:
    """What `GET /v1/revisions` answered before texts were kept apart: built from each
    revision's whole body, as it then was, in the same key order."""
    items = []
    for n in numbers:
        body = harness.service.store.get_revision(n)
        assert body is not None
        items.append({"revision": n, **{k: v for k, v in body.items() if k != "files"},
                      "files": [p for p, _ in body["files"]]})  # fmt: skip
    return items


def test_a_chain_of_role_creates_stores_each_text_once(live: Any, harness: Harness) -> None:
    """Revision k of N `roles.create`s holds k role files: each source is stored once
    (the store grew with N, not N^2), and each revision reads back whole."""
    n, size = 24, 8000
    sources = [_role(f"r{i}", size) for i in range(n)]
    for i, source in enumerate(sources):
        made = live.post("/v1/roles", json={"name": f"r{i}", "source": source},
                         headers=harness.auth())  # fmt: skip
        assert made.status_code == 201, made.text
    texts = table_size(harness.file, "texts")
    assert texts == (n + 1, len(POLICY) + sum(len(s) for s in sources))
    revisions, revision_bytes = table_size(harness.file, "revisions")
    assert revisions == n + 1 and revision_bytes < 100 * (n + 1) ** 2  # (no text in a row)
    for k in (2, n + 1):
        got = live.get(f"/v1/policy?revision={k}", headers=harness.auth()).json()["files"]
        assert [(f["path"], f["text"]) for f in got] == [
            ("policy.charter", POLICY),
            *((f"api/roles/r{i}.charter", sources[i]) for i in range(k - 1)),
        ]
    # The history is what it was, and is read without a text: the same with them gone.
    history = live.get("/v1/revisions?limit=200", headers=harness.auth())
    items = history.json()["items"]
    assert [list(item.items()) for item in items] == [
        list(item.items()) for item in _history_as_it_was(harness, range(1, n + 2))
    ]
    assert items[-1]["files"] == ["policy.charter", *(f"api/roles/r{i}.charter" for i in range(n))]
    with sqlite3.connect(harness.file) as other:
        other.execute("DELETE FROM texts")
    other.close()
    assert live.get("/v1/revisions?limit=200", headers=harness.auth()).content == history.content


OLD_ROLE = "role old-one {\n  allow mail.send\n}\n"


def test_a_revision_in_the_old_form_is_served(live: Any, harness: Harness) -> None:
    """A revision row as an older charter wrote it (every text in it) is the latest: a
    process opening the file compiles it (Snapshots), serves its files, lists it as any
    other, and a role created on it makes a revision that keeps its files."""
    body = harness.service.store.get_revision(1)
    assert body is not None
    old = {**body, "files": [*body["files"], ["api/roles/old-one.charter", OLD_ROLE]],
           "note": "written by an older charter"}  # fmt: skip
    with sqlite3.connect(harness.file) as other:
        row = cbor2.dumps(old)  # (with its checksum: the form of its body is the old one)
        other.execute("INSERT INTO revisions (n, body, sum) VALUES (2, ?, ?)",
                      (row, row_digest("revisions", (2, row))))  # fmt: skip
    other.close()
    with opened_again(harness.db, harness.key_file) as service:
        assert service.store.get_revision(2) == old
        assert "old-one" in service.current().workspace.roles  # (compiled from the row)
    got = live.get("/v1/policy", headers=harness.auth())
    assert got.headers["etag"] == '"2"'
    assert [(f["path"], f["text"]) for f in got.json()["files"]] == [tuple(f) for f in old["files"]]
    made = live.post("/v1/roles", json={"name": "new-one", "source": _role("new-one", 10)},
                     headers=harness.auth())  # fmt: skip
    assert made.status_code == 201 and made.json()["revision"] == 3
    files = live.get("/v1/policy", headers=harness.auth()).json()["files"]
    paths = ["policy.charter", "api/roles/old-one.charter", "api/roles/new-one.charter"]
    assert [f["path"] for f in files] == paths
    assert files[1]["text"] == OLD_ROLE
    items = live.get("/v1/revisions", headers=harness.auth()).json()["items"]
    assert items == _history_as_it_was(harness, range(1, 4))
    assert [item["files"] for item in items] == [paths[:1], paths[:2], paths]


def _state(live: Any, harness: Harness) -> tuple[Any, ...]:
    """What a refused change must leave as it was: the latest revision, the stored texts,
    the decision log."""
    store = harness.service.store
    latest = live.get("/v1/policy", headers=harness.auth()).json()["revision"]
    return latest, store.latest_revision(), table_size(harness.file, "texts"), store.last_seq()


def test_an_agents_chain_of_role_creates_stops_at_the_cap(live: Any, harness: Harness) -> None:
    """An agent allowed `roles.create` could grow the policy without bound, a role at a
    time: past `max_policy_bytes` it is a 413 `policy-too-large`, and nothing is written
    (no revision, no text, not the decision)."""
    size = 20_000
    harness.service.max_policy_bytes = len(POLICY) + 2 * size + 1000
    agent = harness.auth(harness.agent_token)
    for name in ("r0", "r1"):
        made = live.post("/v1/roles", json={"name": name, "source": _role(name, size)},
                         headers=agent)  # fmt: skip
        assert made.status_code == 201, made.text
    before = _state(live, harness)
    refused = live.post("/v1/roles", json={"name": "r2", "source": _role("r2", size)},
                        headers=agent)  # fmt: skip
    expect(refused, 413, "policy-too-large")
    problem = refused.json()
    assert problem["max_bytes"] == harness.service.max_policy_bytes
    assert problem["bytes"] == len(POLICY) + sum(len(_role(f"r{i}", size)) for i in range(3))
    assert "--max-policy-mib" in problem["help"]
    assert _state(live, harness) == before
    expect(live.get("/v1/roles/r2", headers=harness.auth()), 404, "role-not-found")


def test_an_upload_over_the_cap_writes_nothing(live: Any, harness: Harness) -> None:
    harness.service.max_policy_bytes = len(POLICY) + 100
    before = _state(live, harness)
    for body in (POLICY + "# " + "é" * 60 + "\n",  # (over in UTF-8 bytes, not in characters)
                 {"files": [{"path": "policy.charter", "text": POLICY},
                            {"path": "more.charter", "text": "#" * 101}]}):  # fmt: skip
        if isinstance(body, str):
            response = live.put("/v1/policy", content=body.encode(), headers=harness.auth())
        else:
            response = live.put("/v1/policy", json=body, headers=harness.auth())
        expect(response, 413, "policy-too-large")
        assert _state(live, harness) == before
    made = live.put("/v1/policy", content=POLICY + "#" * 99 + "\n", headers=harness.auth())
    assert made.status_code == 201  # (at the cap exactly)


def test_a_policy_over_a_lowered_cap_may_shrink(live: Any, harness: Harness) -> None:
    """A cap lowered below the policy's size refuses what would grow it, not what keeps
    or shrinks it: a role is deleted, the same files are uploaded again."""
    made = live.post("/v1/roles", json={"name": "r0", "source": _role("r0", 100)},
                     headers=harness.auth())  # fmt: skip
    assert made.status_code == 201
    harness.service.max_policy_bytes = 100
    refused = live.post("/v1/roles", json={"name": "r1", "source": _role("r1", 1)},
                        headers=harness.auth())  # fmt: skip
    expect(refused, 413, "policy-too-large")
    assert live.delete("/v1/roles/r0", headers=harness.auth()).status_code == 204
    again = live.put("/v1/policy", content=POLICY, headers=harness.auth())
    assert again.status_code == 201 and again.json()["revision"] == 4
    expect(live.put("/v1/policy", content=POLICY + "#\n", headers=harness.auth()),
           413, "policy-too-large")  # fmt: skip


def test_serve_refuses_a_workspace_over_the_cap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`charter serve --max-policy-mib 1 --workspace DIR` with more than 1 MiB of files:
    exit 1 (a workspace it cannot load), saying why, no revision made."""

    def serve(*args: object, **kwargs: object) -> None:
        raise AssertionError("charter serve went on to serve")

    monkeypatch.setattr("api.cli_serve.run_uvicorn", serve)
    monkeypatch.delenv("CHARTER_SECRET_KEY", raising=False)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "policy.charter").write_text(POLICY)
    pad = "#" * 600_000 + "\n"  # (two files: one is at most 1 MiB)
    (workspace / "a.charter").write_text(pad)
    (workspace / "b.charter").write_text(pad)
    db = tmp_path / "charter.db"
    argv = ["serve", "--db", str(db), "--workspace", str(workspace), "--port", "0"]
    assert main([*argv, "--max-policy-mib", "1"]) == 1
    out, err = capsys.readouterr()
    size = policy_bytes([("", POLICY), ("", pad), ("", pad)])
    assert out == "" and err == (
        f"charter: the policy would hold {size} bytes of text, over this server's cap of "
        "1048576\nhelp: delete roles or files the policy no longer needs, or serve it with a "
        "larger `--max-policy-mib`\n"
    )
    with opened_again(db) as service:
        assert service.store.latest_revision() == 0


def test_the_cap_reaches_every_worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`--workers N` hands `--max-policy-mib` to each worker process as it does
    `--turn-lifetime`, through the environment (16 MiB when it is not set)."""
    monkeypatch.setattr("api.http.app.tune_gc", lambda: None)  # (not this test process's)
    monkeypatch.setenv("CHARTER_DB", str(tmp_path / "charter.db"))
    for value, wanted in (("3", 3 << 20), (None, MAX_POLICY_BYTES)):
        if value is None:
            monkeypatch.delenv(MAX_POLICY_ENV)
        else:
            monkeypatch.setenv(MAX_POLICY_ENV, value)
        service = app_from_env().charter.service  # type: ignore[attr-defined]
        try:
            assert service.max_policy_bytes == wanted
        finally:
            assert service.shared_metrics is not None
            service.shared_metrics.close()
            service.store.close()
