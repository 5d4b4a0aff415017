"""A client generated from a live server's `/openapi.json` by a standard generator
(openapi-python-client, the `test` extra) decides calls against that server: the
document is one a client generator takes, with the operation ids (`decide`) and tags
(`decisions`) its calls are named and grouped by."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tests.api.conftest import Harness

PACKAGE = "charter_client"


@pytest.fixture
def generated(tmp_path: Path, live: httpx.Client) -> Iterator[ModuleType]:
    """The generated package, imported from tmp_path, and taken out of sys.modules after."""
    document = live.get("/openapi.json")
    assert document.status_code == 200
    (tmp_path / "openapi.json").write_bytes(document.content)
    # No post hooks: the generator would run ruff over its output, which changes nothing
    # a call does.
    (tmp_path / "config.json").write_text(json.dumps({"post_hooks": []}))
    generator = Path(sys.executable).with_name("openapi-python-client")
    ran = subprocess.run(
        [str(generator), "generate", "--path", "openapi.json", "--config", "config.json",
         "--meta", "none", "--output-path", PACKAGE],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # The one part it skips is `PUT /v1/policy`'s `text/plain` body (its JSON one is there).
    said = ran.stdout + ran.stderr
    warnings = [line for line in said.splitlines() if line.startswith("WARNING")]
    assert warnings and all("PUT /v1/policy" in line for line in warnings), said
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.partition(".")[0] == PACKAGE]:
            del sys.modules[name]


def test_a_generated_client_decides_calls(harness: Harness, live: httpx.Client,
                                          generated: ModuleType) -> None:  # fmt: skip
    decide = importlib.import_module(f"{PACKAGE}.api.decisions.decide")
    list_tools = importlib.import_module(f"{PACKAGE}.api.decisions.list_agent_tools")
    models = importlib.import_module(f"{PACKAGE}.models")
    # (closed on leaving: it keeps its connection open)
    with generated.AuthenticatedClient(base_url=str(live.base_url), token=harness.decide) as client:

        def call(to: str, agent: str = "a1") -> object:
            args = {"to": to, "subject": "hi", "body": "hello"}
            body = models.DecisionRequest.from_dict({"agent": agent, "tool": "mail.send",
                                                     "args": args})  # fmt: skip
            return decide.sync(client=client, body=body)

        allowed = call("bob@example.com")
        assert isinstance(allowed, models.DecisionResponse)
        assert allowed.effect.value == "allow"
        assert allowed.seq >= 1 and allowed.revision == 1
        assert allowed.args is not None and allowed.args.to_dict()["to"] == "bob@example.com"

        denied = call("eve@elsewhere.net")
        assert isinstance(denied, models.DecisionResponse)
        assert denied.effect.value == "deny"
        assert denied.seq == allowed.seq + 1
        assert denied.reasons and all(isinstance(r, models.Reason) for r in denied.reasons)

        # A refusal reads as the document's problem+json `Problem`, its stable code with it.
        refused = call("bob@example.com", agent="nobody")
        assert isinstance(refused, models.Problem)
        assert (refused.status, refused.code) == (404, "agent-not-found")

        # A path parameter and a GET: the agent's tools, by `listAgentTools`.
        listing = list_tools.sync(id="a1", client=client)
        assert isinstance(listing, models.ToolListing)
        assert "mail.send" in {tool.tool for tool in listing.tools}

    # What the client sent was decided and logged as any call is.
    log = live.get("/v1/decisions", headers=harness.auth()).json()["decisions"]
    assert [(row["tool"], row["effect"]) for row in log[-2:]] == [
        ("mail.send", "allow"),
        ("mail.send", "deny"),
    ]
