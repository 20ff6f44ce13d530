"""Which GPUs served the run (run.json's ``gpus``): each GPU's name, total memory and driver from NVML
(the fake, answering as the H200 did), from nvidia-smi (its recorded output), from a sidecar's /info,
written once to ``gpus.json`` by the run's monitor, and read back — or, without it, from the samples.

References: the recorded answers themselves (``nvml_probe.txt``'s driver line and memory tuple, the
header line of nvidia-smi's CSV naming each column), not the parsers under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tokenstorm.monitors import NvmlSampler, RunMonitor, SmiSampler, gpus_of, parse_smi_identity
from tokenstorm.workloads.rundir.gpus import GPUS_FILE, read_gpus

from .test_gpu_monitors import FIXTURES, load_fake_nvml

PROBE = (FIXTURES / "nvml_probe.txt").read_text()
SMI_IDLE = (FIXTURES / "nvidia_smi_idle.txt").read_text()


def probe_truth() -> dict[str, Any]:
    """The H200's answers as nvml_probe.txt recorded them."""
    driver = re.search(r"^driver (\S+)", PROBE, re.M)
    name = re.search(r"^name: (.+?)  \(", PROBE, re.M)
    total = re.search(r"^mem: \((\d+),", PROBE, re.M)
    assert driver and name and total
    return {"name": name[1], "memory_total_mib": int(total[1]) / 2**20, "driver": driver[1]}


def smi_truth() -> list[dict[str, Any]]:
    """Each GPU of the CSV recorded *with* its header, read by the header's column names."""
    lines = SMI_IDLE.split("== query idle (csv with header)\n")[1].splitlines()
    header = [h.strip() for h in lines[0].split(",")]
    out = []
    for line in lines[1:]:
        if line.startswith("=="):
            break
        row = dict(zip(header, (c.strip() for c in line.split(",")), strict=False))
        out.append({"index": int(row["index"]), "name": row["name"], "driver": row["driver_version"],
                    "memory_total_mib": float(row["memory.total [MiB]"].removesuffix(" MiB"))})  # fmt: skip
    return out


def test_nvml_names_each_gpu_its_memory_and_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", "2")
    sampler = NvmlSampler(load_fake_nvml())
    truth = probe_truth()
    assert sampler.identity() == [{"index": i, **truth} for i in range(2)]
    # the same memory the samples carry (one figure for the GPU, wherever it is shown)
    assert [s.mem_total_mib for s in sampler.sample()] == [truth["memory_total_mib"]] * 2


def test_nvml_without_a_driver_version_call_says_none() -> None:
    nvml = load_fake_nvml()
    del nvml.nvmlSystemGetDriverVersion  # an old nvidia-ml-py
    (gpu,) = NvmlSampler(nvml).identity()
    assert gpu["driver"] is None and gpu["name"] == probe_truth()["name"]


def test_nvidia_smi_identity_from_the_recorded_query() -> None:
    recorded = SMI_IDLE.split("== query idle (csv,noheader,nounits)\n")[1].split("==")[0]
    assert parse_smi_identity(recorded) == smi_truth()
    sampler = SmiSampler(run=lambda args: recorded)  # the same query the sampler sends, answered as recorded
    assert sampler.identity() == smi_truth()


class Bare:
    """A sampler with no identity() (a stand-in, an older backend): the samples say name and memory."""

    source = "fake"

    def __init__(self) -> None:
        self._nvml = NvmlSampler(load_fake_nvml())

    def sample(self) -> Any:
        return self._nvml.sample()

    def close(self) -> None:
        pass


def test_the_monitor_writes_gpus_json_once_and_the_run_reads_it(tmp_path: Path) -> None:
    monitor = RunMonitor(tmp_path, target_url=None, local_sampler=NvmlSampler(load_fake_nvml()))
    monitor.poll()
    first = (tmp_path / GPUS_FILE).stat().st_mtime_ns
    monitor.poll()
    monitor.close()
    assert (tmp_path / GPUS_FILE).stat().st_mtime_ns == first  # written once, not every interval
    assert read_gpus(tmp_path) == [{"index": 0, **probe_truth()}]


def test_without_gpus_json_the_samples_give_name_and_memory(tmp_path: Path) -> None:
    assert read_gpus(tmp_path) == []  # no monitor: nothing, not an error
    samples = [json.dumps({"epoch_s": 1.0 + t, "gpu": g, "name": f"GPU {g}", "mem_total_mib": 1000.0 * (g + 1)})
               for t in range(500) for g in range(2)]  # fmt: skip
    gap = json.dumps({"epoch_s": 0.5, "source": "gpu", "reason": "sidecar down", "gap": True})
    (tmp_path / "gpu.jsonl").write_text("\n".join([gap, *samples]) + "\n")
    assert read_gpus(tmp_path) == [{"index": g, "name": f"GPU {g}", "memory_total_mib": 1000.0 * (g + 1),
                                    "driver": None} for g in range(2)]  # fmt: skip
    assert gpus_of(Bare()) == [{"index": 0, "name": probe_truth()["name"],
                                "memory_total_mib": probe_truth()["memory_total_mib"], "driver": None}]  # fmt: skip


def test_a_broken_gpus_json_falls_back_to_the_samples(tmp_path: Path) -> None:
    (tmp_path / GPUS_FILE).write_text("{not json")
    (tmp_path / "gpu.jsonl").write_text(json.dumps({"epoch_s": 1.0, "gpu": 0, "name": "A100", "mem_total_mib": 40960})
                                        + "\n")  # fmt: skip
    assert read_gpus(tmp_path) == [{"index": 0, "name": "A100", "memory_total_mib": 40960.0, "driver": None}]
