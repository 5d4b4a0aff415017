"""Prometheus counters for one process (each `--workers` process reports its own)."""

from __future__ import annotations

import bisect
import threading

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.decisions = {"allow": 0, "deny": 0, "pause": 0}
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.requests = 0
        self.rejected: dict[tuple[int, str], int] = {}  # (status, problem code) -> count
        self._lock = threading.Lock()

    def decided(self, effect: str, n: int = 1) -> None:
        with self._lock:  # management requests decide on worker threads
            self.decisions[effect] = self.decisions.get(effect, 0) + n

    def observe(self, seconds: float) -> None:
        # No lock: only decision handlers call this, on the event loop's thread.
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds
        self.requests += 1

    def reject(self, status: int, code: str) -> None:
        """A request answered with a problem: its status and stable code (a bounded set,
        never user input, so the label values stay few)."""
        with self._lock:  # management requests fail on worker threads
            key = (status, code)
            self.rejected[key] = self.rejected.get(key, 0) + 1

    def render(self, revision: int) -> str:
        lines = [
            "# HELP charter_decisions_total Decisions made, by effect.",
            "# TYPE charter_decisions_total counter",
        ]
        for effect, count in sorted(self.decisions.items()):
            lines.append(f'charter_decisions_total{{effect="{effect}"}} {count}')
        lines += [
            "# HELP charter_decision_request_seconds Latency of decision requests.",
            "# TYPE charter_decision_request_seconds histogram",
        ]
        running = 0
        for bound, count in zip(BUCKETS, self.counts, strict=False):
            running += count
            lines.append(f'charter_decision_request_seconds_bucket{{le="{bound}"}} {running}')
        lines.append(f'charter_decision_request_seconds_bucket{{le="+Inf"}} {self.requests}')
        lines.append(f"charter_decision_request_seconds_sum {self.total}")
        lines.append(f"charter_decision_request_seconds_count {self.requests}")
        lines += [
            "# HELP charter_rejected_requests_total Requests answered with a problem, by "
            "status and code.",
            "# TYPE charter_rejected_requests_total counter",
        ]
        for (status, code), count in sorted(self.rejected.items()):
            lines.append(
                f'charter_rejected_requests_total{{status="{status}",code="{code}"}} {count}'
            )
        lines += [
            "# HELP charter_policy_revision The latest policy revision this process knows.",
            "# TYPE charter_policy_revision gauge",
            f"charter_policy_revision {revision}",
        ]
        return "\n".join(lines) + "\n"
