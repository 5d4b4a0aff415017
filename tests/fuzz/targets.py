"""The coverage-guided fuzz targets: each takes one input (bytes) and raises when the
property it checks fails, and returns otherwise.

They import nothing of atheris: `tests/fuzz/atheris_main.py` drives them under atheris
(`make fuzz`), and `tests/fuzz/test_replay.py` replays their saved inputs in `make test`.
An input is text where it can be (UTF-8, bad bytes replaced), so that a seed from
`fixtures/` reads as itself and a minimal reproduction reads as what it is:

- `parse-check`: a policy file. `parse` gives a tree or raises `CharterSyntaxError`,
  nothing else; `fmt` of the tree parses again and is stable; `check_sources` accepts it or
  raises `CharterError`, nothing else.
- `decide-differential`: a policy, a line `%%`, then requests, one JSON object a line
  (`profile`, `tool`, `args`, `context`, `agent`, `thread`). A policy that checks must
  compile; every request is decided by the compiled snapshot and by the reference
  interpreter (engine/reference.py), and the two agree on the effect and, when the call
  goes ahead, on its arguments, kind for kind.
- `fit-sampled`: a policy, `%%`, a line `profile CALLER CANDIDATE` or `role CALLER ROLE`,
  then calls, one JSON object a line. When the fit check says the candidate fits, no
  sampled call is allowed by the candidate's roles and refused by the caller's; every
  counterexample it gives is one (the reference interpreter confirms it).
- `http-readers`: the first byte picks a reader of api/http (a decision's body, a batch's,
  the body of each endpoint's model, a query string, an `If-Match` header, a path id),
  the rest is what the reader reads. Each gives its value or refuses with a catalogued
  code at its 4xx status, and raises nothing else.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
SPLIT = "\n%%\n"
EFFECTS = ("allow", "deny", "pause")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _parts(data: bytes) -> tuple[str, list[str]]:
    """The policy before the first `%%` line, and the lines after it."""
    policy, _, rest = _text(data).partition(SPLIT)
    return policy, rest.splitlines()


def _objects(lines: list[str], most: int = 16) -> list[dict[str, Any]]:
    """The lines that are JSON objects (NaN and Infinity taken, as a lenient reader would)."""
    found = []
    for line in lines[:most]:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


# ---- parse-check ------------------------------------------------------------------------


def parse_check(data: bytes) -> None:
    from engine.check import check_sources
    from grammar.fmt import format_file
    from grammar.parser import parse
    from policy.diagnostics import CharterError, CharterSyntaxError

    text = _text(data)
    try:
        tree = parse(text, "fuzz.charter")
    except CharterSyntaxError:
        tree = None
    if tree is not None:
        once = format_file(tree)
        again = parse(once, "fuzz.charter")  # fmt's output always parses
        assert format_file(again) == once, "fmt is not stable"
    try:
        check_sources([("fuzz.charter", text)])
    except CharterError as exc:
        assert exc.diagnostics, "a CharterError without a diagnostic"


# ---- decide-differential ---------------------------------------------------------------


@lru_cache(maxsize=16)
def _compiled(text: str) -> Any:
    """The checked workspace and its snapshot; None for a policy the checker refuses."""
    from engine.check import check_sources
    from engine.compile import compile_workspace
    from policy.diagnostics import CharterError

    try:
        ws = check_sources([("fuzz.charter", text)])
    except CharterError:
        return None
    return ws, compile_workspace(ws)  # a checked policy compiles


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, dict) else None


def decide_differential(data: bytes) -> None:
    from engine.decision import Request
    from engine.reference import reference_decide
    from tests.property.support import same_value

    policy, lines = _parts(data)
    built = _compiled(policy)
    if built is None:
        return
    ws, snapshot = built
    profiles = sorted(ws.profiles)
    for item in _objects(lines):
        profile = item.get("profile")
        if not isinstance(profile, str):
            profile = profiles[0] if profiles else "none"
        tool = item.get("tool")
        request = Request(
            profile,
            tool if isinstance(tool, str) else "none",
            item.get("args", {}),
            _mapping(item.get("context")),
            _mapping(item.get("agent")),
            _mapping(item.get("thread")),
        )
        decision = snapshot.decide(request)
        assert decision.effect in EFFECTS, decision
        effect, args = reference_decide(ws, request)
        assert decision.effect == effect, (request, decision, effect)
        if effect != "deny":
            compiled_args = dict(decision.args or {})
            assert same_value(compiled_args, dict(args or {})), (request, compiled_args, args)


# ---- fit-sampled --------------------------------------------------------------------------


def _roles_effect(ws: Any, profile: str, call: Mapping[str, Any]) -> str:
    from engine.decision import Request
    from engine.reference import _roles

    tool = ws.tools.get(call.get("tool"))
    if tool is None:
        return "deny"
    request = Request(
        profile, call["tool"], call.get("args", {}), _mapping(call.get("context")),
        _mapping(call.get("agent")), _mapping(call.get("thread")),
    )  # fmt: skip
    effect, _ = _roles(ws, ws.profiles[profile], tool, request.args, request)
    return effect


def _sole_role_profile(ws: Any, role: str) -> Any:
    """The workspace with a profile `fuzz-role` of `role` alone (and its execute grant
    assumed, as the fit check assumes it of a lone role): what the role allows."""
    from dataclasses import replace

    from policy import ast

    profile = ast.Profile("fuzz-role", (role,), ("none",), hooks_written=True)
    return replace(ws, profiles={**ws.profiles, "fuzz-role": profile})


def _judged(ws: Any, kind: str, call: Mapping[str, Any]) -> bool:
    """Whether the reference's roles-only answer judges `call`: a lone role is checked as
    if granted `execute` (roles compose), which its sole profile here is not, so a call
    of a tool that `runs code` is left out for a role."""
    tool = ws.tools.get(call.get("tool"))
    return kind == "profile" or tool is None or not tool.runs_code


def fit_sampled(data: bytes) -> None:
    from engine.fit import fit_role, fit_workspace_profile

    policy, lines = _parts(data)
    if not lines:
        return
    built = _compiled(policy)
    if built is None:
        return
    ws = built[0]
    words = lines[0].split()
    if len(words) != 3 or words[0] not in ("profile", "role") or words[1] not in ws.profiles:
        return
    kind, caller, candidate = words
    if kind == "profile":
        if candidate not in ws.profiles:
            return
        result = fit_workspace_profile(ws, caller, ws, candidate, timeout_ms=5_000)
        cand_ws, cand_profile = ws, candidate
    else:
        if candidate not in ws.roles:
            return
        result = fit_role(ws, caller, ws, candidate, timeout_ms=5_000)
        cand_ws, cand_profile = _sole_role_profile(ws, candidate), "fuzz-role"
    calls = [c for c in _objects(lines[1:]) if _judged(ws, kind, c)]
    widens = [
        v for v in result.violations
        if v.kind == "widens" and v.counterexample is not None
        and _judged(ws, kind, v.counterexample)
    ]  # fmt: skip
    for violation in widens:  # every counterexample is real
        c = violation.counterexample
        assert c is not None
        assert _roles_effect(cand_ws, cand_profile, c) == "allow", violation
        assert _roles_effect(ws, caller, c) != "allow", violation
    if result.fits:
        for c in calls:  # "fits": no sampled call is the candidate's and not the caller's
            if _roles_effect(cand_ws, cand_profile, c) == "allow":
                assert _roles_effect(ws, caller, c) == "allow", (c, "widens but fits")


# ---- http-readers -----------------------------------------------------------------------


@lru_cache(maxsize=1)
def _body_models() -> list[Any]:
    from api.http.app import TABLE

    return sorted({spec.request for spec, _ in TABLE if spec.request}, key=lambda m: m.__name__)


def _request(query: bytes = b"", headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    from starlette.requests import Request

    scope = {"type": "http", "method": "GET", "path": "/", "query_string": query,
             "headers": headers or [], "path_params": {}}  # fmt: skip
    return Request(scope)


def _readers() -> list[tuple[str, Callable[[bytes], Any]]]:
    import re

    from api.http import body, calls, pagination, preconditions, routing

    readers: list[tuple[str, Callable[[bytes], Any]]] = [
        ("decision", calls.one_call),
        ("batch", calls.batch_calls),
        ("query", lambda raw: pagination.list_args(_request(raw), "agent", "status")),
        (
            "if-match",
            lambda raw: preconditions.if_match(
                _request(headers=[(b"if-match", part) for part in raw.split(b"\n")[:3]]),
                re.compile(r'"[0-9a-f]{1,64}"'),
                "a tag",
                "a read",
            ),
        ),
        ("path-id", lambda raw: routing.bounded_id(raw.decode("latin-1") * 8, "the path")),
    ]
    for model in _body_models():
        readers.append((f"body:{model.__name__}", functools.partial(body.parse, model)))
    return readers


@lru_cache(maxsize=1)
def readers() -> list[tuple[str, Callable[[bytes], Any]]]:
    return _readers()


def http_readers(data: bytes) -> None:
    from api.http.codes import CODES
    from api.service.errors import ServiceError

    if not data:
        return
    table = readers()
    name, read = table[data[0] % len(table)]
    try:
        read(data[1:])
    except ServiceError as exc:
        code = CODES.get(exc.code)
        assert code is not None, (name, exc.code, "not catalogued")
        assert code.status is not None and 400 <= code.status < 500, (name, exc.code)


# ---- the table --------------------------------------------------------------------------


def _files(*patterns: str) -> list[Path]:
    return sorted(p for pattern in patterns for p in FIXTURES.glob(pattern) if p.is_file())


def _workspace_text() -> str:
    return "\n".join(p.read_text() for p in _files("workspace/*.charter"))


REQUESTS = [
    {"profile": "support", "tool": "mail.send",
     "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}},
    {"profile": "support", "tool": "gmail.send", "args": {"to": "x@y.z", "body": "b"},
     "context": {"amount": 5}},
    {"profile": "engineering", "tool": "github.merge_pr", "args": {"repo": "a/b", "pr": 3}},
    {"profile": "platform-admin", "tool": "agents.create", "args": {"id": "a", "profile": "support"}},
    {"profile": "office", "tool": "drive.share", "args": {"file": "f", "with": ["a@b.c"]},
     "agent": {"metadata": {"team": "x"}}},
]  # fmt: skip

FIT_CALLS = [
    {"tool": "mail.send", "args": {"to": "a@example.com", "subject": "s", "body": "b"}},
    {"tool": "mail.send", "args": {"to": "a@partner.org", "subject": "s", "body": "b"}},
    {"tool": "mail.search", "args": {"query": "ticket 1", "limit": 30}},
    {"tool": "roles.create", "args": {"name": "team-x", "body": "role x {}"}},
    {"tool": "agents.delete", "args": {"id": "a"}},
]  # fmt: skip


def _lines(items: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(item) for item in items)


def _parse_seeds() -> list[bytes]:
    return [p.read_bytes() for p in _files("**/*.charter")]


def _differential_seeds() -> list[bytes]:
    text = _workspace_text()
    return [
        (text + SPLIT + _lines(REQUESTS)).encode(),
        (_files("fit/policy.charter")[0].read_text() + SPLIT + _lines(FIT_CALLS)).encode(),
    ]


def _fit_seeds() -> list[bytes]:
    text = _files("fit/policy.charter")[0].read_text()
    heads = ["profile support helper", "profile support loose", "role support mail-team",
             "role support mail-partners"]  # fmt: skip
    return [(text + SPLIT + head + "\n" + _lines(FIT_CALLS)).encode() for head in heads]


def _reader_seeds() -> list[bytes]:
    out = [b"\x00" + json.dumps({"agent": "a", **REQUESTS[0]}).encode()]
    out.append(b"\x01" + json.dumps({"calls": [{"agent": "a", **r} for r in REQUESTS]}).encode())
    out += [b"\x02limit=5&cursor=abc&agent=x", b'\x03"0af3"', b"\x04agent-1"]
    for index, (name, _) in enumerate(readers()):
        if name.startswith("body:"):
            out.append(bytes([index]) + b'{"name": "x", "profile": "support", "n": 1.5}')
    return out


@dataclass(frozen=True)
class Target:
    name: str
    checks: str
    run: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]
    # What atheris instruments for coverage: the packages the target exercises.
    packages: tuple[str, ...]


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "parse-check",
            "parser and checker: a tree or CharterSyntaxError, fmt re-parses and is stable, "
            "the checker accepts or raises CharterError (nothing else)",
            parse_check,
            _parse_seeds,
            ("grammar", "policy", "engine"),
        ),
        Target(
            "decide-differential",
            "a checked policy compiles; compiled decide agrees with engine/reference.py "
            "(effect, and arguments kind for kind)",
            decide_differential,
            _differential_seeds,
            ("engine", "grammar", "policy"),
        ),
        Target(
            "fit-sampled",
            "fit check against sampled calls: `fits` means no sampled call widens; every "
            "counterexample is confirmed by the reference interpreter",
            fit_sampled,
            _fit_seeds,
            ("engine",),
        ),
        Target(
            "http-readers",
            "request readers of api/http (bodies, batch, query, If-Match, path ids): a value "
            "or a catalogued 4xx ServiceError, nothing else",
            http_readers,
            _reader_seeds,
            ("api",),
        ),
    )
}

REGRESSIONS = Path(__file__).resolve().parent / "regressions"


def saved_inputs(target: str) -> list[Path]:
    """The inputs saved for `target` (failures found by a fuzz run, kept as regressions)."""
    folder = REGRESSIONS / target
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
