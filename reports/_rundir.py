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
    "timing_violation",
)  # fmt: skip


@dataclass
class RunData:
    """Everything a report needs from one run directory."""

    path: Path
    meta: dict[str, Any]
    requests: pd.DataFrame  # one row per request, scalar columns only
    itl_flat: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.float32))  # every gap, in order
    itl_counts: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # gaps per request
    gpu: pd.DataFrame = field(default_factory=pd.DataFrame)
    gpu_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    server: pd.DataFrame = field(default_factory=pd.DataFrame)
    server_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    load: pd.DataFrame = field(default_factory=pd.DataFrame)

    def itl_values(self, mask: np.ndarray) -> np.ndarray:
        """All ITL gaps (seconds, float32) of the requests selected by boolean ``mask``."""
        if self.itl_counts.size == 0 or not mask.any():
            return np.empty(0, dtype=np.float32)
        if mask.all():
            return self.itl_flat
        selected: np.ndarray = self.itl_flat[np.repeat(mask, self.itl_counts)]
        return selected


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


_SCHEMA = pa.schema(
    [
        ("workload", pa.string()), ("start_epoch_s", pa.float64()), ("ok", pa.bool_()),
        ("error_category", pa.string()), ("error_detail", pa.string()), ("status_code", pa.int64()),
        ("prompt_tokens", pa.int64()), ("output_tokens", pa.int64()), ("ttft_s", pa.float64()),
        ("ttfc_s", pa.float64()), ("e2e_s", pa.float64()), ("tpot_s", pa.float64()), ("worker_id", pa.string()),
        ("warmup", pa.bool_()), ("model", pa.string()), ("send_lag_s", pa.float64()),
        ("timing_violation", pa.string()), ("itl_gaps_s", pa.list_(pa.float64())),
    ]
)  # fmt: skip


def _read_requests(path: Path) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Stream the records in blocks, keeping only the columns reports use.

    ITL gaps are kept as one flat float32 array plus a count per request (microsecond
    precision, a quarter of the memory of Python lists of floats).
    """
    empty = pd.DataFrame(columns=list(_SCALAR_COLUMNS))
    if not path.exists() or path.stat().st_size == 0:
        return empty, np.empty(0, np.float32), np.empty(0, np.int64)
    size = path.stat().st_size
    end = _complete_prefix_length(path)
    if end == 0:
        return empty, np.empty(0, np.float32), np.empty(0, np.int64)
    # A line torn by a crash (no final newline) is left out; everything before it is read.
    source: Any = path if end == size else pa.BufferReader(pa.memory_map(str(path)).read_buffer(end))
    reader = paj.open_json(
        source,
        read_options=paj.ReadOptions(block_size=8 << 20),
        parse_options=paj.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore"),
    )
    tables, flats, counts = [], [], []
    for batch in reader:
        itl = batch.column("itl_gaps_s")
        counts.append(pc.fill_null(pc.list_value_length(itl), 0).to_numpy().astype(np.int64))
        flats.append(pc.list_flatten(itl).to_numpy(zero_copy_only=False).astype(np.float32))
        tables.append(pa.Table.from_batches([batch]).drop_columns(["itl_gaps_s"]))
    if not tables:
        return empty, np.empty(0, np.float32), np.empty(0, np.int64)
    frame = pa.concat_tables(tables).to_pandas()
    return frame, np.concatenate(flats), np.concatenate(counts)


def _complete_prefix_length(path: Path) -> int:
    """Bytes up to and including the last newline (0 when no line is complete)."""
    pos = path.stat().st_size
    with path.open("rb") as fh:
        while pos > 0:
            step = min(65536, pos)
            pos -= step
            fh.seek(pos)
            idx = fh.read(step).rfind(b"\n")
            if idx >= 0:
                return pos + idx + 1
    return 0


def load_run(run_dir: Path) -> RunData:
    """Load ``run_dir``; missing monitor files give empty tables (the report says so)."""
    if not (run_dir / "requests.jsonl").exists() and not (run_dir / "run.json").exists():
        raise FileNotFoundError(f"{run_dir} is not a tokenstorm run directory (no requests.jsonl or run.json)")
    meta: dict[str, Any] = {}
    if (run_dir / "run.json").exists():
        meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    requests, itl_flat, itl_counts = _read_requests(run_dir / "requests.jsonl")
    data = RunData(path=run_dir, meta=meta, requests=requests, itl_flat=itl_flat, itl_counts=itl_counts)
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
