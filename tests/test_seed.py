"""The Seed agent definition: normalization, reasoning levels and grants, to the letter."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Request
from engine.seed import (
    CALLABLES,
    PUBLISH_REFUSED,
    SeedGrants,
    decide_authored_tool,
    decide_call,
    decide_write,
    to_role_source,
)
from policy.seed import SeedError, normalize, reasoning_levels, render_prompt


def base(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "  helper  ",
        "systemPrompt": "You help.",
        "modelProvider": "openai",
        "model": "gpt-5",
    }
    raw.update(changes)
    return raw


def refused(raw: Any, **kwargs: Any) -> str:
    with pytest.raises(SeedError) as info:
        normalize(raw, **kwargs)
    assert info.value.status == 400
    return info.value.message


def test_strings_are_trimmed() -> None:
    definition = normalize(base())
    assert definition.name == "helper"
    assert definition.model == "gpt-5"
    assert definition.tools is None


@pytest.mark.parametrize(
    ("key", "label"),
    [("name", "Name"), ("modelProvider", "Model provider"), ("model", "Model")],
)
def test_required_and_too_large(key: str, label: str) -> None:
    assert refused(base(**{key: "   "})) == f"{label} is required"
    assert refused(base(**{key: None})) == f"{label} is required"
    assert refused(base(**{key: "x" * 257})) == f"{label} is too large"
    assert normalize(base(**{key: "é" * 128})) is not None  # 256 bytes exactly
    assert refused(base(**{key: "é" * 129})) == f"{label} is too large"


def test_system_prompt_limits_and_blocks() -> None:
    assert refused(base(systemPrompt="  ")) == "System prompt is required"
    assert refused(base(systemPrompt=None)) == "System prompt is required"
    assert refused(base(systemPrompt=42)) == "System prompt must be blocks"
    assert refused(base(systemPrompt="x" * (64 * 1024 + 1))) == "System prompt is too large"
    assert normalize(base(systemPrompt="x" * (64 * 1024))) is not None
    assert refused(base(systemPrompt=[{"block": {"id": "", "type": "p"}}])) == (
        "System prompt blocks are invalid"
    )
    assert refused(base(systemPrompt=[{"block": {"id": "a"}}])) == (
        "System prompt blocks are invalid"
    )
    assert refused(base(systemPrompt=["text"])) == "System prompt blocks are invalid"
    bad_children = [{"block": {"id": "a", "type": "Paragraph", "text": "x"}, "children": {}}]
    assert refused(base(systemPrompt=bad_children)) == "System prompt block children are invalid"
    assert refused(base(systemPrompt=[{"block": {"id": "a", "type": "Paragraph"}}])) == (
        "System prompt is required"
    )
    big = [{"block": {"id": "a", "type": "Paragraph", "text": "y" * (64 * 1024 + 1)}}]
    assert refused(base(systemPrompt=big)) == "System prompt is too large"


def test_block_tree_renders_to_markdown() -> None:
    tree = [
        {
            "block": {"id": "h", "type": "Heading", "text": "Rules"},
            "children": [
                {"block": {"id": "p", "type": "Paragraph", "text": "Be kind."}},
                {"block": {"id": "c", "type": "Code", "text": "print(1)"}},
            ],
        }
    ]
    assert render_prompt(tree) == "# Rules\n\nBe kind.\n\n```\nprint(1)\n```"
    assert normalize(base(systemPrompt=tree)).rendered_prompt.startswith("# Rules")


def test_tools_limits_and_messages() -> None:
    assert refused(base(tools="search")) == "Tools must be an array"
    assert refused(base(tools=["a"] * 33)) == "Too many tools"
    assert normalize(base(tools=["a"] * 32)).tools == ("a",) * 32
    assert refused(base(tools=[" search"])) == "Tools must be non-empty trimmed strings"
    assert refused(base(tools=[""])) == "Tools must be non-empty trimmed strings"
    assert refused(base(tools=[3])) == "Tools must be non-empty trimmed strings"
    assert refused(base(tools=["x" * 129])) == "Tool name is too large"
    # 32 names of 128 bytes are exactly the 4 KiB allowed in all.
    assert normalize(base(tools=["x" * 128] * 32)).tools is not None


def test_metadata_and_reasoning_level() -> None:
    assert refused(base(metadata=[1])) == "Metadata must be an object"
    assert refused(base(metadata={"x": "y" * (16 * 1024)})) == "Metadata is too large"
    assert normalize(base(metadata={"team": "ops"})).metadata == {"team": "ops"}
    assert refused(base(reasoningLevel="extreme")) == "Reasoning level is invalid"


def test_signing_keys_must_exist() -> None:
    stored = {"hm-account-abc"}
    ok = normalize(base(signingKey="hm-account-abc"), signing_key_exists=stored.__contains__)
    assert ok.signing_keys == ("hm-account-abc",)
    message = refused(base(signingKeys=["hm-account-zzz"]), signing_key_exists=stored.__contains__)
    assert message == "Signing key not found"
    assert refused(base(signingKey="  ")) == "Signing key is required"
    assert refused(base(signingKey="k" * 257)) == "Signing key is too large"


@pytest.mark.parametrize(
    ("provider", "model", "levels"),
    [
        ("openai", "o1", "low medium high"),
        ("openai", "o3-mini", "low medium high"),
        ("openai", "o4-mini-high", "low medium high"),
        ("openai", "o2", ""),
        ("openai", "gpt-5", "minimal low medium high"),
        ("openai", "gpt-5-mini", "minimal low medium high"),
        ("openai", "gpt-5-chat-latest", ""),
        ("openai", "gpt-5.1", "low medium high"),
        ("openai", "gpt-5.2", "low medium high xhigh"),
        ("openai", "gpt-5.4-pro", "low medium high xhigh"),
        ("openai", "gpt-6", "low medium high xhigh"),
        ("openai", "gpt-4o", ""),
        ("openai", "gpt-4.1", ""),
        ("anthropic", "claude-3-7-sonnet-20250219", "minimal low medium high"),
        ("anthropic", "claude-3-5-sonnet-20241022", ""),
        ("anthropic", "claude-3-opus-20240229", ""),
        ("anthropic", "claude-sonnet-4-5", "minimal low medium high"),
        ("anthropic", "claude-sonnet-4-20250514", "minimal low medium high"),
        ("anthropic", "claude-opus-4-1-20250805", "minimal low medium high"),
        ("google", "gemini-2.5-pro", "minimal low medium high"),
        ("google", "gemini-3-flash", "minimal low medium high"),
        ("google", "gemini-2.0-flash", ""),
        ("mistral", "mistral-large", ""),
    ],
)
def test_reasoning_levels_per_model(provider: str, model: str, levels: str) -> None:
    assert reasoning_levels(provider, model) == tuple(levels.split())


def test_reasoning_level_messages() -> None:
    message = refused(base(model="gpt-4o", reasoningLevel="low"))
    assert message == "Model gpt-4o does not support a reasoning level"
    message = refused(base(model="gpt-5.1", reasoningLevel="minimal"))
    assert (
        message
        == "Model gpt-5.1 does not support reasoning level 'minimal' (valid: low, medium, high)"
    )
    assert normalize(base(model="gpt-5.2", reasoningLevel="xhigh")).reasoning_level == "xhigh"


def test_absent_tools_grant_everything_and_publish() -> None:
    grants = SeedGrants.of(normalize(base()))
    assert grants.callables == frozenset(CALLABLES) and grants.publish


@pytest.mark.parametrize(
    "legacy", ["publish", "write", "memory_publish_document", "ipfs_write", "attachment_to_ipfs"]
)
def test_publish_grant_and_legacy_names(legacy: str) -> None:
    grants = SeedGrants.from_tools([legacy])
    assert grants.publish and grants.callables == frozenset()
    assert decide_write(grants, "hm://z6Mk/doc").allowed


def test_execute_code_maps_to_execute_and_verbs_are_not_grants() -> None:
    grants = SeedGrants.from_tools(["execute_code", "read", "search"])
    assert grants.callables == {"execute", "search"}
    assert not grants.publish
    assert decide_call(grants, "execute_code").allowed
    assert not decide_call(grants, "navigate").allowed


def test_public_write_without_grant_is_refused_memory_is_not() -> None:
    grants = SeedGrants.from_tools(["search"])
    for url in ("hm://z6Mk/doc", "ipfs://bafy", "HM://upper"):
        decision = decide_write(grants, url)
        assert (decision.allowed, decision.status, decision.message) == (
            False,
            403,
            PUBLISH_REFUSED,
        )
    assert decide_write(grants, "memory://notes/today.md").allowed
    assert decide_write(grants, "notes/today.md").allowed


def test_authored_tool_that_runs_code_needs_execute() -> None:
    decision = decide_authored_tool(SeedGrants.from_tools(["search"]), "my-lambda", runs_code=True)
    assert decision.status == 403
    assert decision.message == (
        "Tool my-lambda runs code in the sandbox, which is not enabled for this agent. "
        "Its owner can grant code execution in the agent's tool settings."
    )
    assert decide_authored_tool(SeedGrants.from_tools(["execute"]), "my-lambda", True).allowed
    assert decide_authored_tool(SeedGrants.from_tools([]), "my-doc", runs_code=False).allowed
    assert not decide_authored_tool(SeedGrants.from_tools(None), "X", runs_code=False).allowed


tool_lists = st.none() | st.lists(
    st.sampled_from([*CALLABLES, "execute_code", "publish", "write", "read", "ipfs_write", "x"]),
    max_size=8,
)


@given(parent=tool_lists, child=tool_lists, grandchild=tool_lists)
def test_delegated_tools_only_shrink(
    parent: list[str] | None, child: list[str] | None, grandchild: list[str] | None
) -> None:
    """A delegated child's tools can only reduce authority, along any chain."""
    top = SeedGrants.from_tools(parent)
    middle = top.delegate(child)
    bottom = middle.delegate(grandchild)
    assert middle.callables <= top.callables and bottom.callables <= middle.callables
    assert (not middle.publish or top.publish) and (not bottom.publish or middle.publish)


@given(tools=tool_lists, call=st.sampled_from([*CALLABLES, "publish"]))
def test_role_translation_agrees_with_seed_rules(tools: list[str] | None, call: str) -> None:
    """The Charter role made from a definition grants exactly what Seed's rules grant."""
    grants = SeedGrants.from_tools(tools)
    source = (
        to_role_source("seed-agent", grants) + "profile seed { roles seed-agent\n hooks none }\n"
    )
    snapshot = compile_workspace(check_sources([("seed.charter", source)]))
    args: dict[str, Any] = {
        "search": {"query": "q"}, "web_search": {"query": "q"}, "navigate": {"url": "https://a"},
        "execute": {"source": "1"}, "publish": {"url": "hm://doc"},
    }[call]  # fmt: skip
    allowed = snapshot.decide(Request("seed", call, args)).effect == "allow"
    expected = grants.publish if call == "publish" else decide_call(grants, call).allowed
    assert allowed == expected
