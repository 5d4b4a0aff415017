"""The decision log: step 6 (connections, then budgets), the pending approval for a
pause, and the rows, for calls that api.service.decide prepared; and steps 2-5 and 7 for
a call whose conditions read `thread.cost`, which only the ledger knows exactly.

A group of prepared calls is drafted (`draft`: step 6, each call's row and response)
before its write transaction whenever no call needs the ledger's sums, then logged
inside it (`Draft.log`: approvals, new reasons, the rows, numbered by the store). Only a
call charged against a budget, or one decided on its thread's running cost, is drafted
inside the transaction, where the ledger's sums cannot move under it (`write`). With
several workers this keeps SQLite's write lock, which the workers take in turn, for the
INSERTs and the COMMIT alone. A log row is the decision's JSON, bytes the store keeps as
given: encoding it with orjson costs a tenth of encoding its fields as CBOR (the rows of
databases written before are CBOR: api.service.logrows reads both).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from decimal import Decimal
from functools import lru_cache, partial
from typing import Any

import cbor2

from api.records import Approval
from api.service import threadevents
from api.service.approved import Approved, hook_digests
from api.service.budget import (
    MICROS,
    Cap,
    Ledger,
    caps_for,
    charge_within,
    over_cap,
    to_micros,
)
from api.service.calls import Prepared
from api.service.core import Service, new_id, now_ms
from api.service.encoding import dumps
from api.service.entropy import random_hex
from api.service.metrics import Metrics
from api.service.redaction import every_secret, redact, secret_names, shape_denied
from api.service.seedgrants import narrowed
from engine.decision import Decision, Reason, make_decision
from policy.money import over_rate, rate_cap
from policy.store import Store
from policy.store.changes import APPROVAL_OPENED

MAX_KNOWN_REFS = 100_000  # `reasons` documents a process remembers as written


class _NeedsLedger(Exception):
    """A call's step 6 reads the budget sums: it is drafted inside the transaction."""


class _Batch:
    """What one batch reads once: the ledger's sums and each agent's chain of caps.
    `in_transaction`: whether the ledger may be read (its sums are the transaction's)."""

    __slots__ = ("_caps", "_eligible", "_ledger", "in_transaction", "moves", "now", "service")

    def __init__(self, service: Service, now: int, in_transaction: bool) -> None:
        self.service = service
        self.now = now
        self.in_transaction = in_transaction
        # The caches' state before anything of this batch was read (`ReadModel.moves`): what
        # it reads after a drop may be from before the change that dropped them.
        self.moves = service.read.moves
        self._ledger: Ledger | None = None  # made on first use: most batches charge nothing
        self._caps: dict[tuple[int, str, str, str | None], tuple[list[Cap], list[str]]] = {}
        self._eligible: dict[tuple[str, str | None], list[str]] = {}

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            if not self.in_transaction:
                raise _NeedsLedger
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
        # (the profile too: a call on a turn may run under the profile the turn pinned)
        agent = p.agent
        key = (
            p.snapshot.revision,
            agent.id,
            agent.profile,
            p.thread.id if p.thread else None,
        )
        found = self._caps.get(key)
        if found is None:
            found = caps_for(p.snapshot, p.agent, p.thread, self.service.find_agent, p.latest)
            self._caps[key] = found
        return found


