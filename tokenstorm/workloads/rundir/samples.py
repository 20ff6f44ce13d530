"""Typed monitor samples as they are written to ``gpu.jsonl`` and ``server.jsonl``.

Every line carries ``epoch_s`` (wall clock, the requests' time axis) and ``schema``.
A line with ``"gap": true`` marks a stretch where a source could not be read (sidecar
killed, ``/metrics`` down): the load test went on, and the report can show the hole.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .meta import refuse_newer

__all__ = ["MONITOR_SCHEMA_VERSION", "GpuSample", "MonitorGap", "ServerSample", "read_samples", "to_line"]

MONITOR_SCHEMA_VERSION = 1


@dataclass(slots=True)
class GpuSample:
    """One GPU at one instant. ``None`` means the driver does not expose that reading."""

    epoch_s: float
    gpu: int
    uuid: str
    name: str
    source: str  # "nvml" or "nvidia-smi"
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    mem_reserved_mib: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_mj: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    pcie_tx_kbs: float | None = None
    pcie_rx_kbs: float | None = None
    nvlink_tx_kbs: float | None = None
    nvlink_rx_kbs: float | None = None
    throttle_reasons: int | None = None
    pstate: int | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)
    host: str = ""
    schema: int = MONITOR_SCHEMA_VERSION


@dataclass(slots=True)
class ServerSample:
    """vLLM's own view at one instant (counters are cumulative since the server started)."""

    epoch_s: float
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    preemptions: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    requests_finished: float | None = None
    ttft_hist: dict[str, float] = field(default_factory=dict)  # "le" -> cumulative count, plus sum/count
    itl_hist: dict[str, float] = field(default_factory=dict)
    e2e_hist: dict[str, float] = field(default_factory=dict)
    #: the A/B target's label (``--targets``); empty in a one-target run
    target: str = ""
    schema: int = MONITOR_SCHEMA_VERSION


@dataclass(slots=True)
class MonitorGap:
    """A source could not be read at ``epoch_s``; ``reason`` says why in one line."""

    epoch_s: float
    source: str
    reason: str
    gap: bool = True
    schema: int = MONITOR_SCHEMA_VERSION


def to_line(sample: GpuSample | ServerSample | MonitorGap) -> str:
    """One compact JSON line."""
    return json.dumps(asdict(sample), separators=(",", ":"))


def read_samples(path: Path) -> tuple[Any, Any]:
    """``(samples, gaps)`` of a ``gpu.jsonl`` / ``server.jsonl`` as pandas frames (empty when
    the file is missing or empty; a line torn by a crash is skipped; a newer schema's refused)."""
    import pandas as pd

    rows = []
    if path.exists():
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue
    versions = [r["schema"] for r in rows if isinstance(r, dict) and isinstance(r.get("schema"), int)]
    refuse_newer(path, max(versions, default=None), MONITOR_SCHEMA_VERSION)
    frame = pd.DataFrame(rows)
    if frame.empty or "gap" not in frame.columns:
        return frame, pd.DataFrame()
    is_gap = frame["gap"].fillna(False).astype(bool)
    return frame[~is_gap].reset_index(drop=True), frame[is_gap].reset_index(drop=True)
