"""No part of a secret argument, ever: the scan.

Secret arguments (the catalogue's `credential` and `seed`, and a toolset's `api_key:
secret str`) go through every endpoint of the app's own route table (a new endpoint is
sent them too) with every kind of token, and through `charter decide`, `explain` and
`test`, under a policy whose conditions and hooks read them through every function and
operator (`host`, `lower`, `len`, comparisons, `like`, `in`) and make them error in
each way `host` can. Every answer body, every decision log row (`GET /v1/decisions`
and the database's raw rows and files), `/metrics`, every approval webhook delivered
and the server's log output and stderr are then searched for any 6-character piece of each secret, in any case (an
error that lowercased a host put one there).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.cli import main
from api.http.app import TABLE, create_app
from api.service.webhookdelivery import deliverer
from api.service.webhookoutbox import KIND, WebhookConfig
from tests.api.conftest import POLICY, Harness, LiveServer
from tests.api.webhookreceiver import Receiver

# Each one a shape `host` refuses in its own way, in mixed case (`host` lowercases what it
# reads), and none of their 6-character pieces is text the service writes by itself (so no
# `https://`: the schemes are made up, which `host` reads as any other).
CREDENTIALS = (
    "qzjx://Qz7Jk-Vw2Xq5.Zm8Pt!Rn4/Kb9?Hy6=Gf3",  # a host that is not plain
    "zqxj://Wq4Zx9Kj.Vb3Nm7.0x7fQJ/",  # a numeric last label (IPv4 in another notation)
)
API_KEYS = (
    "jzqv://Wk5Jq8Zv:Jx3@Xn2Bq7Jz.Vq/",  # a user part
    "vjzq://[Jz4Qx9Wv8Kq3",  # a URL urlsplit refuses (its message quoted nothing, or did)
    "sk-Vq9Zx2Jk7Wp4Qz1Xj6",  # no host at all
)
SEED = "Qz7JkVw2Xq5Zm8PtRn4Kb9Hy6Gf3Ds1Aw0Lx5Cv7Bn8="  # (base64 of 32 bytes: importable)
SECRETS = (*CREDENTIALS, *API_KEYS, SEED)
SECRET_FIELDS = {"credential": CREDENTIALS[0], "seed": SEED, "api_key": API_KEYS[0]}

READERS = """
toolset vendor {
  tool connect(url: str, api_key: secret str, note: str = "")
}
role secret-reader {
  allow connections.create, connections.update where host(args.credential) endswith ".example.com"
  allow connections.create where lower(args.credential) like "*zz*" or len(args.credential) > 100000 or args.credential in ["zz", "yy"] or args.credential startswith "zz" or args.credential contains "zz" or args.credential == "zz" or args.credential not in ["a"] and args.credential endswith "zz"
  allow identities.import where host(args.seed) == "x" or lower(args.seed) like "zz*"
  allow identities.import where len(args.seed) == 3 or args.seed in ["zz"]
  allow vendor.connect where host(args.api_key) endswith ".example.com"
  allow vendor.connect where lower(args.api_key) like "zz*" or len(args.api_key) < 3 or args.api_key == "zz"
  deny connections.update where host(args.credential) == "x"
}
role open-secrets {
  allow connections.*, identities.*, vendor.*, approvals.*
}
hook lower-key on vendor.connect {
  rewrite args.api_key = lower(args.api_key)
}
hook look-at-key on vendor.connect where host(args.api_key) == "x" {
  pause "a human looks at the key"
}
hook look-at-credential on connections.create where host(args.credential) == "x" {
  pause "a human looks at the credential"
}
hook no-seeds on identities.import where host(args.seed) == "x" {
  deny "no seeds"
}
hook credential-host on connections.update where has(args.credential) {
  rewrite args.credential = host(args.credential)
}
profile leaky {
  roles secret-reader
  hooks none
}
profile hooked {
  roles open-secrets
  hooks lower-key, look-at-key, look-at-credential, no-seeds, credential-host
}
"""


def calls() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every secret in a call of each tool that takes it (and in one that does not)."""
    for credential in CREDENTIALS:
        yield "connections.create", {"name": "c", "toolset": "vault", "credential": credential}
        yield "connections.update", {"id": "nope", "credential": credential}
    for key in API_KEYS:
        yield "vendor.connect", {"url": "https://a.example.com/", "api_key": key}
    yield "identities.import", {"seed": SEED}
    yield "identities.create", {"label": "x", "seed": SEED}  # (another tool's secret: a shape deny)


def windows(secret: str) -> set[str]:
    folded = secret.casefold()
    return {folded[i : i + 6] for i in range(len(folded) - 5)}


def assert_no_piece(where: str, text: str) -> None:
    folded = text.casefold()
    for secret in SECRETS:
        for piece in windows(secret):
            at = folded.find(piece)
            assert at < 0, (
                f"{where}: `{piece}` of a secret at {at}: {text[max(0, at - 80) : at + 80]!r}"
            )


# ---- the HTTP API -----------------------------------------------------------------------


