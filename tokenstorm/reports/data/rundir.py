"""A run directory as tables: read only through :mod:`tokenstorm.workloads.rundir`, the files' one home.

Request records come from :func:`tokenstorm.workloads.rundir.read_requests_frame`: one row per request
with the scalar columns, and the inter-token gaps streamed from disk into exact microsecond
histograms when a figure asks for them — a report's memory grows with the request count
alone, never with the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tokenstorm.workloads.rundir import (
    GPU_FILE,
    REQUESTS_FILE,
    RUN_FILE,
    SEGMENTS_DIR,
    SERVER_FILE,
    ItlHistogram,
    ItlSource,
    LoadSample,
    RunMeta,
    frame_from_rows,
    join_spans,
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
    itl: ItlSource | None = None  # the requests' gaps, streamed on demand
    gpu: pd.DataFrame = field(default_factory=pd.DataFrame)
    gpu_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    server: pd.DataFrame = field(default_factory=pd.DataFrame)
    server_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    load: list[LoadSample] = field(default_factory=list)

    def itl_values(self, mask: np.ndarray) -> ItlHistogram:
        """Every ITL gap of the requests selected by boolean ``mask``, as an exact histogram."""
        if self.itl is None or not mask.any():
            return ItlHistogram()
        return self.itl.histogram(mask)


def load_run(run_dir: Path) -> RunData:
    """Load ``run_dir``; missing monitor files give empty tables (the report says so)."""
    if not any((run_dir / name).exists() for name in (REQUESTS_FILE, SEGMENTS_DIR, RUN_FILE)):
        raise FileNotFoundError(
            f"{run_dir} is not a tokenstorm run directory (no {SEGMENTS_DIR}/, {REQUESTS_FILE} or {RUN_FILE})"
        )
    meta = read_run_meta(run_dir) or RunMeta(status="unknown")
    requests, itl = read_requests_frame(run_dir)
    join_spans(requests, run_dir)  # the server's own spans (--otlp-port), by trace id
    data = RunData(path=run_dir, meta=meta, requests=requests, itl=itl)
    data.gpu, data.gpu_gaps = read_samples(run_dir / GPU_FILE)
    data.server, data.server_gaps = read_samples(run_dir / SERVER_FILE)
    data.load = read_load(run_dir)
    return data


def run_from_records(records: list[dict[str, Any]], meta: RunMeta, path: Path = Path()) -> RunData:
    """A :class:`RunData` of decoded request records (a capacity-search step judged live)."""
    frame, itl = frame_from_rows(records)
    return RunData(path=path, meta=meta, requests=frame, itl=itl)
