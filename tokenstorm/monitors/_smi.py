"""Fallback GPU sampling through ``nvidia-smi --query-gpu ... --format=csv,noheader,nounits``."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

from tokenstorm.workloads.rundir.gpus import gpu_identity
from tokenstorm.workloads.rundir.samples import GpuSample

from ._nvml import NoGpuError

__all__ = ["SMI_FIELDS", "SmiSampler", "parse_smi_csv", "parse_smi_identity"]

#: The fields asked for, in order (the same list recorded in tests/fixtures/gpu/).
SMI_FIELDS = (
    "timestamp",
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "driver_version",
    "pstate",
    "temperature.gpu",
    "temperature.memory",
    "utilization.gpu",
    "utilization.memory",
    "memory.total",
    "memory.used",
    "memory.free",
    "memory.reserved",
    "power.draw",
    "power.draw.instant",
    "power.limit",
    "clocks.current.sm",
    "clocks.current.memory",
    "clocks.current.graphics",
    "clocks.max.sm",
    "fan.speed",
    "encoder.stats.sessionCount",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "clocks_event_reasons.active",
    "ecc.errors.uncorrected.volatile.total",
)


def _num(text: str) -> float | None:
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Not Supported"):
        return None  # "[N/A]", "[Not Supported]": the GPU lacks it (fan on passive parts)
    for unit in (" MiB", " W", " MHz", " %"):
        if text.endswith(unit):
            text = text[: -len(unit)]
    try:
        return float(text)
    except ValueError:
        return None


def parse_smi_csv(text: str, epoch_s: float | None = None, host: str = "") -> list[GpuSample]:
    """Parse the CSV lines of one query (one line per GPU) into samples."""
    out = []
    now = time.time() if epoch_s is None else epoch_s
    idx = {name: i for i, name in enumerate(SMI_FIELDS)}
    for line in text.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(SMI_FIELDS) or not cols[1].isdigit():
            continue  # a header, a blank line or a different query

        def f(name: str, cols: list[str] = cols) -> float | None:
            return _num(cols[idx[name]])

        reasons = cols[idx["clocks_event_reasons.active"]]
        pstate = cols[idx["pstate"]]
        out.append(
            GpuSample(
                epoch_s=now,
                gpu=int(cols[idx["index"]]),
                uuid=cols[idx["uuid"]],
                name=cols[idx["name"]],
                source="nvidia-smi",
                host=host,
                util_gpu_pct=f("utilization.gpu"),
                util_mem_pct=f("utilization.memory"),
                mem_used_mib=f("memory.used"),
                mem_total_mib=f("memory.total"),
                mem_reserved_mib=f("memory.reserved"),
                power_w=f("power.draw"),
                power_limit_w=f("power.limit"),
                temp_c=f("temperature.gpu"),
                sm_clock_mhz=f("clocks.current.sm"),
                mem_clock_mhz=f("clocks.current.memory"),
                throttle_reasons=int(reasons, 16) if reasons.startswith("0x") else None,
                pstate=int(pstate[1:]) if pstate.startswith("P") and pstate[1:].isdigit() else None,
            )
        )
    return out


def parse_smi_identity(text: str) -> list[dict[str, Any]]:
    """Each GPU's index, name, total memory (MiB) and driver version from the CSV lines of one query."""
    idx = {name: i for i, name in enumerate(SMI_FIELDS)}
    out = []
    for line in text.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(SMI_FIELDS) or not cols[1].isdigit():
            continue  # a header, a blank line or a different query
        driver = cols[idx["driver_version"]]
        out.append(
            gpu_identity(
                int(cols[idx["index"]]),
                cols[idx["name"]],
                _num(cols[idx["memory.total"]]),
                None if driver.startswith("[") or driver == "N/A" else driver,
            )
        )
    return out


class SmiSampler:
    """Runs nvidia-smi once per sample (slower than NVML: ~100 ms; the fallback only)."""

    source = "nvidia-smi"

    def __init__(self, run: Callable[[list[str]], str] | None = None) -> None:
        if run is None:
            exe = shutil.which("nvidia-smi")
            if exe is None:
                raise NoGpuError("nvidia-smi is not on PATH")
            run = _runner(exe)
        self._run = run
        self._host = socket.gethostname()
        self._last_text = ""  # the last query's CSV: the GPUs' identity is read from it, not queried again
        first = self.sample()
        if not first:
            raise NoGpuError("nvidia-smi reports no GPU")
        self.gpu_count = len(first)

    def sample(self) -> list[GpuSample]:
        """Query every GPU once."""
        try:
            text = self._run(["--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"])
        except (OSError, subprocess.SubprocessError) as exc:
            raise NoGpuError(f"nvidia-smi failed: {exc}") from exc
        self._last_text = text
        return parse_smi_csv(text, host=self._host)

    def identity(self) -> list[dict[str, Any]]:
        """Each GPU's name, total memory (MiB) and driver version (``gpus.json``), from the last query."""
        return parse_smi_identity(self._last_text)

    def close(self) -> None:
        """Nothing to release."""


def _runner(exe: str) -> Callable[[list[str]], str]:
    def run(args: list[str]) -> str:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=10, check=True).stdout

    return run
