"""A GPU sidecar (the real CLI, with the fake NVML) says which GPUs it samples in ``/info``, and the
run's monitor polling it writes them — driver included — to the run directory's ``gpus.json``."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path

from tokenstorm.monitors import RunMonitor
from tokenstorm.workloads.rundir.gpus import read_gpus

from .test_sidecar import FAKES, start_sidecar


def test_the_sidecars_gpus_reach_the_run_directory(tmp_path: Path) -> None:
    fake = (FAKES / "pynvml.py").read_text()
    truth = {
        "name": fake.split("def nvmlDeviceGetName")[1].split('return "')[1].split('"')[0],
        "driver": fake.split("def nvmlSystemGetDriverVersion")[1].split('return "')[1].split('"')[0],
    }
    proc, url = start_sidecar(tmp_path / "sidecar.jsonl", interval=0.2)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    try:
        with urllib.request.urlopen(f"{url}/info", timeout=5) as resp:
            info = json.loads(resp.read())
        assert [{k: g[k] for k in ("name", "driver")} for g in info["gpus"]] == [truth]
        time.sleep(0.5)
        monitor = RunMonitor(run_dir, target_url=None, gpu_monitor=url)
        monitor.poll()
        monitor.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)
    samples = [json.loads(line) for line in (run_dir / "gpu.jsonl").read_text().splitlines()]
    assert samples, "no samples pulled from the sidecar"
    gpus = read_gpus(run_dir)
    assert gpus == info["gpus"]
    # the memory the samples carry, and the GPU they name
    assert [(g["name"], g["memory_total_mib"]) for g in gpus] == [(samples[0]["name"], samples[0]["mem_total_mib"])]
