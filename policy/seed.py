"""The Seed Hypermedia `AgentDefinition`: normalization with Seed's own limits and messages.

docs/design.md section 7 fixes the rules and the wording;
the messages here are part of the contract, so they are kept verbatim (capitalized, as
Seed writes them), and each failure is a `SeedError` with the HTTP status Seed answers
with.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import cbor2

from policy.metadata import METADATA_LIMIT  # (Seed's cap, which identities and agents share)

REASONING_LEVELS: tuple[str, ...] = ("minimal", "low", "medium", "high", "xhigh")

NAME_LIMIT = 256
PROMPT_LIMIT = 64 * 1024
TOOLS_MAX = 32
TOOL_NAME_LIMIT = 128
TOOLS_TOTAL_LIMIT = 4 * 1024


class SeedError(ValueError):
    """A definition Seed would refuse; `status` is the HTTP status Seed answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class AgentDefinition:
    """A normalized definition: strings trimmed, prompt kept as given (string or blocks)."""

    name: str
    system_prompt: str | list[Any]
    model_provider: str
    model: str
    reasoning_level: str | None = None
    tools: tuple[str, ...] | None = None
    signing_keys: tuple[str, ...] = ()
    metadata: Mapping[str, Any] | None = None

    @property
    def rendered_prompt(self) -> str:
        return render_prompt(self.system_prompt)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "systemPrompt": self.system_prompt,
            "modelProvider": self.model_provider,
            "model": self.model,
        }
        if self.reasoning_level is not None:
            out["reasoningLevel"] = self.reasoning_level
        if self.tools is not None:
            out["tools"] = list(self.tools)
        if len(self.signing_keys) == 1:
            out["signingKey"] = self.signing_keys[0]
        elif self.signing_keys:
            out["signingKeys"] = list(self.signing_keys)
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        return out


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _required_string(raw: Mapping[str, Any], key: str, label: str, limit: int) -> str:
    value = raw.get(key)
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise SeedError(f"{label} is required")
    if _size(text) > limit:
        raise SeedError(f"{label} is too large")
    return text


def _block_markdown(node: Any, depth: int, out: list[str]) -> None:
    if not isinstance(node, Mapping):
        raise SeedError("System prompt blocks are invalid")
    block = node.get("block")
    if not isinstance(block, Mapping):
        raise SeedError("System prompt blocks are invalid")
    for field in ("id", "type"):
        value = block.get(field)
        if not isinstance(value, str) or not value:
            raise SeedError("System prompt blocks are invalid")
    text = block.get("text")
    if isinstance(text, str) and text.strip():
        kind = block["type"]
        if kind == "Heading":
            out.append("#" * min(depth + 1, 6) + " " + text.strip())
        elif kind == "Code":
            out.append("```\n" + text + "\n```")
        else:
            out.append(text.strip())
    children = node.get("children")
    if children is None:
        return
    if not isinstance(children, list):
        raise SeedError("System prompt block children are invalid")
    for child in children:
        _block_markdown(child, depth + 1, out)


def render_prompt(prompt: str | list[Any]) -> str:
    """A prompt as the model sees it: a string as is, a block tree rendered to markdown."""
    if isinstance(prompt, str):
        return prompt.strip()
    out: list[str] = []
    for node in prompt:
        _block_markdown(node, 0, out)
    return "\n\n".join(out).strip()


def _prompt(raw: Mapping[str, Any]) -> str | list[Any]:
    prompt = raw.get("systemPrompt")
    if isinstance(prompt, str):
        value: str | list[Any] = prompt.strip()
    elif isinstance(prompt, list):
        value = prompt
    elif prompt is None:
        raise SeedError("System prompt is required")
    else:
        raise SeedError("System prompt must be blocks")
    rendered = render_prompt(value)
    if not rendered:
        raise SeedError("System prompt is required")
    if _size(rendered) > PROMPT_LIMIT:
        raise SeedError("System prompt is too large")
    return value


def _tools(raw: Mapping[str, Any]) -> tuple[str, ...] | None:
    if "tools" not in raw or raw["tools"] is None:
        return None
    tools = raw["tools"]
    if not isinstance(tools, list):
        raise SeedError("Tools must be an array")
    if len(tools) > TOOLS_MAX:
        raise SeedError("Too many tools")
    total = 0
    for tool in tools:
        if not isinstance(tool, str) or not tool or tool != tool.strip():
            raise SeedError("Tools must be non-empty trimmed strings")
        if _size(tool) > TOOL_NAME_LIMIT:
            raise SeedError("Tool name is too large")
        total += _size(tool)
    if total > TOOLS_TOTAL_LIMIT:
        raise SeedError("Tools are too large")
    return tuple(tools)


