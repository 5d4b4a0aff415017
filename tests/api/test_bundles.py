"""Signed policy bundles (policy/bundles.py, api/cli_bundle.py): each bad bundle is
refused with its stable code and nothing is written, the same way through `charter
bundle verify`, through `charter serve --trusted-keys` at start-up and through `PUT
/v1/policy/bundle` on a real server on loopback; a good one goes through each. Real
Ed25519 keys made by `charter bundle keygen`, a real SQLite file."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import patch

import httpx
import pytest

from api.cli import main
from api.cli_bundle import workspace_files
from api.http.app import create_app
from api.service.errors import ServiceError
from policy import bundles
from policy.bundles import SIGNATURES_FILE
from tests.api.conftest import POLICY as CONFTEST_POLICY
from tests.api.conftest import PROBLEM, Harness, LiveServer, make_harness, opened_again
from tests.api.start_runs import POLICY, Served, command

ROLE = "role extra {\n  allow mail.send\n}\n"
ROLES = 'role reader {\n  allow mail.send where args.to endswith "@example.org"\n}\n'


def run(*argv: str, starts: bool = False) -> tuple[int, str, str]:
    """`charter ARGV` in this process: exit code, stdout, stderr. A `charter serve` is
    never served: `starts`, it returns once it would serve (exit 0), else that fails."""
    out, err = io.StringIO(), io.StringIO()

    def serve(app: Any, *args: object, **kwargs: object) -> None:
        assert starts, "served"
        app.charter.service.store.close()  # (its checkpoint thread stops)

    with redirect_stdout(out), redirect_stderr(err), patch("api.cli_serve.run_uvicorn", serve):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@dataclass
class Keys:
    trusted: Path  # lists alice and old (expired)
    alice: Path
    old: Path
    mallory: Path  # not listed


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    where = tmp_path_factory.mktemp("keys")
    lines = []
    for name in ("alice", "old", "mallory"):
        code, out, err = run("bundle", "keygen", "--key-id", name, "--key", str(where / name))
        assert code == 0, err
        assert (where / name).stat().st_mode & 0o777 == 0o600
        if name == "alice":
            lines.append(out.strip())
        elif name == "old":
            lines.append(out.strip() + " expires=2020-01-01")
    trusted = where / "trusted.keys"
    trusted.write_text("# the keys this server trusts\n" + "\n".join(lines) + "\n")
    return Keys(trusted, where / "alice", where / "old", where / "mallory")


def signed_dir(where: Path, keys: Keys, key: Path | None = None) -> Path:
    """A workspace directory of two files, built and signed (by alice unless `key`)."""
    folder = where / "ws"
    (folder / "teams").mkdir(parents=True)
    (folder / "policy.charter").write_text(POLICY)
    (folder / "teams" / "reader.charter").write_text(ROLES)
    assert run("bundle", "build", str(folder), "--revision", "v1")[0] == 0
    assert run("bundle", "sign", str(folder), "--key", str(key or keys.alice))[0] == 0
    return folder


def _document(folder: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((folder / SIGNATURES_FILE).read_text())
    return value


def _rewrite(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    value = _document(folder)
    change(value)
    (folder / SIGNATURES_FILE).write_text(json.dumps(value))


# ---- the bad bundles: each a change to a signed directory, and the code it is refused with --
def unsigned(folder: Path, keys: Keys) -> None:
    _rewrite(folder, lambda doc: doc.update(signatures=[]))


def no_signatures_file(folder: Path, keys: Keys) -> None:
    (folder / SIGNATURES_FILE).unlink()


def unknown_key(folder: Path, keys: Keys) -> None:
    _rewrite(folder, lambda doc: doc.update(signatures=[]))
    assert run("bundle", "sign", str(folder), "--key", str(keys.mallory))[0] == 0


def expired_key(folder: Path, keys: Keys) -> None:
    _rewrite(folder, lambda doc: doc.update(signatures=[]))
    assert run("bundle", "sign", str(folder), "--key", str(keys.old))[0] == 0


def missing_key_id(folder: Path, keys: Keys) -> None:
    """OPA's hole: a signature that names no key must not pass for an unsigned bundle."""
    _rewrite(folder, lambda doc: doc["signatures"][0].pop("key_id"))


