"""A logged decision explained again: the call a log row holds, decided with its trace
(engine.explain) against the revision it was decided on, which the store keeps.

A row keeps the call's profile, tool and arguments (secret ones `[redacted]`), its thread
and its revision; it does not keep the call's `context`, what its thread had spent, or
the agent's attributes as they were. So before a trace is made, the conditions that may
run for the call (its profile's rules and hooks that match the tool) are read for what
they read (`policy.ast.paths`), and a condition that reads what the log cannot give back
makes the answer say so, in place of a trace of other inputs than the call's:

- `context.*`, or an argument the log shows `[redacted]`: unless the row names an
  approval, whose sealed call (api.service.decide.unseal_call) holds the arguments and
  the context as they were sent;
- `thread.cost` (the ledger's sum when the call came), or `thread.depth` of a deleted
  thread;
- `agent.name`, `agent.identity` or `agent.metadata` of an agent deleted since, or whose
  name, identity or metadata changed since (`Agent.context_at`; a change of its status or
  budget alone keeps the trace; `agent.id` is the row's).

A condition reading `time.*` reads the row's `at`: the moment the call was logged, within
a few milliseconds of the moment it was decided.

The trace shows arguments as the log does, secret ones `[redacted]`, whichever inputs it
was made from. What the engine decides is compared with the logged effect: after the
engine, the service may deny for a connection, a rate or a budget (step 6) or a Seed
definition's grants, and lift a pause that a person approved; a logged reason of that
kind says which, and an effect that differs without one is said plainly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from api.records import Agent, Approval, Thread
from api.service.core import Service
from api.service.decide import agent_context, unseal_call
from api.service.errors import ServiceError
from api.service.logrows import log_view, reasons_resolver
from api.service.redaction import REDACTED, redacted_trace
from api.service.seedgrants import REASON as DEFINITION
from engine import clock
from engine.compile import Snapshot
from engine.decision import Request
from engine.reads import reads_thread_cost
from policy import ast
from policy.store import Damaged

# The kinds of reason the service adds after the engine's decision, and what they do.
AFTER_ENGINE = {
    "connection": "the connection check (step 6)",
    "rate": "the profile's rate (step 6)",
    "budget": "a budget (step 6)",
    DEFINITION: "the agent's Seed definition",
    "approved": "a person's approval",
}


class Unavailable(Exception):
    """Why the trace cannot be made again: a stable `why` and a message."""

    def __init__(self, why: str, message: str) -> None:
        super().__init__(message)
        self.why = why
        self.message = message


def read_entry(service: Service, seq: int) -> dict[str, Any]:
    """The log's entry at `seq` with every field (`decision-not-found` if there is none);
    a damaged row is Unavailable."""
    rows = service.store.read_decisions(seq - 1, 1) if seq > 0 else []
    if not rows or rows[0][0] != seq:
        raise ServiceError(
            "decision-not-found", f"the decision log has no decision at seq {seq}",
            help="GET /v1/decisions reads the log with each decision's `seq`",
        )  # fmt: skip
    row = rows[0][1]
    if isinstance(row, Damaged):
        raise Unavailable("damaged", f"the log's row at seq {seq} is damaged ({row.why})")
    return log_view(seq, row, reasons_resolver(service))


def _answer(seq: int, revision: int | None, logged: str | None) -> dict[str, Any]:
    return {
        "seq": seq, "revision": revision, "logged_effect": logged, "trace": None,
        "effect": None, "same_effect": None, "note": None, "inputs": None, "unavailable": None,
    }  # fmt: skip


def unavailable(seq: int, why: Unavailable) -> dict[str, Any]:
    """The answer for a row that cannot be read (a damaged one)."""
    answer = _answer(seq, None, None)
    answer["unavailable"] = {"why": why.why, "message": why.message}
    return answer


def explained(service: Service, seq: int) -> dict[str, Any]:
    """The answer of `GET /v1/log/{seq}/explain` (and of `charter log explain`): the
    entry at `seq` explained again, or why it cannot be (`decision-not-found` raised for
    a seq the log does not have)."""
    service.sync()
    try:
        entry = read_entry(service, seq)
    except Unavailable as why:
        return unavailable(seq, why)
    return explain_entry(service, entry)


def explain_entry(service: Service, entry: dict[str, Any]) -> dict[str, Any]:
    """The answer of `GET /v1/log/{seq}/explain` for a logged entry."""
    answer = _answer(entry["seq"], entry["revision"], entry["effect"])
    try:
        snapshot = _snapshot(service, entry["revision"])
        request, inputs = _request(service, snapshot, entry)
    except Unavailable as why:
        answer["unavailable"] = {"why": why.why, "message": why.message}
        return answer
    with clock.fixed(entry["at"]):  # (`time.*` as at the row's moment, not at this one)
        decision, _, trace = redacted_trace(snapshot, request)
    answer.update(trace=trace, effect=decision.effect, inputs=inputs)
    answer["same_effect"] = decision.effect == entry["effect"]
    if not answer["same_effect"]:
        answer["note"] = _difference(decision.effect, entry)
    return answer


def _snapshot(service: Service, revision: int) -> Snapshot:
    try:
        return service.snapshots.get(revision)
    except ServiceError as exc:
        if exc.code == "revision-not-found":
            raise Unavailable("revision-gone", f"revision {revision} is not stored") from None
        if exc.code == "revision-does-not-check":
            raise Unavailable(
                "revision-does-not-check", f"revision {revision} does not check any more"
            ) from None
        raise


def _request(service: Service, snapshot: Snapshot, entry: dict[str, Any]) -> tuple[Request, str]:
    """The call to explain, and where its arguments and context come from (`approval`:
    its approval's sealed call; `log`: the row, without a context)."""
    profile, tool = entry["profile"], entry["tool"]
    read = list(_paths(snapshot, profile, tool))
    args: Mapping[str, Any] = entry["args"] or {}
    context: Mapping[str, Any] | None = None
    inputs = "log"
    sealed = _sealed(service, entry)
    if sealed is not None:
        args, context = sealed
        inputs = "approval"
    else:
        for path in read:
            if path.root == "context":
                raise Unavailable(
                    "context-not-logged",
                    f"a condition reads `{path}` ({path.span}), and the log does not keep "
                    "a call's context",
                )  # fmt: skip
        hidden = {name for name, value in args.items() if _holds_redacted(value)}
        for path in read:
            if path.root == "args" and (not path.parts or path.parts[0] in hidden):
                raise Unavailable(
                    "arguments-redacted",
                    f"a condition reads `{path}` ({path.span}), a secret argument the log "
                    "keeps redacted",
                )  # fmt: skip
    return Request(
        profile, tool, args, context, _agent(service, entry, read),
        _thread(service, snapshot, entry, read),
    ), inputs  # fmt: skip


def _paths(snapshot: Snapshot, profile_name: str, tool_name: str) -> Iterator[ast.Path]:
    """What the conditions that may run for a call of `tool_name` read: the profile's
    rules and hooks whose patterns match it (a hook's rewrites too)."""
    ws = snapshot.served
    profile = ws.profiles.get(profile_name)
    if profile is None or tool_name not in ws.tools:
        return
    for name in dict.fromkeys(profile.roles):
        for rule in ws.roles[name].rules:
            if any(p.matches(tool_name) for p in rule.patterns):
                yield from ast.paths(rule.where)
    for hook in ws.profile_hooks(profile):
        if any(p.matches(tool_name) for p in hook.patterns):
            yield from ast.paths((hook.where, hook.rewrites))


def _holds_redacted(value: Any) -> bool:
    if value == REDACTED:
        return True
    if isinstance(value, Mapping):
        return any(_holds_redacted(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_redacted(v) for v in value)
    return False


def _sealed(
    service: Service, entry: dict[str, Any]
) -> tuple[Mapping[str, Any], Mapping[str, Any] | None] | None:
    """(arguments, context) of the call as sent, from the sealed call of the approval the
    row names, if that approval is stored and is of this call."""
    approval_id = entry.get("approval")
    if approval_id is None:
        return None
    doc = service.store.get(Approval.KIND, approval_id)
    if doc is None:
        return None
    approval = Approval.read(doc)
    if approval.agent != entry["agent"] or approval.tool != entry["tool"]:
        return None
    if approval.sealed_call is None:
        return None
    call = unseal_call(service, approval)
    return call.args, call.context


def _agent(service: Service, entry: dict[str, Any], read: list[ast.Path]) -> dict[str, Any]:
    """The agent's attributes as conditions read them; Unavailable when a condition
    reads one that may have changed since the call."""
    agent_id = entry["agent"]
    reads = [p for p in read if p.root == "agent" and (not p.parts or p.parts[0] != "id")]
    if not reads:
        return {"id": agent_id, "name": None, "identity": None, "metadata": {}}
    doc = service.store.get(Agent.KIND, agent_id)
    if doc is None:
        raise Unavailable(
            "agent-gone", f"a condition reads `{reads[0]}`, and agent `{agent_id}` is deleted"
        )  # fmt: skip
    agent = Agent.read(doc)
    changed = agent.updated_at if agent.context_at is None else agent.context_at
    if changed > entry["at"]:
        raise Unavailable(
            "agent-changed",
            f"a condition reads `{reads[0]}`, and agent `{agent_id}` changed after the call",
        )  # fmt: skip
    return agent_context(agent)


def _thread(
    service: Service, snapshot: Snapshot, entry: dict[str, Any], read: list[ast.Path]
) -> dict[str, Any] | None:
    thread_id = entry.get("thread")
    if thread_id is None:
        return None
    reads = [p for p in read if p.root == "thread"]
    if any(reads_thread_cost(p) for p in reads):
        raise Unavailable(
            "thread-cost-not-logged",
            "a condition reads `thread.cost`, what the thread had spent when the call "
            "came, which the log does not keep",
        )  # fmt: skip
    depth = 0
    if any(p.parts and p.parts[0] == "depth" for p in reads):
        doc = service.store.get(Thread.KIND, thread_id)
        if doc is None:
            raise Unavailable(
                "thread-gone", f"a condition reads `thread.depth`, and thread `{thread_id}` "
                "is deleted",
            )  # fmt: skip
        depth = Thread.read(doc).depth
    return {"id": thread_id, "depth": depth}


def _difference(effect: str, entry: dict[str, Any]) -> str:
    """Why the engine's `effect` is not the logged one, as the logged reasons tell."""
    logged = entry["effect"]
    for reason in reversed(entry.get("reasons") or []):
        what = AFTER_ENGINE.get(reason.get("kind", ""))
        if what is not None:
            return f"the policy decides {effect}; {what} made it {logged}: {reason.get('message')}"
    return f"the policy decides {effect} here, and the log says {logged}: the trace is not of the logged decision"
