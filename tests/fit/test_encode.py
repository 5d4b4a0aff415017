"""The z3 encoding of single operations agrees with engine.runtime on small inputs."""

from __future__ import annotations

import itertools

import pytest
import z3

from engine.fit import fit_source
from engine.fit.model import _text as model_text
from engine.fit.relations import glob_match
from engine.fit.terms import Unsupported, text_val
from engine.runtime import glob
from tests.fit.support import roles_effect, snapshot

PATTERNS = ("", "*", "**", "a*", "*a", "a*b", "*ab*", "a*b*", "*a*b", "ab*ba", "a**b", "*@x*")
TEXTS = ["", *("".join(t) for n in range(1, 4) for t in itertools.product("ab@x", repeat=n))]


def test_glob_encoding_equals_runtime_glob() -> None:
    text = z3.String("s")
    for pattern in PATTERNS:
        formula = glob_match(text, pattern)
        for value in TEXTS:
            got = z3.simplify(z3.substitute(formula, (text, z3.StringVal(value))))
            assert z3.is_true(got) == glob(value, pattern), (pattern, value)


# Texts z3 would have read as escapes, or that hold characters z3 shows escaped.
ESCAPY = ["\\u0041", "\\u{41}", "\\", "a\\b", "\\x41", "é\\u{e9}", "\\u{5c}", "\u0007\U0002ffff"]


def test_a_string_literal_is_its_own_characters_in_z3() -> None:
    for text in ESCAPY:
        value = z3.simplify(text_val(text))
        assert z3.simplify(z3.Length(value)).as_long() == len(text), text
        assert model_text(value) == text
    with pytest.raises(Unsupported):
        text_val("\U000e0041")  # (above z3's characters: it read `\u{e0041}`, 9 of them)


CALLER = 'role c { allow mail.send where args.to startswith "A" }\nprofile caller { roles c }'


@pytest.mark.parametrize(
    "where",
    ['args.to startswith "\\\\u0041"', 'args.to like "\\\\u{41}*"', 'args.to == "\\\\u{41}"'],
)
def test_a_literal_spelling_an_escape_does_not_fit_a_caller_of_the_escaped_text(
    where: str,
) -> None:
    # z3.StringVal read `\u0041` in a literal as "A": the role fitted, and allowed
    # `mail.send` to `\u0041...`, which the caller may not send
    snap = snapshot(CALLER)
    result = fit_source(snap, "caller", f"role r {{ allow mail.send where {where} }}")
    assert [v.kind for v in result.violations] == ["widens"]
    call = result.violations[0].counterexample
    assert call is not None and str(call["args"]["to"]).startswith("\\u")
    assert roles_effect(snap, "caller", call) == "deny"


def test_a_literal_of_a_character_above_z3s_does_not_fit() -> None:
    # its nine-character spelling and the character were one z3 string
    snap = snapshot(
        'role c { allow mail.send where args.to == "\\\\u{e0041}" }\nprofile caller { roles c }'
    )
    result = fit_source(
        snap, "caller", 'role r { allow mail.send where args.to == "\\udb40\\udc41" }'
    )
    assert not result.fits
    assert [v.kind for v in result.violations] == ["unsupported"]
