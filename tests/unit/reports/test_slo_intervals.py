"""SLOs judged by their intervals on constructed runs: what the verdict, exit code, summary.json, JUnit, the console
and the report say when a figure is held, failed or too uncertain to tell, and that the interval is the one of the
judged records (numpy and scipy on the raw records, sessions as clusters)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tests.conftest import make_run_dir, request
from tokenstorm.reports.build import build_report
from tokenstorm.reports.judging.intervals import quantile_interval
from tokenstorm.reports.judging.slo_spec import load_slo_spec
from tokenstorm.reports.render.console import console_block

AT_95 = {"options": {"confidence": 0.95}}


def _run(tmp_path: Path, ttfts_ms: np.ndarray, meta: dict | None = None, **kw: object) -> Path:
    return make_run_dir(tmp_path / "run", [request(i, float(t), **kw) for i, t in enumerate(ttfts_ms)], meta or AT_95)


def _ttfts(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(100), 0.4, n)


def test_an_slo_whose_interval_straddles_its_target_is_inconclusive_exit_6_naming_the_requests_needed(
    tmp_path: Path,
) -> None:
    ttfts = _ttfts(60)
    p99 = float(np.percentile(ttfts, 99))
    spec = load_slo_spec(text=f"slos:\n  chat:\n    ttft_ms: {{p50: 1000, p99: {p99 * 3:.0f}}}\n")
    result = build_report(_run(tmp_path, ttfts), spec)
    summary = json.loads(result.summary_json.read_text())
    by = {s["stat"]: s for s in summary["slos"]}
    # The p50 of 60 requests is bounded both ways, far below 1 s: held. Their p99 cannot be bounded from above
    # (0.99^60 = 55% of samples of 60 have nothing above the true p99): inconclusive, however far the target.
    assert by["p50"]["result"] == "held" and by["p50"]["ci_low"] < by["p50"]["measured"] < by["p50"]["ci_high"]
    assert by["p99"]["result"] == "inconclusive" and by["p99"]["ci_high"] is None
    # 0.99^n <= 2.5% from n = 368: what the p99 needs before its interval has a top at all.
    assert 368 <= by["p99"]["needed_requests"] <= 420, by["p99"]
    assert result.exit_code == 6 and summary["verdict"] == "inconclusive"
    reason = summary["verdict_reason"]
    assert reason.startswith("1 of 2 SLOs inconclusive at 95%: chat ttft_ms p99") and "(has 60)" in reason
    assert f"needs ~{by['p99']['needed_requests']:,} requests" in reason
    # JUnit: the inconclusive SLO is skipped (not a failure, not a pass), saying why; the held one passes.
    cases = {c.get("name"): c for c in ET.parse(result.junit).getroot().iter("testcase")}
    p99_case = next(c for name, c in cases.items() if name and "p99" in name)
    skipped = p99_case.find("skipped")
    assert skipped is not None and skipped.get("message", "").startswith("inconclusive: measured")
    assert "needs ~" in skipped.get("message", "") and p99_case.find("failure") is None
    assert ET.parse(result.junit).getroot().find("testsuite").get("failures") == "0"  # type: ignore[union-attr]
    # The console's SLO lines and the report's table say it too.
    lines = "\n".join(console_block(result.summary))
    assert "SLO inconclusive chat ttft_ms p99" in lines and "SLO held         chat ttft_ms p50" in lines
    page = result.report.read_text()
    assert 'data-result="inconclusive"' in page and 'data-result="held"' in page and "95% interval" in page
    assert 'class="banner inconclusive' in page or "SLOs inconclusive" in page


def test_a_failure_the_interval_confirms_fails_and_one_within_the_noise_does_not(tmp_path: Path) -> None:
    ttfts = _ttfts(400)
    p50 = float(np.percentile(ttfts, 50))
    # Target 20% under the median of 400: the whole interval is above it — failed, exit 1.
    spec = load_slo_spec(text=f"slos:\n  chat:\n    ttft_ms: {{p50: {p50 * 0.8:.1f}}}\n")
    failed = build_report(_run(tmp_path / "a", ttfts), spec)
    assert failed.exit_code == 1 and failed.summary.slo_results[0].result == "failed"
    assert failed.summary.slo_results[0].ci_low > p50 * 0.8  # type: ignore[operator]
    # Target 1% under the median: a point estimate would fail it; the interval holds it: inconclusive.
    near = load_slo_spec(text=f"slos:\n  chat:\n    ttft_ms: {{p50: {p50 * 0.99:.2f}}}\n")
    assert build_report(_run(tmp_path / "b", ttfts), near).exit_code == 6
    # --confidence 0 judges the point estimate, as before intervals: failed.
    point = build_report(_run(tmp_path / "c", ttfts, {"options": {"confidence": 0}}), near)
    assert point.exit_code == 1 and point.summary.slo_results[0].ci_low is None


def test_the_interval_is_the_order_statistics_of_the_judged_records(tmp_path: Path) -> None:
    """Checked against scipy's binomial on the raw TTFTs: the p50 interval's ends lie between the order
    statistics the exact (uninterpolated) 95% interval names, and the warm-up and failed records are left out."""
    ttfts = _ttfts(300, seed=7)
    records = [request(i, float(t)) for i, t in enumerate(ttfts)]
    records += [request(300 + i, 5.0, ok=False) for i in range(10)]  # failed: not in a latency's sample
    run_dir = make_run_dir(tmp_path / "run", records, AT_95)
    result = build_report(run_dir, load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p50: 500}\n"))
    slo = result.summary.slo_results[0]
    ordered = np.sort(ttfts)
    n = ordered.size
    # Exact binomial ranks (1-based) of the 95% interval of the median: P(B < lo) <= 2.5%, P(B >= hi) <= 2.5%.
    lo = int(stats.binom.ppf(0.025, n, 0.5))
    hi = int(stats.binom.ppf(0.975, n, 0.5)) + 1
    assert ordered[lo - 2] <= slo.ci_low <= ordered[lo]  # type: ignore[operator]
    assert ordered[hi - 2] <= slo.ci_high <= ordered[hi]  # type: ignore[operator]
    assert slo.samples == 300 and slo.result == "held"


def test_the_turns_of_one_session_are_not_counted_as_independent(tmp_path: Path) -> None:
    """40 sessions of 5 turns, each session's TTFTs alike: the interval is as wide as 40 samples give, not 200."""
    rng = np.random.default_rng(3)
    level = rng.lognormal(np.log(100), 0.5, 40)
    ttfts = np.repeat(level, 5) * rng.uniform(0.98, 1.02, 200)
    sessions = [f"s{i // 5}" for i in range(200)]
    records = [request(i, float(t), session_id=sessions[i], step=i % 5) for i, t in enumerate(ttfts)]
    spec = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p50: 1000}\n")
    slo = build_report(make_run_dir(tmp_path / "run", records, AT_95), spec).summary.slo_results[0]
    naive = quantile_interval(ttfts.copy() / 1000, 50, 0.95)
    assert naive.low is not None and naive.high is not None and slo.ci_low is not None and slo.ci_high is not None
    width, naive_width = slo.ci_high - slo.ci_low, (naive.high - naive.low) * 1000
    assert width > 1.5 * naive_width, (width, naive_width)