def _static(batch: _Batch, p: Prepared) -> tuple[Any, ...]:
    """What step 6 and the row need that is the same for like calls (all but the
    ledger's sums): (connection problem, caps, ledger subjects, secret argument names)."""
    # Kept across requests: an entry keeps the snapshot, the agent and the thread it was
    # made from and is used only while the call's are those very objects (the read
    # model's cached agent and thread; a changed agent or connection, or a thread
    # deleted, empties the whole cache). Not for a call whose caps are read from the
    # latest revision as well (a child's on a turn's older one).
    shared = p.latest is None
    if shared:
        thread = p.thread
        shared_key = (id(p.agent), p.call.tool, p.call.connection, thread.id if thread else None)
        hit = batch.service.read.static_parts.get(shared_key)
        if hit is not None and hit[0] is p.snapshot and hit[1] is p.agent and hit[2] is thread:
            found: tuple[Any, ...] = hit[3]
            return found
    spec = p.snapshot.tools.get(p.call.tool)
    problem = None
    # A named connection is the one the call will use: it must be eligible whether or not
    # the toolset needs one (docs/design.md section 1), else the allow handed an agent another
    # identity's credential, another toolset's, or one that is not there.
    named = p.call.connection is not None
    if spec is not None and spec.toolset is not None and (spec.connection_required or named):
        problem = _connection_problem(batch, p, spec.toolset)
    elif spec is not None and named:
        # A built-in tool (`agents.*`, `search`, ...) has no toolset, so no connection is
        # for it (docs/design.md section 1: a connection is a toolset's credential): one named
        # was logged with the allow unchecked (another identity's, or none at all), for
        # whoever runs the call to use. (An unknown tool is denied for its shape.)
        problem = (
            f"built-in tool `{p.call.tool}` takes no connection, and the call names "
            f"`{p.call.connection}`"
        )
    caps, subjects = batch.caps(p)
    hidden = secret_names(p.snapshot, p.call.tool)
    static = (problem, caps, subjects, hidden, _rate(p))
    if shared:
        entry = (p.snapshot, p.agent, p.thread, static)
        batch.service.read.keep_static(shared_key, entry, batch.moves)
    return static


def _rate(p: Prepared) -> Cap | None:
    """The agent's profile's `rate`, as a cap on its count of allowed calls."""
    profile = p.snapshot.served.profiles.get(p.agent.profile)
    if profile is None or profile.rate is None:
        return None
    return rate_cap(p.agent.id, profile.name, profile.rate.calls, profile.rate.period)


def _on_running_cost(batch: _Batch, p: Prepared) -> Decision:
    """Steps 2-5 and 7 for a call whose conditions read `thread.cost`, on what the thread
    has spent when the call comes: the ledger's sum read inside the write transaction
    (what other processes committed before it included), plus what the calls before this
    one in the transaction were charged (the ledger keeps its sums up to date). So the
    calls of a batch or of a group commit are decided as if they had come one at a time,
    in log order, as their budget caps are (docs/design.md section 2)."""
    r = p.request
    assert p.thread is not None and r is not None and r.thread is not None
    spent = batch.ledger.spent(f"thread:{p.thread.id}", 0)
    thread = {**r.thread, "cost": Decimal(spent) / MICROS}
    return p.snapshot.decide_call(r.profile, r.tool, r.args, r.context, r.agent, thread)


def _step6(batch: _Batch, p: Prepared, decision: Decision, static: tuple[Any, ...]) -> Decision:
    """Connections, then the rate, then budgets; runs inside the logging transaction
    (atomic ledger). An allowed call is counted against the rate once the budgets let it
    through, so a call the budgets refuse is not counted."""
    problem, caps, subjects, _, rate = static
    if problem is not None:
        return make_decision("deny", None, (*decision.reasons, Reason("connection", problem)))
    if rate is not None and over_cap(batch.ledger, [rate], 1, batch.now) is not None:
        return make_decision("deny", None, (*decision.reasons, Reason("rate", over_rate(rate))))
    decision = _budgets(batch, p, decision, caps, subjects)
    if rate is not None and decision.effect == "allow":
        batch.ledger.charge([rate.subject], 1, batch.now)
    return decision


def _budgets(
    batch: _Batch, p: Prepared, decision: Decision, caps: list[Cap], subjects: list[str]
) -> Decision:
    cost = to_micros(p.call.expected_cost) if p.call.expected_cost is not None else 0
    if decision.effect == "allow" and cost > 0:
        cap = charge_within(batch.ledger, caps, subjects, cost, batch.now)
    else:
        cap = over_cap(batch.ledger, caps, cost, batch.now) if caps else None
    if cap is not None:
        message = f"expected cost {p.call.expected_cost or 0} USD is over the {cap.label}"
        return make_decision("deny", None, (*decision.reasons, Reason("budget", message)))
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
    eligible = batch.eligible(toolset, p.agent.identity)
    if p.call.connection is None:
        if not eligible:
            return f"toolset `{toolset}` needs a connection and none is eligible"
        return None
    if p.call.connection not in eligible:
        return f"connection `{p.call.connection}` is not eligible for toolset `{toolset}`"
    return None


