"""A run directory as tables: read only through :mod:`workloads.rundir`, the files' one home.

Request records come from :func:`workloads.rundir.read_requests_frame` (pyarrow, C++,
multi-threaded), so a run of a million records loads in seconds; the per-gap ITL lists stay
one flat float32 array plus a count per request, flattened per workload only when percentiles
are computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workloads.rundir import (
    GPU_FILE,
    REPORT_COLUMNS,
    REQUESTS_FILE,
    RUN_FILE,
    SERVER_FILE,
    LoadSample,
    RunMeta,
    read_load,
    read_requests_frame,
    read_run_meta,
    read_samples,
)

__all__ = ["RunData", "load_run", "run_from_records"]


@dataclass
class RunData:
    """Everything a report needs from one run directory."""

    path: Path
    meta: RunMeta
    requests: pd.DataFrame  # one row per request, scalar columns only
    itl_flat: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.float32))  # every gap, in order
    itl_counts: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # gaps per request
    gpu: pd.DataFrame = field(default_factory=pd.DataFrame)
    gpu_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    server: pd.DataFrame = field(default_factory=pd.DataFrame)
    server_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    load: list[LoadSample] = field(default_factory=list)

    def itl_values(self, mask: np.ndarray) -> np.ndarray:
        """All ITL gaps (seconds, float32) of the requests selected by boolean ``mask``."""
        if self.itl_counts.size == 0 or not mask.any():
            return np.empty(0, dtype=np.float32)
        if mask.all():
            return self.itl_flat
        selected: np.ndarray = self.itl_flat[np.repeat(mask, self.itl_counts)]
        return selected


def load_run(run_dir: Path) -> RunData:
    """Load ``run_dir``; missing monitor files give empty tables (the report says so)."""
    if not (run_dir / REQUESTS_FILE).exists() and not (run_dir / RUN_FILE).exists():
        raise FileNotFoundError(f"{run_dir} is not a tokenstorm run directory (no {REQUESTS_FILE} or {RUN_FILE})")
    meta = read_run_meta(run_dir) or RunMeta(status="unknown")
    requests, itl_flat, itl_counts = read_requests_frame(run_dir / REQUESTS_FILE)
    data = RunData(path=run_dir, meta=meta, requests=requests, itl_flat=itl_flat, itl_counts=itl_counts)
    data.gpu, data.gpu_gaps = read_samples(run_dir / GPU_FILE)
    data.server, data.server_gaps = read_samples(run_dir / SERVER_FILE)
    data.load = read_load(run_dir)
    return data


def run_from_records(records: list[dict[str, Any]], meta: RunMeta, path: Path = Path()) -> RunData:
    """A :class:`RunData` of decoded request records (a capacity-search step judged live)."""
    scalars = [name for name, kind in REPORT_COLUMNS if kind != "list_float64"]
    frame = pd.DataFrame([{k: r.get(k) for k in scalars} for r in records], columns=scalars)
    gaps = [r.get("itl_gaps_s") or [] for r in records]
    counts = np.array([len(g) for g in gaps], dtype=np.int64)
    flat = np.fromiter((x for g in gaps for x in g), dtype=np.float32, count=int(counts.sum()))
    return RunData(path=path, meta=meta, requests=frame, itl_flat=flat, itl_counts=counts)
