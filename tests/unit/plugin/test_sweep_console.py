"""The console's line per sweep level: a level that BROKE names each SLO it broke with the value
measured against the target's threshold (once it said only "BROKE"), and percentiles from too few
requests are said to be."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.conftest import request
from tokenstorm.reports import load_slo_spec, measure_sweep_level
from tokenstorm.workloads.plugin.shapes.levels import level_line
from tokenstorm.workloads.rundir import RequestRecord, SweepLevel

SPEC = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p95: 200}\n    error_rate: {max: 0.01}\n")


def _rows(n: int, ttft_ms: float, failed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    records = [request(0, float(ttft_ms + rng.exponential(10)), start_epoch_s=1000.0 + 9 * i / n) for i in range(n)]
    records += [request(0, 0, ok=False, start_epoch_s=1001.0) for _ in range(failed)]
    return [RequestRecord(**{"endpoint": "/v1/chat/completions", "model": "m", "stream": True, **r}).as_row()
            for r in records]  # fmt: skip


def _level(rows: list[dict[str, Any]], users: int = 8) -> SweepLevel:
    return measure_sweep_level(rows, SPEC, users=users, kind="level", started_epoch_s=990.0,
                               judged_from_epoch_s=1000.0, judged_to_epoch_s=1010.0, confidence=0.0)  # fmt: skip


def test_a_broken_level_names_the_slo_measured_against_its_threshold() -> None:
    rows = _rows(150, ttft_ms=300, failed=5)
    line = level_line(_level(rows))
    p95_ms = float(np.percentile([r["ttft_s"] * 1000 for r in rows if r["ok"]], 95))
    error_rate = 5 / len(rows)
    assert line.startswith("sweep level 8 users (level): BROKE ")
    assert f"chat ttft_ms p95 <= 200 (measured {p95_ms:.4g})" in line
    assert f"chat error_rate max <= 0.01 (measured {error_rate:.4g})" in line
    assert "low sample" not in line  # 150 requests: p95 and p99 both have their tail


def test_a_held_level_says_held_and_few_requests_are_said() -> None:
    line = level_line(_level(_rows(150, ttft_ms=100)))
    assert ": held — " in line and "BROKE" not in line and "low sample" not in line
    few = level_line(_level(_rows(12, ttft_ms=100), users=1))
    assert "held" in few and few.endswith("[low sample: chat p95/p99 of 12 requests]")
    some = level_line(_level(_rows(40, ttft_ms=100), users=2))
    assert some.endswith("[low sample: chat p99 of 40 requests]")  # p95 has 40 ≥ 20; p99 needs 100


def test_a_level_without_judged_requests_says_so() -> None:
    empty = _level([], users=4)
    assert level_line(empty).startswith("sweep level 4 users (level): BROKE: no judged requests —")


def test_many_broken_slos_are_cut_to_the_first_few() -> None:
    level = _level(_rows(150, ttft_ms=300, failed=5))
    assert "+1 more" in level_line(level, most=1) and level_line(level).count("measured") == 2