Answers = tuple[list[dict[str, Any]], list[Mapping[str, Any] | None]]


class Draft:
    """Prepared calls past step 6, as rows and responses, waiting for their transaction.

    A row names its reasons by ref; each distinct list of reasons is a `reasons` document
    (content-addressed, so every process writes the same one), written in the same
    transaction as the first row that names it. Refs in `service.reason_refs` are known to
    be committed and not written again; the refs written here join them when the
    transaction commits (`store.after_commit`)."""

    __slots__ = ("approvals", "bodies", "counts", "events", "fresh", "raw", "rows")

    def __init__(self) -> None:
        self.approvals: list[Approval] = []  # pending approvals the pauses opened
        self.fresh: dict[str, list[dict[str, Any]]] = {}  # reasons not known as written
        self.raw: list[Mapping[str, Any] | None] = []  # final arguments, unredacted
        self.bodies: list[dict[str, Any]] = []  # the responses, numbered by `log`
        self.rows: list[bytes] = []
        self.counts: dict[str, int] = {}
        # (the row's index, its thread, the event's fields): a `call` event for each call
        # in a thread, numbered with its row (api.service.threadevents)
        self.events: list[tuple[int, str, int, dict[str, Any]]] = []

    def log(self, service: Service) -> Answers:
        """Write it all inside the caller's `store.atomic()`: (responses, the final
        arguments unredacted), in order."""
        store = service.store
        # Every thread a call names is there: a deletion since the calls were prepared
        # is in the change feed, which the transaction read before this, and the calls
        # were then prepared again (api.service.groupcommit, decide.decide_detailed).
        for approval in self.approvals:
            store.insert(Approval.KIND, approval.id, approval.stored(), tag=approval.status)
            service.read.note_approval(APPROVAL_OPENED, approval)
        if self.fresh:
            for ref, value in self.fresh.items():
                store.insert("reasons", ref, {"reasons": value})
            # Known once committed (a rolled-back transaction leaves them unknown, so the
            # next row that names them writes them again). Bounded: budget and approval
            # reasons carry amounts and ids, so new lists keep coming; forgetting costs
            # only a re-insert, which the store ignores.
            known = service.reason_refs
            if len(known) > MAX_KNOWN_REFS:
                known.clear()
            store.after_commit(partial(known.update, tuple(self.fresh)))
        seqs = store.append_decisions(self.rows)
        for body, seq in zip(self.bodies, seqs, strict=True):
            body["seq"] = seq
        if self.events:
            self._events(store, seqs)
        # counted once committed: an agent's management request whose operation is then
        # refused rolls its decision back (api.service.manage)
        store.after_commit(partial(_count, service.metrics, self.counts))
        return self.bodies, self.raw

    def _events(self, store: Store, seqs: list[int]) -> None:
        """Each call's `call` event on its thread, in this transaction."""
        events: list[tuple[str, threadevents.Event, int, dict[str, Any]]] = []
        for index, thread, at, fields in self.events:
            body = self.bodies[index]
            events.append((thread, "call", at, {
                "seq": seqs[index], "decision": body["id"], "effect": body["effect"],
                "approval": body.get("approval_id"), **fields,
            }))  # fmt: skip
        threadevents.record_many(store, events)


def _count(metrics: Metrics, counts: dict[str, int]) -> None:
    for name, n in counts.items():
        metrics.decided(name, n)


def write(
    service: Service,
    prepared: Sequence[Prepared],
    *,
    management: bool = False,
    approval: Approved | None = None,
) -> Answers:
    """Step 6 and the log for prepared calls, all inside the caller's `store.atomic()`."""
    found = draft(service, prepared, management=management, approval=approval, inside=True)
    assert found is not None  # (inside a transaction the ledger may be read)
    return found.log(service)


