"""Prometheus counters of one process, and their sum over `--workers N` processes.

Each process counts for itself (no lock on the hot path). With several workers a scrape
reaches one of them, so each worker also stores each counter's new value into a file
mapped into its memory (`attach`, see api.service.metricsshare) and the one that answers
adds the others' to its own (`Metrics.render`): whichever worker answers, the totals are
the server's.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from typing import Any, Protocol

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_BUCKET_KEYS = [f"bucket:{index}" for index in range(len(BUCKETS) + 1)]


# What became of an approval webhook's attempt (`Metrics.webhook`).
WEBHOOK_RESULTS = ("delivered", "retry", "given-up")


class Mirror(Protocol):
    """Where a worker's counters are also stored (api.service.metricsshare.CounterFile)."""

    def set(self, key: str, value: float) -> None: ...


class Metrics:
    def __init__(self) -> None:
        self.decisions = {"allow": 0, "deny": 0, "pause": 0}
        self.counts = [0] * (len(BUCKETS) + 1)  # the last: over the largest bound
        self.total = 0.0
        self.rejected: dict[tuple[int, str], int] = {}  # (status, problem code) -> count
        # Approval webhooks' attempts, by what became of each (api/service/webhookdelivery.py).
        self.webhooks = dict.fromkeys(WEBHOOK_RESULTS, 0)
        self._lock = threading.Lock()
        self._mirror: Mirror | None = None

    def attach(self, mirror: Mirror | None) -> None:
        """Store every counter into `mirror` from now on (None: no longer)."""
        with self._lock:
            if mirror is not None:
                for effect, count in self.decisions.items():
                    mirror.set(f"decision:{effect}", count)
                for key, count in zip(_BUCKET_KEYS, self.counts, strict=True):
                    mirror.set(key, count)
                mirror.set("total", self.total)
                for (status, code), count in self.rejected.items():
                    mirror.set(f"rejected:{status}:{code}", count)
                for result, count in self.webhooks.items():
                    mirror.set(f"webhook:{result}", count)
            self._mirror = mirror

    def decided(self, effect: str, n: int = 1) -> None:
        with self._lock:  # management requests decide on worker threads
            count = self.decisions[effect] = self.decisions.get(effect, 0) + n
            if self._mirror is not None:
                self._mirror.set(f"decision:{effect}", count)

    def observe(self, seconds: float) -> None:
        # No lock: only decision handlers call this, on the event loop's thread.
        index = bisect.bisect_left(BUCKETS, seconds)
        count = self.counts[index] = self.counts[index] + 1
        self.total += seconds
        mirror = self._mirror
        if mirror is not None:
            mirror.set(_BUCKET_KEYS[index], count)
            mirror.set("total", self.total)

    def reject(self, status: int, code: str) -> None:
        """A request answered with a problem: its status and stable code (a bounded set,
        api/http/codes.py, never user input, so the label values stay few)."""
        with self._lock:  # management requests fail on worker threads
            key = (status, code)
            count = self.rejected[key] = self.rejected.get(key, 0) + 1
            if self._mirror is not None:
                self._mirror.set(f"rejected:{status}:{code}", count)

    def webhook(self, result: str) -> None:
        """An approval webhook's attempt settled: `delivered`, `retry` (failed, to be tried
        again) or `given-up` (failed, its last)."""
        with self._lock:  # (the deliverer's thread)
            count = self.webhooks[result] = self.webhooks.get(result, 0) + 1
            if self._mirror is not None:
                self._mirror.set(f"webhook:{result}", count)

    def snapshot(self) -> dict[str, Any]:
        """The counters as plain JSON values (what a worker publishes)."""
        with self._lock:
            decisions = dict(self.decisions)
            rejected = [[status, code, n] for (status, code), n in self.rejected.items()]
            webhooks = dict(self.webhooks)
        # The histogram is written without a lock, so its count (+Inf) is the sum of the
        # buckets as copied, never a counter of its own: one copied apart from them could
        # be less than the last bucket (a request counted in its bucket, not yet in the
        # count), and buckets that are not cumulative are no histogram. `total` may be a
        # request apart from them, which a scrape cannot tell from a later request.
        return {
            "decisions": decisions, "counts": list(self.counts), "total": self.total,
            "rejected": rejected, "webhooks": webhooks,
        }  # fmt: skip

    def render(self, revision: int, others: Iterable[dict[str, Any]] = ()) -> str:
        """Prometheus text: this process's counters plus `others` (snapshots of the other
        workers'), and the latest revision."""
        mine = self.snapshot()
        decisions: dict[str, int] = mine["decisions"]
        counts: list[int] = mine["counts"]
        total: float = mine["total"]
        rejected = {(status, code): n for status, code, n in mine["rejected"]}
        webhooks: dict[str, int] = mine["webhooks"]
        processes = 1
        for other in others:
            processes += 1
            for effect, n in other["decisions"].items():
                decisions[effect] = decisions.get(effect, 0) + n
            counts = [a + b for a, b in zip(counts, other["counts"], strict=True)]
            total += other["total"]
            for status, code, n in other["rejected"]:
                rejected[(status, code)] = rejected.get((status, code), 0) + n
            for result, n in other.get("webhooks", {}).items():
                webhooks[result] = webhooks.get(result, 0) + n
        lines = [
            "# HELP charter_decisions_total Decisions made, by effect.",
            "# TYPE charter_decisions_total counter",
        ]
        for effect, count in sorted(decisions.items()):
            lines.append(f'charter_decisions_total{{effect="{effect}"}} {count}')
        lines += [
            "# HELP charter_decision_request_seconds Latency of decision requests.",
            "# TYPE charter_decision_request_seconds histogram",
        ]
        requests = sum(counts)
        running = 0
        for bound, count in zip(BUCKETS, counts, strict=False):
            running += count
            lines.append(f'charter_decision_request_seconds_bucket{{le="{bound}"}} {running}')
        lines.append(f'charter_decision_request_seconds_bucket{{le="+Inf"}} {requests}')
        lines.append(f"charter_decision_request_seconds_sum {total}")
        lines.append(f"charter_decision_request_seconds_count {requests}")
        lines += [
            "# HELP charter_rejected_requests_total Requests answered with a problem, by "
            "status and code.",
            "# TYPE charter_rejected_requests_total counter",
        ]
        for (status, code), count in sorted(rejected.items()):
            lines.append(
                f'charter_rejected_requests_total{{status="{status}",code="{code}"}} {count}'
            )
        lines += [
            "# HELP charter_approval_webhook_attempts_total Approval webhooks' attempts, by "
            "what became of each.",
            "# TYPE charter_approval_webhook_attempts_total counter",
        ]
        for result, count in sorted(webhooks.items()):
            lines.append(f'charter_approval_webhook_attempts_total{{result="{result}"}} {count}')
        lines += [
            "# HELP charter_policy_revision The latest policy revision.",
            "# TYPE charter_policy_revision gauge",
            f"charter_policy_revision {revision}",
            "# HELP charter_serving_processes Serving processes whose counters are summed "
            "here (one that has exited keeps its last published counts).",
            "# TYPE charter_serving_processes gauge",
            f"charter_serving_processes {processes}",
        ]
        return "\n".join(lines) + "\n"
