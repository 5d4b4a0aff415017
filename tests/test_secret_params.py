"""`api_key: secret str`: a toolset marks its own secret arguments (grammar/charter.lark's
`param`), as the catalogue marks `seed` and `credential`."""

from __future__ import annotations

import pytest

from api.service.redaction import REDACTED, hidden_for, redact
from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Request
from grammar.fmt import format_file
from grammar.parser import parse
from policy.diagnostics import CharterError

TOOLSET = """toolset vendor {
  tool connect(url: str, api_key: secret str, scope?: secret str, secret: str = "")
}
"""
USE = """
role connector {
  allow vendor.connect where len(args.api_key) > 3
}
profile p {
  roles connector
  hooks none
}
"""


def diagnostics(source: str) -> list[tuple[str, int, str, str | None]]:
    try:
        check_sources([("a.charter", source)])
    except CharterError as exc:
        return [(d.code, d.span.col, d.message, d.help) for d in exc.diagnostics]
    return []


def test_a_toolsets_secrets_are_its_tools_sensitive_arguments() -> None:
    workspace = check_sources([("a.charter", TOOLSET + USE)])
    assert workspace.tools["vendor.connect"].sensitive == {"api_key", "scope"}
    assert workspace.tools["identities.import"].sensitive == {"seed"}
    assert workspace.secret_names == {"api_key", "scope", "seed", "credential"}
    snapshot = compile_workspace(workspace)
    args = {"url": "u", "api_key": "sk-live-1234", "scope": "s"}
    decision = snapshot.decide(Request("p", "vendor.connect", args))
    assert decision.effect == "allow"
    hidden = hidden_for(snapshot, "vendor.connect", decision)
    assert redact(hidden, decision.args) == {
        "url": "u", "api_key": REDACTED, "scope": REDACTED, "secret": "",
    }  # fmt: skip
    # A call another tool's secret is sent to is denied for its shape: every name hidden.
    denied = snapshot.decide(Request("p", "mail.send", {"api_key": "sk-live-1234"}))
    assert redact(hidden_for(snapshot, "mail.send", denied), {"api_key": "k"}) == {
        "api_key": REDACTED
    }


def test_fmt_prints_secret_before_the_type_and_round_trips() -> None:
    written = (
        "toolset vendor {\n  tool connect(url:str,api_key :  secret   str, b ?:secret str)\n}\n"
    )
    formatted = format_file(parse(written, "a.charter"))
    assert "tool connect(url: str, api_key: secret str, b?: secret str)" in formatted
    assert format_file(parse(formatted, "a.charter")) == formatted
    assert parse(formatted, "a.charter") == parse(written, "a.charter")


@pytest.mark.parametrize(
    ("params", "column", "message"),
    [
        ("secret api_key: str", 16, "`secret` goes after the parameter's name and `:`"),
        ("api_key: str secret", 29, "`secret` is misplaced here"),
        ("api_key: list[secret str]", 30, "`secret` is misplaced here"),
        ("api_key: secret secret str", 32, "`secret` is misplaced here"),
        ("api_key secret: str", 24, "`secret` is misplaced here"),
    ],
)
def test_a_misplaced_secret_says_where_it_goes(params: str, column: int, message: str) -> None:
    found = diagnostics(f"toolset vendor {{\n  tool connect({params})\n}}\n")
    assert len(found) == 1
    code, col, text, help = found[0]
    assert (code, col) == ("E0002", column) and text.startswith(message)
    assert (
        help == "`secret` stands after the parameter's `:`, before its type: `api_key: secret str`"
    )


def test_secret_outside_a_parameter_is_a_plain_syntax_error() -> None:
    [(code, _, message, help)] = diagnostics("role r {\n  allow agents.list\n  secret\n}\n")
    assert code == "E0002" and message.startswith("unexpected `secret`") and help is None


def test_a_secret_is_a_str_without_a_default() -> None:
    found = diagnostics(
        'toolset v {\n  tool c(a: secret int, b?: secret str, c: secret str = "k")\n}\n'
    )
    assert [(code, col) for code, col, _, _ in found] == [("E0021", 20), ("E0020", 57)]
    assert found[0][3] == "write `a: secret str`, or drop `secret`"
    assert found[1][2] == "secret parameter `c` has a default"


def test_a_hook_may_not_copy_a_toolsets_secret_elsewhere() -> None:
    copying = """
hook leak on vendor.connect {
  rewrite args.url = lower(args.api_key)
}
hook keep on vendor.connect {
  rewrite args.api_key = lower(args.api_key)
}
"""
    found = diagnostics(TOOLSET + USE + copying)
    assert [(code, message) for code, _, message, _ in found] == [
        (
            "E0207",
            "hook `leak` copies `args.api_key`, a secret of `vendor.connect`, into "
            "`args.url`, which the log and responses show",
        )
    ]
