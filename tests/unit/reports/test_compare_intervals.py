"""``reports compare`` judges a change by its interval: a regression only when the whole interval of the change
lies beyond the threshold, "no significant difference" when it reaches inside, a figure without raw records
judged on its point as before. The rule on known cases, its error rates on many constructed samples, and
runs written by hand: two draws of one distribution, a real +50%, sessions as clusters, A/B twins paired."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, compare_runs
from tokenstorm.reports.compare.model import fmt_interval
from tokenstorm.reports.compare.significance import change_interval, judge
from tokenstorm.reports.judging.intervals import proportion_interval, quantile_interval

FOREIGN = Path(__file__).resolve().parents[2] / "fixtures" / "foreign"


def _run(path: Path, ttft_ms: Any, options: dict[str, Any] | None = None, **kw: Any) -> Path:
    records = [request(i, float(t), **kw) for i, t in enumerate(ttft_ms)]
    return make_run_dir(path, records, {"status": "finished", "options": {"num_users": 4, **(options or {})}})


@pytest.mark.parametrize(
    ("delta", "change", "higher_better", "expected"),
    [
        (17.7, (-21.0, None), False, "unclear"),  # the E2E p99: +17.7%, but its interval reaches below
        (50.0, (38.0, 63.0), False, "worse"),  # a latency up, the whole interval beyond +10%
        (15.0, (10.0, 20.0), False, "unclear"),  # its low end on the threshold: not wholly beyond it
        (-12.0, (-45.0, 30.0), True, "unclear"),  # the requests/s: -12%, the interval reaches up
        (-30.0, (-40.0, -15.0), True, "worse"),  # a throughput down, the whole interval below -10%
        (30.0, (15.0, 40.0), True, "better"),
        (-30.0, (-40.0, -15.0), False, "better"),  # a latency down
        (3.0, (-2.0, 8.0), False, "within"),  # the whole interval inside ±10%
        (3.0, (-2.0, 14.0), False, "unclear"),  # inside at its point, but might be beyond
        (5.0, (None, None), False, "unclear"),  # the samples bound neither side
        (17.7, None, False, "worse"),  # no interval: judged on the point, as before
        (-12.0, None, True, "worse"),
        (5.0, None, False, "within"),
        (50.0, (38.0, 63.0), None, None),  # a figure never judged (the server's timing)
        (None, None, False, None),
    ],
)
def test_the_rule(delta: float | None, change: Any, higher_better: bool | None, expected: str | None) -> None:
    assert judge(delta, change, higher_better, 10.0) == expected


def test_a_rates_change_is_newcombes_interval_in_percentage_points() -> None:
    # Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 vs 48/80, difference 0.2000,
    # hybrid score interval 0.0524 to 0.3339
    new, base = proportion_interval(56, 70, 0.95), proportion_interval(48, 80, 0.95)
    low, high = change_interval("error_rate", 48 / 80, base, 56 / 70, new)
    assert low is not None and high is not None
    assert (round(low, 2), round(high, 2)) == (5.24, 33.39)


def test_intervals_print_compactly_and_unbounded_ends_say_so() -> None:
    assert fmt_interval(-21.3, 62.0) == "[-21..+62]"
    assert fmt_interval(-4.24, 4.9) == "[-4.2..+4.9]"
    assert fmt_interval(None, None) == "[-100..+∞]"
    assert fmt_interval(-0.01, 0.3) == "[+0.0..+0.3]"  # no "-0.0"


def _p50_verdicts(factor: float, trials: int, n: int, seed: int) -> dict[str | None, int]:
    """How the rule judges the p50 change of ``trials`` pairs of ``n`` lognormal samples, the second ``factor``
    times the first's distribution."""
    rng = np.random.default_rng(seed)
    out: dict[str | None, int] = {}
    for _ in range(trials):
        a, b = rng.lognormal(np.log(200), 0.6, n), rng.lognormal(np.log(200), 0.6, n) * factor
        pa, pb = float(np.median(a)), float(np.median(b))
        change = change_interval(
            "median_ttft_ms", pa, quantile_interval(a.copy(), 50, 0.95), pb, quantile_interval(b.copy(), 50, 0.95)
        )
        verdict = judge((pb / pa - 1) * 100, change, False, 10.0)
        out[verdict] = out.get(verdict, 0) + 1
    return out


def test_the_rule_seldom_calls_noise_a_regression_and_finds_a_real_one() -> None:
    # 400 pairs of 120 requests from one skewed distribution: the point estimates call ~1 in 6 a regression
    # of the p50 by > 10%; the intervals (at 95%) hardly ever
    same = _p50_verdicts(1.0, 400, 120, seed=1)
    assert same.get("worse", 0) <= 4, same
    rng = np.random.default_rng(1)
    point = sum(
        np.median(rng.lognormal(np.log(200), 0.6, 120)) / np.median(rng.lognormal(np.log(200), 0.6, 120)) > 1.1
        for _ in range(400)
    )
    assert point > 40  # what the point estimates alone would have flagged
    # the second run's latency 50% higher: found in nearly 9 of 10 at 120 requests a run (359 of 400 here)
    slower = _p50_verdicts(1.5, 400, 120, seed=2)
    assert slower.get("worse", 0) >= 340 and "better" not in slower, slower


