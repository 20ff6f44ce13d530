"""A/B targets in the report: each judged on its own records, deltas against the first."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, load_slo_spec


def test_each_target_is_judged_on_its_own_records_with_deltas(tmp_path: Path) -> None:
    # Known answers: target a has TTFT 100 ms, b 300 ms (+200%); the SLO (p50 <= 200) breaks on b only.
    records = [{**request(i, 100.0), "target": "a"} for i in range(20)]
    records += [{**request(i, 300.0), "target": "b"} for i in range(20)]
    targets = [{"label": "a", "url": "http://a:1"}, {"label": "b", "url": "http://b:1"}]
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished", "targets": targets})
    spec = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p50: 200}\n")
    result = build_report(run_dir, spec)
    assert result.exit_code == 1 and result.summary.verdict == "failed"
    ab = json.loads((run_dir / "summary.json").read_text())["targets"]
    assert ab["baseline"] == "a" and ab["slowest"] == "b" and ab["fastest"] == "a"
    assert ab["targets"]["a"]["median_ttft_ms"] == 100.0 and ab["targets"]["b"]["median_ttft_ms"] == 300.0
    assert ab["targets"]["b"]["delta_pct_vs_baseline"]["median_ttft_ms"] == 200.0
    assert ab["targets"]["a"]["delta_pct_vs_baseline"]["median_ttft_ms"] == 0.0
    assert ab["targets"]["a"]["requests"] == ab["targets"]["b"]["requests"] == 20
    assert [(r.target, r.passed) for r in result.summary.slo_results] == [("a", True), ("b", False)]
    assert "b chat ttft_ms p50 300 ms vs <= 200 ms" in result.summary.reason
    # E2E is TTFT + 0.5 s here: b is slower by 200/600.
    assert round(ab["slower_by_pct"]) == 33 and ab["sentence"].startswith("b is slower")
    html = (run_dir / "report.html").read_text()
    assert 'id="targets"' in html and "+200.0%" in html and "http://b:1" in html


def test_a_one_target_run_has_no_targets_block(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path / "run", [request(i, 100.0) for i in range(5)], {"status": "finished"})
    build_report(run_dir, load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p50: 200}\n"))
    assert "targets" not in json.loads((run_dir / "summary.json").read_text())
    assert 'id="targets"' not in (run_dir / "report.html").read_text()


def test_one_labelled_target_and_a_target_without_judged_requests(tmp_path: Path) -> None:
    spec = load_slo_spec(text="slos:\n  '*':\n    ttft_ms: {p50: 200}\n")
    one = make_run_dir(tmp_path / "one", [{**request(i, 100.0), "target": "fp8"} for i in range(5)],
                       {"status": "finished", "targets": [{"label": "fp8", "url": "http://a:1"}]})  # fmt: skip
    result = build_report(one, spec)
    assert result.exit_code == 0 and 'id="targets"' in (one / "report.html").read_text()
    # b's only requests were cancelled at the end: b cannot be said to hold anything — the run fails.
    records = [{**request(i, 100.0), "target": "a"} for i in range(5)]
    records += [{**request(i, 100.0, ok=False, error_category="cancelled"), "target": "b"} for i in range(3)]
    targets = [{"label": "a", "url": "http://a:1"}, {"label": "b", "url": "http://b:1"}]
    two = make_run_dir(tmp_path / "two", records, {"status": "finished", "targets": targets})
    result = build_report(two, spec)
    assert result.exit_code == 1
    broken = [(r.target, r.metric, r.note) for r in result.summary.slo_results if not r.passed]
    assert broken == [("b", "requests", "no judged request from this target")]
    ab = json.loads((two / "summary.json").read_text())["targets"]
    assert ab["targets"]["a"]["verdict"] == "passed" and ab["targets"]["b"]["verdict"] == "failed"
    assert "sentence" not in ab  # one target with an E2E p50: nothing to compare; the page still renders
    assert "FAIL: 1 of 1 SLOs" in (two / "report.html").read_text()
