"""Columns of a run's request table, read without copying a whole run: the rows a mask selects, sums over
them, the workloads they hold, and slices a million rows long for the rest."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["chunks", "dropped_nan", "masked_sum", "measures", "selected", "workloads_in"]

_CHUNK = 1 << 20


def workloads_in(df: Any, mask: np.ndarray) -> list[str]:
    """The workloads of the rows in ``mask``, sorted — counted on the categorical's codes, since
    iterating millions of rows as Python strings costs ~70 bytes each."""
    if df.empty or "workload" not in df:
        return []
    col = df["workload"]
    if not isinstance(col.dtype, pd.CategoricalDtype):
        return sorted(str(w) for w in set(col[mask].dropna()))
    codes = np.asarray(col.cat.codes)[mask]
    counts = np.bincount(codes[codes >= 0].astype(np.int64), minlength=len(col.cat.categories))
    return sorted(str(col.cat.categories[i]) for i in np.flatnonzero(counts))


def masked_sum(df: Any, col: str, mask: np.ndarray) -> float:
    """Sum of column ``col`` over the rows in ``mask``, missing values as 0 — without copying rows."""
    values = df[col].to_numpy(dtype=float, na_value=np.nan) if df[col].dtype.kind != "f" else df[col].to_numpy()
    return float(np.sum(values, where=mask & ~np.isnan(values), dtype=np.float64))  # float32 counts: no 2**24 cap


def chunks(n: int) -> Any:
    """Slices of ``range(n)`` a million rows long: whole-run temporaries cost bytes per request."""
    return (slice(i, i + _CHUNK) for i in range(0, n, _CHUNK))


def selected(df: Any, col: str, mask: np.ndarray) -> np.ndarray:
    """Column ``col`` of the rows in ``mask`` as a new float array (NaN for none) — the caller's
    to sort in place: one copy of the rows asked for, never of the whole table."""
    column = df[col]
    # A float column as it is (a view): ``na_value`` would copy all of it first.
    full = column.to_numpy() if column.dtype.kind == "f" else column.to_numpy(dtype=float, na_value=np.nan)
    values: np.ndarray = np.asarray(full, dtype=float)[mask]
    return values


def dropped_nan(values: np.ndarray) -> np.ndarray:
    """``values`` without NaN — the same array when there is none (no copy of millions of rows)."""
    nan = np.isnan(values)
    return values[~nan] if nan.any() else values


#: the column a workload needs a value in for "*" to judge it by this metric (tool calls, sessions)
_ONLY_WHERE = {"tool_call_ms": "tool_call_s", "session_ms": "session_end"}


def measures(df: Any, judged: np.ndarray, workload: str, metric: str) -> bool:
    """Whether an SLO under ``"*"`` judges ``workload`` by ``metric``: every workload, except for
    ``tool_call_ms`` and ``session_ms``, which apply where tool calls were made or sessions ended."""
    col = _ONLY_WHERE.get(metric)
    if col is None:
        return True
    if col not in df:
        return False
    values = pd.Series(df[col].to_numpy()[judged & (df["workload"] == workload).to_numpy()])
    return bool(values.fillna(False).astype(bool).any()) if col == "session_end" else bool(values.notna().any())