def signature_over_other_files(folder: Path, keys: Keys) -> None:
    """Alice's signature of another workspace (one file more), put beside this one's
    manifest."""
    other = folder.parent / "other"
    shutil.copytree(folder, other)
    (other / "extra.charter").write_text(ROLE)
    assert run("bundle", "build", str(other), "--revision", "v1")[0] == 0
    assert run("bundle", "sign", str(other), "--key", str(keys.alice))[0] == 0
    theirs = _document(other)["signatures"]
    _rewrite(folder, lambda doc: doc.update(signatures=theirs))


def other_files_manifest(folder: Path, keys: Keys) -> None:
    """Another workspace's signed manifest and signature, whole, over these files."""
    other = folder.parent / "other"
    shutil.copytree(folder, other)
    (other / "policy.charter").write_text(POLICY + ROLE)
    assert run("bundle", "build", str(other), "--revision", "v1")[0] == 0
    assert run("bundle", "sign", str(other), "--key", str(keys.alice))[0] == 0
    shutil.copy(other / SIGNATURES_FILE, folder / SIGNATURES_FILE)


def file_added(folder: Path, keys: Keys) -> None:
    (folder / "teams" / "extra.charter").write_text(ROLE)


def file_changed(folder: Path, keys: Keys) -> None:
    with (folder / "policy.charter").open("a") as handle:
        handle.write(ROLE)


def tampered_digest(folder: Path, keys: Keys) -> None:
    """A file changed and its digest in the manifest changed to match: the signature no
    longer verifies."""
    file_changed(folder, keys)
    text = (folder / "policy.charter").read_text()

    def change(doc: dict[str, Any]) -> None:
        for entry in doc["manifest"]["files"]:
            if entry["path"] == "policy.charter":
                entry["sha256"] = bundles.digest(text)

    _rewrite(folder, change)


def file_removed(folder: Path, keys: Keys) -> None:
    (folder / "teams" / "reader.charter").unlink()


BAD = {
    "unsigned": (unsigned, "bundle-unsigned"),
    "no-signatures-file": (no_signatures_file, "bundle-unsigned"),
    "unknown-key": (unknown_key, "bundle-unknown-key"),
    "expired-key": (expired_key, "bundle-key-expired"),
    "missing-key-id": (missing_key_id, "bundle-malformed"),
    "signature-over-other-files": (signature_over_other_files, "bundle-bad-signature"),
    "other-files-manifest": (other_files_manifest, "bundle-digest-mismatch"),
    "file-added": (file_added, "bundle-file-unlisted"),
    "file-changed": (file_changed, "bundle-digest-mismatch"),
    "tampered-digest": (tampered_digest, "bundle-bad-signature"),
    "file-removed": (file_removed, "bundle-file-missing"),
}


def bad_dir(where: Path, keys: Keys, case: str) -> tuple[Path, str]:
    folder = signed_dir(where, keys)
    change, code = BAD[case]
    change(folder, keys)
    return folder, code


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# ---- through the command line --------------------------------------------------------------
def test_a_signed_workspace_verifies(tmp_path: Path, keys: Keys) -> None:
    folder = signed_dir(tmp_path, keys)
    code, out, err = run("bundle", "verify", str(folder), "--trusted-keys", str(keys.trusted))
    assert code == 0, err
    assert out == f"verified {folder}: 2 file(s), revision `v1`, signed by `alice`\n"


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_cli_refuses_each_bad_bundle(tmp_path: Path, keys: Keys, case: str) -> None:
    folder, code = bad_dir(tmp_path, keys, case)
    before = snapshot(folder)
    exit_code, out, err = run(
        "bundle", "verify", str(folder), "--trusted-keys", str(keys.trusted)
    )  # fmt: skip
    assert (exit_code, out) == (1, "")
    assert err.startswith(f"charter: error[{code}]: "), err
    assert "\nhelp: " in err
    assert snapshot(folder) == before  # nothing written


def test_a_bundle_file_round_trip_and_tampering(tmp_path: Path, keys: Keys) -> None:
    folder = signed_dir(tmp_path, keys)
    bundle = tmp_path / "policy.bundle"
    assert run("bundle", "build", str(folder), "-o", str(bundle), "--revision", "v2")[0] == 0
    trusted = ("--trusted-keys", str(keys.trusted))
    assert run("bundle", "verify", str(bundle), *trusted)[2].startswith(
        "charter: error[bundle-unsigned]"
    )
    assert run("bundle", "sign", str(bundle), "--key", str(keys.alice))[0] == 0
    assert run("bundle", "verify", str(bundle), *trusted)[0] == 0
    value = json.loads(bundle.read_text())
    value["files"].append({"path": "added.charter", "text": ROLE})
    bundle.write_text(json.dumps(value))
    code, _, err = run("bundle", "verify", str(bundle), *trusted)
    assert code == 1 and "error[bundle-file-unlisted]" in err