def test_error_rate_zero_of_few_requests_is_inconclusive_and_of_many_held(tmp_path: Path) -> None:
    spec = load_slo_spec(text="slos:\n  run:\n    error_rate: {max: 1%}\n")
    few = build_report(_run(tmp_path / "few", _ttfts(50)), spec)
    assert few.exit_code == 6 and few.summary.slo_results[0].ci_high > 0.01  # type: ignore[operator]
    many = build_report(_run(tmp_path / "many", _ttfts(600)), spec)
    assert many.exit_code == 0 and many.summary.slo_results[0].ci_high < 0.01  # type: ignore[operator]
    headline = json.loads(many.summary_json.read_text())
    low, high = headline["median_ttft_ms_ci"]
    assert low < headline["median_ttft_ms"] < high and headline["p99_ttft_ms_ci"][1] is not None


@pytest.mark.parametrize(("given", "code"), [("0", 1), ("95", 2), ("x", 2)])
def test_reports_build_takes_a_confidence_and_refuses_a_percent_in_one_line(
    tmp_path: Path, given: str, code: int
) -> None:
    ttfts = _ttfts(60)
    run_dir = _run(tmp_path, ttfts)
    (tmp_path / "slo.yaml").write_text(f"slos:\n  chat:\n    ttft_ms: {{p50: {np.percentile(ttfts, 50) * 0.99:.2f}}}\n")
    cmd = [sys.executable, "-m", "tokenstorm.reports", "build", str(run_dir), "--slo", str(tmp_path / "slo.yaml")]
    done = subprocess.run([*cmd, "--confidence", given], capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stdout + done.stderr
    if code == 2:
        assert "--confidence" in done.stderr and "Traceback" not in done.stderr
        assert "0.5 to below 1" in done.stderr or "not a number" in done.stderr


def test_an_error_bound_of_zero_is_judged_on_the_count_and_a_rate_asks_for_a_longer_run(tmp_path: Path) -> None:
    # No interval of a share reaches down to 0: error_rate <= 0 is judged on the count, held or failed.
    zero = load_slo_spec(text="slos:\n  run:\n    error_rate: {max: 0}\n")
    assert build_report(_run(tmp_path / "zero", _ttfts(50)), zero).exit_code == 0
    # A throughput near its target over a few dozen requests: inconclusive, and more time (not a count) answers.
    ttfts = _ttfts(60)
    measured = build_report(
        _run(tmp_path / "a", ttfts), load_slo_spec(text="slos:\n  run:\n    requests_per_s: {min: 1}\n")
    )
    rate = measured.summary.slo_results[0].measured
    assert rate is not None
    near = load_slo_spec(text=f"slos:\n  run:\n    requests_per_s: {{min: {rate * 0.95:.3f}}}\n")
    result = build_report(_run(tmp_path / "b", ttfts), near)
    assert result.exit_code == 6 and "needs a longer run (has 60)" in result.summary.reason
