"""`host(url)` reads only URLs every parser reads alike (engine/runtime.py).

`https://evil.com\\.example.com/` is host `evil.com\\.example.com` to Python's urlsplit
and `evil.com` to a browser's (WHATWG) parser, and `https://evil.com\\@docs.python.org/`
is `docs.python.org` to one and `evil.com` to the other: with the fixtures' own rule
`allow web.fetch where host(args.url) endswith ".example.com" or host(args.url) ==
"docs.python.org"`, both were allowed, and a tool on a WHATWG client fetched evil.com.
A URL parsers may read differently is an error, which never grants.
"""

from __future__ import annotations

import pytest

from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Request
from engine.reference import reference_decide
from engine.runtime import EvalError, host

POLICY = """
toolset web {
  tool fetch(url: str)
}
role researcher {
  allow web.fetch where host(args.url) endswith ".example.com" or host(args.url) == "docs.python.org"
}
profile web {
  roles researcher
  hooks none
}
"""

PLAIN = {
    "https://a.example.com/x?y=1#z": "a.example.com",
    "https://DOCS.python.org:443/3/": "docs.python.org",
    "http://[::1]:8080/": "::1",
    "https://xn--e1afmkfd.example.com/": "xn--e1afmkfd.example.com",
    "https://a_b.example.com": "a_b.example.com",
    "http://127.0.0.1:8080/": "127.0.0.1",
    "http://v1.example.com/": "v1.example.com",
}
AMBIGUOUS = [
    "https://evil.com\\.example.com/",
    "https://evil.com\\@docs.python.org/",
    "https://user:pass@docs.python.org/",
    "https://evil.com@a.example.com/",
    " https://a.example.com/",
    "https://a.example.com/\tx",
    "https://a.example.com\x00.evil.com/",
    "https://ex\u0430mple.example.com/",  # a Cyrillic `а`
    "https://evil%2Ecom.example.com/",
    # an IPv4 address in a notation other than four decimal numbers, which a browser's
    # parser reads as 127.0.0.1 (`host(url) == "127.0.0.1"` would not see it)
    "http://2130706433/",
    "http://0x7f000001/",
    "http://127.1/",
    "http://0177.0.0.1/",
    "http://10.0.0.01/",
    "http://example.123/",
    "http://localhost./",  # a trailing dot: the same host, another string
    "http://a..b/",
]


@pytest.mark.parametrize(("url", "name"), PLAIN.items())
def test_a_plain_url_gives_its_host(url: str, name: str) -> None:
    assert host(url) == name


@pytest.mark.parametrize("url", AMBIGUOUS)
def test_a_url_parsers_may_read_differently_is_an_error(url: str) -> None:
    with pytest.raises(EvalError):
        host(url)


@pytest.mark.parametrize("url", AMBIGUOUS)
def test_such_a_url_is_never_allowed(url: str) -> None:
    workspace = check_sources([("policy.charter", POLICY)])
    request = Request("web", "web.fetch", {"url": url})
    decision = compile_workspace(workspace).decide(request)
    assert decision.effect == "deny" and decision.errors, decision
    assert reference_decide(workspace, request)[0] == "deny"


def test_the_rule_still_allows_what_it_names() -> None:
    snapshot = compile_workspace(check_sources([("policy.charter", POLICY)]))
    for url, effect in (("https://docs.python.org/3/", "allow"),
                        ("https://a.example.com/", "allow"),
                        ("https://evil.com/", "deny")):  # fmt: skip
        assert snapshot.decide(Request("web", "web.fetch", {"url": url})).effect == effect
