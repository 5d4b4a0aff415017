"""Metrics: one process's counters, and their sum over the workers' published files."""

from __future__ import annotations

import json
from pathlib import Path

from api.service import metricsshare
from api.service.metrics import Metrics
from api.service.metricsshare import SharedMetrics


def _values(text: str) -> dict[str, str]:
    return {
        line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_render_sums_the_other_workers_counters() -> None:
    mine, other = Metrics(), Metrics()
    mine.decided("allow", 3)
    mine.observe(0.0004)
    mine.reject(401, "unauthorized")
    other.decided("allow", 2)
    other.decided("pause")
    other.observe(0.003)
    other.observe(0.003)
    other.reject(401, "unauthorized")
    other.reject(404, "agent-not-found")
    values = _values(mine.render(7, [other.snapshot()]))
    assert values['charter_decisions_total{effect="allow"}'] == "5"
    assert values['charter_decisions_total{effect="pause"}'] == "1"
    assert values['charter_decision_request_seconds_bucket{le="0.0005"}'] == "1"
    assert values['charter_decision_request_seconds_bucket{le="0.005"}'] == "3"
    assert values['charter_decision_request_seconds_bucket{le="+Inf"}'] == "3"
    assert values["charter_decision_request_seconds_count"] == "3"
    assert abs(float(values["charter_decision_request_seconds_sum"]) - 0.0064) < 1e-9
    assert values['charter_rejected_requests_total{status="401",code="unauthorized"}'] == "2"
    assert values['charter_rejected_requests_total{status="404",code="agent-not-found"}'] == "1"
    assert values["charter_policy_revision"] == "7"
    assert values["charter_serving_processes"] == "2"
    alone = _values(mine.render(7))
    assert alone['charter_decisions_total{effect="allow"}'] == "3"
    assert alone["charter_serving_processes"] == "1"


def test_workers_read_each_others_published_counters(tmp_path: Path) -> None:
    db = str(tmp_path / "charter.db")
    first_counts, second_counts = Metrics(), Metrics()
    first = SharedMetrics(db, first_counts)
    second = SharedMetrics(db, second_counts)
    assert first.others() == [] and second.others() == []  # nothing published yet
    first_counts.decided("deny", 4)
    first.publish()
    (seen,) = second.others()
    assert seen["decisions"]["deny"] == 4
    assert first.others() == []  # its own file is not counted twice
    first_counts.decided("deny")
    first.close()  # a worker shutting down publishes its last counts
    assert second.others()[0]["decisions"]["deny"] == 5
    # A file that is not counters, or would put its own text into the output, is left out.
    directory = metricsshare.directory_for(db)
    (directory / "cut.json").write_text('{"decisions": {"allow"')
    forged = {**first_counts.snapshot(), "rejected": [[401, 'x"} 1\nfake_total', 1]]}
    (directory / "forged.json").write_text(json.dumps(forged))
    wrong_buckets = {**first_counts.snapshot(), "counts": [1, 2]}
    (directory / "short.json").write_text(json.dumps(wrong_buckets))
    odd: dict[str, dict[str, object]] = {
        "newline.json": {"decisions": {"allow\n": 1}},
        "boolean.json": {"decisions": {"allow": True}},
        "negative.json": {"requests": -1},
        "fraction.json": {"requests": 1.5},
        "infinite.json": {"total": float("inf")},
        "text-count.json": {"rejected": [["401", "unauthorized", 1]]},
    }
    for name, change in odd.items():
        (directory / name).write_text(json.dumps({**first_counts.snapshot(), **change}))
    assert len(second.others()) == 1
    text = second_counts.render(1, second.others())
    assert "fake_total" not in text and "charter_serving_processes 2" in text
    second.publish()
    metricsshare.reset(db)  # what charter serve does before starting its workers
    assert not directory.exists()
    second.publish()  # unchanged counts, but its file is gone: written again
    assert [p.name for p in directory.glob("*.json")] == [second.name]
