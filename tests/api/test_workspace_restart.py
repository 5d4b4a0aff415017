"""`charter serve --workspace DIR` loads the directory into an empty database, and on a
restart only when the directory changed since it was last loaded: a policy uploaded
through the API is never reverted by a restart (over real `charter serve` processes)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.api.start_runs import POLICY, Served, workspace

EXTRA = "role extra {\n  allow mail.send\n}\n"


def _latest(served: Served) -> tuple[int, list[str]]:
    answer = httpx.get(f"{served.url}/v1/policy", headers=served.headers, timeout=30)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    return body["revision"], sorted(f["path"] for f in body["files"])


def _upload(served: Served, files: dict[str, str]) -> int:
    body = {"files": [{"path": path, "text": text} for path, text in files.items()]}
    answer = httpx.put(f"{served.url}/v1/policy", json=body, headers=served.headers, timeout=60)
    assert answer.status_code in (200, 201), answer.text
    return int(answer.json()["revision"])


def test_a_restart_keeps_an_upload_and_loads_a_changed_directory(tmp_path: Path) -> None:
    folder = workspace(tmp_path)
    db = tmp_path / "x.db"
    first = Served(db, "--workspace", str(folder))
    try:
        assert any("from" in line and "policy: revision 1" in line for line in first.out)
        uploaded = _upload(first, {"policy.charter": POLICY, "extra.charter": EXTRA})
    finally:
        first.stop()

    again = Served(db, "--workspace", str(folder))  # the directory is as it was loaded
    try:
        assert any("kept" in line and "has not changed" in line for line in again.out)
        assert _latest(again) == (uploaded, ["extra.charter", "policy.charter"])
    finally:
        again.stop()

    (folder / "more.charter").write_text("role more {\n  allow mail.send\n}\n")
    changed = Served(db, "--workspace", str(folder))  # the directory changed: it is loaded
    try:
        revision, paths = _latest(changed)
        assert revision == uploaded + 1 and paths == ["more.charter", "policy.charter"]
        assert any(f"policy: revision {revision} from" in line for line in changed.out)
    finally:
        changed.stop()
