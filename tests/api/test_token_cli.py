"""`charter token` on a real database: `--agent` only with `--scope agent`, and only for an
agent that exists; anything else is exit 2 and issues nothing."""

from __future__ import annotations

import pytest

from api.cli import main
from api.service import tokens
from tests.api.conftest import Harness


def _tokens(harness: Harness) -> list[dict[str, object]]:
    return [dict(row.body) for row in harness.service.store.scan("tokens")]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--scope", "admin", "--agent", "no-such-agent"], "--agent is only for --scope agent"),
        (["--scope", "admin", "--agent", "a1"], "--agent is only for --scope agent"),
        (["--scope", "decide", "--agent", "a1"], "--agent is only for --scope agent"),
        (["--scope", "decide", "--agent", ""], "--agent is only for --scope agent"),
        (["--scope", "agent", "--agent", "no-such-agent"], "no agent `no-such-agent`"),
        (["--scope", "agent"], "--scope agent needs --agent"),
        (["--scope", "agent", "--agent", ""], "--scope agent needs --agent"),
    ],
)
def test_a_wrong_agent_is_exit_2_and_issues_nothing(
    harness: Harness, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    before = _tokens(harness)
    assert main(["token", "--db", str(harness.db), *argv]) == 2
    captured = capsys.readouterr()
    assert says in captured.err and captured.out == ""
    assert _tokens(harness) == before


def test_each_scope_gets_a_token_of_that_scope(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, scope, agent in (
        (["--scope", "admin"], "admin", None),
        (["--scope", "decide"], "decide", None),
        (["--scope", "agent", "--agent", "a1"], "agent", "a1"),
    ):
        assert main(["token", "--db", str(harness.db), *argv]) == 0
        token = capsys.readouterr().out.strip()
        doc = harness.service.store.get("tokens", tokens.digest(token)[:16])
        assert doc is not None and (doc["scope"], doc["agent"]) == (scope, agent)


def test_issue_refuses_a_scope_and_agent_that_do_not_go_together(harness: Harness) -> None:
    store = harness.service.store
    before = _tokens(harness)
    for scope, agent in (("admin", "a1"), ("decide", "a1"), ("agent", None), ("root", None)):
        with pytest.raises(ValueError):
            tokens.issue(store, scope, agent)
    assert _tokens(harness) == before
