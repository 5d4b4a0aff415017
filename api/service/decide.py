"""Deciding calls for agents: DESIGN.md section 2 around the engine's compiled plans.

The engine decides steps 2-5 and 7 on a snapshot; here: step 1 (the revision a turn
pinned, else the latest), step 6 (budgets and connections), the pending approval for a
pause, and the log. A batch is resolved completely before anything is written (an
unknown agent, turn or thread is a 404 and nothing is logged), then logged in one
transaction, so every decision is logged exactly once with a gap-free sequence number.

The work is split so that concurrent requests can share one write transaction (the HTTP
layer's group commit, api.http.commit): `prepare` resolves one request's calls (and
raises for it alone), `write` decides step 6 and logs any number of prepared calls inside
one `store.atomic()`. A log row is the decision's JSON (`{"json": bytes}`): encoding it
with orjson costs a tenth of encoding its fields as CBOR; `expand` reads either kind.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Any, NamedTuple

import cbor2

from api.service.budget import Cap, Ledger, caps_for, over_cap, to_micros
from api.service.core import Service, new_id, now_ms
from api.service.encoding import dumps, loads
from api.service.errors import ServiceError, no_policy
from engine.compile import Snapshot
from engine.decision import Decision, Reason, Request, make_decision
from policy.catalogue import SENSITIVE_ARGS
from policy.store import Doc

REDACTED = "[redacted]"
MAX_KNOWN_REFS = 100_000  # `reasons` documents a process remembers as written


class Call(NamedTuple):
    """One call to decide (a named tuple: built once per call, so it is built cheaply)."""

    agent: str
    tool: str
    args: Mapping[str, Any] = MappingProxyType({})
    thread: str | None = None
    turn: str | None = None
    context: Mapping[str, Any] | None = None
    expected_cost: Decimal | None = None
    connection: str | None = None


@dataclass(slots=True)
class Prepared:
    call: Call
    agent: Doc
    snapshot: Snapshot
    thread: Doc | None
    request: Request
    decision: Decision | None = None


def redact(snapshot: Snapshot, tool: str, args: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return _redact(_hidden(snapshot, tool), args)


def _redact(hidden: frozenset[str], args: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if args is None:
        return None
    if not hidden:
        return args if type(args) is dict else dict(args)
    return {k: (REDACTED if k in hidden else v) for k, v in args.items()}


_HIDDEN: weakref.WeakKeyDictionary[Snapshot, dict[str, frozenset[str]]] = (
    weakref.WeakKeyDictionary()
)


def _hidden(snapshot: Snapshot, tool: str) -> frozenset[str]:
    """The tool's secret argument names, cached per snapshot (gone with the snapshot)."""
    per_tool = _HIDDEN.get(snapshot)
    if per_tool is None:
        per_tool = _HIDDEN.setdefault(snapshot, {})
    found = per_tool.get(tool)
    if found is None:
        spec = snapshot.tools.get(tool)
        found = SENSITIVE_ARGS.get(tool, frozenset()) | (spec.sensitive if spec else frozenset())
        per_tool[tool] = found
    return found


