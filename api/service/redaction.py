"""Secret arguments out of sight: the names a call's arguments are redacted by, in the
decision log, in every response that shows a call (a decision, an approval) and in the
command line's `charter decide` and `charter explain`.

A tool's secret arguments are the ones its signature marks `secret`: the catalogue's
(`identities.import`'s `seed`, `connections.create`/`.update`'s `credential`) and a
toolset's own (`tool connect(url: str, api_key: secret str)`), one set per snapshot
(engine.workspace.Workspace.secret_names).
A call whose arguments do not fit its tool (a tool the policy does not have, or one that
does not take what was sent) is denied for its shape and shown as sent: every name that
any tool keeps secret is hidden in it, at any depth and in any case, as such a call is
most often another tool's meant (`Identities.import`, `identities.create` given the
`seed` of an import).
"""

from __future__ import annotations

from api.service.encoding import dumps_text
from engine.compile import Snapshot
from engine.decision import Decision, Request
from engine.explain import explain
from engine.redaction import REDACTED, redact

__all__ = [
    "REDACTED", "every_secret", "hidden_for", "redact", "redacted_trace", "secret_names",
    "shape_denied",
]  # fmt: skip


def secret_names(snapshot: Snapshot, tool: str) -> frozenset[str]:
    """The tool's secret argument names. A tool the snapshot does not know is denied for
    its name, and its arguments are logged as sent: each name that any tool keeps secret
    is hidden in them, as a misnamed call (`Identities.import`) carries that tool's
    secret."""
    spec = snapshot.tools.get(tool)
    return every_secret(snapshot) if spec is None else spec.sensitive


def every_secret(snapshot: Snapshot) -> frozenset[str]:
    """Every argument name that some tool of `snapshot` keeps secret, built-in or not."""
    return snapshot.served.secret_names


def shape_denied(decision: Decision) -> bool:
    """Whether `decision` refused its call's arguments as they were sent (step 2): a tool
    the policy does not have, or arguments its tool does not take. Only such a call can
    carry a name its tool does not declare (a call of the right shape has its tool's
    arguments alone, defaults filled in)."""
    return decision.args is None and bool(decision.reasons) and decision.reasons[0].kind == "shape"


def hidden_for(snapshot: Snapshot, tool: str, decision: Decision) -> frozenset[str]:
    """The names redacted in a call of `tool` that `decision` decided: its tool's secret
    arguments, or every tool's for a call denied for its shape (`identities.create`
    given a `seed`, `connections.get` a `credential`: another tool's call, most likely,
    that the log would otherwise show with its secret in clear)."""
    if shape_denied(decision):
        return every_secret(snapshot)
    return secret_names(snapshot, tool)


def redacted_trace(snapshot: Snapshot, request: Request) -> tuple[Decision, frozenset[str], str]:
    """`request` decided, the names its arguments are redacted by, and its trace (`charter
    explain`'s account) with those arguments `[redacted]`: what is hidden depends on the
    decision (`hidden_for`), so the call is decided before it is traced."""
    decision = snapshot.decide(request)
    hidden = hidden_for(snapshot, request.tool, decision)
    _, trace = explain(
        snapshot, request, show=lambda value: dumps_text(redact(hidden, value), indent=False)
    )
    return decision, hidden, trace
