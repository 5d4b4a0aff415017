"""`charter serve --approval-webhook URL`: a real server, of two workers, delivering the
approvals' events to a real receiver on loopback, each once, signed with the key its
`GET /v1/keys` publishes; and the command line's refusals of what is no webhook URL."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from api.cli import main
from api.service.webhooksign import verify
from policy.serverkeys import from_jwks
from tests.api.start_runs import Served
from tests.api.webhookreceiver import Receiver

POLICY = """
toolset deploy {
  tool push(target: str, token: secret str)
}
role deployer {
  allow deploy.push
}
role manager {
  allow approvals.*
}
hook approve-deploys on deploy.push {
  pause "a human approves deploys"
}
profile support {
  roles deployer, manager
  hooks approve-deploys
}
"""
TOKEN = "Zr4Kq8Wm2Xv6Jn3Pt7"


def test_two_workers_deliver_each_event_once_through_failures(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "policy.charter").write_text(POLICY)
    with Receiver(fail_first=2) as receiver:
        # (from a file: a URL that carries a token stays out of the command line)
        (tmp_path / "hooks.txt").write_text(f"\n{receiver.url}\n\n")
        served = Served(
            tmp_path / "charter.db", "--workspace", str(tmp_path / "ws"), "--workers", "2",
            "--approval-webhook", f"@{tmp_path / 'hooks.txt'}",
            "--approval-webhook-retry-ms", "20",
        )  # fmt: skip
        try:
            with httpx.Client(base_url=served.url, headers=served.headers, timeout=30) as http:
                made = []
                for i in range(6):
                    args = {"target": f"t{i}", "token": TOKEN}
                    call = {"agent": "demo-support", "tool": "deploy.push", "args": args}
                    paused = http.post("/v1/decisions", json=call)
                    assert paused.json()["effect"] == "pause", paused.text
                    made.append(paused.json()["approval_id"])
                for approval in made[:2]:
                    assert http.post(f"/v1/approvals/{approval}/approve").status_code == 200
                accepted = receiver.wait_for(len(made) + 2)
                time.sleep(0.5)  # (long enough for a second delivery, were there one)
                keys = from_jwks(http.get("/v1/keys").json())
        finally:
            served.stop()
    assert len(receiver.got) == len(made) + 2 + 2  # (the two refused, then each once)
    ids = [verify(got.headers, got.body, keys)[0] for got in accepted]
    wanted = {f"approval.opened:{a}" for a in made} | {f"approval.decided:{a}" for a in made[:2]}
    assert sorted(ids) == sorted(wanted)
    for got in receiver.got:
        assert TOKEN[:6].encode() not in got.body
        assert json.loads(got.body)["approval"]["args"]["token"] != TOKEN
    assert receiver.url not in served.errors.read_text()


@pytest.mark.parametrize(
    ("url", "wanted"),
    [
        ("ftp://qz.invalid/Pq8Zr", "a webhook URL starts with `http://` or `https://`"),
        ("https://u:Pq8Zr@qz.invalid/", "a webhook URL has no user or password"),
        ("https://", "a webhook URL names a host"),
    ],
)
def test_a_url_no_webhook_goes_to_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    url: str,
    wanted: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["serve", "--db", "x.db", "--approval-webhook", url])
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == ""
    line = err.splitlines()[-1]
    assert line.startswith(f"charter serve: error: argument --approval-webhook: {wanted}")
    assert "Pq8Zr" not in err and "qz.invalid" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("lines", "wanted"),
    [
        ("https://qz.invalid/a\nftp://qz.invalid/Pq8Zr\n", "`hooks` line 2: a webhook URL starts"),
        ("\n\n", "`hooks` lists no URL: give one a line"),
        (None, "cannot read `hooks`: no such file or directory"),
        (b"\xff\n", "cannot read `hooks`: it is not UTF-8"),
    ],
)
def test_a_file_of_urls_that_is_not_one_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    lines: str | bytes | None,
    wanted: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    if isinstance(lines, str):
        (tmp_path / "hooks").write_text(lines)
    elif lines is not None:
        (tmp_path / "hooks").write_bytes(lines)
    made = sorted(tmp_path.iterdir())
    with pytest.raises(SystemExit) as info:
        main(["serve", "--db", "x.db", "--approval-webhook", "@hooks"])
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == ""
    line = err.splitlines()[-1]
    assert line.startswith(f"charter serve: error: argument --approval-webhook: {wanted}")
    assert "Pq8Zr" not in err and "qz.invalid" not in err
    assert sorted(tmp_path.iterdir()) == made
