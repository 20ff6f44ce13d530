"""What a sweep's report leads with, and how every report writes its numbers: the per-level table's
latency percentiles (every workload of a level together, recomputed here with numpy from the records
that started in the level's judged half), SLOs judged per level and never pooled across levels, the
default check named for what it is, and one format per unit."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, load_slo_spec, measure_sweep_level
from tokenstorm.reports.data.rundir import load_run
from tokenstorm.reports.judging.formats import by_key, ms, per_s, share, slo_value, tok_s
from tokenstorm.reports.judging.slo import SloResult
from tokenstorm.reports.judging.verdict_words import default_check_sentence, verdict_title
from tokenstorm.reports.sections.sweep.model import level_rows, workload_rows
from tokenstorm.workloads.rundir import RequestRecord, SweepResult, sweep_knee, write_sweep

SPEC = load_slo_spec(text="slos:\n  '*':\n    ttft_ms: {p95: 250}\n")
#: users -> chat TTFT ms, code TTFT ms of the level's requests (12 each, all successful)
PLAN = {1: (90.0, 60.0), 2: (140.0, 80.0), 4: (400.0, 120.0)}


def _records() -> list[dict[str, Any]]:
    rng = np.random.default_rng(7)
    out = []
    for k, (chat, code) in enumerate(PLAN.values()):
        lo = 1000.0 + 20 * k
        for w, base in (("chat", chat), ("code", code)):
            out += [
                request(0, float(base + rng.exponential(20)), workload=w, start_epoch_s=lo + 0.7 * i) for i in range(12)
            ]
        out.append(request(0, 5000.0, workload="chat", start_epoch_s=lo - 5))  # before the judged half: not here
    return out


def _sweep_run(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    records = _records()
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished"})
    rows = [
        RequestRecord(**{"endpoint": "/v1/chat/completions", "model": "m", "stream": True, **r}).as_row()
        for r in records
    ]
    levels = [
        measure_sweep_level(
            rows,
            SPEC,
            users=u,
            kind="level",
            started_epoch_s=1000.0 + 20 * k - 10,
            judged_from_epoch_s=1000.0 + 20 * k,
            judged_to_epoch_s=1000.0 + 20 * k + 10,
            confidence=0.0,  # 12 requests a workload: judged on the figures (intervals: test_sweep_outcomes.py)
        )
        for k, u in enumerate(PLAN)
    ]
    write_sweep(run_dir, SweepResult(20.0, levels, complete=True))
    return run_dir, records


def test_each_level_row_carries_every_workloads_percentiles_of_its_own_requests(tmp_path: Path) -> None:
    run_dir, records = _sweep_run(tmp_path)
    run = load_run(run_dir)
    from tokenstorm.workloads.rundir import read_sweep

    result = read_sweep(run_dir)
    assert result is not None
    levels = sorted(result.levels, key=lambda lv: lv.users)
    rows = level_rows(run, levels, sweep_knee(levels))
    assert [r.level.users for r in rows] == [1, 2, 4] and [r.knee for r in rows] == [False, True, False]
    for k, row in enumerate(rows):
        lo = 1000.0 + 20 * k
        mine = [r for r in records if lo <= r["start_epoch_s"] < lo + 10]
        assert row.requests == len(mine) == 24  # both workloads, not the slow one from before the half
        for name, col in (("ttft", "ttft_s"), ("e2e", "e2e_s")):
            want = np.percentile([r[col] * 1000 for r in mine], [50, 95, 99])
            got = [row.latency_ms[name][p] for p in ("p50", "p95", "p99")]
            assert got == pytest.approx(want), (k, name)
        assert row.latency_ms["itl"]["p50"] == pytest.approx(10.0, abs=0.01)
        assert row.low == ["p99"]  # 24 requests: enough for a p95, not a p99
    # the level that broke says which SLO, measured in its unit; the others held
    assert rows[2].broken() and all(
        re.fullmatch(r"\w+ ttft_ms p95 [\d,]+ ms vs <= 250 ms", b) for b in rows[2].broken()
    )
    assert rows[0].broken() == [] and rows[0].level.held
    per_workload = workload_rows(levels)
    assert [(r.level.users, r.workload) for r in per_workload] == [(u, w) for u in PLAN for w in ("chat", "code")]


def test_a_sweep_report_leads_with_the_levels_and_has_no_pooled_slo_table(tmp_path: Path) -> None:
    run_dir, _ = _sweep_run(tmp_path)
    result = build_report(run_dir, SPEC)
    html = result.report.read_text()
    assert result.summary.verdict == "passed" and result.summary.reason.startswith("sweep: goodput knee 2 users")
    assert "pools every level" not in result.summary.reason
    # the sweep's answer straight under the verdict, before the headline; its figures further down
    order = [
        html.index(s)
        for s in ('id="verdict"', 'id="sweep-answer"', 'id="sweep-levels"', 'id="headline"', '<section id="sweep">')
    ]
    assert order == sorted(order)
    assert "<strong>Goodput knee found</strong>" in html
    # no table of SLOs judged on every level pooled: the SLO section says where they are judged
    slos = html[html.index('<section id="slos">') : html.index("</section>", html.index('<section id="slos">'))]
    assert "<table" not in slos and "judged per level" in slos
    header = html[html.index('id="sweep-levels"') : html.index("</thead>", html.index('id="sweep-levels"'))]
    for label in ("TTFT ms", "ITL ms", "E2E ms", "Goodput req/s", "Achieved req/s"):
        assert label in header
    assert header.count(">p99</th>") == 3


def test_a_run_without_slo_names_its_default_check(tmp_path: Path) -> None:
    records = [request(i, 100) for i in range(30)]
    result = build_report(make_run_dir(tmp_path / "run", records, {"status": "finished"}))
    want = "default check held: error rate 0.00% ≤ 1% (no latency SLOs given; --slo FILE)"
    assert result.summary.verdict == "passed" and result.summary.reason == want
    html = result.report.read_text()
    assert "<strong>Default check held</strong>" in html and "SLOs held" not in html
    failing = [request(i, 100, ok=i >= 3) for i in range(30)]  # 3 of 30 failed: 10%
    failed = build_report(make_run_dir(tmp_path / "bad", failing, {"status": "finished"}))
    assert failed.summary.verdict == "failed" and failed.exit_code == 1
    assert failed.summary.reason.startswith("default check failed: error rate 10.00% > 1% (no latency SLOs given")


def test_one_format_per_unit() -> None:
    assert [ms(x) for x in (13480.2, 256.9, 19.34, 9.954, 9.996, None, math.nan)] == [
        "13,480",
        "257",
        "19.3",
        "9.95",
        "10.0",
        "—",
        "—",
    ]
    assert [per_s(x) for x in (3, 14.623, 1234.56)] == ["3.00", "14.62", "1,234.6"]
    assert [tok_s(x) for x in (21528.7, 64.44)] == ["21,529", "64.4"]
    assert share(0.09333) == "9.33%"
    assert slo_value("error_rate", 0.09333) == "9.33%" and slo_value("error_rate", 0.01, threshold=True) == "1%"
    assert slo_value("ttft_ms", 13480.0) == "13,480 ms" and slo_value("e2e_ms", 20000.0, threshold=True) == "20,000 ms"
    assert slo_value("gpu_memory_gb", 73.4) == "73.4 GB" and slo_value("ttft_ms", None) == "no data"
    assert by_key("p95_ttft_ms", 1234.5) == "1,234" and by_key("request_throughput", 3) == "3.00"
    assert by_key("output_throughput", 215.2) == "215" and by_key("error_rate", 0.0) == "0.00%"
    for text in ("13,480", "9.33%", "3.00"):
        assert "e+" not in text and "e-" not in text


def test_verdict_words() -> None:
    held = SloResult("run", "error_rate", "max", "<=", 0.01, 0.0, True)
    assert default_check_sentence([held]).startswith("default check held: error rate 0.00% ≤ 1%")
    ab = [
        SloResult("run", "error_rate", "max", "<=", 0.01, 0.0, True, target="fp8"),
        SloResult("run", "error_rate", "max", "<=", 0.01, 0.05, False, target="awq"),
    ]
    assert default_check_sentence(ab).startswith("default check failed: error rate fp8 0.00%, awq 5.00% > 1%")
    assert verdict_title("passed", default_check=True) == "Default check held"
    assert verdict_title("passed", sweep=True) == "Goodput knee found" and verdict_title("failed") == "SLOs failed"
