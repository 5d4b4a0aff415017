"""docs/design.md states what the code does: its example workspace checks and its tests
pass as printed, its tables of default hooks, Seed messages and reasoning levels are the
code's own, so the design doc fails here when it drifts from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from api.cli import main
from engine import seed as seed_rules
from engine.builtins import default_hooks
from grammar.fmt import expr_text
from policy import identities, seed

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")


def _section(number: int) -> str:
    """Section `number` of the design doc, from its heading to the next one of its level."""
    match = re.search(rf"^## {number}\. .*?(?=^## |\Z)", DOC, re.MULTILINE | re.DOTALL)
    assert match is not None, f"no section {number}"
    return match.group()


def _table(text: str, header: str) -> list[list[str]]:
    """The rows of the table whose header row is `header`, as their cells."""
    lines = text.splitlines()
    start = lines.index(header) + 2  # (past the header and the `| --- |` row)
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
        rows.append([cell.strip().replace("\\|", "|") for cell in cells])
    return rows


def _words(text: str) -> str:
    """Text with its line breaks and runs of spaces as single spaces."""
    return " ".join(text.split())


def test_the_section_numbers_are_the_ones_cited() -> None:
    titles = re.findall(r"^## (\d+)\. (.*)$", DOC, re.MULTILINE)
    assert titles == [
        ("1", "The model"),
        ("2", "How a decision is made"),
        ("3", "Agents can only narrow"),
        ("4", "The Charter DSL"),
        ("5", "Architecture"),
        ("6", "HTTP"),
        ("7", "The Seed agent definition"),
    ]
    steps = re.findall(r"^(\d)\. \*\*(.*?)\*\*", _section(2), re.MULTILINE)
    assert [n for n, _ in steps] == [str(i) for i in range(1, 8)]
    assert steps[5][1].startswith("Budget and connection") and steps[6][1] == "Hooks"


def test_the_example_workspace_checks_and_its_tests_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"^```\n(.*?)^```$", _section(4), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    (tmp_path / "example.charter").write_text(blocks[0], encoding="utf-8")
    capsys.readouterr()
    assert main(["check", str(tmp_path)]) == 0
    assert main(["test", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "4 passed, 0 failed"
    assert main(["fmt", "--check", str(tmp_path)]) == 0  # printed in the canonical form


def test_the_default_hooks_table_is_the_catalogues() -> None:
    rows = _table(_section(4), "| hook | pauses |")
    documented = {}
    for name, pauses in rows:
        patterns, _, where = pauses.partition(" where ")
        documented[name.strip("`")] = (
            tuple(re.findall(r"`([^`]+)`", patterns)),
            where.strip("`") or None,
        )
    assert documented == {
        hook.name: (
            tuple(p.text for p in hook.patterns),
            None if hook.where is None else expr_text(hook.where),
        )
        for hook in default_hooks()
    }
    assert all(hook.kind == "pause" for hook in default_hooks())


def _constant_seed_messages() -> set[str]:
    """Every message `policy.seed` raises as a constant string."""
    source = (ROOT / "policy" / "seed.py").read_text(encoding="utf-8")
    return set(re.findall(r'SeedError\("([^"{]+)"\)', source))


def test_the_seed_messages_table_is_the_codes() -> None:
    documented = {message for _, message in _table(_section(7), "| check | message |")}
    labelled = {
        f"{label} is {what}"
        for label in ("Name", "Model provider", "Model", "System prompt", "Signing key")
        for what in ("required", "too large")
    }
    constants = _constant_seed_messages()
    assert documented <= constants
    assert constants - documented <= labelled  # the rest: "<Label> is required", ...
    assert "`<Label> is required`" in DOC and "`<Label> is too large`" in DOC


def test_the_seed_grants_and_refusals_are_the_codes() -> None:
    grants = _words(_section(7))
    for name in (*seed_rules.CALLABLES, *seed_rules.VERBS, *seed_rules.PUBLISH_NAMES):
        assert f"`{name}`" in grants
    assert _words(seed_rules.PUBLISH_REFUSED) in grants
    assert _words(seed_rules.RUNS_CODE_REFUSED.format(name="<name>")) in grants
    assert seed_rules.AUTHORED_TOOL_NAME.pattern in grants
    assert f"at most {seed.TOOLS_MAX} entries" in grants
    assert f"at most {seed.TOOL_NAME_LIMIT} bytes" in grants
    assert f"`{identities.NOT_FOUND}`" in grants
    assert f'{{kind: "{identities.KIND}", accountId, label, name, ...}}' in grants


# One model of each row of the reasoning-level table: (provider, model).
ROW_MODELS = {
    "OpenAI o1, o3, o4 (`^o[134](-|$)`)": [("openai", "o1"), ("openai", "o4-mini")],
    "OpenAI gpt-5.0 family (not `gpt-5-chat*`)": [("openai", "gpt-5"), ("openai", "gpt-5-mini")],
    "OpenAI gpt-5.1": [("openai", "gpt-5.1")],
    "OpenAI gpt-5.2 and later, gpt-6 and later": [("openai", "gpt-5.2"), ("openai", "gpt-6")],
    "OpenAI before gpt-5, and `gpt-5-chat*`": [("openai", "gpt-4o"), ("openai", "gpt-5-chat")],
    "Anthropic claude-3-7 and later (`claude-sonnet-4-5` style ids too)": [
        ("anthropic", "claude-3-7-sonnet-20250219"),
        ("anthropic", "claude-sonnet-4-5"),
    ],
    "Google gemini-2.5 and later": [("google", "gemini-2.5-pro"), ("google", "gemini-3-flash")],
    "any other provider": [("mistral", "mistral-large")],
}


def test_the_reasoning_level_table_is_the_codes() -> None:
    rows = _table(_section(7), "| provider / model | levels |")
    assert [row for row, _ in rows] == list(ROW_MODELS)
    for row, levels in rows:
        expected = () if levels == "none" else tuple(levels.split(", "))
        for provider, model in ROW_MODELS[row]:
            assert seed.reasoning_levels(provider, model) == expected, (row, model)
    assert all(f"`{level}`" in _section(7) for level in seed.REASONING_LEVELS)
    with pytest.raises(seed.SeedError) as refused:
        seed.check_reasoning_level("openai", "gpt-5.1", "minimal")
    assert f"`{refused.value.message}`" in _words(_section(7))
