"""What a GPU sampler says of the GPUs themselves — name, total memory, driver — for ``gpus.json``."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Protocol

from tokenstorm.workloads.rundir.gpus import gpu_identity
from tokenstorm.workloads.rundir.samples import GpuSample

__all__ = ["gpus_from_rows", "gpus_of"]


class _Sampler(Protocol):
    """What is read of a sampler here (the sidecar's ``GpuSampler`` is one; it imports this module)."""

    def sample(self) -> list[GpuSample]: ...


def gpus_of(sampler: _Sampler) -> list[dict[str, Any]]:
    """The GPUs ``sampler`` reads (``gpus.json`` entries: index, name, total memory, driver): its
    ``identity()`` where it has one (NVML, nvidia-smi), else one sample's name and memory; ``[]``
    when the driver does not answer (a monitor never fails a run for it)."""
    try:
        identity = getattr(sampler, "identity", None)
        if identity is not None:
            return list(identity())
        return gpus_from_rows([asdict(s) for s in sampler.sample()])
    except Exception:  # a driver error: the samples say what they can, run.json goes without
        return []


def gpus_from_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each GPU's name and memory (no driver) from sample rows (a sidecar that does not say more)."""
    first: dict[int, dict[str, Any]] = {}
    for row in rows:
        if "gpu" in row and not row.get("gap"):
            first.setdefault(int(row["gpu"]), gpu_identity(row["gpu"], row.get("name"), row.get("mem_total_mib"), None))
    return [first[k] for k in sorted(first)]
