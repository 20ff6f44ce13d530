"""--metrics-port during a real run: Prometheus text parsed by prometheus-client, the expected
series, and counts that agree with the records the run wrote; --report-every snapshots."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, free_port
from tokenstorm.workloads.rundir import read_records


def _scrape(url: str) -> dict[tuple[str, tuple], float]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}  # fmt: skip


#: the emulator returns its own timing of each request, as vLLM with --enable-per-request-metrics does
EMULATOR_ARGS = "--ttft-ms 40 --itl-ms 4 --frontend-ms 3 --enable-per-request-metrics"


def test_metrics_port_serves_client_side_series_during_the_run(tmp_path: Path) -> None:
    port = free_port()
    # scraped at 8 s; a snapshot is written every 3 s, so one exists by then, and the run goes on 4 s more
    run = "--headless -u 6 -r 6 -t 12s --wait-time 0 --max-tokens 16 --report-every 3"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(ROOT / "locustfiles" / "mixed.py"),
            *run.split(),
            "--metrics-port",
            str(port),
            "--run-dir",
            str(tmp_path / "runs"),
            "--emulator-args",
            EMULATOR_ARGS,
            "--timing-verdict",
            "warn",
            "--confidence",
            "0",
        ],  # the export is checked here, not this busy box's clock nor its sample's size
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        time.sleep(8)
        t_scrape = time.time()
        got = _scrape(f"http://127.0.0.1:{port}/metrics")
        (live_dir,) = (tmp_path / "runs").iterdir()
        # --report-every 3: report.html is rebuilt while the run goes on (a child process)
        while not (live_dir / "report.html").exists() and proc.poll() is None:
            time.sleep(0.2)
        assert proc.poll() is None, "no snapshot before the run ended"
        snapshot = (live_dir / "report.html").read_text()
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-2000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = [r.as_row() for r in read_records(run_dir)]
    for workload in ("contract", "code", "chat"):
        w = (("workload", workload),)
        ok_then = got[("tokenstorm_time_to_first_token_seconds_count", w)]
        ok_final = sum(1 for r in records if r["workload"] == workload and r["ok"])
        assert 0 < ok_then <= ok_final  # scraped mid-run: part of what the run recorded, never more
        assert got[("tokenstorm_requests_total", (("category", ""), ("outcome", "ok"), *w))] == ok_then
        # every ITL gap counted: one per token event after the first, as in the records of the requests that had
        # ended by the scrape (two ending together may be exported in either order: one request's gaps apart)
        ended = [r for r in records if r["workload"] == workload and r["ok"]]
        by_end = sorted(ended, key=lambda r: r["start_epoch_s"] + r["e2e_s"])
        gaps = sum(len(r["itl_gaps_s"]) for r in by_end[: int(ok_then)])
        most = max(len(r["itl_gaps_s"]) for r in by_end)
        assert gaps > ok_then and abs(got[("tokenstorm_inter_token_latency_seconds_count", w)] - gaps) <= most
        # numpy on the records finished by the scrape: the same requests, the same mean TTFT
        done = [r for r in records if r["workload"] == workload and r["ok"]
                and r["start_epoch_s"] + r["e2e_s"] <= t_scrape]  # fmt: skip
        assert abs(ok_then - len(done)) <= 3, (ok_then, len(done))
        mean_ttft = got[("tokenstorm_time_to_first_token_seconds_sum", w)] / ok_then
        assert mean_ttft == pytest.approx(float(np.mean([r["ttft_s"] for r in done])), rel=0.05)
        assert got[("tokenstorm_output_tokens_total", w)] >= ok_then
        # where the time went: every successful request's parts, adding up to its TTFT, as in the records
        labels = (("target", ""), *w)
        parts = {f: got[(f"tokenstorm_{f}_seconds_sum", labels)] for f in ("overhead", "server_queue")}
        parts["server_ttft"] = got[("tokenstorm_server_time_to_first_token_seconds_sum", labels)]
        assert got[("tokenstorm_server_queue_seconds_count", labels)] == ok_then
        assert sum(parts.values()) / ok_then == pytest.approx(mean_ttft, rel=1e-6)
        for part, field in (("overhead", "overhead_s"), ("server_ttft", "server_ttft_s")):
            assert parts[part] / ok_then == pytest.approx(float(np.mean([r[field] for r in done])), rel=0.05), part
        assert parts["overhead"] / ok_then >= 0.003  # the emulator's --frontend-ms is outside the engine
        itl = got[("tokenstorm_server_inter_token_latency_seconds_sum", labels)]
        itl_count = got[("tokenstorm_server_inter_token_latency_seconds_count", labels)]
        weighted = [(r["server_itl_s"], r["output_tokens"] - 1) for r in done if r["output_tokens"] > 1]
        records_itl = sum(v * n for v, n in weighted) / sum(n for _, n in weighted)
        assert itl / itl_count == pytest.approx(records_itl, rel=0.05)  # gap-weighted, as vLLM's own ITL mean
    assert got[("tokenstorm_users", ())] == 6
    assert 'id="verdict"' in snapshot and "never finished" not in snapshot  # live: not "incomplete"
    assert got[("tokenstorm_client_cpu_percent", (("worker", "local"),))] > 0