def minimal(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The least value a JSON schema (as pydantic writes it) takes."""
    if "$ref" in schema:
        return minimal(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return minimal(schema["anyOf"][0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal(props[name], defs) for name in schema.get("required", ())}
    if kind == "array":
        return [minimal(schema["items"], defs)] * schema.get("minItems", 0)
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    return "x" * max(1, schema.get("minLength", 1))


def bodies(model: Any) -> list[dict[str, Any]]:
    """A route's bodies: its least body with every secret field it has given a secret and
    `agent` an agent's id; then that body with every secret name added (to a body that
    takes none: the 422 names the field, never its value)."""
    schema = model.model_json_schema()
    body = minimal(schema, schema.get("$defs", {}))
    for name in schema.get("properties", {}):
        if name in SECRET_FIELDS:
            body[name] = SECRET_FIELDS[name]
        elif name == "agent":
            body[name] = "leaky"
    return [body, {**body, **SECRET_FIELDS}]


class Scan:
    """Sends requests and keeps every answer's text."""

    def __init__(self, client: httpx.Client, harness: Harness) -> None:
        self.client = client
        self.harness = harness
        self.answers: list[str] = []
        self.sent: set[tuple[str, str]] = set()

    def first_event(self, path: str, token: str) -> None:
        """An event stream's answer as far as its first event (it never ends by itself)."""
        headers = self.harness.auth(token)
        with self.client.stream("GET", path, headers=headers) as answer:
            assert answer.status_code < 500, f"GET {path}: {answer.status_code}"
            text = answer.read().decode() if answer.status_code >= 400 else ""
            if not text:
                text = next(answer.iter_text(), "")
        self.answers.append(f"GET {path} {answer.status_code} {answer.headers}\n{text}")

    def send(self, method: str, path: str, token: str, **kwargs: Any) -> httpx.Response:
        answer = self.client.request(method, path, headers=self.harness.auth(token), **kwargs)
        assert answer.status_code < 500, f"{method} {path}: {answer.text}"
        self.answers.append(f"{method} {path} {answer.status_code} {answer.headers}\n{answer.text}")
        return answer


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as made:
        yield made


