"""A capacity search and a sweep stop at a step/level whose timing was not trustworthy: it is not
held, capacity.json / sweep.json say why, and no capacity or knee is reported at or above it —
judged on hand-made records, as the shapes judge theirs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tokenstorm.reports import load_slo_spec
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.sections.sweep.verdict import sweep_block, sweep_verdict
from tokenstorm.workloads.plugin.shapes.levels import capacity_result, judge_step, untrusted_reason, with_timing
from tokenstorm.workloads.rundir import (
    CapacityStep,
    LoadSample,
    RunMeta,
    SweepLevel,
    SweepResult,
    read_capacity,
    read_sweep,
    sweep_knee,
    write_capacity,
    write_sweep,
)

T0 = 1_700_000_000.0
SPEC = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p95: 500}\n    error_rate: {max: 0.05}\n")


def record(i: int, late_events: int = 0, ttft_late: bool = False, lag_s: float = 0.0002,
           ttft_s: float = 0.1) -> dict[str, Any]:  # fmt: skip
    """One streamed chat request of 10 token events, started ``i`` × 0.1 s after T0."""
    gaps = [0.01] * 9
    e2e = ttft_s + sum(gaps)
    return {"request_id": f"r{i}", "workload": "chat", "worker_id": "local", "ok": True, "status_code": 200,
            "start_epoch_s": T0 + i * 0.1, "ttfc_s": ttft_s, "ttft_s": ttft_s, "e2e_s": e2e, "done_s": e2e,
            "tpot_s": sum(gaps) / 9, "itl_gaps_s": gaps, "output_tokens": 10, "prompt_tokens": 20,
            "token_events": 10, "late_events": late_events, "ttft_late": ttft_late, "read_lag_max_s": lag_s,
            "warmup": False, "target": ""}  # fmt: skip


def on_time(n: int = 50) -> list[dict[str, Any]]:
    return [record(i) for i in range(n)]


def read_late(n: int = 50) -> list[dict[str, Any]]:
    """Every other request read late: 4 of its 10 token events (TTFT among them) after a 30 ms wait."""
    return [record(i, late_events=4, ttft_late=True, lag_s=0.03) if i % 2 else record(i) for i in range(n)]


def crowded() -> list[LoadSample]:
    """The load generator waited 400 ms a second for a CPU (other processes on its core)."""
    figures = {"interval_s": 1.0, "cpu_pct": 40.0, "runq_wait_ms_per_s": 400.0, "throttled_ms_per_s": 0.0,
               "loop_lag_p99_ms": 30.0, "loop_lag_max_ms": 60.0}  # fmt: skip
    return [LoadSample(T0 + k, 8, {"local": 40.0}, clock={"local": figures}) for k in range(5)]


# These judge the steps on their figures (confidence 0): what they test is the timing; 50 requests would leave
# a p95 inconclusive by its interval (that: test_sweep_outcomes.py).
def test_a_step_read_on_time_holds_and_one_read_late_does_not_even_though_its_slos_held() -> None:
    held = judge_step(on_time(), SPEC, 8, [], [], confidence=0.0)
    assert held.held and held.timing_trustworthy and held.timing_reason.startswith("timing trustworthy")
    late = judge_step(read_late(), SPEC, 16, [], crowded(), confidence=0.0)
    assert late.measured["chat ttft_ms p95"] == pytest.approx(100.0)  # the SLO itself held...
    assert not late.held and not late.timing_trustworthy  # ...but on timing that cannot be trusted
    assert "timing NOT trustworthy" in late.timing_reason and "20% of 500 token events" in late.timing_reason
    assert "waited 400 ms per second for a CPU" in late.timing_reason  # what limited it


def test_the_search_stops_at_an_untrustworthy_step_and_reports_no_capacity_at_or_above_it(tmp_path: Path) -> None:
    steps = [
        judge_step(on_time(), SPEC, 8, [], [], confidence=0.0),
        judge_step(on_time(), SPEC, 16, [], [], confidence=0.0),
        judge_step(read_late(), SPEC, 24, [], crowded(), confidence=0.0),
    ]
    result = capacity_result(steps)
    assert result.highest_users_that_held == 16
    assert result.untrustworthy_at_users == 24 and result.broke_at_users is None  # no SLO broke: the timing did
    write_capacity(tmp_path, result)
    doc = json.loads((tmp_path / "capacity.json").read_text())
    assert doc["untrustworthy_at_users"] == 24
    assert doc["steps"][2]["timing_trustworthy"] is False and "NOT trustworthy" in doc["steps"][2]["timing_reason"]
    assert read_capacity(tmp_path) == result
    # An untrustworthy first step: no capacity at all. A step that broke an SLO: broke_at_users, as before.
    assert capacity_result(steps[2:]).highest_users_that_held is None
    broke = capacity_result([steps[0], CapacityStep(16, 40, False, {"chat ttft_ms p95": 900.0})])
    assert (broke.highest_users_that_held, broke.broke_at_users, broke.untrustworthy_at_users) == (8, 16, None)


def test_capacity_files_written_before_the_timing_check_still_read(tmp_path: Path) -> None:
    (tmp_path / "capacity.json").write_text(json.dumps({"highest_users_that_held": 6, "broke_at_users": 8,
        "steps": [{"users": 6, "requests": 40, "held": True, "measured": {}}], "schema": 1}))  # fmt: skip
    old = read_capacity(tmp_path)
    assert old is not None and old.untrustworthy_at_users is None
    assert old.steps[0].timing_trustworthy and old.steps[0].timing_reason == ""


def level(users: int, rows: list[dict[str, Any]], load: list[LoadSample], held: bool = True) -> SweepLevel:
    """A level judged on ``rows`` (its SLO verdict given), with the timing of those that started in its judged part."""
    measured = SweepLevel(users, "level", T0, T0, T0 + 60, len(rows), 10.0 * users, 100.0 * users, held)
    return with_timing(measured, rows, load)


def test_a_sweep_level_read_late_is_not_held_and_the_knee_is_below_it(tmp_path: Path) -> None:
    cancelled_late = {**record(99, late_events=9, ttft_late=True), "error_category": "cancelled", "ok": False}
    levels = [level(1, on_time(), []), level(2, [*on_time(), cancelled_late], []), level(4, read_late(), crowded())]
    assert [lv.held for lv in levels] == [True, True, False]
    assert levels[1].timing_trustworthy  # a cancelled request is not judged, its timing neither
    assert not levels[2].timing_trustworthy and "NOT trustworthy" in levels[2].timing_reason
    knee = sweep_knee(levels)
    assert knee is not None and knee.users == 2
    # Levels that say they held at or above it (a file edited by hand, a noisy level) are no capacity either.
    edited = dataclasses.replace(levels[2], held=True)
    above = SweepLevel(8, "level", T0, T0, T0 + 60, 50, 80.0, 800.0, True)
    assert [lv.users for lv in (sweep_knee([*levels[:2], edited, above]),) if lv] == [2]
    stopped = untrusted_reason(4, levels[2].timing_reason)
    assert stopped.startswith("stopped: the load generator's timing was not trustworthy at 4 users (")
    write_sweep(tmp_path, SweepResult(60.0, levels, complete=True, stopped_early=stopped))
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert doc["knee_users"] == 2 and doc["levels"][2]["timing_trustworthy"] is False
    back = read_sweep(tmp_path)
    assert back is not None and back.levels == levels
    # What summary.json and the verdict say of it.
    block = sweep_block(RunData(tmp_path, RunMeta(status="finished"), requests=None))  # type: ignore[arg-type]
    assert block is not None and block["timing_untrustworthy_at_users"] == 4 and block["knee_users"] == 2
    verdict, reason = sweep_verdict(block)
    assert verdict == "passed" and "stopped: the load generator's timing was not trustworthy at 4 users" in reason


def test_a_sweep_untrustworthy_from_its_first_level_has_no_knee_and_is_unreliable(tmp_path: Path) -> None:
    levels = [level(1, read_late(), crowded())]
    write_sweep(tmp_path, SweepResult(60.0, levels, complete=True,
                                      stopped_early=untrusted_reason(1, levels[0].timing_reason)))  # fmt: skip
    block = sweep_block(RunData(tmp_path, RunMeta(status="finished"), requests=None))  # type: ignore[arg-type]
    assert block is not None and block["knee_users"] is None
    verdict, reason = sweep_verdict(block)
    assert verdict == "unreliable" and "timing was not trustworthy at 1 users" in reason
    # A trustworthy lowest level that broke an SLO still fails the sweep, as before.
    broke = [level(1, on_time(), [], held=False), level(2, read_late(), crowded())]
    write_sweep(tmp_path, SweepResult(60.0, broke, complete=True))
    block = sweep_block(RunData(tmp_path, RunMeta(status="finished"), requests=None))  # type: ignore[arg-type]
    assert sweep_verdict(block or {})[0] == "failed"


def test_sweep_files_written_before_the_timing_check_still_read(tmp_path: Path) -> None:
    write_sweep(tmp_path, SweepResult(5.0, [SweepLevel(1, "level", T0, T0, T0 + 5, 10, 3.0, 60.0, True)]))
    doc = json.loads((tmp_path / "sweep.json").read_text())
    for lv in doc["levels"]:
        del lv["timing_trustworthy"], lv["timing_reason"]
    (tmp_path / "sweep.json").write_text(json.dumps(doc))
    back = read_sweep(tmp_path)
    assert back is not None and back.levels[0].timing_trustworthy and back.knee_users == 1
