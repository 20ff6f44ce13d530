"""The GPU sidecar CLI (with the fake NVML) writes and serves samples; the run survives its death."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT

FAKES = ROOT / "tests" / "fakes"


def start_sidecar(out: Path, interval: float = 0.2) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": f"{FAKES}{os.pathsep}{ROOT}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenstorm.monitors", "gpu", "--port", "0", "--interval", str(interval), "--out",
            str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "serving http://" in line, line + (proc.stderr.read() if proc.stderr else "")
    url = line.split("serving ")[1].strip().removesuffix("/samples")
    return proc, url


def get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def test_sidecar_writes_and_serves_samples(tmp_path: Path) -> None:
    proc, url = start_sidecar(tmp_path / "gpu.jsonl")
    try:
        time.sleep(1.2)
        assert get(f"{url}/health") == {"ok": True}
        assert get(f"{url}/info")["backend"] == "nvml"  # type: ignore[index]
        samples = get(f"{url}/samples?since=0")
        assert isinstance(samples, list) and len(samples) >= 4
        assert all(s["name"] == "NVIDIA H200" and s["mem_used_mib"] > 20000 for s in samples)
        times = [s["epoch_s"] for s in samples]
        assert times == sorted(times) and abs(times[-1] - time.time()) < 2
        newer = get(f"{url}/samples?since={times[-2]}")
        assert [s["epoch_s"] for s in newer][:1] == [times[-1]]  # type: ignore[union-attr]
        with pytest.raises(urllib.error.HTTPError):
            get(f"{url}/samples?since=yesterday")
        # /metrics: each GPU's newest sample as Prometheus gauges, read by prometheus-client's parser
        latest = {s["gpu"]: s for s in get(f"{url}/latest")}  # type: ignore[union-attr]
        text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
        gauges = {(s.name, s.labels["gpu"]): s.value for f in text_string_to_metric_families(text) for s in f.samples}
        assert len(latest) >= 1 and {g for _, g in gauges} == {str(g) for g in latest}
        for gpu, sample in latest.items():
            assert gauges[("tokenstorm_gpu_memory_used_bytes", str(gpu))] == sample["mem_used_mib"] * 2**20
            assert gauges[("tokenstorm_gpu_power_watts", str(gpu))] == sample["power_w"]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    on_disk = [json.loads(line) for line in (tmp_path / "gpu.jsonl").read_text().splitlines()]
    assert len(on_disk) >= len(samples)
    assert "sampler CPU" in out


def _kill_once_sampled(proc: subprocess.Popen[str], runs: Path, samples: int, done: threading.Event) -> None:
    """Kill the sidecar once the run has ``samples`` of its samples: not at a fixed time, which a busy machine's
    slow start-up may reach before the run has sampled at all."""
    while not done.wait(0.1):
        files = list(runs.glob("*/gpu.jsonl"))
        if files and len(files[0].read_text().splitlines()) >= samples:
            proc.kill()
            return


def test_killing_the_sidecar_mid_run_keeps_the_load_test_going_and_records_the_gap(locust_runner, tmp_path):  # type: ignore[no-untyped-def]
    proc, url = start_sidecar(tmp_path / "sidecar.jsonl")
    done = threading.Event()
    killer = threading.Thread(target=_kill_once_sampled, args=(proc, tmp_path / "runs", 6, done), daemon=True)
    killer.start()
    try:
        run = locust_runner(
            "chat.py",
            "--chat-think-time",
            "0-0.2",
            "-u",
            "5",
            "-r",
            "5",
            "-t",
            "9s",
            "--gpu-monitor",
            url,
            "--monitor-interval",
            "0.5",
            "--emulator-args",
            "--ttft-ms 50 --itl-ms 5",
        )
    finally:
        done.set()
        proc.kill()
        proc.communicate()
    assert run.returncode == 0, run.output[-2000:]
    records = run.records()
    assert len(records) > 20
    rows = [json.loads(line) for line in (run.run_dir / "gpu.jsonl").read_text().splitlines()]
    samples = [r for r in rows if not r.get("gap")]
    gaps = [r for r in rows if r.get("gap")]
    assert len(samples) >= 5 and len(gaps) == 1
    assert "not answering" in gaps[0]["reason"]
    # The gap is placed after the last sample on the same wall-clock axis as the requests.
    assert max(s["epoch_s"] for s in samples) < gaps[0]["epoch_s"]
    assert min(r["start_epoch_s"] for r in records) < gaps[0]["epoch_s"] < max(r["start_epoch_s"] for r in records)
    assert "recording a gap; the load test goes on" in run.output
    # The emulator's /metrics were scraped too, on the same axis.
    server = [json.loads(line) for line in (run.run_dir / "server.jsonl").read_text().splitlines()]
    assert len(server) >= 10 and all("kv_cache_usage" in s for s in server)
    assert max(s["running"] for s in server) > 0