def test_two_draws_of_one_distribution_are_no_regression_where_the_points_said_one(tmp_path: Path) -> None:
    # seed 1: the second run's p95 TTFT comes out 41% higher by chance, its p99 32%
    rng = np.random.default_rng(1)
    a = _run(tmp_path / "a", rng.lognormal(np.log(200), 0.6, 120))
    b = _run(tmp_path / "b", rng.lognormal(np.log(200), 0.6, 120))
    point = compare_runs([a, b], confidence=0)
    assert {r["key"] for r in point.regressions} >= {"p95_ttft_ms", "p99_ttft_ms"}  # what compare said before
    c = compare_runs([a, b], confidence=0.95)
    assert c.regressions == [] and c.confidence == 0.95
    text = c.to_text()
    sentence = text.split("\n\n")[1].replace("\n  ", " ")
    assert "no significant difference: " in sentence and "TTFT p95 +41.1% [" in sentence
    assert text.splitlines()[0].endswith("changes judged by their 95% intervals")
    assert text.split("\n\n")[-1].startswith("no regression beyond 10% at 95% confidence against A (a); ")
    assert "TTFT p95 ms" in text and "(+41.1%? [" in text  # '?': beyond 10%, no significant difference
    assert max(len(line) for line in c.to_text(details=True).splitlines()) <= 100
    html = c.to_html()
    assert "no significant difference: TTFT p50 -12.5% [" in html and "TTFT p95 +41.1% [" in html
    assert 'class="unclear" title="no significant difference' in html


