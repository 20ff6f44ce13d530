"""GPU sampling through NVML (``nvidia-ml-py``, imported as ``pynvml``).

Costs measured on an H200 (shared/fixtures/gpu/nvml_probe.txt): utilisation ~3 ms, power
~1.5 ms, energy ~5 ms, but PCIe throughput ~21 ms *per direction* — so PCIe is read only
every ``pcie_every``-th sample and the last value is repeated in between. Features a GPU
lacks (NVLink on a single card, ...) raise ``NotSupported``: they become ``None``.
"""

from __future__ import annotations

import contextlib
import socket
import time
from types import ModuleType
from typing import Any

from tokenstorm.workloads.rundir.gpus import gpu_identity
from tokenstorm.workloads.rundir.samples import GpuSample

__all__ = ["NoGpuError", "NvmlSampler"]


class NoGpuError(Exception):
    """No usable GPU (no driver, no device); the message is one line for users."""


class NvmlSampler:
    """Samples every GPU NVML can see. ``nvml`` may be a stand-in module for tests."""

    source = "nvml"

    def __init__(self, nvml: ModuleType | Any | None = None, pcie_every: int = 10) -> None:
        if nvml is None:
            try:
                import pynvml as nvml_module
            except ImportError as exc:
                raise NoGpuError("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from exc
            nvml = nvml_module
        self._nvml = nvml
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            raise NoGpuError(f"NVML cannot load: {_nvml_text(exc)}") from exc
        if count == 0:
            raise NoGpuError("NVML sees no GPU")
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self._static = [self._static_info(h) for h in self._handles]
        self._pcie_every = max(1, pcie_every)
        self._n = 0
        self._last_pcie: list[tuple[float | None, float | None]] = [(None, None)] * count
        # NVLink: cumulative KiB counters (all links, scope UINT_MAX); rates come from deltas.
        self._nvlink_fields = [
            getattr(nvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", None),
            getattr(nvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", None),
        ]
        self._nvlink_prev: list[tuple[float, int, int] | None] = [None] * count
        self._last_nvlink: list[tuple[float | None, float | None]] = [(None, None)] * count
        self._host = socket.gethostname()

    def _static_info(self, handle: Any) -> dict[str, Any]:
        nv = self._nvml
        return {
            "uuid": _str(self._try(nv.nvmlDeviceGetUUID, handle)) or "",
            "name": _str(self._try(nv.nvmlDeviceGetName, handle)) or "",
        }

    def identity(self) -> list[dict[str, Any]]:
        """Each GPU's name, total memory (MiB, as its samples have it) and the driver version (``gpus.json``)."""
        driver = _str(self._try(getattr(self._nvml, "nvmlSystemGetDriverVersion", None)))
        out = []
        for i, handle in enumerate(self._handles):
            mem = self._memory(handle)
            out.append(gpu_identity(i, self._static[i]["name"], mem.total / 2**20 if mem is not None else None, driver))
        return out

    @property
    def gpu_count(self) -> int:
        """How many GPUs are sampled."""
        return len(self._handles)

    def sample(self) -> list[GpuSample]:
        """Read every GPU once."""
        nv = self._nvml
        now = time.time()
        read_pcie = self._n % self._pcie_every == 0
        self._n += 1
        out = []
        for i, h in enumerate(self._handles):
            s = GpuSample(epoch_s=now, gpu=i, source=self.source, host=self._host, **self._static[i])
            util = self._try(nv.nvmlDeviceGetUtilizationRates, h)
            if util is not None:
                s.util_gpu_pct, s.util_mem_pct = float(util.gpu), float(util.memory)
            mem = self._memory(h)
            if mem is not None:
                s.mem_total_mib = mem.total / 2**20
                s.mem_used_mib = mem.used / 2**20
                reserved = getattr(mem, "reserved", None)
                s.mem_reserved_mib = reserved / 2**20 if reserved is not None else None
            power = self._try(nv.nvmlDeviceGetPowerUsage, h)
            s.power_w = power / 1000 if power is not None else None
            limit = self._try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
            s.power_limit_w = limit / 1000 if limit is not None else None
            energy = self._try(nv.nvmlDeviceGetTotalEnergyConsumption, h)
            s.energy_mj = float(energy) if energy is not None else None
            temp = self._try(nv.nvmlDeviceGetTemperature, h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))
            s.temp_c = float(temp) if temp is not None else None
            sm = self._try(nv.nvmlDeviceGetClockInfo, h, getattr(nv, "NVML_CLOCK_SM", 1))
            s.sm_clock_mhz = float(sm) if sm is not None else None
            mclk = self._try(nv.nvmlDeviceGetClockInfo, h, getattr(nv, "NVML_CLOCK_MEM", 2))
            s.mem_clock_mhz = float(mclk) if mclk is not None else None
            reasons = self._try(nv.nvmlDeviceGetCurrentClocksEventReasons, h)
            if reasons is None:
                reasons = self._try(getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None), h)
            s.throttle_reasons = int(reasons) if reasons is not None else None
            pstate = self._try(nv.nvmlDeviceGetPerformanceState, h)
            s.pstate = int(pstate) if pstate is not None else None
            if read_pcie:
                tx = self._try(nv.nvmlDeviceGetPcieThroughput, h, getattr(nv, "NVML_PCIE_UTIL_TX_BYTES", 0))
                rx = self._try(nv.nvmlDeviceGetPcieThroughput, h, getattr(nv, "NVML_PCIE_UTIL_RX_BYTES", 1))
                self._last_pcie[i] = (
                    float(tx) if tx is not None else None,
                    float(rx) if rx is not None else None,
                )
            s.pcie_tx_kbs, s.pcie_rx_kbs = self._last_pcie[i]
            if read_pcie:
                self._last_nvlink[i] = self._nvlink_rates(i, h, now)
            s.nvlink_tx_kbs, s.nvlink_rx_kbs = self._last_nvlink[i]
            procs = self._try(nv.nvmlDeviceGetComputeRunningProcesses, h) or []
            s.processes = [
                {"pid": int(p.pid), "used_mib": (p.usedGpuMemory or 0) / 2**20}
                for p in procs
                if getattr(p, "pid", None) is not None
            ]
            out.append(s)
        return out

    def _nvlink_rates(self, i: int, handle: Any, now: float) -> tuple[float | None, float | None]:
        """KB/s over all NVLinks since the last read; None where NVLink is absent (one GPU)."""
        fn = getattr(self._nvml, "nvmlDeviceGetFieldValues", None)
        if fn is None or None in self._nvlink_fields:
            return (None, None)
        values = self._try(fn, handle, [(f, 0xFFFFFFFF) for f in self._nvlink_fields])
        if values is None or any(getattr(v, "nvmlReturn", 1) != 0 for v in values):
            return (None, None)  # NVML_ERROR_NOT_SUPPORTED: no NVLink on this GPU
        tx, rx = (int(v.value.ullVal) for v in values)
        prev, self._nvlink_prev[i] = self._nvlink_prev[i], (now, tx, rx)
        if prev is None or now <= prev[0]:
            return (None, None)
        dt = now - prev[0]
        return ((tx - prev[1]) / dt, (rx - prev[2]) / dt)

    def _memory(self, handle: Any) -> Any:
        nv = self._nvml
        v2 = getattr(nv, "nvmlMemory_v2", None)
        if v2 is not None:
            mem = self._try(nv.nvmlDeviceGetMemoryInfo, handle, version=v2)
            if mem is not None:
                return mem  # v2 "used" excludes the driver's reservation (reported apart)
        return self._try(nv.nvmlDeviceGetMemoryInfo, handle)

    @staticmethod
    def _try(fn: Any, *args: Any, **kwargs: Any) -> Any:
        if fn is None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception:  # NVMLError_NotSupported and friends: the reading is absent
            return None

    def close(self) -> None:
        """Release NVML."""
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
