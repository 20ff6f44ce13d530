"""A long run's report stays small: 30 minutes of records and of GPU, vLLM and load-generator samples every
second, written with the run directory's own writers, make a page of a few hundred KiB — its charts thinned
to at most MAX_POINTS points a line, each x array carried once, uPlot inlined once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report
from tokenstorm.reports.render.charts import MAX_POINTS
from tokenstorm.workloads.rundir import GpuSample, ServerSample, to_line

T0 = 1000.0
RUN_S = 30 * 60
KIB = 1024


def _thirty_minute_run(tmp_path: Path, gpus: int) -> Path:
    """4 requests a second over four workloads (1% failed), and every second a sample of each GPU, of
    vLLM and of two load generators."""
    rng = np.random.default_rng(11)
    records = []
    for i in range(RUN_S * 4):
        workload = ("chat", "code", "contract", "agent")[i % 4]
        if rng.random() < 0.01:
            records.append(request(i, 0, workload=workload, ok=False, start_epoch_s=T0 + i / 4))
        else:
            ttft_ms = float(50 + rng.exponential(50))
            records.append(request(i, ttft_ms, workload=workload, start_epoch_s=T0 + i / 4))
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished"})
    seconds = range(RUN_S + 2)
    gpu = [
        GpuSample(
            T0 + s,
            g,
            f"GPU-{g}",
            "H100",
            "nvml",
            util_gpu_pct=float(rng.integers(80, 100)),
            mem_used_mib=float(60_000 + rng.integers(0, 500)),
            power_w=float(400 + rng.random() * 50),
        )
        for s in seconds
        for g in range(gpus)
    ]
    (run_dir / "gpu.jsonl").write_text("".join(to_line(g) + "\n" for g in gpu))
    server = [
        ServerSample(
            T0 + s,
            running=float(rng.integers(40, 64)),
            waiting=float(rng.integers(0, 5)),
            kv_cache_usage=float(rng.random()),
        )
        for s in seconds
    ]
    (run_dir / "server.jsonl").write_text("".join(to_line(s) + "\n" for s in server))
    with (run_dir / "load.jsonl").open("w") as fh:
        for s in seconds:
            cpu = {"w1": 40 + rng.random(), "w2": 41 + rng.random()}
            clock = {w: {"runq_wait_ms_per_s": rng.random(), "loop_lag_p99_ms": rng.random()} for w in cpu}
            fh.write(json.dumps({"epoch_s": T0 + s, "users": 64, "cpu": cpu, "clock": clock}) + "\n")
    return run_dir


@pytest.mark.parametrize(("gpus", "bound_kib"), [(1, 400), (8, 700)])
def test_a_thirty_minute_runs_report_is_a_few_hundred_kib(tmp_path: Path, gpus: int, bound_kib: int) -> None:
    run_dir = _thirty_minute_run(tmp_path, gpus)
    build_report(run_dir)
    html = (run_dir / "report.html").read_text()
    size_kib = len(html.encode()) / KIB
    print(f"30-minute run, {gpus} GPU(s): report.html {size_kib:.0f} KiB")
    assert size_kib <= bound_kib
    block = re.search(r'id="chart-data">(.*?)</script>', html, re.S)
    assert block is not None
    charts = {c["id"]: c for c in json.loads(block.group(1))["charts"]}
    assert len(charts["gpu-util"]["series"]) == gpus and len(charts["gpu-util"]["xs"]) == 1  # one x array
    assert all(len(s["y"]) <= MAX_POINTS for c in charts.values() for s in c["series"])
    assert len(charts["gpu-power"]["series"][0]["y"]) == RUN_S + 2  # a sample a second: under the cap, all kept