def test_a_real_change_is_a_regression_with_its_interval(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    base = rng.lognormal(np.log(200), 0.3, 120)
    a = _run(tmp_path / "a", base, {"confidence": 0.95})  # the run's own --confidence decides
    b = _run(tmp_path / "b", rng.lognormal(np.log(200), 0.3, 120) * 1.5, {"confidence": 0.95})
    c = compare_runs([a, b])
    assert c.confidence == 0.95
    row = next(r for r in c.rows if r["scope"] == "all" and r["key"] == "median_ttft_ms")
    low, high = row["ci"][1]
    assert row["judged"][1] == "worse" and low is not None and high is not None and 10 < low < row["deltas"][1] < high
    assert c.verdict.startswith("REGRESSION: ") and "at 95% confidence" in c.verdict
    assert f"worse: TTFT p50 +{row['deltas'][1]:.1f}% {fmt_interval(low, high)}" in c.to_text()
    assert f"(+{row['deltas'][1]:.1f}%! {fmt_interval(low, high)})" in c.to_text()
    # --confidence 0: the point estimates, no interval, as compare always did
    zero = compare_runs([a, b], confidence=0)
    assert zero.confidence == 0 and all(ci is None for r in zero.rows for ci in r["ci"])
    assert "[" not in zero.to_text().split("\n\n")[1]


def test_the_steps_of_a_session_are_not_counted_as_independent(tmp_path: Path) -> None:
    # 20 sessions of 10 steps each, every step of a session with the session's TTFT: 200 requests that hold the
    # information of 20; the same values without sessions make an interval far too narrow
    rng = np.random.default_rng(4)
    per_session = np.repeat(rng.lognormal(np.log(200), 0.5, 20), 10)
    sessions = _run(tmp_path / "sessions", per_session, session_id="")
    records = [request(i, float(t), session_id=f"s{i // 10}", step=i % 10) for i, t in enumerate(per_session)]
    clustered = make_run_dir(tmp_path / "clustered", records, {"status": "finished", "options": {"num_users": 4}})
    c = compare_runs([sessions, clustered], confidence=0.95)
    independent, grouped = (col.intervals["all"]["median_ttft_ms"] for col in c.columns)
    assert independent.n == grouped.n == 200 and grouped.n_eff < 40 < independent.n_eff
    assert independent.low is not None and independent.high is not None
    assert grouped.low is None or grouped.low < independent.low
    assert grouped.high is None or grouped.high > independent.high


def _ab(path: Path, a_ms: np.ndarray, b_ms: np.ndarray, confidence: float = 0) -> Path:
    """An A/B run: session k's step j sent to both targets (the twins), a's TTFT ``a_ms``, b's ``b_ms``."""
    records = []
    for label, values in (("a", a_ms), ("b", b_ms)):
        records += [
            {**request(i, float(t), session_id=f"s{i // 3}", step=i % 3), "target": label} for i, t in enumerate(values)
        ]
    targets = [{"label": "a", "url": "http://a:1"}, {"label": "b", "url": "http://b:1"}]
    options = {"num_users": 4, "confidence": confidence}
    return make_run_dir(path, records, {"status": "finished", "targets": targets, "options": options})


def test_ab_targets_are_paired_request_by_request(tmp_path: Path) -> None:
    # the prompts' own spread is wide (some take 10x others), b is 20% slower on every one of them: paired, the
    # change is clear; the same values as two separate runs cannot tell it from the spread
    rng = np.random.default_rng(5)
    a_ms = rng.lognormal(np.log(200), 1.0, 90)
    b_ms = a_ms * 1.2 * rng.uniform(0.98, 1.02, 90)
    c = compare_runs([_ab(tmp_path / "ab", a_ms, b_ms)], confidence=0.95)
    row = next(r for r in c.rows if r["scope"] == "all" and r["key"] == "median_ttft_ms")
    assert row["paired"] == [False, True] and row["judged"][1] == "worse", row
    assert "its requests paired with their twins" in c.to_text()
    apart = compare_runs([_run(tmp_path / "a", a_ms), _run(tmp_path / "b", b_ms)], confidence=0.95)
    row = next(r for r in apart.rows if r["scope"] == "all" and r["key"] == "median_ttft_ms")
    assert row["paired"] == [False, False] and row["judged"][1] == "unclear", row


def test_another_tools_file_has_no_interval_and_is_judged_on_its_point(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", np.full(40, 100.0))
    c = compare_runs([a, FOREIGN / "vllm-bench-serve-0.32.0.json"], confidence=0.95)
    assert c.columns[1].no_interval == "no raw records" and c.columns[0].no_interval is None
    rows = [r for r in c.rows if r["deltas"][1] is not None]
    assert rows and all(r["ci"][1] is None for r in rows)
    assert all(r["judged"][1] != "unclear" for r in rows)  # worse, better or within, on the point
    assert "no interval (no raw records)" in c.to_text() and "no interval (no raw records)" in c.to_html()


def test_the_cli_takes_a_confidence_and_refuses_a_bad_one_in_a_line(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", np.full(30, 100.0))
    b = _run(tmp_path / "b", np.full(30, 150.0))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tokenstorm.reports", "compare", str(a), str(b), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    ok = cli("--confidence", "0.9")
    assert ok.returncode == 1 and "changes judged by their 90% intervals" in ok.stdout  # +50% on every request
    bad = cli("--confidence", "1.5")
    assert bad.returncode == 2 and "--confidence 1.5: a share from 0.5 to below 1" in bad.stderr
    assert "Traceback" not in bad.stderr


def _lengths_run(path: Path, output_tokens: Any) -> Path:
    records = [request(i, 100.0, output_tokens=int(t)) for i, t in enumerate(output_tokens)]
    return make_run_dir(path, records, {"status": "finished", "options": {"num_users": 4}})


def test_answer_lengths_drawn_by_chance_are_no_different_load_and_a_real_difference_is(tmp_path: Path) -> None:
    # seed 0: two runs of 25 answers from one length distribution, whose means come out 176 and 256 tokens
    rng = np.random.default_rng(0)
    a = _lengths_run(tmp_path / "a", rng.lognormal(np.log(150), 0.8, 25) + 1)
    b = _lengths_run(tmp_path / "b", rng.lognormal(np.log(150), 0.8, 25) + 1)
    assert compare_runs([a, b], confidence=0).load_diffs == ["output tokens per request (mean): 176 (A) vs 256 (B)"]
    c = compare_runs([a, b], confidence=0.95)
    assert c.load_diffs == [] and "LOAD" not in c.to_text()
    # a cap of 64 tokens against 256 on every answer: a different load, whatever the confidence
    short = _lengths_run(tmp_path / "short", np.full(25, 64))
    long = _lengths_run(tmp_path / "long", np.full(25, 256))
    assert compare_runs([short, long], confidence=0.95).load_diffs == [
        "output tokens per request (mean): 64 (A) vs 256 (B)"
    ]


def test_summary_json_gives_an_ab_targets_deltas_their_paired_intervals(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    a_ms = rng.lognormal(np.log(200), 1.0, 90)
    run_dir = _ab(tmp_path / "ab", a_ms, a_ms * 1.2 * rng.uniform(0.98, 1.02, 90), confidence=0.95)
    build_report(run_dir)
    b = json.loads((run_dir / "summary.json").read_text())["targets"]["targets"]["b"]
    low, high = b["delta_ci_pct_vs_baseline"]["median_ttft_ms"]
    assert 15 < low < b["delta_pct_vs_baseline"]["median_ttft_ms"] < high < 25  # b is 20% slower on each prompt
    assert b["delta_ci_pct_vs_baseline"]["p95_ttft_ms"] is not None  # 90 pairs: ~4 beyond a p95
    assert (
        "delta_ci_pct_vs_baseline" not in json.loads((run_dir / "summary.json").read_text())["targets"]["targets"]["a"]
    )
    # --confidence 0: no interval
    point = _ab(tmp_path / "point", a_ms, a_ms * 1.2, confidence=0)
    build_report(point)
    assert "delta_ci_pct_vs_baseline" not in json.loads((point / "summary.json").read_text())["targets"]["targets"]["b"]
