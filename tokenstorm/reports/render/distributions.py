"""The report's latency distributions as data (:class:`~tokenstorm.reports.render.charts.Chart`): TTFT, ITL and E2E
per workload (and A/B target) as quantile curves — at x = p, the p-th percentile of the judged successful
requests (ITL: of every gap between tokens, not a per-request mean). Every workload shares the x axis,
so a hover reads each workload's p95 at once; the grid is finer in the tail, where SLOs are set.
"""

from __future__ import annotations

import numpy as np

from tokenstorm.reports.data.columns import dropped_nan, selected, workloads_in
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.targets import target_labels, target_mask
from tokenstorm.reports.render.charts import Chart, series

__all__ = ["PERCENTILE_GRID", "distribution_charts"]

#: the percentiles each curve is drawn at: every 1 to p99, every 0.1 to p99.9, then p99.99 and the max
PERCENTILE_GRID = np.concatenate([np.arange(0, 99, 1.0), np.round(np.arange(99, 100, 0.1), 1), [99.99, 100.0]])

_METRICS = (("ttft", "TTFT", "ttft_s"), ("itl", "ITL", None), ("e2e", "E2E", "e2e_s"))


def distribution_charts(run: RunData, mask: np.ndarray) -> list[Chart]:
    """One chart per latency (TTFT, ITL, E2E), one curve per workload (and A/B target) with a successful
    judged request; none for a latency no request has."""
    df = run.requests
    if df.empty:
        return []
    ok = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    groups = [(f" {t}", ok & target_mask(run, t)) for t in target_labels(run)] or [("", ok)]
    scopes = [
        (f"{w}{suffix}", part & np.asarray(df["workload"] == w, dtype=bool))
        for suffix, part in groups
        for w in workloads_in(df, part)
    ]
    charts = []
    for key, name, col in _METRICS:
        lines = []
        for label, sel in scopes:
            if col is None:
                gaps = run.itl_values(sel)
                ms = gaps.percentiles(PERCENTILE_GRID) * 1000 if gaps.size else None
            else:
                v = dropped_nan(selected(df, col, sel))
                ms = np.percentile(v * 1000, PERCENTILE_GRID) if v.size else None
            if ms is not None:
                lines.append(series(label, PERCENTILE_GRID, ms))
        if lines:
            charts.append(
                Chart(
                    f"dist-{key}",
                    f"{name} by percentile, per workload (ms)",
                    "percentile of the requests (%)" if col else "percentile of the gaps between tokens (%)",
                    f"{name} (ms)",
                    lines,
                    kind="percentile",
                    unit="ms",
                )
            )
    return charts