def draft(
    service: Service,
    prepared: Sequence[Prepared],
    *,
    management: bool = False,
    approval: Approved | None = None,
    inside: bool = False,
) -> Draft | None:
    """Step 6, each call's row and response (the hot loop of a batch: one row encode per
    call); None when a call's step 6 reads the budget sums, or a call is decided on its
    thread's running cost, and this runs outside the write transaction (`inside` False):
    only `write` may draft those. Outside, everything read
    here comes from the caches or the store as of the caller's last `service.sync()`,
    which the caller checks again inside its transaction before `Draft.log`."""
    made = Draft()
    known = service.reason_refs
    fresh, raw, bodies, rows, counts = made.fresh, made.raw, made.bodies, made.rows, made.counts
    now = now_ms()
    batch = _Batch(service, now, inside)
    ids = random_hex(12 * len(prepared))
    for i, p in enumerate(prepared):
        decision = p.decision
        if decision is None:
            try:
                decision = _on_running_cost(batch, p)
            except _NeedsLedger:
                return None
        agent = p.agent
        if agent.definition is not None or agent.parent is not None:  # (Seed's grants)
            decision = narrowed(agent, batch.service.find_agent, p.snapshot, p.call.tool, decision)
        if (
            approval is not None
            and decision.effect == "pause"
            and approval.lifts(decision, p.snapshot)
        ):
            decision = make_decision(
                "allow",
                decision.args,
                (*decision.reasons, Reason("approved", f"approved in approval `{approval.id}`")),
                decision.errors,
            )
        static = _static(batch, p)
        if decision.effect != "deny" and (
            static[0] is not None
            or static[1]
            or p.call.expected_cost is not None
            or static[4] is not None
        ):  # (no connection problem, no cap, no cost and no rate: step 6 has nothing to say)
            try:
                decision = _step6(batch, p, decision, static)
            except _NeedsLedger:
                return None
        effect = decision.effect
        raw.append(decision.args)
        call = p.call
        hidden = static[3]
        if decision.args is None and shape_denied(decision):
            # (arguments its tool does not take may be another tool's secret: redaction)
            hidden = every_secret(p.snapshot)
        args = redact(hidden, call.args)
        final = redact(hidden, decision.args)
        decision_id = ids[24 * i : 24 * i + 24]
        reasons, ref = _reasons(decision.reasons)
        if ref not in known and ref not in fresh:
            fresh[ref] = reasons
        revision = p.snapshot.revision
        entry: dict[str, Any] = {
            "id": decision_id,
            "at": now,
            "agent": call.agent,
            "profile": p.agent.profile,
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
        approval_id = approval.id if approval is not None else None
        if effect == "pause":
            opened = _approval(service, p, decision, now, management, args)
            made.approvals.append(opened)
            approval_id = opened.id
        if approval_id is not None:
            entry["approval"] = approval_id
        rows.append(dumps(entry))
        if call.thread is not None:
            charged = str(call.expected_cost) if effect == "allow" and call.expected_cost else None
            fields = {"tool": call.tool, "turn": call.turn, "charged": charged}
            made.events.append((i, call.thread, now, fields))
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
    return made


def _added(
    args: Mapping[str, Any] | None, final: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """What `final` adds to `args` when it keeps every argument as it was, else None."""
    if args is None or final is None or not args.items() <= final.items():
        return None
    return {k: v for k, v in final.items() if k not in args}


def _approval(
    service: Service,
    p: Prepared,
    decision: Decision,
    now: int,
    management: bool,
    shown: Mapping[str, Any] | None,
) -> Approval:
    """The pending approval a pause opens (inserted with the rows by `Draft.log`);
    `shown`: the call's arguments as the log row has them, secrets redacted."""
    call = p.call
    sealed = service.sealer.seal(
        cbor2.dumps(
            {
                "args": dict(call.args),
                "context": dict(call.context) if call.context is not None else None,
                "expected_cost": None if call.expected_cost is None else str(call.expected_cost),
            }
        )
    )
    # (reasons as the engine writes them, which records.Reason reads)
    return Approval.model_validate(
        {"id": new_id(), "status": "pending", "agent": call.agent, "tool": call.tool,
         "args": shown, "thread": call.thread, "turn": call.turn,
         "connection": call.connection, "revision": p.snapshot.revision,
         "reasons": [r.to_json() for r in decision.reasons],
         # (what is approved: api.service.approved)
         "hook_digests": hook_digests(p.snapshot, decision), "management": management,
         "expected_cost": None if call.expected_cost is None else str(call.expected_cost),
         "sealed_call": sealed, "created_at": now, "decided_at": None, "decided_by": None,
         "final": None}
    )  # fmt: skip
