"""The load an open-loop run or a trace replay offered the server: its arrival rate and how bursty it was."""

from __future__ import annotations

import numpy as np

__all__ = ["offered_load"]


def offered_load(starts: np.ndarray, lags: np.ndarray) -> dict[str, float]:
    """Arrivals per second, from when each request was due (its start less its send lag), and the inter-arrival
    gaps' coefficient of variation (Poisson arrivals: 1; a fixed rate: 0)."""
    keep = ~np.isnan(lags)
    due = np.sort(starts[keep] - lags[keep])
    if due.size < 3 or due[-1] <= due[0]:
        return {}
    gaps = np.diff(due)
    return {"offered_rate": float(gaps.size / (due[-1] - due[0])), "arrival_cv": float(gaps.std() / gaps.mean())}