def test_sign_refuses_files_that_do_not_match_the_manifest(tmp_path: Path, keys: Keys) -> None:
    """A signature says "these files": never one over a manifest the files have left."""
    folder = signed_dir(tmp_path, keys)
    file_added(folder, keys)
    before = snapshot(folder)
    code, _, err = run("bundle", "sign", str(folder), "--key", str(keys.alice))
    assert code == 1 and err.startswith("charter: error[bundle-file-unlisted]: not signed: ")
    assert snapshot(folder) == before


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "lists no key"),
        ("alice ed25519 AAAA\n", "line 1 its public key is not 32 bytes of base64"),
        ("alice rsa AAAA\n", "line 1 is not `KEY_ID ed25519 PUBLIC_KEY [expires=DATE]`"),
        ("alice ed25519 " + "A" * 43 + "= expires=tomorrow\n", "is not a date or a time"),
    ],
)
def test_a_malformed_trusted_keys_file_is_a_usage_error(
    tmp_path: Path, keys: Keys, text: str, why: str
) -> None:
    folder = signed_dir(tmp_path, keys)
    (tmp_path / "bad.keys").write_text(text)
    code, _, err = run(
        "bundle", "verify", str(folder), "--trusted-keys", str(tmp_path / "bad.keys")
    )
    assert code == 2 and why in err, err
    db = tmp_path / "charter.db"
    code, _, err = run(*command(db, "--workspace", str(folder), "--trusted-keys",
                                str(tmp_path / "bad.keys"))[3:])  # fmt: skip
    assert code == 2 and why in err, err
    assert not db.exists()


def test_a_key_file_others_may_read_is_refused(tmp_path: Path, keys: Keys) -> None:
    folder = signed_dir(tmp_path, keys)
    loose = tmp_path / "loose.key"
    shutil.copy(keys.alice, loose)
    loose.chmod(0o644)
    code, _, err = run("bundle", "sign", str(folder), "--key", str(loose))
    assert code == 2 and "may be read or written by others" in err
    assert loose.read_text().split()[2] not in err  # (never the key itself)
    assert run("bundle", "keygen", "--key-id", "x", "--key", str(loose))[0] == 2  # never replaced


# ---- through `charter serve --trusted-keys` at start-up --------------------------------------
@pytest.mark.parametrize("case", sorted(BAD))
def test_serve_refuses_each_bad_workspace(tmp_path: Path, keys: Keys, case: str) -> None:
    folder, code = bad_dir(tmp_path, keys, case)
    db = tmp_path / "charter.db"
    exit_code, out, err = run(
        *command(db, "--workspace", str(folder), "--trusted-keys", str(keys.trusted))[3:]
    )
    assert (exit_code, out) == (1, "")
    assert err.startswith(f"charter: error[{code}]: `{folder}`: "), err
    assert err.endswith("nothing was changed\n")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("charter.db")]  # nothing made


def test_serve_keeps_the_revision_of_a_database_when_it_refuses(tmp_path: Path, keys: Keys) -> None:
    """A database served before: a bad workspace leaves its latest revision as it was."""
    folder = signed_dir(tmp_path, keys)
    db = tmp_path / "charter.db"
    trusted = ("--trusted-keys", str(keys.trusted))
    code, out, err = run(*command(db, "--workspace", str(folder), *trusted)[3:], starts=True)
    assert code == 0 and "policy: revision 1 from" in out, err
    file_added(folder, keys)
    code, _, err = run(*command(db, "--workspace", str(folder), *trusted)[3:])
    assert code == 1 and "error[bundle-file-unlisted]" in err
    with opened_again(db) as service:  # the revision is as it was
        assert service.store.latest_revision() == 1


def test_serve_refuses_an_unsigned_latest_revision(tmp_path: Path, keys: Keys) -> None:
    """A database whose latest revision came in unsigned (served without --trusted-keys)
    is not served with them until a signed workspace replaces it."""
    folder = signed_dir(tmp_path, keys)
    db = tmp_path / "charter.db"
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "policy.charter").write_text(POLICY)
    assert run(*command(db, "--workspace", str(plain))[3:], starts=True)[0] == 0
    trusted = ("--trusted-keys", str(keys.trusted))
    code, out, err = run(*command(db, *trusted)[3:])
    assert (code, out) == (1, "")
    assert err.startswith("charter: error[bundle-unsigned]: the latest revision (1): "), err
    # the same files, signed: loaded as a revision of their own, then served
    shutil.copy(plain / "policy.charter", folder / "policy.charter")
    (folder / "teams" / "reader.charter").unlink()
    assert run("bundle", "build", str(folder))[0] == 0
    assert run("bundle", "sign", str(folder), "--key", str(keys.alice))[0] == 0
    code, out, err = run(*command(db, "--workspace", str(folder), *trusted)[3:], starts=True)
    assert code == 0 and "policy: revision 2 from" in out, err
    assert run(*command(db, *trusted)[3:], starts=True)[0] == 0  # (and again, without it)


