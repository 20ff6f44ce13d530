"""Distributed runs: the master's run directory holds every worker's records, and a worker
that dies is named in the report with every record it sent before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import LOCUST, ROOT, free_port
from tokenstorm.workloads.rundir import read_records


def test_master_and_four_workers_equal_one_process(locust_runner) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner("chat.py", "--chat-think-time", "0-0.2", "--processes", "4", "-u", "20", "-r", "20",
                        "-t", "10s", "--max-tokens", "20",
                        "--emulator-args", "--ttft-ms 100 --itl-ms 5")  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    everything = run.records()
    records = [r for r in everything if r["error_category"] != "cancelled"]
    stats = run.locust_stats()
    assert len(records) == stats[("E2E", "chat")]["requests"] > 100  # every request made is recorded
    assert len({r["worker_id"] for r in everything}) == 4
    assert len({r["request_id"] for r in everything}) == len(everything)  # and recorded once
    # The report's percentiles are those of the same records computed in one process.
    summary = json.loads((run.run_dir / "summary.json").read_text())
    ttft = np.array([r["ttft_s"] for r in records]) * 1000
    e2e = np.array([r["e2e_s"] for r in records]) * 1000
    itl = np.concatenate([r["itl_gaps_s"] for r in records]) * 1000
    assert summary["completed"] == len(records)
    assert summary["p99_ttft_ms"] == pytest.approx(np.percentile(ttft, 99))
    assert summary["median_e2el_ms"] == pytest.approx(np.median(e2e))
    assert summary["p95_itl_ms"] == pytest.approx(np.percentile(itl, 95))
    assert len(run.run_json()["workers_seen"]) == 4
    # Each worker's CPU and timekeeping, measured by the worker itself, are in load.jsonl within
    # seconds of the start (Locust's own figure read 0.0 for the first ~20 s of every run).
    start = run.run_json()["started_epoch_s"]
    load = [json.loads(line) for line in (run.run_dir / "load.jsonl").read_text().splitlines()]
    early = {w for row in load if row["epoch_s"] < start + 5 for w, pct in row["cpu"].items() if pct > 0}
    assert early == set(run.run_json()["workers_seen"]), load[:6]
    clocks = [c for row in load for c in row["clock"].values()]
    assert clocks and all(c["interval_s"] >= 0.2 and 0 < c["cpu_pct"] <= 200 for c in clocks), load[:6]


def test_killing_one_of_four_workers_is_reported_and_keeps_its_records(tmp_path: Path) -> None:
    port = free_port()
    locustfile = str(ROOT / "locustfiles" / "chat.py")
    common = ["-f", locustfile, "--chat-think-time", "0-0.2", "--max-tokens", "20", "--confidence", "0"]
    master = subprocess.Popen(
        [*LOCUST, *common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--expect-workers", "4", "--headless", "-u", "16", "-r", "16", "-t", "16s", "--only-summary",
         "--run-dir", str(tmp_path / "runs"), "--emulator-args", "--ttft-ms 100 --itl-ms 5"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    workers = [
        subprocess.Popen(
            [*LOCUST, *common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(4)
    ]
    try:
        # connected, spawned, several record batches sent by every worker (however long a busy box takes to start
        # four workers): then one dies
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not _each_shipped(tmp_path / "runs", workers=4, records=8):
            time.sleep(0.5)
        os.kill(workers[0].pid, signal.SIGKILL)
        out, _ = master.communicate(timeout=90)
    finally:
        for w in workers:
            w.kill()
            w.wait()
        if master.poll() is None:
            master.kill()
            master.communicate()
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert len(meta["workers_seen"]) == 4
    (lost_id,) = meta["workers_lost"]
    lost = meta["workers_lost"][lost_id]
    records = [r.as_row() for r in read_records(run_dir)]
    from_lost = [r for r in records if r["worker_id"] == lost_id]
    assert len(from_lost) > 5  # what it sent before dying is kept
    assert max(r["start_epoch_s"] for r in from_lost) <= lost["detected_epoch_s"]
    assert lost["last_heard_epoch_s"] <= lost["detected_epoch_s"]
    assert f"worker {lost_id} vanished" in out
    # The run lost a quarter of its load: incomplete, whatever the SLOs say (exit code 4).
    assert master.returncode == 4, out[-2000:]
    report = (run_dir / "report.html").read_text()
    assert "Workers lost during the run" in report and lost_id in report
    summary = json.loads((run_dir / "summary.json").read_text())
    assert lost_id in summary["workers_lost"]
    assert summary["verdict"] == "incomplete" and not summary["complete"]
    assert "Run incomplete" in report
    # The other three workers carried the run on to its end.
    others = [r for r in records if r["worker_id"] != lost_id]
    assert max(r["start_epoch_s"] for r in others) > lost["detected_epoch_s"] + 3


def _each_shipped(runs: Path, workers: int, records: int) -> bool:
    """The run directory under ``runs`` holds at least ``records`` records of each of ``workers`` workers."""
    dirs = list(runs.glob("*/requests")) if runs.is_dir() else []
    if not dirs:
        return False
    try:
        by_worker = Counter(r.worker_id for r in read_records(dirs[0].parent))
    except (OSError, ValueError):  # a segment renamed while read: look again
        return False
    return len(by_worker) >= workers and min(by_worker.values()) >= records


def test_workers_started_bare_take_the_masters_options(tmp_path: Path) -> None:
    """As docker-compose and k8s start them: `--worker --master-host ...` and nothing else."""
    port = free_port()
    locustfile = str(ROOT / "locustfiles" / "code_completion.py")
    master = subprocess.Popen(
        [*LOCUST, "-f", locustfile, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--expect-workers", "2", "--headless", "-u", "4", "-r", "4", "-t", "6s", "--only-summary",
         "--run-dir", str(tmp_path / "runs"), "--max-tokens", "7", "--wait-time", "0", "--temperature", "0.5",
         "--emulator-args", "--ttft-ms 20 --itl-ms 5"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    workers = [subprocess.Popen([*LOCUST, "-f", locustfile, "--worker", "--master-host", "127.0.0.1",
                                 "--master-port", str(port)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for _ in range(2)]  # fmt: skip
    try:
        out, _ = master.communicate(timeout=90)
    finally:
        for w in workers:
            w.kill()
            w.wait()
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = [r.as_row() for r in read_records(run_dir)]
    assert len({r["worker_id"] for r in records}) == 2, out[-2000:]
    assert {r["requested_max_tokens"] for r in records} == {7}
    assert max(r["output_tokens"] or 0 for r in records) <= 7