def test_no_piece_of_a_secret_anywhere(
    tmp_path: Path,
    harness: Harness,
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    for logger in ("charter", "uvicorn", "uvicorn.error"):
        caplog.set_level("DEBUG", logger=logger)
    admin = harness.admin
    with harness.service.store.atomic():
        harness.service.upload([("policy.charter", POLICY + READERS)], "test")
    for agent in ("leaky", "hooked"):
        harness.add_agent(agent, agent)
    agents = {agent: harness.token_for(agent) for agent in ("leaky", "hooked")}
    # The approvals' webhooks too: every delivery is scanned.
    service = harness.service
    config = WebhookConfig((receiver.url,))
    hooks = deliverer(
        service.store, service.sealer, service.keys, service.read, config, service.metrics
    )
    service.webhooks = hooks
    hooks.start()
    with (
        LiveServer(create_app(harness.service)) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        scan = Scan(client, harness)
        every_call = [{"agent": a, "tool": t, "args": args} for a in agents for t, args in calls()]
        for call in every_call:
            scan.send("POST", "/v1/decisions", harness.decide, json=call)
        scan.send("POST", "/v1/decisions/batch", harness.decide, json={"calls": every_call})
        # Management calls made by agents are decided (and logged) as their tools.
        for token in (admin, *agents.values()):
            for credential in CREDENTIALS:
                body = {"name": "c", "toolset": "vault", "credential": credential}
                made = scan.send("POST", "/v1/connections", token, json=body)
                if made.status_code == 201:
                    path = f"/v1/connections/{made.json()['id']}"
                    scan.send("PATCH", path, token, json={"credential": credential})
                    scan.send("PATCH", path, agents["hooked"], json={"credential": credential})
            scan.send("POST", "/v1/identities/import", token, json={"seed": SEED})
        approvals = scan.send("GET", "/v1/approvals", admin).json()["items"]
        assert approvals, "the hooks paused no call: the policy reads no secret"
        for i, approval in enumerate(approvals):
            verb = "approve" if i % 2 == 0 else "reject"
            scan.send("POST", f"/v1/approvals/{approval['id']}/{verb}", admin, json={})
        # Every route of the app, with each kind of token, a secret wherever it may go.
        ids = {
            "identities": harness.identity, "agents": "leaky", "threads": "nope",
            "connections": "nope", "roles": "secret-reader", "profiles": "hooked",
            "hooks": "lower-key", "toolsets": "vendor", "approvals": approvals[0]["id"],
            "tokens": "nope",
        }  # fmt: skip
        for spec, _ in TABLE:
            resource = spec.path.split("/")[2] if spec.path.count("/") >= 3 else ""
            path = spec.path.replace("{id}", ids.get(resource, "nope"))
            path = path.replace("{name}", ids.get(resource, "nope"))
            if spec.method == "DELETE":
                path = path.rsplit("/", 1)[0] + "/nope"
            query = {name: SECRET_FIELDS.get(name, "0") for name in (*spec.query, *SECRET_FIELDS)}
            if spec.path == "/v1/policy" and spec.method == "PUT":
                kinds: list[dict[str, Any]] = [
                    {"content": POLICY + READERS},
                    {"json": {"files": [{"path": "p.charter", "source": POLICY + READERS}]}},
                ]
            elif spec.request is None:
                kinds = [{}]
            else:
                kinds = [{"json": body} for body in bodies(spec.request)]
            for token in (admin, harness.decide, *agents.values()):
                if spec.path == "/v1/approvals/events":
                    scan.first_event(spec.path, token)
                    scan.sent.add((spec.method, spec.path))
                    continue
                for kind in kinds:
                    scan.send(spec.method, path, token, params=query, **kind)
                scan.sent.add((spec.method, spec.path))
        assert scan.sent == {(spec.method, spec.path) for spec, _ in TABLE}
        # What the service keeps and shows of it all.
        after, rows = 0, []
        while True:
            page = scan.send("GET", "/v1/decisions", admin, params={"after_seq": after}).json()
            rows += page["decisions"]
            if not page["decisions"]:
                break
            after = page["decisions"][-1]["seq"]
        shown = json.dumps(rows)
        scan.send("GET", "/metrics", admin)
        deadline = time.monotonic() + 10
        while list(service.store.scan(KIND, tag="pending")):
            assert time.monotonic() < deadline, "the webhooks were not all delivered"
            time.sleep(0.02)
        hooks.stop()
    assert len(receiver.got) >= len(approvals) * 2  # (each opened, and decided)
    for i, got in enumerate(receiver.got):
        assert_no_piece(f"webhook delivery {i}", f"{got.headers}\n{got.body.decode()}")
    for i, answer in enumerate(scan.answers):
        assert_no_piece(f"answer {i}", answer)
    assert_no_piece("the decision log", shown)
    # (it read the secrets: conditions errored on each, and their errors are in the log)
    assert len(rows) >= len(every_call) * 2
    assert "[redacted]" in shown and "host(args.credential)" in shown
    assert "host(args.api_key)" in shown and "host(args.seed)" in shown
    database = sqlite3.connect(harness.file)
    try:
        tables = [
            t for (t,) in database.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        for table in tables:
            for row in database.execute(f'SELECT * FROM "{table}"'):
                cells = [c.decode("latin-1") if isinstance(c, bytes) else str(c) for c in row]
                assert_no_piece(f"table {table}", "\x00".join(cells))
    finally:
        database.close()
    for file in harness.file.parent.iterdir():
        if file.is_file():
            assert_no_piece(f"file {file.name}", file.read_bytes().decode("latin-1"))
    out, err = capfd.readouterr()
    assert_no_piece("the server's output", out + err + caplog.text)


# ---- the command line -------------------------------------------------------------------

TESTS = """
test "secrets in tests" {
  profile hooked
  expect allow vendor.connect { url: "u", api_key: "KEY0" } rewritten { api_key: "KEY1" }
  expect deny connections.create { name: "c", toolset: "vault", credential: "CRED0" }
  expect allow identities.import { seed: "SEED" }
  expect allow connections.update { id: "c", credential: "CRED1" }
}
test "secrets read by roles" {
  profile leaky
  expect allow vendor.connect { url: "u", api_key: "KEY1" }
  expect allow connections.create { name: "c", toolset: "vault", credential: "CRED0" }
  expect allow identities.import { seed: "SEED" }
}
"""


def test_no_piece_of_a_secret_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`charter decide`, `explain` and `test` (text and JSON) on calls whose secrets the
    policy reads and errors on: none of them prints any piece of one."""
    tests = TESTS
    for name, value in (("KEY0", API_KEYS[0]), ("KEY1", API_KEYS[1]), ("SEED", SEED),
                        ("CRED0", CREDENTIALS[0]), ("CRED1", CREDENTIALS[1])):  # fmt: skip
        tests = tests.replace(f'"{name}"', json.dumps(value))
    (tmp_path / "policy.charter").write_text(POLICY + READERS + tests, encoding="utf-8")
    printed = []
    for argv in (["test", str(tmp_path)], ["test", "--format", "json", str(tmp_path)]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 1, out + err  # (each test fails: what it prints is what is searched)
        printed.append(out + err)
    for profile in ("leaky", "hooked"):
        for tool, args in calls():
            for verb in ("decide", "explain"):
                code = main([verb, "--workspace", str(tmp_path), "--profile", profile,
                             "--tool", tool, "--args", json.dumps(args)])  # fmt: skip
                out, err = capsys.readouterr()
                assert code == 0, err
                printed.append(out + err)
    for i, text in enumerate(printed):
        assert_no_piece(f"output {i}", text)
    joined = "\n".join(printed)
    assert "condition error" in printed[0] and "host(args.credential)" in printed[0]
    assert "[redacted]" in joined and "host(args.api_key)" in joined
