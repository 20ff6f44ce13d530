"""One latency's statistics as ``summary.json`` names them: ``mean_NAME_ms``, ``median_NAME_ms``, ``std_NAME_ms``,
``pNN_NAME_ms`` for each of :data:`PERCENTILES` and ``max_NAME_ms`` (vLLM's benchmark field names), from an
array of seconds or an :class:`~tokenstorm.workloads.rundir.ItlHistogram`. Percentiles are numpy's linear interpolation.
"""

from __future__ import annotations

import numpy as np

from tokenstorm.reports.data.columns import dropped_nan
from tokenstorm.workloads.rundir import ItlHistogram

__all__ = ["PERCENTILES", "metric_block"]

PERCENTILES = (50, 90, 95, 99)


def metric_block(values_s: np.ndarray | ItlHistogram, name: str) -> dict[str, float | None]:
    """``values_s``' statistics in milliseconds (every key None when there is no value). An array is sorted
    in place (pass a copy: :func:`tokenstorm.reports.data.columns.selected` makes one)."""
    if isinstance(values_s, ItlHistogram):
        return _histogram_block(values_s, name)
    values = dropped_nan(values_s)
    if values.size == 0:
        return {
            f"mean_{name}_ms": None,
            f"median_{name}_ms": None,
            f"std_{name}_ms": None,
            **{f"p{p}_{name}_ms": None for p in PERCENTILES},
            f"max_{name}_ms": None,
        }
    # One pass for every percentile: ITL arrays can hold tens of millions of gaps.
    mean, top = values.mean(dtype=np.float64), values.max()
    std = _std(values, float(mean))
    # ``values`` is a copy of the rows (``selected``): sorted in place rather than copied once more.
    qs = np.percentile(values, [50, *PERCENTILES], overwrite_input=True) * 1000
    return {
        f"mean_{name}_ms": float(mean * 1000),
        f"median_{name}_ms": float(qs[0]),
        f"std_{name}_ms": float(std * 1000),
        **{f"p{p}_{name}_ms": float(q) for p, q in zip(PERCENTILES, qs[1:], strict=True)},
        f"max_{name}_ms": float(top * 1000),
    }


def _std(values: np.ndarray, mean: float) -> float:
    """``numpy.std`` in slices: its whole-array temporary is 8 bytes a request."""
    total = 0.0
    for i in range(0, values.size, 1 << 20):
        d = values[i : i + (1 << 20)] - mean
        total += float(np.dot(d, d))
    return float(np.sqrt(total / values.size))


def _histogram_block(hist: ItlHistogram, name: str) -> dict[str, float | None]:
    if hist.size == 0:
        return metric_block(np.empty(0), name)
    qs = hist.percentiles([50, *PERCENTILES]) * 1000
    return {
        f"mean_{name}_ms": hist.mean() * 1000,
        f"median_{name}_ms": float(qs[0]),
        f"std_{name}_ms": hist.std() * 1000,
        **{f"p{p}_{name}_ms": float(q) for p, q in zip(PERCENTILES, qs[1:], strict=True)},
        f"max_{name}_ms": hist.max() * 1000,
    }
