"""A sweep level measured from its records (known answers), and the sweep in report.html and summary.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, load_slo_spec, measure_sweep_level
from tokenstorm.workloads.rundir import RequestRecord, SweepResult, write_sweep

SPEC = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p50: 200}\n    e2e_ms: {max: 1000}\n")


def _row(record: dict[str, Any]) -> dict[str, Any]:
    return RequestRecord(**{"endpoint": "/v1/chat/completions", "model": "m", "stream": True, **record}).as_row()


def _level_records(slow_ms: float) -> list[dict[str, Any]]:
    """Ten requests started at 1000..1009 s (the last one ``slow_ms`` to its first token), one from
    before the judged window that ended inside it, and one the load test cancelled."""
    records = [request(i, 100 if i < 9 else slow_ms, start_epoch_s=1000.0 + i) for i in range(10)]
    records.append(request(0, 100, start_epoch_s=999.8))  # ended at 1000.4: counts for throughput only
    records.append(request(0, 100, ok=False, start_epoch_s=1005.0, error_category="cancelled"))
    return records


def test_a_level_is_judged_on_its_window() -> None:
    rows = [_row(r) for r in _level_records(slow_ms=900)]
    level = measure_sweep_level(rows, SPEC, users=4, kind="level", started_epoch_s=990.0,
                                judged_from_epoch_s=1000.0, judged_to_epoch_s=1010.0)  # fmt: skip
    assert level.requests == 10  # started in the window, the cancelled one left out
    # Ended in the window: 9 of the 10 (the slow one ended at 1010.4) plus the one from before it.
    assert level.requests_per_s == pytest.approx(1.0)
    assert level.output_tokens_per_s == pytest.approx(51.0)
    chat = level.latency_ms["chat"]
    assert chat["ttft"]["p50"] == pytest.approx(100.0) and chat["ttft"]["p99"] > 800
    assert chat["itl"]["p95"] == pytest.approx(10.0, abs=0.01) and chat["e2e"]["p50"] == pytest.approx(600.0)
    verdicts = {v.target: v.passed for v in level.slos}
    assert verdicts == {"chat ttft_ms p50 <= 200": True, "chat e2e_ms max <= 1000": False}
    assert not level.held
    assert measure_sweep_level(rows, SPEC, users=4, kind="level", started_epoch_s=0.0, judged_from_epoch_s=2000.0,
                               judged_to_epoch_s=2010.0).held is False  # no requests: nothing held  # fmt: skip


def test_the_report_shows_the_sweep_and_summary_json_names_the_knee(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path / "run", _level_records(slow_ms=900), {"status": "finished"})
    rows = [_row(r) for r in _level_records(slow_ms=900)]
    fast = [_row(r) for r in _level_records(slow_ms=100)]
    levels = [measure_sweep_level(fast, SPEC, users=1, kind="synchronous", started_epoch_s=990.0,
                                  judged_from_epoch_s=1000.0, judged_to_epoch_s=1010.0),
              measure_sweep_level(fast, SPEC, users=2, kind="level", started_epoch_s=990.0,
                                  judged_from_epoch_s=1000.0, judged_to_epoch_s=1010.0),
              measure_sweep_level(rows, SPEC, users=4, kind="level", started_epoch_s=990.0,
                                  judged_from_epoch_s=1000.0, judged_to_epoch_s=1010.0)]  # fmt: skip
    write_sweep(run_dir, SweepResult(20.0, levels, complete=True))
    result = build_report(run_dir, SPEC)
    html = result.report.read_text()
    assert 'id="sweep"' in html and "Goodput knee: 2 users" in html
    assert "chat e2e_ms max 1,400 ms vs &lt;= 1,000 ms" in html  # the target a level broke, named in its unit
    sweep = json.loads(result.summary_json.read_text())["sweep"]
    assert (sweep["knee_users"], sweep["complete"]) == (2, True)
    assert sweep["knee_requests_per_s"] == pytest.approx(1.1)  # all 11 ended in the window
    assert [(lv["users"], lv["held"]) for lv in sweep["levels"]] == [(1, True), (2, True), (4, False)]
    # A run that was no sweep has neither.
    plain = make_run_dir(tmp_path / "plain", _level_records(slow_ms=100), {"status": "finished"})
    plain_result = build_report(plain, SPEC)
    assert 'id="sweep"' not in plain_result.report.read_text()
    assert "sweep" not in json.loads(plain_result.summary_json.read_text())