# ---- over HTTP: a real server on loopback ---------------------------------------------------
@pytest.fixture(scope="module")
def trusting(
    tmp_path_factory: pytest.TempPathFactory, keys: Keys
) -> Iterator[tuple[Harness, httpx.Client]]:
    """A server whose service takes only bundles signed by the trusted keys."""
    made = make_harness(tmp_path_factory.mktemp("trusting"))
    made.service.trusted = bundles.read_trusted_keys(keys.trusted.read_text())
    with (
        LiveServer(create_app(made.service)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield made, client
    made.service.store.close()


def body_of(folder: Path) -> dict[str, Any]:
    """The directory as a bundle file's body, its signatures document as it is (even one
    `charter bundle verify` finds malformed)."""
    value = _document(folder) if (folder / SIGNATURES_FILE).exists() else {}
    value.setdefault("manifest", {"format": bundles.FORMAT, "revision": "", "files": []})
    files = workspace_files(folder)
    return {**value, "files": [{"path": p, "text": t} for p, t in files]}


def latest(harness: Harness, client: httpx.Client) -> int:
    return int(client.get("/v1/revisions", headers=harness.auth()).json()["items"][-1]["revision"])


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_upload_refuses_each_bad_bundle(
    tmp_path: Path, keys: Keys, trusting: tuple[Harness, httpx.Client], case: str
) -> None:
    harness, client = trusting
    folder, code = bad_dir(tmp_path, keys, case)
    before = latest(harness, client)
    answer = client.put("/v1/policy/bundle", json=body_of(folder), headers=harness.auth())
    if case == "missing-key-id":  # (the schema's own refusal: a signature without its key id)
        assert answer.status_code == 422 and answer.json()["code"] == "invalid-body"
    else:
        assert (answer.status_code, answer.json()["code"]) == (422, code), answer.text
    assert answer.headers["content-type"] == PROBLEM
    assert latest(harness, client) == before  # nothing written


def test_the_upload_takes_a_signed_bundle(
    tmp_path: Path, keys: Keys, trusting: tuple[Harness, httpx.Client]
) -> None:
    harness, client = trusting
    folder = signed_dir(tmp_path, keys)
    bundle = tmp_path / "policy.bundle"
    assert run("bundle", "build", str(folder), "-o", str(bundle), "--revision", "v9")[0] == 0
    assert run("bundle", "sign", str(bundle), "--key", str(keys.alice))[0] == 0
    answer = client.put(
        "/v1/policy/bundle?remove_in_use=true", content=bundle.read_bytes(),
        headers={**harness.auth(), "content-type": "application/json"},
    )  # fmt: skip
    assert answer.status_code == 201, answer.text
    revision = answer.json()["revision"]
    page = client.get("/v1/revisions", headers=harness.auth()).json()["items"]
    assert page[-1]["revision"] == revision
    assert page[-1]["note"] == "bundle `v9`, signed by `alice`"
    files = client.get("/v1/policy", headers=harness.auth()).json()["files"]
    assert sorted(f["path"] for f in files) == ["policy.charter", "teams/reader.charter"]


def test_plain_uploads_and_role_changes_are_refused(
    keys: Keys, trusting: tuple[Harness, httpx.Client]
) -> None:
    """Under --trusted-keys only a signed bundle makes a revision: `PUT /v1/policy` and a
    role's change through the API (an admin's, an agent's) are 403 `signature-required`."""
    harness, client = trusting
    before = latest(harness, client)
    for answer in (
        client.put("/v1/policy", content=POLICY, headers=harness.auth()),
        client.post("/v1/roles", json={"name": "extra", "source": ROLE}, headers=harness.auth()),
        client.delete("/v1/roles/extra", headers=harness.auth()),
        client.post(
            "/v1/roles",
            json={"name": "extra", "source": ROLE},
            headers=harness.auth(harness.agent_token),
        ),
    ):
        assert (answer.status_code, answer.json()["code"]) == (403, "signature-required"), (
            answer.text
        )
        assert answer.headers["content-type"] == PROBLEM
    assert latest(harness, client) == before


def test_the_service_refuses_an_unsigned_revision_whatever_the_path(
    keys: Keys, tmp_path: Path
) -> None:
    """The last guard: `Service.upload` itself, for any path to the store not yet known."""
    harness = make_harness(tmp_path)
    try:
        harness.service.trusted = bundles.read_trusted_keys(keys.trusted.read_text())
        before = harness.service.store.latest_revision()
        with pytest.raises(ServiceError) as refused, harness.service.store.atomic():
            harness.service.upload([("policy.charter", POLICY)], "test")
        assert refused.value.code == "signature-required"
        assert harness.service.store.latest_revision() == before
    finally:
        harness.service.store.close()


def test_served_with_trusted_keys_end_to_end(tmp_path: Path, keys: Keys) -> None:
    """`charter serve --trusted-keys --workers 2` (the keys reach each worker): a signed
    workspace is loaded, a plain upload is refused, a signed bundle is taken, a restart
    without --workspace serves the signed latest revision."""
    folder = signed_dir(tmp_path, keys)
    db = tmp_path / "charter.db"
    trusted = ("--trusted-keys", str(keys.trusted))
    server = Served(db, "--workspace", str(folder), *trusted, "--workers", "2")
    try:
        url, headers = server.url, server.headers
        plain = httpx.put(f"{url}/v1/policy", content=POLICY, headers=headers)
        assert (plain.status_code, plain.json()["code"]) == (403, "signature-required")
        file_added(folder, keys)
        bad = httpx.put(f"{url}/v1/policy/bundle", json=body_of(folder), headers=headers)
        assert (bad.status_code, bad.json()["code"]) == (422, "bundle-file-unlisted")
        assert run("bundle", "build", str(folder), "--revision", "v2")[0] == 0
        assert run("bundle", "sign", str(folder), "--key", str(keys.alice))[0] == 0
        good = httpx.put(f"{url}/v1/policy/bundle", json=body_of(folder), headers=headers)
        assert (good.status_code, good.json()["revision"]) == (201, 2), good.text
    finally:
        server.stop()
    code, out, err = run(*command(db, *trusted)[3:], starts=True)
    assert code == 0 and "policy:" not in out, err  # the signed revision 2, served as it is


def test_an_approved_role_change_is_refused_under_trusted_keys(
    live: httpx.Client, harness: Harness, keys: Keys
) -> None:
    """A `roles.create` an agent asked for, paused for a human before the server took only
    bundles, is refused when approved after: 403 `signature-required`, the approval still
    pending, the revision as it was."""
    admin = harness.auth()
    hooked = (
        CONFTEST_POLICY.replace(
            "  hooks approve-big\n  budget 10 usd", "  hooks approve-big, ask\n  budget 10 usd"
        )
        + 'hook ask on roles.create {\n  pause "a human approves"\n}\n'
    )
    assert live.put("/v1/policy", content=hooked, headers=admin).status_code == 201
    narrow = 'role extra {\n  allow mail.send where args.to endswith "@example.com"\n}\n'
    role = {"name": "extra", "source": narrow}  # (within the agent's own access)
    paused = live.post("/v1/roles", json=role, headers=harness.auth(harness.agent_token))
    assert paused.status_code == 202, paused.text
    approval = paused.json()["approval_id"]
    harness.service.trusted = bundles.read_trusted_keys(keys.trusted.read_text())
    before = latest(harness, live)
    approved = live.post(f"/v1/approvals/{approval}/approve", headers=admin)
    assert (approved.status_code, approved.json()["code"]) == (403, "signature-required")
    assert live.get(f"/v1/approvals/{approval}", headers=admin).json()["status"] == "pending"
    assert latest(harness, live) == before


def test_the_help_names_the_commands_and_the_flag() -> None:
    for argv, words in (
        (("bundle", "--help"), ("keygen", "build", "sign", "verify")),
        (("bundle", "verify", "--help"), ("--trusted-keys", "KEY_ID ed25519 PUBLIC_KEY")),
        (("serve", "--help"), ("--trusted-keys FILE", "signed by a key")),
    ):
        out = io.StringIO()
        with redirect_stdout(out), pytest.raises(SystemExit) as ended:
            main(list(argv))
        assert ended.value.code == 0
        text = " ".join(out.getvalue().split())
        assert all(word in text for word in words), text
