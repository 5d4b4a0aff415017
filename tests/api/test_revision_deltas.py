"""Revisions through the API are stored as what changed (policy/store/revisions.py): a
chain of role changes grows the history by each change, not by the policy each time,
and every reader of a revision answers as before."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import POLICY, Harness, opened_again
from tests.store.tables import table_size


def _role(name: str, version: int = 0) -> str:
    return f"role {name} {{\n  allow mail.send\n}}\n# {version}\n"


def test_role_changes_store_what_changed(live: Any, harness: Harness) -> None:
    """60 role creates, an update (its file moves to the end), a delete, the same files
    uploaded again and one changed in place, one of them by another process: each
    revision's files (`GET /v1/policy?revision=`), the history's paths and what each
    declared (`GET /v1/revisions`), and an older revision compiled (a pinned turn's) are
    what was given; the revisions take a few hundred bytes a change, where each listed
    every file (153 KB here)."""
    auth = harness.auth()
    files = {"policy.charter": POLICY}
    expected = [dict(files)]
    for i in range(60):
        made = live.post("/v1/roles", json={"name": f"r{i:02d}", "source": _role(f"r{i:02d}")},
                         headers=auth)  # fmt: skip
        assert made.status_code == 201, made.text
        files[f"api/roles/r{i:02d}.charter"] = _role(f"r{i:02d}")
        expected.append(dict(files))
    changed = live.patch("/v1/roles/r03", json={"source": _role("r03", 1)}, headers=auth)
    assert changed.status_code == 200, changed.text
    del files["api/roles/r03.charter"]
    files["api/roles/r03.charter"] = _role("r03", 1)
    expected.append(dict(files))
    assert live.delete("/v1/roles/r05", headers=auth).status_code == 204
    del files["api/roles/r05.charter"]
    expected.append(dict(files))
    listed = [{"path": p, "text": t} for p, t in files.items()]
    again = live.put("/v1/policy", json={"files": listed, "note": "again"}, headers=auth)
    assert again.status_code == 201, again.text
    expected.append(dict(files))
    files["policy.charter"] = POLICY + "# edited\n"
    with opened_again(harness.db, harness.key_file) as other, other.store.atomic():
        other.upload(list(files.items()), "another process")
    expected.append(dict(files))
    for n, want in enumerate(expected, 1):
        got = live.get(f"/v1/policy?revision={n}", headers=auth)
        assert got.headers["etag"] == f'"{n}"'
        assert [(f["path"], f["text"]) for f in got.json()["files"]] == list(want.items()), n
    items = live.get("/v1/revisions?limit=200", headers=auth).json()["items"]
    assert [item["files"] for item in items] == [list(want) for want in expected]
    roles = [{p[10:-8] for p in want if p.startswith("api/roles/")} for want in expected]
    base = set(items[0]["summary"]["roles"])
    assert [item["summary"]["roles"] for item in items] == [sorted(base | r) for r in roles]
    assert [item["note"] for item in items[-3:]] == ["delete role r05", "again", ""]
    # An older revision compiled as it was (a turn pinned to it decides on it).
    old = harness.service.snapshots.get(30)
    assert sorted(old.workspace.roles) == sorted(base | {f"r{i:02d}" for i in range(29)})
    count, size = table_size(harness.file, "revisions")
    assert count == len(expected) and size < 500 * count