def _metadata(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if "metadata" not in raw or raw["metadata"] is None:
        return None
    metadata = raw["metadata"]
    if not isinstance(metadata, Mapping):
        raise SeedError("Metadata must be an object")
    try:
        encoded = cbor2.dumps(dict(metadata))
    except (cbor2.CBOREncodeError, TypeError, ValueError, RecursionError):
        raise SeedError("Metadata must be an object") from None
    if len(encoded) > METADATA_LIMIT:
        raise SeedError("Metadata is too large")
    return dict(metadata)


def _signing_keys(raw: Mapping[str, Any], exists: Callable[[str], bool] | None) -> tuple[str, ...]:
    names: list[Any] = []
    if raw.get("signingKey") is not None:
        names.append(raw["signingKey"])
    if raw.get("signingKeys") is not None:
        if not isinstance(raw["signingKeys"], list):
            raise SeedError("Signing key is required")
        names.extend(raw["signingKeys"])
    out: list[str] = []
    for name in names:
        text = name.strip() if isinstance(name, str) else ""
        if not text:
            raise SeedError("Signing key is required")
        if _size(text) > NAME_LIMIT:
            raise SeedError("Signing key is too large")
        if exists is not None and not exists(text):
            raise SeedError("Signing key not found")
        if text not in out:
            out.append(text)
    return tuple(out)


def normalize(raw: Any, signing_key_exists: Callable[[str], bool] | None = None) -> AgentDefinition:
    """Validate and normalize a definition (create and update); raises `SeedError`.

    `signing_key_exists(name)` says whether a stored secret of kind `hm-account-key` has
    that name; without it the signing-key names are only checked for shape.
    """
    if not isinstance(raw, Mapping):
        raise SeedError("Name is required")
    name = _required_string(raw, "name", "Name", NAME_LIMIT)
    provider = _required_string(raw, "modelProvider", "Model provider", NAME_LIMIT)
    model = _required_string(raw, "model", "Model", NAME_LIMIT)
    prompt = _prompt(raw)
    level = raw.get("reasoningLevel")
    if level is not None:
        if level not in REASONING_LEVELS:
            raise SeedError("Reasoning level is invalid")
        check_reasoning_level(provider, model, level)
    return AgentDefinition(
        name=name,
        system_prompt=prompt,
        model_provider=provider,
        model=model,
        reasoning_level=level,
        tools=_tools(raw),
        signing_keys=_signing_keys(raw, signing_key_exists),
        metadata=_metadata(raw),
    )


# ---- reasoning levels per model (docs/design.md section 7, "Reasoning levels per model") ---

_O_SERIES = re.compile(r"^o[134](-|$)")
_GPT = re.compile(r"^gpt-(\d+)(?:\.(\d+))?")
_GEMINI = re.compile(r"^gemini-(\d+)(?:\.(\d+))?")
_CLAUDE_OLD = re.compile(r"^claude-(\d+)(?:-(\d)(?!\d))?-[a-z]")
_CLAUDE_NEW = re.compile(r"^claude-[a-z]+-(\d+)(?:-(\d{1,2})(?!\d))?")

_FOUR = ("minimal", "low", "medium", "high")
_THREE = ("low", "medium", "high")


def _version(match: re.Match[str]) -> tuple[int, int]:
    return int(match.group(1)), int(match.group(2) or 0)


def reasoning_levels(provider: str, model: str) -> tuple[str, ...]:
    """The levels a model accepts; empty when it takes no reasoning level."""
    provider, model = provider.strip().lower(), model.strip().lower()
    if provider == "openai":
        if _O_SERIES.match(model):
            return _THREE
        gpt = _GPT.match(model)
        if gpt is None:
            return ()
        major, minor = _version(gpt)
        if major < 5 or model.startswith("gpt-5-chat"):
            return ()
        if major == 5 and minor == 0:
            return _FOUR
        if major == 5 and minor == 1:
            return _THREE
        return (*_THREE, "xhigh")
    if provider == "anthropic":
        match = _CLAUDE_OLD.match(model) or _CLAUDE_NEW.match(model)
        return _FOUR if match is not None and _version(match) >= (3, 7) else ()
    if provider == "google":
        gemini = _GEMINI.match(model)
        return _FOUR if gemini is not None and _version(gemini) >= (2, 5) else ()
    return ()


def check_reasoning_level(provider: str, model: str, level: str) -> None:
    levels = reasoning_levels(provider, model)
    if not levels:
        raise SeedError(f"Model {model} does not support a reasoning level")
    if level not in levels:
        raise SeedError(
            f"Model {model} does not support reasoning level '{level}' (valid: {', '.join(levels)})"
        )
