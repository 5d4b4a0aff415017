"""What a fit check answers: fits, or the violations (each with its counterexample)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.redaction import redact_call

KINDS = (
    "widens",
    "drops-deny",
    "drops-hook",
    "budget",
    "rate",
    "identity",
    "unsupported",
    "timeout",
)


@dataclass(frozen=True)
class Violation:
    """One reason a candidate does not fit inside the caller's access."""

    kind: str  # one of KINDS
    message: str
    grant: str | None = None  # the candidate's role (or hook / profile) responsible
    location: str | None = None  # "file:line:col" of the candidate's grant
    counterexample: dict[str, Any] | None = None  # confirmed by the evaluator
    tool: str | None = None  # the tool concerned, when there is one
    # Which question found it: "allow" (the candidate's roles allow a call outside the
    # caller's access) or "deny" (a caller deny the candidate does not keep); "" for the
    # hook, budget and identity comparisons, which ask no solver.
    question: str = ""
    # The tool's secret argument names: redacted wherever the counterexample is shown.
    secrets: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def shown_counterexample(self) -> dict[str, Any] | None:
        """The counterexample as shown to anyone: its secret arguments redacted."""
        return redact_call(self.secrets, self.counterexample)

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "kind": self.kind,
            "message": self.message,
            "grant": self.grant,
            "location": self.location,
            # a decimal argument stays a Decimal: the service's and the command line's
            # JSON (api.service.encoding) write it as a number with all its digits, so the
            # call it shows is the call confirmed (as a string it was another call)
            "counterexample": self.shown_counterexample(),
        }


@dataclass(frozen=True)
class FitResult:
    fits: bool
    violations: tuple[Violation, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"fits": self.fits, "violations": [v.to_json() for v in self.violations]}

    @staticmethod
    def of(violations: list[Violation]) -> FitResult:
        return FitResult(not violations, tuple(violations))
