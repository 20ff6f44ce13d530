"""A capacity search whose steps are too short to answer an SLO (issue #30): a step from too few requests is
inconclusive, not broken — it is held a second ``--capacity-step-time`` and judged again, and two such steps
in a row end the search INCONCLUSIVE (exit code 6), saying a longer step time answers. A real search on the
built-in emulator, judged at 95%: a TTFT p99 ≤ 2 s holds by far (TTFT ~30-80 ms), but no step reaches the 299
requests a p99's upper bound needs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_locust


def test_a_capacity_step_too_short_for_its_p99_is_extended_once_and_two_in_a_row_end_the_search(
    tmp_path: Path,
) -> None:
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  run:\n    ttft_ms: {p99: 2000}\n")
    search = ("--capacity-start", "1", "--capacity-step", "1", "--capacity-step-time", "3", "--capacity-max", "4")
    fast = ("--wait-time", "0", "--max-tokens", "8", "--emulator-args", "--ttft-ms 20 --itl-ms 2")
    locustfiles = "code_completion.py,locustfiles/shape_capacity.py"
    run = run_locust(tmp_path, locustfiles, "--slo", str(slo), "--confidence", "0.95", *search, *fast)
    assert run.returncode == 6, run.output[-3000:]
    assert run.run_dir is not None
    capacity = json.loads((run.run_dir / "capacity.json").read_text())
    steps = capacity["steps"]
    seen = [(s["users"], s["result"], s["extended"]) for s in steps]
    assert seen == [(1, "inconclusive", True), (2, "inconclusive", True)], capacity
    assert steps[0]["results"] == {"run ttft_ms p99": "inconclusive"} and not steps[0]["held"]
    assert capacity["highest_users_that_held"] is None and capacity["broke_at_users"] is None
    assert capacity["inconclusive_users"] == [1, 2] and "2 steps in a row inconclusive" in capacity["stopped"]
    assert "capacity step 1 users: inconclusive" in run.output and "held another 3 s" in run.output
    summary = json.loads((run.run_dir / "summary.json").read_text())
    assert summary["verdict"] == "inconclusive" and summary["verdict_reason"] == (
        "capacity search: no step held for sure — 1, 2 users inconclusive: too few requests per step to tell "
        "(a longer --capacity-step-time answers)"
    )
    assert [s["result"] for s in summary["capacity"]["steps"]] == ["inconclusive", "inconclusive"]
