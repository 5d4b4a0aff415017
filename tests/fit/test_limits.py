"""What bounds the fit check's work on text anyone with a `decide` token may send
(`POST /v1/fit`): one deadline for the whole text, and sizes past which z3 would not stop
on its own timeout (then `unsupported`: does not fit, as any construct outside the
fragment)."""

from __future__ import annotations

import time

import pytest

from engine.fit import encode, fit_source
from tests.fit.support import snapshot

CALLER = """
role mailer {
  allow mail.send where args.to endswith "@example.com"
}
profile caller { roles mailer }
"""


def _kinds(source: str, timeout_ms: int = 2000) -> list[str]:
    result = fit_source(snapshot(CALLER), "caller", source, timeout_ms=timeout_ms)
    assert not result.fits
    return [v.kind for v in result.violations]


def test_one_deadline_bounds_every_role_of_the_text() -> None:
    # Each of these roles widens, found in a few tens of milliseconds; with a deadline of
    # its own each, 40 of them took as long as 40 of those (300 roles: 13 s at the
    # service's 2 s), and none ran out of time.
    source = "\n".join(
        f'role r{i} {{ allow mail.send where args.to endswith "@x{i}.org" }}' for i in range(40)
    )
    started = time.monotonic()
    kinds = _kinds(source, timeout_ms=300)
    assert time.monotonic() - started < 2.0
    assert len(kinds) == 40  # every role still answered for
    assert "timeout" in kinds


def test_a_like_of_many_stars_is_outside_the_fragment() -> None:
    # 1,600 `*`s kept z3 in its assertion for over 15 minutes, deaf to the timeout.
    stars = "*a" * (getattr(encode, "MAX_GLOB_STARS", 32) + 1)
    assert _kinds(f'role r {{ allow mail.send where args.to like "{stars}" }}', 300) == [
        "unsupported"
    ]


def test_a_long_literal_is_outside_the_fragment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A `!=` of one 24,000-character literal took one check 15 s, whatever its timeout.
    monkeypatch.setattr(encode, "MAX_LITERAL", 16, raising=False)
    assert _kinds('role r { allow mail.send where args.to == "0123456789abcdef" }') == ["widens"]
    result = fit_source(
        snapshot(CALLER),
        "caller",
        'role r { allow mail.send where args.to == "0123456789abcdefg" }',
    )
    assert [v.kind for v in result.violations] == ["unsupported"]
    assert "a string literal of 17 characters" in result.violations[0].message


def test_literals_are_bounded_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    # 240 literals of 1,000 characters took one check 7.5 s.
    # (the caller's "@example.com" is 12 of them)
    monkeypatch.setattr(encode, "MAX_LITERALS", 40, raising=False)
    fits = 'role r { allow mail.send where args.to == "0123456789abcdef" }'
    assert _kinds(fits) == ["widens"]
    many = 'role r { allow mail.send where args.to in ["0123456789abcdef", "0123456789abcdef"] }'
    assert _kinds(many) == ["unsupported"]
