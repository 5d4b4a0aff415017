"""`charter serve` as a subprocess on a fresh database: the README's request works as printed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.api.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_serve_first_start_and_the_readme_request(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "charter.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--workspace",
         str(ROOT / "fixtures" / "workspace"), "--port", str(port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, "charter serve exited"
            assert time.monotonic() < deadline
            time.sleep(0.1)
        token_file = Path(f"{db}.admin-token")
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        token = token_file.read_text().strip()
        response = httpx.post(
            f"{url}/v1/decisions",
            headers={"Authorization": f"Bearer {token}"},
            json={"agent": "demo-support", "tool": "mail.send",
                  "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}},
        )  # fmt: skip
        assert response.status_code == 200, response.text
        assert response.json()["effect"] == "allow"  # the README promises this
        # Reasons name files relative to the workspace, never where the server keeps them.
        locations = [r["location"] for r in response.json()["reasons"] if "location" in r]
        assert locations and all(not loc.startswith(("/", str(ROOT))) for loc in locations)
        assert all(loc.split(":")[0].endswith(".charter") for loc in locations)
        metrics = httpx.get(f"{url}/metrics").text
        assert "charter_decisions_total" in metrics and "charter_policy_revision 1" in metrics
        assert httpx.get(f"{url}/openapi.json").json()["paths"]["/v1/decisions"]["post"]
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert output.count(token) == 1  # shown once
