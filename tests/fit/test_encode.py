"""The z3 encoding of single operations agrees with engine.runtime on small inputs."""

from __future__ import annotations

import itertools

import z3

from engine.fit.relations import glob_match
from engine.runtime import glob

PATTERNS = ("", "*", "**", "a*", "*a", "a*b", "*ab*", "a*b*", "*a*b", "ab*ba", "a**b", "*@x*")
TEXTS = ["", *("".join(t) for n in range(1, 4) for t in itertools.product("ab@x", repeat=n))]


def test_glob_encoding_equals_runtime_glob() -> None:
    text = z3.String("s")
    for pattern in PATTERNS:
        formula = glob_match(text, pattern)
        for value in TEXTS:
            got = z3.simplify(z3.substitute(formula, (text, z3.StringVal(value))))
            assert z3.is_true(got) == glob(value, pattern), (pattern, value)
