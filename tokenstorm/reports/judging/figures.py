"""The figures a report's first screen adds to each summary block: how the records are accounted
for, the achieved concurrency, and the prompt and output length distributions.

Every figure comes from the raw records (``run.requests``), as the rest of ``summary.json`` does:

- **Accounting** — every record of a scope is exactly one of: *completed* (judged, succeeded),
  *failed* (judged, did not), *cancelled* (stopped by the load test before its response ended: the
  run's end, or users stopped by a load shape) or *warm-up* (not cancelled, but started in the
  warm-up: not judged). ``completed + failed + cancelled + warmup_requests == records``.
- **Achieved concurrency** — the mean number of requests in flight over the measured window: the
  sum of the judged requests' durations (E2E: sent to last token, or until they failed) divided by
  the window (the first judged request's start to the last one's end), as Little's law has it.
- **Lengths** — prompt and output tokens of the completed judged requests (the server's usage
  counts where it sent them): p50 / p90 / p99 (numpy's linear interpolation) / max / mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenstorm.reports.data.columns import dropped_nan, selected
from tokenstorm.reports.data.rundir import RunData

__all__ = ["LENGTH_PERCENTILES", "accounting", "achieved_concurrency", "cancelled_mask", "length_figures"]

LENGTH_PERCENTILES = (50, 90, 99)


def cancelled_mask(run: RunData) -> np.ndarray:
    """The records the load test itself stopped (``error_category == "cancelled"``)."""
    df = run.requests
    if df.empty:
        return np.zeros(0, dtype=bool)
    return np.asarray(df["error_category"] == "cancelled", dtype=bool)


def accounting(run: RunData, judged: np.ndarray, scope: np.ndarray | None = None) -> dict[str, int]:
    """``records``, ``cancelled`` and ``warmup_requests`` of the rows in ``scope`` (None: all), ``judged``
    being the judged rows of that scope (completed and failed are counted with them)."""
    rows = np.ones(len(run.requests), dtype=bool) if scope is None else scope
    cancelled = int((rows & cancelled_mask(run)).sum())
    records = int(rows.sum())
    return {"records": records, "cancelled": cancelled, "warmup_requests": records - cancelled - int(judged.sum())}


def achieved_concurrency(run: RunData, judged: np.ndarray, window_s: float) -> float:
    """Mean requests in flight over ``window_s``: the judged requests' summed durations / the window."""
    if not window_s or not judged.any():
        return 0.0
    durations = selected(run.requests, "e2e_s", judged)
    return float(np.nansum(durations)) / window_s


def length_figures(run: RunData, ok: np.ndarray) -> dict[str, Any]:
    """``p50_prompt_tokens`` ... ``max_output_tokens``, ``mean_*``: the completed requests' lengths."""
    out: dict[str, Any] = {}
    for col in ("prompt_tokens", "output_tokens"):
        values = dropped_nan(selected(run.requests, col, ok))
        if values.size == 0:
            out.update({f"p{p}_{col}": None for p in LENGTH_PERCENTILES})
            out[f"max_{col}"] = out[f"mean_{col}"] = None
            continue
        qs = np.percentile(values, LENGTH_PERCENTILES, overwrite_input=True)  # our copy: sorted in place
        out.update({f"p{p}_{col}": float(q) for p, q in zip(LENGTH_PERCENTILES, qs, strict=True)})
        out[f"max_{col}"] = float(values.max())
        out[f"mean_{col}"] = float(values.mean())
    return out
