"""Load shapes against the emulator: open loop holds its rate; capacity search finds saturation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def test_open_loop_sends_at_its_rate_against_a_slow_server(locust_runner) -> None:  # type: ignore[no-untyped-def]
    # The server needs 2 s per request; a closed loop of 20 users would send ~8/s. Open loop: 25/s.
    run = locust_runner("open_loop.py", "-t", "12s", "--arrival-rate", "25", "--arrival", "constant",
                        "--max-tokens", "10", "--emulator-args", "--ttft-ms 2000 --itl-ms 10")  # fmt: skip
    assert run.returncode == 0, run.output[-2000:]
    records = run.records()
    starts = np.sort([r["start_epoch_s"] for r in records])
    inner = starts[(starts > starts[0] + 1) & (starts < starts[-1] - 1)]  # edges: start-up and stop
    rate = (len(inner) - 1) / (inner[-1] - inner[0])
    assert abs(rate - 25) / 25 < 0.05, rate
    lags = [r["send_lag_s"] for r in records]
    assert all(lag is not None for lag in lags) and float(np.percentile(lags, 99)) < 0.05
    assert {r["workload"] for r in records} == {"contract", "code", "chat"}


def test_capacity_search_finds_the_emulators_saturation_point(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  code:\n    ttft_ms: {p95: 300}\n    error_rate: {max: 0.01}\n")
    # 12 sequences at once; beyond that requests queue for a slot and TTFT jumps past 300 ms.
    run = locust_runner(
        "code.py,locustfiles/shape_capacity.py", "--slo", str(slo), "--wait-time", "0", "--max-tokens", "20",
        "--ignore-eos", "--capacity-start", "3", "--capacity-step", "3", "--capacity-step-time", "4",
        "--emulator-args", "--max-num-seqs 12 --ttft-ms 200 --itl-ms 10 --prefill-us-per-token 0",
    )  # fmt: skip
    assert run.run_dir is not None, run.output[-2000:]
    capacity = json.loads((run.run_dir / "capacity.json").read_text())
    assert abs(capacity["highest_users_that_held"] - 12) <= 1.2, capacity
    assert capacity["broke_at_users"] == 15
    assert "highest load that held: 12 users" in run.output


def test_poisson_arrivals_have_exponential_gaps(locust_runner) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner("open_loop.py", "-t", "8s", "--arrival-rate", "40", "--arrival", "poisson",
                        "--max-tokens", "5", "--emulator-args", "--ttft-ms 50 --itl-ms 5")  # fmt: skip
    starts = np.sort([r["start_epoch_s"] for r in run.records()])
    gaps = np.diff(starts)
    # Exponential inter-arrival times: mean 1/rate and coefficient of variation ~1 (constant: ~0).
    assert abs(gaps.mean() - 1 / 40) / (1 / 40) < 0.2
    assert 0.8 < gaps.std() / gaps.mean() < 1.2
