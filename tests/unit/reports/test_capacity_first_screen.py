"""A capacity search's report and verdict come from its steps, never from SLOs pooled over them: the search
stops at the step that broke, so pooled, every search that found its capacity failed. Each step's row carries
its TTFT, ITL and E2E percentiles, recomputed here with numpy from the records the search judged (started in
the step's second half, ended by its end)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, load_slo_spec
from tokenstorm.workloads.rundir import CapacityResult, CapacityStep, write_capacity

SPEC = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p95: 250}\n    error_rate: {max: 0.01}\n")
STEP_S = 10.0
#: users -> the TTFT (ms) of its step's requests; 4 users queue past 250 ms
PLAN = {1: 90.0, 2: 120.0, 4: 600.0}


def _records() -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    out = []
    for k, ttft in enumerate(PLAN.values()):
        t0 = 1000.0 + k * STEP_S
        out += [request(0, float(ttft + rng.exponential(10)), start_epoch_s=t0 + 0.4 * i) for i in range(22)]
    return out


def _capacity_run(tmp_path: Path, held: tuple[bool, ...] = (True, True, False)) -> tuple[Path, list[dict[str, Any]]]:
    records = _records()
    meta = {"status": "finished", "options": {"capacity_step_time": STEP_S}}
    run_dir = make_run_dir(tmp_path / "run", records, meta)
    steps = [
        CapacityStep(u, 10, h, {"chat ttft_ms p95": ttft + 20, "chat error_rate max": 0.0})
        for (u, ttft), h in zip(PLAN.items(), held, strict=True)
    ]
    best = next((s.users for s in reversed(steps) if s.held), None) if held[0] else None
    broke = next((s.users for s in steps if not s.held), None)
    write_capacity(run_dir, CapacityResult(best, broke, steps))
    return run_dir, records


def test_a_capacity_search_that_found_its_capacity_passes_with_a_row_per_step(tmp_path: Path) -> None:
    run_dir, records = _capacity_run(tmp_path)
    result = build_report(run_dir, SPEC)
    # pooled, the 4-user step's 600 ms takes the run's TTFT p95 past 250 ms: it would fail
    assert result.summary.slo_results and not all(r.passed for r in result.summary.slo_results)
    assert result.exit_code == 0 and result.summary.verdict == "passed"
    assert result.summary.reason.startswith("capacity search: highest load that held every per-request SLO: 2 users")
    assert "broke at 4 users" in result.summary.reason
    html = result.report.read_text()
    order = [html.index(s) for s in ('id="verdict"', 'id="capacity-steps"', 'id="headline"')]
    assert order == sorted(order) and "<strong>Capacity found</strong>" in html
    slos = html[html.index('<section id="slos">') : html.index("</section>", html.index('<section id="slos">'))]
    assert "<table" not in slos and "judged per step" in slos
    for k, users in enumerate(PLAN):
        lo, hi = 1000.0 + (k + 0.5) * STEP_S, 1000.0 + (k + 1) * STEP_S
        judged = [r for r in records if lo <= r["start_epoch_s"] < hi and r["start_epoch_s"] + r["e2e_s"] <= hi]
        row = html[html.index(f'<tr data-users="{users}"') :]
        row = row[: row.index("</tr>")]
        for p, q in zip(
            ("p50", "p95", "p99"), np.percentile([r["ttft_s"] * 1000 for r in judged], [50, 95, 99]), strict=True
        ):
            shown = row.split(f'data-figure="ttft_{p}" data-value="')[1].split('"')[0]
            assert float(shown) == pytest.approx(q), (users, p)
    assert "BROKE" in row and "chat ttft_ms p95 620 ms vs &lt;= 250 ms" in row
    summary = json.loads(result.summary_json.read_text())
    assert summary["capacity"]["highest_users_that_held"] == 2 and summary["verdict"] == "passed"
    junit = ET.parse(result.junit).getroot()
    assert junit.find(".//failure") is None
    cases = {c.get("name"): c for c in junit.iter("testcase") if c.get("classname") == "tokenstorm.slo.capacity"}
    assert set(cases) == {"a step held", "1 users", "2 users", "4 users"}
    assert cases["4 users"].find("skipped") is not None


def test_a_capacity_search_whose_first_step_broke_fails(tmp_path: Path) -> None:
    run_dir, _ = _capacity_run(tmp_path, held=(False, False, False))
    result = build_report(run_dir, SPEC)
    assert result.exit_code == 1 and result.summary.verdict == "failed"
    assert result.summary.reason == "capacity search: no step met every per-request SLO, not even 1 user(s)"
    assert "<strong>No step held</strong>" in result.report.read_text()
    junit = ET.parse(result.junit).getroot()
    assert [c.get("name") for c in junit.iter("testcase") if c.find("failure") is not None] == ["a step held"]
