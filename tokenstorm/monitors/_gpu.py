"""Choosing a GPU backend: NVML first, nvidia-smi when NVML cannot load."""

from __future__ import annotations

from ._nvml import NoGpuError, NvmlSampler
from ._sidecar import GpuSampler
from ._smi import SmiSampler

__all__ = ["open_gpu_sampler"]


def open_gpu_sampler(backend: str = "auto", pcie_every: int = 10) -> GpuSampler:
    """Return a working sampler or raise :class:`NoGpuError` saying why, in one line."""
    if backend not in ("auto", "nvml", "nvidia-smi"):
        raise ValueError(f"unknown GPU backend {backend!r}")
    nvml_problem = None
    if backend in ("auto", "nvml"):
        try:
            return NvmlSampler(pcie_every=pcie_every)
        except NoGpuError as exc:
            nvml_problem = str(exc)
            if backend == "nvml":
                raise
    try:
        return SmiSampler()
    except NoGpuError as exc:
        reasons = f"{nvml_problem}; {exc}" if nvml_problem else str(exc)
        raise NoGpuError(f"no GPU found ({reasons})") from exc
