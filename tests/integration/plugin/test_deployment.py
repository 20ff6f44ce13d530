"""run.json says what served the run, captured, not typed: the server's version, its engine
configuration (block size...), the model's max_model_len, the GPUs the monitor saw — per A/B target
too — and the API key that read them is in no file of the run directory.

References: the emulator's own /version, /metrics (parsed here with prometheus_client) and
/v1/models, fetched by the test beside the run; the fake NVML's answers for the GPUs.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT
from tokenstorm.emulator import EmulatorProcess

FAKES = ROOT / "tests" / "fakes"
KEY = "sk-deployment-Zq81x"
FAST = ("--ttft-ms", "20", "--itl-ms", "4")


def get(url: str, key: str | None = None) -> bytes:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as resp:
        return bytes(resp.read())


def served(url: str, key: str | None = None) -> dict[str, Any]:
    """What the server says of itself, read without tokenstorm."""
    cache = next(s.labels for f in text_string_to_metric_families(get(f"{url}/metrics").decode())
                 for s in f.samples if s.name == "vllm:cache_config_info")  # fmt: skip
    (model,) = json.loads(get(f"{url}/v1/models", key))["data"]
    return {"version": json.loads(get(f"{url}/version"))["version"], "block_size": cache["block_size"],
            "model": {"id": model["id"], "max_model_len": model["max_model_len"]}}  # fmt: skip


def test_a_run_records_its_server_and_gpus_and_no_key(locust_runner, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The fake NVML (two H200s) for the run's monitor process, which runs on this PYTHONPATH.
    monkeypatch.setenv("PYTHONPATH", f"{FAKES}{os.pathsep}{ROOT}")
    monkeypatch.setenv("FAKE_NVML_GPUS", "2")
    with EmulatorProcess("--api-key", KEY, "--block-size", "32", "--max-model-len", "8192", *FAST) as emu:
        truth = served(emu.url, KEY)
        run = locust_runner("chat.py", "--host", emu.url, "--api-key", KEY, "-u", "2", "-r", "2", "-t", "3s",
                            "--chat-think-time", "0-0", "--max-tokens", "8", "--gpu-monitor", "local",
                            "--monitor-interval", "0.5")  # fmt: skip
    assert run.returncode in (0, 1, 5), run.output[-3000:]  # the verdict is not what this checks; a run it is
    meta = run.run_json()
    assert set(meta["deployment"]) == {""}  # one target: no label
    deployment = meta["deployment"][""]
    assert deployment["problems"] == [], deployment
    assert deployment["url"] == emu.url
    assert deployment["server_version"] == truth["version"]
    assert deployment["engine"]["cache_config"]["block_size"] == truth["block_size"] == "32"
    assert deployment["model"] == truth["model"] and truth["model"]["max_model_len"] == 8192

    import importlib.util

    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKES / "pynvml.py")
    assert spec and spec.loader
    nvml = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nvml)
    total_mib = nvml.nvmlDeviceGetMemoryInfo(0).total / 2**20
    assert meta["gpus"] == [{"index": i, "name": nvml.nvmlDeviceGetName(i), "memory_total_mib": total_mib,
                             "driver": nvml.nvmlSystemGetDriverVersion()} for i in range(2)]  # fmt: skip

    assert run.run_dir is not None
    for path in run.run_dir.rglob("*"):  # the key sent to read them is stored nowhere
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in run.output


def test_ab_targets_each_record_their_own_deployment(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with (
        EmulatorProcess("--block-size", "8", "--max-model-len", "4096", *FAST) as small,
        EmulatorProcess("--block-size", "32", "--max-model-len", "16384", *FAST) as big,
    ):
        truth = {"small": served(small.url), "big": served(big.url)}
        run = locust_runner("chat.py", "--targets", f"small={small.url},big={big.url}", "-u", "2", "-r", "2",
                            "-t", "3s", "--chat-think-time", "0-0", "--max-tokens", "8")  # fmt: skip
    assert run.returncode in (0, 1, 5), run.output[-3000:]
    deployment = run.run_json()["deployment"]
    assert set(deployment) == {"small", "big"}
    for label, url in (("small", small.url), ("big", big.url)):
        assert deployment[label]["url"] == url and deployment[label]["problems"] == []
        assert deployment[label]["engine"]["cache_config"]["block_size"] == truth[label]["block_size"]
        assert deployment[label]["model"] == truth[label]["model"]
    sizes = {label: d["engine"]["cache_config"]["block_size"] for label, d in deployment.items()}
    assert sizes["small"] != sizes["big"]  # what a comparison of the two would name
    assert "gpus" not in run.run_json()  # no GPU monitor: absent, not empty
