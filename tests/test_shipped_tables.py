"""The parse tables shipped in grammar/shipped_tables.py are what lark builds from
grammar/charter.lark (so a parse never needs lark's half-second build), numbered the
same whatever the process's hash seed; tables made from another grammar are not used."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grammar import shipped_tables, tables

HELP = "run `python -m grammar.tables` to write them again"


def test_the_shipped_tables_are_lark_s_build_of_the_grammar() -> None:
    assert tables.grammar_digest() == shipped_tables.GRAMMAR_SHA256, HELP
    assert tables.table_data() == shipped_tables.DATA, HELP


def test_the_tables_are_numbered_alike_in_every_process() -> None:
    code = "from grammar.tables import table_data; print(repr(table_data()))"
    seen = set()
    for seed in ("1", "2"):
        env = {"PYTHONHASHSEED": seed, "PATH": ""}
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        seen.add(run.stdout)
    assert len(seen) == 1 and "actions" in next(iter(seen))


def test_tables_of_another_grammar_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shipped_tables, "GRAMMAR_SHA256", "0" * 64)
    assert tables._shipped() is None
