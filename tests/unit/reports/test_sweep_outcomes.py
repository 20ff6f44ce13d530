"""Sweep levels and capacity steps judged by the SLOs' intervals: each is held, broken or inconclusive
(too few requests to tell — never "broken" on noise); the knee is the highest held level below the first
broken one, and the inconclusive levels between them are its uncertainty, said in the report's first
screen, summary.json, the console and the verdict. Records constructed with known answers."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, load_slo_spec, measure_sweep_level
from tokenstorm.reports.render.junit import _sweep_cases
from tokenstorm.reports.sections.sweep.capacity import capacity_block, capacity_verdict
from tokenstorm.reports.sections.sweep.verdict import sweep_verdict
from tokenstorm.workloads.plugin.shapes.levels import capacity_result, judge_step, level_line, plateau_reason
from tokenstorm.workloads.rundir import (
    RequestRecord,
    SweepLevel,
    SweepResult,
    knee_span,
    level_outcome,
    read_capacity,
    write_capacity,
    write_sweep,
)

SPEC = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p95: 200}\n")
#: users -> (requests in the level's judged half, lowest TTFT ms; each TTFT spread evenly over 100 ms above it)
PLAN = {1: (100, 50.0), 2: (100, 50.0), 4: (12, 50.0), 8: (100, 300.0)}


def _records() -> list[dict[str, Any]]:
    rng = np.random.default_rng(11)
    out = []
    for k, (n, low_ms) in enumerate(PLAN.values()):
        lo = 1000.0 + 20 * k
        out += [request(0, float(low_ms + rng.uniform(0, 100)), start_epoch_s=lo + 9.5 * i / n) for i in range(n)]
    return out


def _rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    base = {"endpoint": "/v1/chat/completions", "model": "m", "stream": True}
    return [RequestRecord(**{**base, **r}).as_row() for r in records]


def _levels(rows: list[dict[str, Any]], confidence: float = 0.95) -> list[SweepLevel]:
    return [
        measure_sweep_level(
            rows,
            SPEC,
            users=u,
            kind="level",
            started_epoch_s=990.0 + 20 * k,
            judged_from_epoch_s=1000.0 + 20 * k,
            judged_to_epoch_s=1010.0 + 20 * k,
            confidence=confidence,
        )
        for k, u in enumerate(PLAN)
    ]


def test_a_level_from_too_few_requests_is_inconclusive_not_broken() -> None:
    levels = _levels(_rows(_records()))
    assert [level.outcome() for level in levels] == ["held", "held", "inconclusive", "broken"]
    few = levels[2]
    # its p95 measured well under 200 ms, but 12 requests cannot bound a p95 from above
    assert few.slos[0].measured is not None and few.slos[0].measured < 200 and not few.held
    assert few.slos[0].outcome() == "inconclusive" and (few.slos[0].needed_requests or 0) > 12
    line = level_line(few)
    assert "inconclusive" in line and "BROKE" not in line and "needs about" in line
    # judged on the figures (--confidence 0) the same level held: the interval is what makes it unsure
    assert [level.outcome() for level in _levels(_rows(_records()), confidence=0.0)][2] == "held"


def test_the_knee_is_the_highest_held_level_below_the_first_broken_and_inconclusive_ones_are_its_uncertainty() -> None:
    assert knee_span([(1, "held"), (2, "held"), (4, "inconclusive"), (8, "broken")]) == (2, [4], 8)
    # an inconclusive level below a held one is noise: the knee passes over it
    assert knee_span([(1, "inconclusive"), (2, "held"), (4, "broken")]) == (2, [], 4)
    # a level that held above the first broken one is noise too: it is no knee
    assert knee_span([(1, "held"), (2, "broken"), (4, "held")]) == (1, [], 2)
    assert knee_span([(1, "inconclusive"), (2, "inconclusive"), (4, "broken")]) == (None, [1, 2], 4)
    assert knee_span([(1, "held"), (2, "inconclusive")]) == (1, [2], None)
    assert level_outcome(["held", "inconclusive"], 10) == "inconclusive"
    assert level_outcome(["inconclusive", "failed"], 10) == "broken"  # one failed for sure: broken
    assert level_outcome(["held"], 10, timing_trustworthy=False) == "broken"
    assert level_outcome([], 0) == "broken"  # no judged request


def test_the_report_summary_and_verdict_say_the_knees_uncertainty(tmp_path: Path) -> None:
    records = _records()
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished"})
    write_sweep(run_dir, SweepResult(20.0, _levels(_rows(records)), complete=True))
    result = build_report(run_dir, SPEC)
    doc = json.loads((run_dir / "summary.json").read_text())
    sweep = doc["sweep"]
    assert sweep["knee_users"] == 2 and sweep["knee_inconclusive_users"] == [4]
    assert [level["result"] for level in sweep["levels"]] == ["held", "held", "inconclusive", "broken"]
    assert result.summary.verdict == "passed" and result.exit_code == 0
    assert "between 2 and 4 users: 4 inconclusive" in result.summary.reason
    html = result.report.read_text()
    first = html[html.index('id="sweep-answer"') : html.index("</section>", html.index('id="sweep-answer"'))]
    assert "Goodput knee: 2 users" in first and "(between 2 and 4 users: 4 inconclusive)" in first
    assert 'data-result="inconclusive">inconclusive' in first and 'data-result="broken">BROKE' in first
    # JUnit: the inconclusive level is skipped as too short to tell, not as broken; nothing fails.
    cases = {c.get("name"): c for c in ET.parse(result.junit).getroot().iter("testcase")}
    four = cases["4 users (level)"].find("skipped")
    assert four is not None and four.get("message", "").startswith("inconclusive (too few requests to tell)")
    assert cases["8 users (level)"].find("skipped").get("message", "").startswith("broke an SLO")  # type: ignore[union-attr]
    assert all(c.find("failure") is None for c in cases.values())


def test_a_sweep_with_no_knee_for_sure_is_skipped_in_junit_not_failed() -> None:
    root = ET.Element("testsuite")
    levels = [
        {
            "users": u,
            "kind": "level",
            "requests_per_s": 1.0,
            "output_tokens_per_s": 9.0,
            "held": False,
            "result": "inconclusive",
        }
        for u in (1, 2)
    ]
    failed = _sweep_cases(root, {"knee_users": None, "knee_inconclusive_users": [1, 2], "levels": levels}, "s")
    knee = next(c for c in root.iter("testcase") if c.get("name") == "goodput knee found")
    assert failed == 0 and knee.find("failure") is None
    assert knee.find("skipped").get("message", "").startswith("inconclusive: 1, 2 users")  # type: ignore[union-attr]


def test_a_sweep_whose_lowest_levels_are_inconclusive_has_no_knee_and_ends_inconclusive() -> None:
    levels = [{"users": 1}, {"users": 2}, {"users": 4}]
    block = {"knee_users": None, "knee_inconclusive_users": [1, 2], "complete": True, "levels": levels}
    verdict, reason = sweep_verdict(block)
    assert verdict == "inconclusive" and "no goodput knee for sure — 1, 2 users inconclusive" in reason


def test_inconclusive_levels_do_not_stop_a_sweep_as_a_plateau() -> None:
    levels = _levels(_rows(_records()))
    flat = [levels[0], levels[2], levels[2]]  # two inconclusive levels at the same throughput
    assert plateau_reason(flat) is None
    assert plateau_reason([levels[0], levels[3], levels[3]]) is not None  # two broken ones: it stops


def test_a_capacity_step_from_too_few_requests_is_inconclusive_and_the_capacity_is_a_range(tmp_path: Path) -> None:
    rows = _rows(_records())
    by_level = [[r for r in rows if 1000 + 20 * k <= r["start_epoch_s"] < 1010 + 20 * k] for k in range(4)]
    steps = [judge_step(by_level[k], SPEC, u, [], []) for k, u in enumerate((4, 8, 12, 16))]
    assert [s.outcome() for s in steps] == ["held", "held", "inconclusive", "broken"]
    assert steps[2].results == {"chat ttft_ms p95": "inconclusive"} and not steps[2].held
    result = capacity_result(steps)
    assert (result.highest_users_that_held, result.inconclusive_users, result.broke_at_users) == (8, [12], 16)
    write_capacity(tmp_path, result)
    back = read_capacity(tmp_path)
    assert back is not None and back.steps[2].outcome() == "inconclusive" and back.inconclusive_users == [12]
    run_dir = make_run_dir(tmp_path / "run", [], {"status": "finished"})
    write_capacity(run_dir, result)
    from tokenstorm.reports.data.rundir import load_run

    block = capacity_block(load_run(run_dir))
    assert block is not None and [s["result"] for s in block["steps"]] == ["held", "held", "inconclusive", "broken"]
    verdict, reason = capacity_verdict(block)
    assert verdict == "passed" and "8 users" in reason and "between 8 and 12 users: 12 inconclusive" in reason
    only_unsure = capacity_verdict({**block, "highest_users_that_held": None, "inconclusive_users": [4]})
    assert only_unsure[0] == "inconclusive"
