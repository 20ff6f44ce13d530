"""A stand-in for ``pynvml`` (nvidia-ml-py) with the answers a real H200 gave under load.

Values come from shared/fixtures/gpu/nvml_probe.txt. Put this folder first on PYTHONPATH to
run the real sidecar CLI without a GPU. ``FAKE_NVML_GPUS`` sets the GPU count (default 1);
NVLink answers NotSupported, as on the single-GPU machine it was recorded on.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
nvmlMemory_v2 = 0x02000028

calls: dict[str, int] = {}
_state = {"init": False, "tick": 0}


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    def __str__(self) -> str:
        return "Not Supported"


def _count(name: str) -> None:
    calls[name] = calls.get(name, 0) + 1


def nvmlInit() -> None:
    _state["init"] = True


def nvmlShutdown() -> None:
    _state["init"] = False


def nvmlSystemGetDriverVersion() -> str:
    return "580.159.04"


def nvmlDeviceGetCount() -> int:
    return int(os.environ.get("FAKE_NVML_GPUS", "1"))


def nvmlDeviceGetHandleByIndex(i: int) -> int:
    return i


def nvmlDeviceGetUUID(h: int) -> str:
    return f"GPU-b7935da5-41fc-84c1-2853-ba90559aaeb{h}"


def nvmlDeviceGetName(h: int) -> str:
    return "NVIDIA H200"


def nvmlDeviceGetUtilizationRates(h: int) -> Any:
    _count("util")
    _state["tick"] += 1
    return SimpleNamespace(gpu=100 if _state["tick"] % 2 else 97, memory=23)


def nvmlDeviceGetMemoryInfo(h: int, version: int | None = None) -> Any:
    if version == nvmlMemory_v2:
        return SimpleNamespace(total=150754820096, used=21060452352, free=129049427968, reserved=644939776)
    return SimpleNamespace(total=150754820096, used=21705392128, free=129049427968)


def nvmlDeviceGetPowerUsage(h: int) -> int:
    return 691068


def nvmlDeviceGetEnforcedPowerLimit(h: int) -> int:
    return 700000


def nvmlDeviceGetTotalEnergyConsumption(h: int) -> int:
    return 9897334 + 691 * _state["tick"]


def nvmlDeviceGetTemperature(h: int, sensor: int) -> int:
    return 57


def nvmlDeviceGetClockInfo(h: int, clock: int) -> int:
    return 1500 if clock == NVML_CLOCK_SM else 3201


def nvmlDeviceGetPcieThroughput(h: int, counter: int) -> int:
    _count("pcie")
    return 8013 if counter == NVML_PCIE_UTIL_TX_BYTES else 16415


def nvmlDeviceGetNvLinkState(h: int, link: int) -> int:
    raise NVMLError_NotSupported()


NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139
NVML_ERROR_NOT_SUPPORTED = 3


def nvmlDeviceGetFieldValues(h: int, field_ids: list[Any]) -> list[Any]:
    """NVLink counters (KiB, cumulative) when FAKE_NVML_NVLINK=1 (an 8-GPU HGX box), else NotSupported."""
    out = []
    for fid, _scope in field_ids:
        if os.environ.get("FAKE_NVML_NVLINK") == "1":
            kib = 1_000_000 + 50_000 * _state["tick"] * (1 if fid == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX else 2)
            out.append(SimpleNamespace(fieldId=fid, nvmlReturn=0, value=SimpleNamespace(ullVal=kib)))
        else:
            out.append(SimpleNamespace(fieldId=fid, nvmlReturn=NVML_ERROR_NOT_SUPPORTED, value=None))
    return out


def nvmlDeviceGetComputeRunningProcesses(h: int) -> list[Any]:
    return [SimpleNamespace(pid=416, usedGpuMemory=21051211776)]


def nvmlDeviceGetCurrentClocksEventReasons(h: int) -> int:
    return 4


def nvmlDeviceGetPerformanceState(h: int) -> int:
    return 0
