"""Metrics: one process's counters, and their sum over the workers' published files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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
    mine.webhook("retry")
    other.webhook("retry")
    other.webhook("delivered")
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
    assert values['charter_approval_webhook_attempts_total{result="retry"}'] == "2"
    assert values['charter_approval_webhook_attempts_total{result="delivered"}'] == "1"
    assert values['charter_approval_webhook_attempts_total{result="given-up"}'] == "0"
    assert values["charter_policy_revision"] == "7"
    assert values["charter_serving_processes"] == "2"
    alone = _values(mine.render(7))
    assert alone['charter_decisions_total{effect="allow"}'] == "3"
    assert alone["charter_serving_processes"] == "1"


def test_a_histogram_copied_mid_request_stays_cumulative() -> None:
    """Another worker's counters are read while it counts: a request may be in its bucket
    and not yet in a count of its own. The count (+Inf) is the buckets' sum, so the
    buckets stay cumulative; a `requests` counter read apart from them was less than the
    last bucket."""
    mine, other = Metrics(), Metrics()
    other.observe(0.003)
    caught = other.snapshot()
    caught["counts"][0] += 1  # a request counted in its bucket, not (yet) in `requests`
    values = _values(mine.render(1, [caught]))
    buckets = [
        int(v) for k, v in values.items() if k.startswith("charter_decision_request_seconds_bucket")
    ]
    assert buckets == sorted(buckets) and buckets[-1] == 2
    assert values["charter_decision_request_seconds_count"] == "2"


def test_workers_read_each_others_counters_as_they_change(tmp_path: Path) -> None:
    db = str(tmp_path / "charter.db")
    first_counts, second_counts = Metrics(), Metrics()
    first_counts.decided("deny", 2)  # counted before the file: stored when attached
    first = SharedMetrics(db, first_counts)
    second = SharedMetrics(db, second_counts)
    (seen,) = second.others()
    assert seen["decisions"]["deny"] == 2 and first.others()[0]["decisions"]["deny"] == 0
    first_counts.decided("deny", 2)
    first_counts.observe(0.003)
    first_counts.reject(401, "unauthorized")
    first_counts.webhook("given-up")
    (seen,) = second.others()  # at once: no publishing turn to wait for
    assert seen["webhooks"] == {"delivered": 0, "retry": 0, "given-up": 1}
    assert seen["decisions"]["deny"] == 4 and sum(seen["counts"]) == 1
    assert seen["rejected"] == [[401, "unauthorized", 1]] and seen["total"] == 0.003
    first.close()  # a worker shutting down: its file stays, with its counts
    first_counts.decided("deny")  # (no longer stored)
    assert second.others()[0]["decisions"]["deny"] == 4
    text = second_counts.render(1, second.others())
    assert 'charter_decisions_total{effect="deny"} 4' in text
    assert "charter_serving_processes 2" in text
    # A file that is not counters, or would put its own text into the output, is left out.
    directory = metricsshare.directory_for(db)
    (directory / "cut.bin").write_bytes(metricsshare.MAGIC[:4])
    (directory / "other.bin").write_bytes(b"x" * 4096)
    forged = metricsshare.CounterFile(directory / "forged.bin")
    forged.set('rejected:401:x"} 1\nfake_total', 1)  # (not a key: never stored)
    forged.set("decision:allow", 7)
    forged_raw = bytearray((directory / "forged.bin").read_bytes())
    at = forged_raw.index(b"decision:allow")
    forged_raw[at : at + 14] = b'decision:a"}\n '
    (directory / "edited.bin").write_bytes(bytes(forged_raw))
    (directory / "forged.bin").unlink()
    text = second_counts.render(1, second.others())
    assert "fake_total" not in text and '"}' not in text.replace('"} ', "")
    assert "charter_serving_processes 3" in text  # first's, the edited one (its key left out)
    metricsshare.reset(db)  # what charter serve does before starting its workers
    assert not directory.exists()


def test_a_worker_that_cannot_keep_its_counter_file_serves_counting_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker whose counter file cannot be made (a file where its directory goes here;
    a full disk, where its blocks are allocated up front) raised as its app was built, and
    uvicorn started another in its place, which raised again: nothing was served. It
    serves now, and says on stderr that its /metrics counts for itself alone."""
    from api.http.app import open_service

    db = tmp_path / "x.db"
    (tmp_path / "x.db.metrics").write_text("not a directory\n")
    service = open_service(db, shared=True)
    try:
        assert service.shared_metrics is None
        service.metrics.decided("allow")
        assert _values(service.metrics.render(0))['charter_decisions_total{effect="allow"}'] == "1"
    finally:
        service.store.close()
    err = capsys.readouterr().err
    assert "counts alone: cannot keep its counter file in " in err and "x.db.metrics" in err


def test_serve_with_workers_refuses_a_file_where_the_counters_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`charter serve --workers N` said it was serving while each of its workers failed
    on a file at `<db>.metrics` (uvicorn starting them again and again). Refused, exit 2,
    before anything is made; one worker keeps no counter file and is served."""
    from api.cli import main

    def serve(app: Any, *args: object, **kwargs: object) -> None:
        raise AssertionError("served")

    monkeypatch.setattr("api.cli_serve.run_uvicorn", serve)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHARTER_SECRET_KEY", raising=False)
    (tmp_path / "x.db.metrics").write_text("not a directory\n")
    assert main(["serve", "--db", "x.db", "--port", "0", "--workers", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "charter: `x.db.metrics` is not a directory: the workers keep their counters there\n"
        "help: move it away, or serve another `--db`\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db.metrics"]


def test_reset_empties_a_linked_counter_directory(tmp_path: Path) -> None:
    """`<db>.metrics` a symlink to a directory elsewhere: `rmtree` refused the link (its
    error ignored), so the last run's files stayed and were summed into the new run's
    counters. Their files go; the link and the directory stay."""
    elsewhere = tmp_path / "tmpfs"
    elsewhere.mkdir()
    (tmp_path / "x.db.metrics").symlink_to(elsewhere)
    last_run = Metrics()
    last_run.decided("allow", 5)
    SharedMetrics(str(tmp_path / "x.db"), last_run)
    assert len(list(elsewhere.glob("*.bin"))) == 1
    metricsshare.reset(str(tmp_path / "x.db"))
    assert (tmp_path / "x.db.metrics").is_symlink() and list(elsewhere.iterdir()) == []
    fresh = Metrics()
    shared = SharedMetrics(str(tmp_path / "x.db"), fresh)
    assert _values(fresh.render(0, shared.others()))["charter_serving_processes"] == "1"
