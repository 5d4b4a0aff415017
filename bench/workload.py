"""The benchmark workload: a deterministic, seeded policy workspace and request mix.

`generate(roles=...)` returns the DSL text (one file per toolset, role block and
profile block), the same policy as a plain Python model (so the baseline and the Cedar
translation implement exactly the same rules without reading the DSL), and the
requests with the outcome each was built to exercise. Importable and reusable: other
benchmarks (fit, listing, HTTP) build on the same workspace.

Shape (issue 2, item 9): 100 toolsets of 50 tools (5,000 tools in 100 namespaces), each
tool with 2-4 typed arguments; roles of 3-5 rules, about 5% denies on built-in tools,
10% `ns.*` wildcards and 30% of allows narrowed by a condition on arguments (numeric
`<`, `endswith`, `startswith`); 100 profiles of 10 roles each.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.decision import Request

INTENTS = ("allow", "deny", "condition-false", "not-granted")
DEFAULT_MIX: dict[str, float] = {
    "allow": 0.45,
    "deny": 0.10,
    "condition-false": 0.20,
    "not-granted": 0.25,
}

# Built-in tools the roles grant or deny, with the string argument their conditions read.
BUILTIN_ALLOWS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("agents.get", {"id": "a1"}),
    ("agents.list", {}),
    ("threads.create", {"prompt": "summarise the inbox"}),
    ("memory.read", {"path": "/notes/today"}),
    ("memory.write", {"path": "/notes/today", "content": "done"}),
    ("search", {"query": "charter"}),
    ("web_search", {"query": "charter policy"}),
    ("feeds.publish", {"feed": "news", "message": "hello"}),
)
# (tool, argument read by the condition, prefix that makes the deny apply)
BUILTIN_DENIES: tuple[tuple[str, str, str], ...] = (
    ("agents.get", "id", "root-"),
    ("memory.write", "path", "/secret"),
    ("memory.read", "path", "/secret"),
    ("feeds.publish", "feed", "internal-"),
    ("threads.create", "prompt", "sudo "),
    ("web_search", "query", "leak "),
)

# Extra parameters after the two every tool has (`target: str, count: int`).
EXTRA_PARAMS: tuple[tuple[str, str], ...] = (
    ("note", "note?: str"),
    ("verbose", "verbose: bool = false"),
    ("labels", "labels: list[str]"),
    ("ratio", "ratio?: decimal"),
)


@dataclass(frozen=True)
class ToolDef:
    name: str  # full dotted name
    extras: tuple[str, ...]  # names from EXTRA_PARAMS

    def signature(self) -> str:
        params = ["target: str", "count: int"]
        params += [decl for name, decl in EXTRA_PARAMS if name in self.extras]
        return ", ".join(params)


@dataclass(frozen=True)
class Condition:
    """`args.<arg> <op> <value>` with op one of `<`, `endswith`, `startswith`."""

    arg: str
    op: str
    value: str | int

    def dsl(self) -> str:
        value = self.value if isinstance(self.value, int) else f'"{self.value}"'
        return f"args.{self.arg} {self.op} {value}"

    def holds(self, args: dict[str, Any]) -> bool:
        actual = args[self.arg]
        if self.op == "<":
            return bool(actual < self.value)
        if self.op == "endswith":
            return bool(actual.endswith(self.value))
        return bool(actual.startswith(self.value))


@dataclass(frozen=True)
class RuleDef:
    effect: str  # allow | deny
    pattern: str  # `ns.tool`, `ns.*` or a built-in tool
    condition: Condition | None = None

    @property
    def wildcard(self) -> bool:
        return self.pattern.endswith(".*")

    def dsl(self) -> str:
        where = "" if self.condition is None else f" where {self.condition.dsl()}"
        return f"  {self.effect} {self.pattern}{where}"


@dataclass(frozen=True)
class RoleDef:
    name: str
    rules: tuple[RuleDef, ...]


@dataclass(frozen=True)
class ProfileDef:
    name: str
    roles: tuple[str, ...]


@dataclass
class Workload:
    seed: int
    tools: dict[str, ToolDef]
    namespaces: dict[str, list[str]]  # namespace -> its tools' full names
    roles: dict[str, RoleDef]
    profiles: dict[str, ProfileDef]
    sources: list[tuple[str, str]] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    intents: list[str] = field(default_factory=list)

    @property
    def rule_count(self) -> int:
        return sum(len(r.rules) for r in self.roles.values())

    def profile_rules(self, profile: str) -> Iterator[tuple[str, RuleDef]]:
        """(role name, rule) for every rule the profile selects."""
        for role in self.profiles[profile].roles:
            for rule in self.roles[role].rules:
                yield role, rule

    def expand(self, pattern: str) -> list[str]:
        """The tools a rule pattern matches."""
        if pattern.endswith(".*"):
            return list(self.namespaces.get(pattern[:-2], ()))
        return [pattern]


def _tool_args(tool: ToolDef, rng: random.Random) -> dict[str, Any]:
    args: dict[str, Any] = {
        "target": f"user{rng.randrange(1000)}@mail.example",
        "count": rng.randrange(200),
    }
    if "labels" in tool.extras:
        args["labels"] = ["a", "b"][: rng.randrange(3)]
    if "note" in tool.extras and rng.random() < 0.5:
        args["note"] = "fyi"
    if "verbose" in tool.extras and rng.random() < 0.5:
        args["verbose"] = True
    if "ratio" in tool.extras and rng.random() < 0.3:
        args["ratio"] = 0.5
    return args


def _satisfy(cond: Condition, args: dict[str, Any], rng: random.Random, want: bool) -> None:
    """Make `cond` hold (want=True) or fail (want=False) on `args`."""
    if cond.op == "<":
        assert isinstance(cond.value, int)
        limit = cond.value
        args[cond.arg] = rng.randrange(limit) if want else limit + rng.randrange(100)
    elif cond.op == "endswith":
        args[cond.arg] = f"user{rng.randrange(100)}{cond.value}" if want else "x@else.example"
    else:
        args[cond.arg] = f"{cond.value}{rng.randrange(100)}" if want else "other-value"


def _builtin_args(tool: str) -> dict[str, Any]:
    for name, args in BUILTIN_ALLOWS:
        if name == tool:
            return dict(args)
    raise KeyError(tool)


def _random_condition(rng: random.Random) -> Condition:
    op = rng.choice(("<", "endswith", "startswith"))
    if op == "<":
        return Condition("count", "<", rng.randrange(10, 150))
    if op == "endswith":
        return Condition("target", "endswith", f"@corp{rng.randrange(50)}.example")
    return Condition("target", "startswith", f"team{rng.randrange(50)}-")


def _random_rule(rng: random.Random, namespaces: list[str], tools: dict[str, ToolDef]) -> RuleDef:
    roll = rng.random()
    if roll < 0.05:
        tool, arg, prefix = rng.choice(BUILTIN_DENIES)
        cond = Condition(arg, "startswith", prefix) if rng.random() < 0.5 else None
        return RuleDef("deny", tool, cond)
    if roll < 0.15:
        pattern = f"{rng.choice(namespaces)}.*"
    elif roll < 0.25:
        pattern = rng.choice(BUILTIN_ALLOWS)[0]
    else:
        pattern = f"{rng.choice(namespaces)}.t{rng.randrange(len(tools) // len(namespaces)):02d}"
    builtin = "." not in pattern or pattern.split(".")[0] not in namespaces
    cond = None
    if not builtin and rng.random() < 0.30:
        cond = _random_condition(rng)
    return RuleDef("allow", pattern, cond)


def generate(
    roles: int = 1_000,
    profiles: int = 100,
    roles_per_profile: int = 10,
    namespaces: int = 100,
    tools_per_namespace: int = 50,
    requests: int = 20_000,
    seed: int = 20240901,
    mix: dict[str, float] | None = None,
) -> Workload:
    """Build the workload; the same arguments always give the same workload."""
    rng = random.Random(seed)
    ns_names = [f"svc{i:03d}" for i in range(namespaces)]
    tools: dict[str, ToolDef] = {}
    by_ns: dict[str, list[str]] = {}
    for ns in ns_names:
        for t in range(tools_per_namespace):
            extras = tuple(rng.sample([n for n, _ in EXTRA_PARAMS], rng.randrange(3)))
            tool = ToolDef(f"{ns}.t{t:02d}", extras)
            tools[tool.name] = tool
            by_ns.setdefault(ns, []).append(tool.name)
    role_defs: dict[str, RoleDef] = {}
    for r in range(roles):
        rules = tuple(_random_rule(rng, ns_names, tools) for _ in range(rng.randint(3, 5)))
        role_defs[f"role{r:05d}"] = RoleDef(f"role{r:05d}", rules)
    role_names = list(role_defs)
    profile_defs: dict[str, ProfileDef] = {}
    for p in range(profiles):
        picked = tuple(rng.sample(role_names, min(roles_per_profile, len(role_names))))
        profile_defs[f"profile{p:03d}"] = ProfileDef(f"profile{p:03d}", picked)
    work = Workload(seed, tools, by_ns, role_defs, profile_defs)
    work.sources = _sources(work)
    _requests(work, requests, rng, mix or DEFAULT_MIX)
    return work


def _sources(work: Workload) -> list[tuple[str, str]]:
    files: list[tuple[str, str]] = []
    for ns, names in work.namespaces.items():
        lines = [f"toolset {ns} {{"]
        lines += [f"  tool {n.split('.')[1]}({work.tools[n].signature()})" for n in names]
        lines.append("}")
        files.append((f"toolsets/{ns}.charter", "\n".join(lines) + "\n"))
    chunk: list[str] = []
    for index, role in enumerate(work.roles.values()):
        chunk.append(f"role {role.name} {{\n" + "\n".join(r.dsl() for r in role.rules) + "\n}\n")
        if len(chunk) == 100 or index == len(work.roles) - 1:
            files.append((f"roles/roles{index // 100:03d}.charter", "".join(chunk)))
            chunk = []
    profiles = "".join(
        f"profile {p.name} {{\n  roles {', '.join(p.roles)}\n}}\n" for p in work.profiles.values()
    )
    files.append(("profiles.charter", profiles))
    return files


def _requests(work: Workload, count: int, rng: random.Random, mix: dict[str, float]) -> None:
    names = list(work.profiles)
    intents = list(mix)
    weights = [mix[i] for i in intents]
    granted: dict[str, set[str]] = {}
    for profile in names:
        granted[profile] = {
            tool for _, rule in work.profile_rules(profile) for tool in work.expand(rule.pattern)
        }
    tool_names = list(work.tools)
    while len(work.requests) < count:
        profile = rng.choice(names)
        intent = rng.choices(intents, weights)[0]
        made = _request(work, profile, intent, rng, granted[profile], tool_names)
        if made is not None:
            work.requests.append(made)
            work.intents.append(intent)


def _request(
    work: Workload,
    profile: str,
    intent: str,
    rng: random.Random,
    granted: set[str],
    tool_names: list[str],
) -> Request | None:
    rules = [rule for _, rule in work.profile_rules(profile)]
    if intent == "not-granted":
        for _ in range(20):
            tool = rng.choice(tool_names)
            if tool not in granted:
                return Request(profile, tool, _tool_args(work.tools[tool], rng))
        return None
    if intent == "deny":
        denies = [r for r in rules if r.effect == "deny"]
        if not denies:
            return None
        rule = rng.choice(denies)
        args = _builtin_args(rule.pattern)
        if rule.condition is not None:
            assert isinstance(rule.condition.value, str)
            args[rule.condition.arg] = rule.condition.value + "x"
        return Request(profile, rule.pattern, args)
    allows = [r for r in rules if r.effect == "allow"]
    if intent == "condition-false":
        allows = [r for r in allows if r.condition is not None]
    if not allows:
        return None
    rule = rng.choice(allows)
    tool = rng.choice(work.expand(rule.pattern))
    if tool not in work.tools:
        return Request(profile, tool, _builtin_args(tool))
    args = _tool_args(work.tools[tool], rng)
    if rule.condition is not None:
        _satisfy(rule.condition, args, rng, want=intent == "allow")
    return Request(profile, tool, args)


def as_received(requests: list[Request], decoder: str = "stdlib") -> list[Request]:
    """The requests as a decision service receives them: decoded from JSON text. The
    generator builds requests from the same string objects as the Python model, so an
    engine whose tables were built from that model (the baseline) would find every tool
    name by pointer identity, a shortcut no deployment has: real names arrive in fresh
    strings and every engine compares them.

    `decoder="stdlib"` (the benchmark's verdicts) decodes each request with `json.loads`
    into strings of its own: every argument name is a fresh object, so reading it is a
    cache miss of its own. `decoder="service"` decodes with the parser the HTTP service
    uses (`pydantic_core.from_json`, as `api.http.calls` does), which caches the strings
    it makes: argument names and repeated values are shared between requests, as they
    are in the service."""
    texts = [json.dumps({"profile": r.profile, "tool": r.tool, "args": r.args}) for r in requests]
    if decoder == "service":
        from pydantic_core import from_json

        return [Request(**from_json(text, allow_inf_nan=False)) for text in texts]
    return [Request(**json.loads(text)) for text in texts]
