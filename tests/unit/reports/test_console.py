"""The closing block's lines (:func:`tokenstorm.reports.console_block`): each workload's sessions counted apart (a
chat's
are not an agent's, as the report has them), the cost when a GPU-hour price is given, and no line over 100
characters however long the workload names and figures."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, console_block, load_slo_spec


def _sessions(workload: str, count: int, steps: int, first: int, step_ms: float) -> list[dict]:
    """``count`` sessions of ``steps`` requests each, the last marked as the session's end."""
    rows = []
    for s in range(count):
        for k in range(steps):
            i = first + s * steps + k
            rows.append(
                request(i, step_ms, workload=workload, session_id=f"{workload}-{s}", session_end=k == steps - 1)
            )
    return rows


def test_each_workload_counts_its_own_sessions(tmp_path: Path) -> None:
    records = _sessions("agent", 6, 3, 0, 100.0) + _sessions("chat", 4, 2, 100, 900.0)
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished", "stopped_epoch_s": 1030.0})
    result = build_report(run_dir, load_slo_spec())
    lines = console_block(result.summary)
    workloads = result.summary.per_workload
    assert workloads["agent"]["sessions"] == 6 and workloads["chat"]["sessions"] == 4  # the report's counts
    assert any(line.startswith("agent: 6 of 6 sessions completed") for line in lines), lines
    assert any(line.startswith("chat: 4 of 4 sessions completed") for line in lines), lines
    assert not any("10 sessions" in line for line in lines), lines  # never the run's, pooled


def test_the_cost_is_given_with_a_price_and_every_line_fits_100_columns(tmp_path: Path) -> None:
    names = ("a-workload-with-a-very-long-name-indeed", "chat")
    records = [request(i, 80 + i * 400, workload=names[i % 2], prompt_tokens=123_456) for i in range(40)]
    meta = {"status": "finished", "stopped_epoch_s": 1010.0, "options": {"gpu_cost_per_hour": 2.5}}
    run_dir = make_run_dir(tmp_path / "run", records, meta)
    result = build_report(run_dir, load_slo_spec())
    lines = console_block(result.summary)
    overall = result.summary.overall
    per_1m = overall["cost_per_1m_output_tokens"]  # written as the report's money: 4 digits under 10
    cost = f"{per_1m:,.4g} per 1M output tokens" if per_1m < 10 else f"{per_1m:,.2f} per 1M output tokens"
    assert any(line.startswith("cost at 2.5 per GPU-hour × 1 GPU: ") and cost in line for line in lines), lines
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    plain = console_block(
        build_report(make_run_dir(tmp_path / "free", records, {"status": "finished"}), load_slo_spec()).summary
    )
    assert not any(line.startswith("cost") for line in plain)  # no price, no cost
