"""``tokenstorm compare`` leads with its answer: a legend of the runs' whole names, one sentence per run
against its baseline, the headline figures with their sample sizes; every console line within 100
characters; a delta from few samples marked; an A/B run's first ``--targets`` target its baseline and its
twins never said to have offered different loads. Runs written by hand, figures checked against numpy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import compare_runs

LONG = "2026-12-03T08-37-10_mixed_SIMULATED_a-rather-long-label-for-the-fp8-deployment"


def _run(path: Path, ttft_ms: list[float], contract: int = 0, failed: int = 0, users: int = 4) -> Path:
    records = [request(i, t) for i, t in enumerate(ttft_ms)]
    records += [request(100 + i, 2000.0 + 100 * i, workload="contract") for i in range(contract)]
    records += [request(10 + i, 0, ok=False) for i in range(failed)]
    run_dir = make_run_dir(path, records, {"status": "finished", "options": {"num_users": users, "max_tokens": 64}})
    (run_dir / "load.jsonl").write_text(json.dumps({"epoch_s": 1000.0, "users": users}) + "\n")
    return run_dir


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_the_summary_comes_first_with_sample_sizes_and_the_verdict_last(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    base_ttft = [float(x) for x in rng.uniform(80, 120, 60)]
    slow_ttft = [t * 1.3 for t in base_ttft]  # TTFT 30% worse, everything else alike
    a = _run(tmp_path / LONG, base_ttft)
    b = _run(tmp_path / "b", slow_ttft, failed=2)
    c = compare_runs([a, b])
    text = c.to_text()
    lines = text.splitlines()
    # the legend names each run whole, its label first; the baseline said
    assert lines[0] == "tokenstorm compare: 2 runs, A the baseline"
    assert lines[1] == f"A  {LONG} (baseline)" and "B  b" in lines
    # the first sentence after the legend is the answer: what got worse, the errors
    sentence = text.split("\n\n")[1].replace("\n  ", " ")
    p50 = (np.median(slow_ttft) / np.median(base_ttft) - 1) * 100
    assert sentence.startswith(f"B vs A: worse: TTFT p50 +{p50:.1f}%, TTFT p95 +")
    assert "within 10%: ITL p50, ITL p95" in sentence
    assert "errors 0 of 60 → 2 of 62 (+3.2pp)" in sentence  # 3.2 percentage points: within 10
    # then the headline table: n beside the figures, the errors as counts
    assert re.search(r"^n requests\s+n=60\s+n=60$", text, re.M)
    assert re.search(r"^errors \(failed of all\)\s+0 of 60\s+2 of 62 \(\+3\.2pp\)$", text, re.M)
    verdict = text.split("\n\n")[-1]
    assert verdict.startswith("REGRESSION: ") and verdict.endswith(
        "(--details: every figure, per workload, and each run's context)"
    )
    assert _widest(text) <= 100 and _widest(c.to_text(details=True)) <= 100
    assert len(lines) < 40  # it scans; the per-workload figures wait for --details
    assert "LATENCY" not in text and "LATENCY" in c.to_text(details=True)


def test_a_figure_from_few_requests_says_so(tmp_path: Path) -> None:
    # the case: contract E2E from 1 request against 2
    a = _run(tmp_path / "a", [100.0] * 40, contract=1)
    b = _run(tmp_path / "b", [100.0] * 40, contract=2)
    c = compare_runs([a, b])
    row = next(r for r in c.rows if r["scope"] == "contract" and r["key"] == "median_e2el_ms")
    assert row["n"] == [1, 2] and row["few_delta"] == [False, True]
    details = c.to_text(details=True)
    latency = details.split("\nLATENCY")[1].split("\n\n")[0]
    assert re.search(r"^contract: n requests\s+n=1\s+n=2$", latency, re.M)
    e2e = (np.median([2500.0, 2600.0]) / 2500.0 - 1) * 100
    assert re.search(rf"^  E2E p50 ms\s+2,500\s+2,550 \(~\+{e2e:.1f}%\)$", latency, re.M)
    # 40 requests: a p50 is not few, a p99 is (fewer than 100)
    whole = {r["key"]: r for r in c.rows if r["scope"] == "all"}
    assert not whole["median_ttft_ms"]["few_delta"][1] and whole["p99_ttft_ms"]["few_delta"][1]
    html = c.to_html()
    assert "<td>n=1</td><td>n=2</td>" in html and "(~+2.0%)" in html


def test_many_long_named_columns_split_the_tables_not_the_names(tmp_path: Path) -> None:
    runs = [_run(tmp_path / f"{LONG}-{i}", [100.0 + 10 * i] * 30, contract=i) for i in range(5)]
    c = compare_runs(runs)
    for details in (False, True):
        text = c.to_text(details=details)
        assert _widest(text) <= 100, max(text.splitlines(), key=len)
        for i in range(5):
            assert f"{'ABCDE'[i]}  {LONG}-{i}" in text  # whole names in the legend, never cut with "…"
        assert "…" not in text
    # five columns of "1,234 (+12.3%!)" do not fit beside the labels: the table goes on below, its
    # first column repeated
    heads = [line for line in c.to_text().splitlines() if line.startswith("whole run")]
    assert len(heads) == 2 and heads[0].split()[-1] != "E" and heads[1].split()[-1] == "E"


def _ab(path: Path, first: str, second: str, first_ms: float, second_ms: float, tokens: tuple[int, int]) -> Path:
    """An A/B run with targets given in the order first, second (their names sort the other way)."""
    records = [{**request(i, first_ms, output_tokens=tokens[0]), "target": first} for i in range(30)]
    records += [{**request(i, second_ms, output_tokens=tokens[1]), "target": second} for i in range(30)]
    targets = [{"label": first, "url": f"http://{first}:1"}, {"label": second, "url": f"http://{second}:1"}]
    meta: dict[str, Any] = {"status": "finished", "targets": targets, "options": {"num_users": 4}}
    return make_run_dir(path, records, meta)


def test_an_ab_runs_first_target_is_the_baseline_and_its_twins_share_their_load(tmp_path: Path) -> None:
    # zeta given first: the baseline, though summary.json lists "alpha" first; alpha's server writes
    # longer answers (its measured output length differs by far more than 20%), which is no load difference
    one = _ab(tmp_path / "ab", "zeta", "alpha", 100.0, 150.0, (20, 60))
    c = compare_runs([one])
    assert c.runs == ["ab[zeta]", "ab[alpha]"] and c.baseline == 0
    assert c.load_diffs == [] and "LOAD" not in c.to_text() and "LOAD" not in c.to_html()
    text = c.to_text()
    assert "A  ab[zeta] (baseline) — http://zeta:1" in text and "B vs A: worse: TTFT p50 +50.0%" in text
    # two A/B runs: each target against the baseline run's same one; a load difference between
    # the runs is still said
    later = _ab(tmp_path / "ab2", "zeta", "alpha", 100.0, 150.0, (20, 60))
    meta = json.loads((later / "run.json").read_text())
    meta["options"]["num_users"] = 8
    (later / "run.json").write_text(json.dumps(meta))
    c2 = compare_runs([one, later])
    assert c2.runs == ["ab[zeta]", "ab[alpha]", "ab2[zeta]", "ab2[alpha]"] and c2.refs == [None, 0, 0, 1]
    assert c2.load_diffs == ["users / concurrency (peak): 4 (A) vs 4 (B) vs 8 (C) vs 8 (D)"]


@pytest.mark.parametrize("flag", ["--details", "--all"])
def test_the_cli_prints_the_summary_by_default_and_every_figure_with_the_flag(tmp_path: Path, flag: str) -> None:
    import subprocess
    import sys

    a = _run(tmp_path / "a", [100.0] * 30, contract=2)
    b = _run(tmp_path / "b", [150.0] * 30, contract=2)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tokenstorm.reports", "compare", str(a), str(b), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    short, full = cli(), cli(flag)
    assert short.returncode == full.returncode == 1  # the same regression either way
    assert "B vs A: worse: TTFT p50 +50.0%" in short.stdout and "contract: n requests" not in short.stdout
    assert "contract: n requests" in full.stdout and full.stdout.startswith(short.stdout.split("\n\n")[0])
    assert _widest(short.stdout) <= 100 and _widest(full.stdout) <= 100
