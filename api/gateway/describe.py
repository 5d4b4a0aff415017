"""A tool's limits in plain words, for the description an MCP client shows its model.

The listing (engine.listing) says of each tool whether every call is allowed (`allow`),
none (`deny`: the gateway does not show it) or some (`narrow`, with the condition they
must meet), and which hooks act on it. The description the server gave is kept and these
lines are added after it, so the model knows before it calls what Charter will refuse,
change or hold for a person.
"""

from __future__ import annotations

import re
from typing import Any

_ARGS = re.compile(r"\bargs\.")


def _words(condition: str) -> str:
    """A condition as the model reads its arguments: `args.to` is `to`."""
    return _ARGS.sub("", condition)


def limits(entry: dict[str, Any]) -> list[str]:
    """The lines that say what Charter does with calls of a listed tool (none for a tool
    every call of which is allowed and that no hook acts on)."""
    lines = []
    if entry.get("status") == "narrow" and entry.get("condition"):
        lines.append(f"Allowed only when: {_words(entry['condition'])}.")
    for hook in entry.get("hooks") or ():
        when = f" when {_words(hook['condition'])}" if hook.get("condition") else ""
        kind = hook.get("kind")
        if kind == "pause":
            lines.append(f"Calls{when} wait for a person's approval before they run.")
        elif kind == "rewrite":
            lines.append(f"Calls{when} may have their arguments changed before they run.")
        elif kind == "deny":
            lines.append(f"Calls{when} are refused.")
    return lines


def described(description: str | None, entry: dict[str, Any]) -> str | None:
    """The upstream's description with the tool's limits after it."""
    lines = limits(entry)
    if not lines:
        return description
    said = "Charter: " + " ".join(lines)
    return said if not description else f"{description}\n\n{said}"
