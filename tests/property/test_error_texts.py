"""A condition's error never quotes a run-time value (engine/runtime.py).

An error's message goes into the decision, its log row, the HTTP answer and the command
line's output, where a secret argument (`api_key: secret str`, a connection's
`credential`) is shown `[redacted]`: a message that quoted what `host` read of it showed
a piece of the secret there. So every message is made of the runtime's own words and of
text of the policy (in backticks: a path, a function's argument as written), whatever
the values: URLs that `host` refuses in each of its ways, numbers that are not finite,
values of every kind where a function takes a string.
"""

from __future__ import annotations

import inspect
import re
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from api.service.redaction import redact
from engine import runtime
from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Request
from engine.explain import explain

POLICY = """
toolset vendor {
  tool connect(url: str, api_key: secret str, opts: map = {})
}
role reader {
  allow vendor.connect where host(args.api_key) endswith ".example.com" and lower(args.api_key) like "*a*"
  allow vendor.connect where len(args.opts.k) > 2 or host(args.opts.k) == "h" or lower(args.opts.k) == "l"
  allow vendor.connect where args.opts.k > 3 or args.opts.k startswith "s" or args.opts.k in ["i"]
  allow vendor.connect where args.api_key in ["zz"] or args.api_key contains "c" or len(args.api_key) < 0
}
hook lowered on vendor.connect {
  rewrite args.api_key = lower(args.api_key)
}
hook look on vendor.connect where host(lower(args.api_key)) == "x" or host(args.url) == "y" {
  pause "a human looks"
}
profile p {
  roles reader
  hooks lowered, look
}
"""
SNAPSHOT = compile_workspace(check_sources([("p.charter", POLICY)]))

# The runtime's own words (its messages' text outside backticks), and what it quotes of its
# own (`host`'s messages name the characters and the part of a URL it does not read).
WORDS = set(re.findall(r"[A-Za-z0-9]+", inspect.getsource(runtime)))
QUOTED = {"-", "_", ".", "user@"}

hosts = st.one_of(
    st.sampled_from(
        (
            "a.example.com",
            "A.Example.COM",
            "127.0.0.1",
            "127.1",
            "0x7f000001",
            "2130706433",
            "[::1]",
            "[::1",
            "[zz]",
            "exa\u0430mple.com",
            "ex%2Ecom",
            "a\\b.com",
            "a b",
            "",
            "a..b",
        )
    ),
    st.text(min_size=1, max_size=12),
)
urls = st.builds(
    lambda scheme, user, host, rest: f"{scheme}{user}{host}{rest}",
    st.sampled_from(("https://", "http://", "zq://", "", "//")),
    st.sampled_from(("", "user@", "u:p@", "@")),
    hosts,
    st.sampled_from(("", "/", "/x?y=1#z", ":80/", ":port/", "\\x", " x", "\t")),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=8), urls,
    st.sampled_from((float("nan"), float("inf"), Decimal("NaN"), Decimal("-Infinity"), 1.5)),
)  # fmt: skip
anything = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)  # fmt: skip


def errors(decision: Any, trace: str) -> list[str]:
    """Every error of the decision, and each one the trace reports (its reasons and near
    misses are the rules' own, made once per revision)."""
    found = [e.message for e in decision.errors]
    found += re.findall(r"-> error \((.*)\)$", trace, re.M)
    return found


@given(api_key=st.one_of(urls, st.text(max_size=20)), url=urls, k=anything)
def test_an_error_holds_policy_text_and_the_runtime_words_only(
    api_key: str, url: str, k: Any
) -> None:
    request = Request("p", "vendor.connect", {"url": url, "api_key": api_key, "opts": {"k": k}})
    decision, trace = explain(
        SNAPSHOT, request, show=lambda v: str(redact(frozenset({"api_key"}), v))
    )
    assert decision == SNAPSHOT.decide(request)
    for message in errors(decision, trace):
        for quoted in re.findall(r"`([^`]*)`", message):
            assert quoted in POLICY or quoted in QUOTED, (message, quoted)
        for word in re.findall(r"[A-Za-z0-9]+", re.sub(r"`[^`]*`", "", message)):
            assert word in WORDS or word in POLICY, (message, word)
