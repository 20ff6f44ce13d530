"""Reading a run directory (the contract between the parts) into tables.

Request records are read with pyarrow's JSON reader (C++, multi-threaded), so a run of a
million records loads in seconds; the per-gap ITL lists stay an Arrow list column and are
flattened per workload only when percentiles are computed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as paj

__all__ = ["RunData", "load_run"]

_SCALAR_COLUMNS = (
    "workload", "start_epoch_s", "ok", "error_category", "error_detail", "status_code", "prompt_tokens",
    "output_tokens", "ttft_s", "ttfc_s", "e2e_s", "tpot_s", "worker_id", "warmup", "model", "send_lag_s",
)  # fmt: skip


@dataclass
class RunData:
    """Everything a report needs from one run directory."""

    path: Path
    meta: dict[str, Any]
    requests: pd.DataFrame  # one row per request, scalar columns only
    itl: pa.ChunkedArray | None  # list<double> per request, aligned with ``requests``
    gpu: pd.DataFrame = field(default_factory=pd.DataFrame)
    gpu_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    server: pd.DataFrame = field(default_factory=pd.DataFrame)
    server_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    load: pd.DataFrame = field(default_factory=pd.DataFrame)

    def itl_values(self, mask: np.ndarray) -> np.ndarray:
        """All ITL gaps (seconds) of the requests selected by boolean ``mask``."""
        if self.itl is None or not mask.any():
            return np.empty(0)
        chosen = self.itl.filter(pa.array(mask))
        flat = pc.list_flatten(chosen)
        return np.asarray(flat.to_numpy(zero_copy_only=False), dtype=float)


def _read_jsonl_frame(path: Path) -> pd.DataFrame:
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame()
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a line torn by a crash
    return pd.DataFrame(rows)


def _read_requests(path: Path) -> tuple[pd.DataFrame, pa.ChunkedArray | None]:
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=list(_SCALAR_COLUMNS)), None
    try:
        table = paj.read_json(path, parse_options=paj.ParseOptions(newlines_in_values=False))
    except pa.ArrowInvalid:
        # A torn last line (the run crashed mid-write): drop it and read the rest.
        text = path.read_bytes()
        good = text[: text.rstrip(b"\n").rfind(b"\n") + 1]
        if not good:
            return pd.DataFrame(columns=list(_SCALAR_COLUMNS)), None
        table = paj.read_json(pa.BufferReader(good))
    itl = table.column("itl_gaps_s") if "itl_gaps_s" in table.column_names else None
    if itl is not None and pa.types.is_null(itl.type):
        itl = None
    cols = [c for c in _SCALAR_COLUMNS if c in table.column_names]
    frame = table.select(cols).to_pandas()
    for c in _SCALAR_COLUMNS:
        if c not in frame.columns:
            frame[c] = None
    return frame, itl


def load_run(run_dir: Path) -> RunData:
    """Load ``run_dir``; missing monitor files give empty tables (the report says so)."""
    if not (run_dir / "requests.jsonl").exists() and not (run_dir / "run.json").exists():
        raise FileNotFoundError(f"{run_dir} is not a tokenstorm run directory (no requests.jsonl or run.json)")
    meta: dict[str, Any] = {}
    if (run_dir / "run.json").exists():
        meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    requests, itl = _read_requests(run_dir / "requests.jsonl")
    data = RunData(path=run_dir, meta=meta, requests=requests, itl=itl)
    for name in ("gpu", "server"):
        frame = _read_jsonl_frame(run_dir / f"{name}.jsonl")
        if not frame.empty and "gap" in frame.columns:
            gaps = frame[frame["gap"].fillna(False).astype(bool)]
            frame = frame[~frame["gap"].fillna(False).astype(bool)]
        else:
            gaps = pd.DataFrame()
        setattr(data, name, frame.reset_index(drop=True))
        setattr(data, f"{name}_gaps", gaps.reset_index(drop=True))
    data.load = _read_jsonl_frame(run_dir / "load.jsonl")
    return data