class _Entropy:
    """os.urandom in 4 KiB helpings: a decision id is 12 random bytes, and a system call
    per request for them showed up in the profile of single decisions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._used = 0  # how much of the pool is handed out (an offset: no copy of the rest)
        os.register_at_fork(after_in_child=self._forget)  # a child never reuses a parent's

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._used = 0

    def hex(self, n: int) -> str:
        if n > 1024:
            return os.urandom(n).hex()
        with self._lock:
            used = self._used
            if len(self._pool) - used < n:
                self._pool = os.urandom(4096)
                used = 0
            self._used = used + n
            return self._pool[used : used + n].hex()


_random_hex = _Entropy().hex


def agent_context(agent: Doc) -> dict[str, Any]:
    return {
        "id": agent["id"],
        "name": agent.get("name", ""),
        "identity": agent.get("identity", ""),
        "metadata": agent.get("metadata", {}),
    }


# agent id -> (the cached agent document it was built from, its context). The service's
# agent cache hands out the same document until it changes, so identity is the check.
_CONTEXTS: dict[str, tuple[Doc, dict[str, Any]]] = {}


def _agent_context(agent: Doc) -> dict[str, Any]:
    hit = _CONTEXTS.get(agent["id"])
    if hit is not None and hit[0] is agent:
        return hit[1]
    context = agent_context(agent)
    if len(_CONTEXTS) > 16_384:
        _CONTEXTS.clear()
    _CONTEXTS[agent["id"]] = (agent, context)
    return context


def _owned(service: Service, what: str, id: str, agent: Doc) -> Doc:
    """The turn or thread `id`, which must belong to `agent` (404 unknown, 409 foreign)."""
    doc = service.doc(what + "s", what, id)
    if doc["agent"] != agent["id"]:
        raise ServiceError(409, f"{what}-agent-mismatch", f"{what} `{id}` belongs to another agent")
    return doc


def _prepare(service: Service, call: Call, snapshots: dict[int, Snapshot]) -> Prepared:
    agent = service.agent(call.agent)
    revision = service.snapshots.latest
    if call.turn is not None:
        revision = int(_owned(service, "turn", call.turn, agent)["revision"])
    if revision == 0:
        raise no_policy()
    snapshot = snapshots.get(revision)
    if snapshot is None:
        snapshot = snapshots[revision] = service.snapshots.get(revision)
    thread = None
    thread_ctx = None
    if call.thread is not None:
        thread = _owned(service, "thread", call.thread, agent)
        spent = Decimal(service.store.spent(f"thread:{thread['id']}", 0)) / 1_000_000
        thread_ctx = {"id": thread["id"], "cost": spent, "depth": int(thread.get("depth", 0))}
    request = Request(
        agent["profile"], call.tool, call.args, call.context, _agent_context(agent), thread_ctx
    )
    return Prepared(call, agent, snapshot, thread, request)


class _Batch:
    """What one batch reads once: the ledger's sums and each agent's chain of caps."""

    __slots__ = ("_caps", "_eligible", "_ledger", "now", "service")

    def __init__(self, service: Service, now: int) -> None:
        self.service = service
        self.now = now
        self._ledger: Ledger | None = None  # made on first use: most batches charge nothing
        self._caps: dict[tuple[int, str, str | None], tuple[list[Cap], list[str]]] = {}
        self._eligible: dict[tuple[str, str | None], list[str]] = {}

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger(self.service.store)
        return self._ledger

    def eligible(self, toolset: str, identity: str | None) -> list[str]:
        """Connections an agent with `identity` may use: workspace-owned or its own."""
        key = (toolset, identity)
        found = self._eligible.get(key)
        if found is None:
            connections = self.service.connections_for(toolset)
            found = [cid for cid, owner in connections if owner is None or owner == identity]
            self._eligible[key] = found
        return found

    def caps(self, p: Prepared) -> tuple[list[Cap], list[str]]:
        key = (p.snapshot.revision, p.agent["id"], p.thread["id"] if p.thread else None)
        found = self._caps.get(key)
        if found is None:
            found = caps_for(p.snapshot, p.agent, p.thread, self.service.find_agent)
            self._caps[key] = found
        return found


def _static(batch: _Batch, p: Prepared) -> tuple[Any, ...]:
    """What step 6 and the row need that is the same for like calls (all but the
    ledger's sums): (connection problem, caps, ledger subjects, secret argument names)."""
    # Kept across requests for calls outside a thread (a thread is read afresh for each
    # call, so it would never hit): the entry keeps the snapshot and the agent it was
    # made from and is used only while the call's are those very objects (the service's
    # cached agent; a changed agent or connection empties the whole cache).
    shared = p.thread is None
    if shared:
        shared_key = (id(p.agent), p.call.tool, p.call.connection)
        hit = batch.service.static_parts.get(shared_key)
        if hit is not None and hit[0] is p.snapshot and hit[1] is p.agent:
            found: tuple[Any, ...] = hit[2]
            return found
    spec = p.snapshot.tools.get(p.call.tool)
    problem = None
    if spec is not None and spec.connection_required:
        problem = _connection_problem(batch, p, spec.toolset or "")
    caps, subjects = batch.caps(p)
    hidden = _hidden(p.snapshot, p.call.tool)
    static = (problem, caps, subjects, hidden)
    if shared:
        parts = batch.service.static_parts
        if len(parts) >= 4096:
            parts.clear()
        parts[shared_key] = (p.snapshot, p.agent, static)
    return static


def _step6(batch: _Batch, p: Prepared, decision: Decision, static: tuple[Any, ...]) -> Decision:
    """Connections, then budgets; runs inside the logging transaction (atomic ledger)."""
    problem, caps, subjects, _ = static
    if problem is not None:
        return make_decision("deny", None, (*decision.reasons, Reason("connection", problem)))
    cost = to_micros(p.call.expected_cost) if p.call.expected_cost is not None else 0
    if caps:
        cap = over_cap(batch.ledger, caps, cost, batch.now)
        if cap is not None:
            message = f"expected cost {p.call.expected_cost or 0} USD is over the {cap.label}"
            return make_decision("deny", None, (*decision.reasons, Reason("budget", message)))
    if decision.effect == "allow" and cost > 0:
        batch.ledger.charge(subjects, cost, batch.now)
    return decision


@lru_cache(maxsize=4096)
def _reasons_value(reasons: tuple[Reason, ...]) -> tuple[list[dict[str, Any]], str]:
    value = [r.to_json() for r in reasons]
    return value, hashlib.sha256(dumps(value)).hexdigest()[:24]


# id(tuple) -> (the tuple, its JSON, its ref). Most tuples are the compiled snapshot's
# shared constants, so an identity look-up saves hashing every Reason of the tuple per call.
_REASONS: dict[int, tuple[tuple[Reason, ...], list[dict[str, Any]], str]] = {}


def _reasons(reasons: tuple[Reason, ...]) -> tuple[list[dict[str, Any]], str]:
    """Reasons as JSON and the ref a log row names them by (the first 96 bits of the
    JSON's SHA-256), built once per distinct tuple. Callers never mutate the lists."""
    hit = _REASONS.get(id(reasons))
    if hit is not None and hit[0] is reasons:
        return hit[1], hit[2]
    value, ref = _reasons_value(reasons)
    if len(_REASONS) > 4096:
        _REASONS.clear()
    _REASONS[id(reasons)] = (reasons, value, ref)
    return value, ref


def _reasons_json(reasons: tuple[Reason, ...]) -> list[dict[str, Any]]:
    return _reasons(reasons)[0]


def _connection_problem(batch: _Batch, p: Prepared, toolset: str) -> str | None:
    """An agent may use workspace-owned connections and its own identity's, nothing else.
    Naming a connection picks it (it must be eligible); else any eligible one will do."""
    eligible = batch.eligible(toolset, p.agent.get("identity"))
    if p.call.connection is None:
        if not eligible:
            return f"toolset `{toolset}` needs a connection and none is eligible"
        return None
    if p.call.connection not in eligible:
        return f"connection `{p.call.connection}` is not eligible for toolset `{toolset}`"
    return None


def decide_calls(service: Service, calls: Sequence[Call]) -> list[dict[str, Any]]:
    """Decide and log every call; returns one response document per call, in order."""
    return decide_detailed(service, calls)[0]


def decide_detailed(
    service: Service,
    calls: Sequence[Call],
    *,
    management: bool = False,
    approval: str | None = None,
) -> tuple[list[dict[str, Any]], list[Mapping[str, Any] | None]]:
    """Decide and log every call: (responses, the final arguments unredacted), in order.

    With `approval` (the id of the approval a human granted), this re-checks the approved
    call: a pause left by the hooks means the call is allowed by the roles, so it becomes
    the allow the human granted (never more).
    """
    service.sync()
    prepared = prepare(service, calls, {})
    with service.store.atomic():
        return write(service, prepared, management=management, approval=approval)


def prepare(
    service: Service, calls: Sequence[Call], snapshots: dict[int, Snapshot]
) -> list[Prepared]:
    """Resolve the calls of one request (step 1, the agent, turn and thread) and decide
    steps 2-5 and 7 on the snapshot. Raises ServiceError (a 404, a 409) for the whole
    request: nothing is written for it. Call `service.sync()` first."""
    prepared = []
    latest = service.snapshots.latest
    agents: dict[str, tuple[Doc, dict[str, Any]]] = {}  # a batch is mostly one agent's
    for call in calls:
        if call.turn is not None or call.thread is not None:
            p = _prepare(service, call, snapshots)
        else:  # the common case, inline: no turn to pin a revision, no thread
            hit = agents.get(call.agent)
            if hit is None:
                agent = service.agent(call.agent)
                hit = agents[call.agent] = (agent, _agent_context(agent))
            if latest == 0:
                raise no_policy()
            snapshot = snapshots.get(latest)
            if snapshot is None:
                snapshot = snapshots[latest] = service.snapshots.get(latest)
            agent, context = hit
            request = Request(agent["profile"], call.tool, call.args, call.context, context, None)
            p = Prepared(call, agent, snapshot, None, request)
        p.decision = p.snapshot.decide(p.request)
        prepared.append(p)
    return prepared


def write(
    service: Service,
    prepared: Sequence[Prepared],
    *,
    management: bool = False,
    approval: str | None = None,
) -> tuple[list[dict[str, Any]], list[Mapping[str, Any] | None]]:
    """Step 6 and the log for prepared calls, inside the caller's `store.atomic()`:
    (responses, the final arguments unredacted), in order. The hot loop of a batch: each
    call's row and response are built here directly (one row encode per call).

    A row names its reasons by ref; each distinct list of reasons is a `reasons` document
    (content-addressed, so every process writes the same one), written in the same
    transaction as the first row that names it. Refs in `service.reason_refs` are known to
    be committed and not written again; the refs written here join them when the
    transaction commits (`store.after_commit`)."""
    now = now_ms()
    known = service.reason_refs
    fresh: dict[str, list[dict[str, Any]]] = {}
    raw: list[Mapping[str, Any] | None] = []
    bodies: list[dict[str, Any]] = []
    rows: list[dict[str, bytes]] = []
    counts: dict[str, int] = {}
    batch = _Batch(service, now)
    ids = _random_hex(12 * len(prepared))
    for i, p in enumerate(prepared):
        decision = p.decision
        assert decision is not None
        if approval is not None and decision.effect == "pause":
            decision = make_decision(
                "allow",
                decision.args,
                (*decision.reasons, Reason("approved", f"approved in approval `{approval}`")),
                decision.errors,
            )
        static = _static(batch, p)
        if decision.effect != "deny" and (
            static[0] is not None or static[1] or p.call.expected_cost is not None
        ):  # (no connection problem, no cap and no cost: step 6 has nothing to say)
            decision = _step6(batch, p, decision, static)
        effect = decision.effect
        raw.append(decision.args)
        call = p.call
        hidden = static[3]
        args = _redact(hidden, call.args)
        final = _redact(hidden, decision.args)
        decision_id = ids[24 * i : 24 * i + 24]
        reasons, ref = _reasons(decision.reasons)
        if ref not in known and ref not in fresh:
            fresh[ref] = reasons
        revision = p.snapshot.revision
        entry: dict[str, Any] = {
            "id": decision_id,
            "at": now,
            "agent": call.agent,
            "profile": p.agent["profile"],
            "tool": call.tool,
            "args": args,
            "effect": effect,
            "reasons_ref": ref,
            "revision": revision,
        }
        # Rows leave out what is empty or repeats `args`; `expand` gives every row its
        # full shape back.
        if (final is not None) if effect == "deny" else (final is not args and final != args):
            added = _added(args, final)
            if added is None:
                entry["final_args"] = final
            else:  # the usual difference: the tool's defaults filled in
                entry["final_added"] = added
        errors = [e.to_json() for e in decision.errors] if decision.errors else []
        if errors:
            entry["errors"] = errors
        near = _reasons_json(decision.near_misses) if decision.near_misses else []
        if near:
            entry["near_misses"] = near
        if call.thread is not None:
            entry["thread"] = call.thread
        if call.turn is not None:
            entry["turn"] = call.turn
        if call.expected_cost is not None:
            entry["expected_cost"] = str(call.expected_cost)
        approval_id = approval
        if effect == "pause":
            approval_id = _open_approval(service, p, decision, now, management)
        if approval_id is not None:
            entry["approval"] = approval_id
        rows.append({"json": dumps(entry)})
        # What `response(entry, seq)` gives, built from what is at hand: the response's
        # `args` are always `final` (None for a deny that rewrote nothing).
        body = {
            "id": decision_id, "seq": 0, "effect": effect, "args": final, "reasons": reasons,
            "errors": errors, "near_misses": near, "revision": revision,
        }  # fmt: skip
        if approval_id:
            body["approval_id"] = approval_id
        bodies.append(body)
        counts[effect] = counts.get(effect, 0) + 1
    if fresh:
        for ref, value in fresh.items():
            service.store.insert("reasons", ref, {"reasons": value})
        # Known once committed, whichever path owns the transaction (a rolled-back one
        # leaves them unknown, so the next row that names them writes them again).
        # Bounded: budget and approval reasons carry amounts and ids, so new lists keep
        # coming; forgetting costs only a re-insert, which the store ignores.
        if len(known) > MAX_KNOWN_REFS:
            known.clear()
        service.store.after_commit(partial(known.update, tuple(fresh)))
    seqs = service.store.append_decisions(rows)
    for body, seq in zip(bodies, seqs, strict=True):
        body["seq"] = seq
    for name, n in counts.items():
        service.metrics.decided(name, n)
    return bodies, raw


def _added(
    args: Mapping[str, Any] | None, final: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """What `final` adds to `args` when it keeps every argument as it was, else None."""
    if args is None or final is None or not args.items() <= final.items():
        return None
    return {k: v for k, v in final.items() if k not in args}


_ENTRY_DEFAULTS: dict[str, Any] = {
    "errors": [], "near_misses": [], "thread": None, "turn": None, "expected_cost": None,
    "approval": None,
}  # fmt: skip


def expand(entry: Mapping[str, Any], resolve: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """A log row with every field: a JSON row decoded, its reasons looked up by ref with
    `resolve` (None without one), what a compact row leaves out filled back in."""
    if "json" in entry and len(entry) == 1:
        entry = loads(entry["json"])
    full = {**_ENTRY_DEFAULTS, **entry}
    ref = full.pop("reasons_ref", None)
    if ref is not None:
        full["reasons"] = resolve(ref) if resolve is not None else None
    added = full.pop("final_added", None)
    if added is not None:
        full["final_args"] = {**entry["args"], **added}
    elif "final_args" not in entry:
        full["final_args"] = None if entry["effect"] == "deny" else entry["args"]
    return full


def reasons_resolver(service: Service) -> Callable[[str], Any]:
    """Looks a row's reasons up by ref (one read per distinct ref)."""
    found: dict[str, Any] = {}

    def resolve(ref: str) -> Any:
        if ref not in found:
            doc = service.store.get("reasons", ref)
            found[ref] = None if doc is None else doc["reasons"]
        return found[ref]

    return resolve


def log_view(
    seq: int, entry: Mapping[str, Any], resolve: Callable[[str], Any] | None = None
) -> dict[str, Any]:
    return {"seq": seq, **expand(entry, resolve)}


def _open_approval(
    service: Service, p: Prepared, decision: Decision, now: int, management: bool
) -> str:
    call = p.call
    approval_id = new_id()
    sealed = service.sealer.seal(
        cbor2.dumps(
            {
                "args": dict(call.args),
                "context": dict(call.context) if call.context is not None else None,
                "expected_cost": None if call.expected_cost is None else str(call.expected_cost),
            }
        )
    )
    doc = {
        "id": approval_id,
        "status": "pending",
        "agent": call.agent,
        "tool": call.tool,
        "args": redact(p.snapshot, call.tool, call.args),
        "thread": call.thread,
        "turn": call.turn,
        "connection": call.connection,
        "revision": p.snapshot.revision,
        "reasons": [r.to_json() for r in decision.reasons],
        "management": management,
        "sealed_call": sealed,
        "created_at": now,
        "decided_at": None,
        "decided_by": None,
        "final": None,
    }
    service.store.insert("approvals", approval_id, doc, tag="pending")
    return approval_id


def unseal_call(service: Service, approval: Doc) -> Call:
    inner = cbor2.loads(service.sealer.open(approval["sealed_call"]))
    cost = inner.get("expected_cost")
    return Call(
        approval["agent"],
        approval["tool"],
        inner["args"],
        approval.get("thread"),
        None,  # approving re-checks on the current revision, not the pinned one
        inner.get("context"),
        Decimal(cost) if cost is not None else None,
        approval.get("connection"),
    )
