"""How many samples a clear answer needs, and the interval of a change between two runs or two targets.

Part of :mod:`tokenstorm.reports.judging.intervals` (import these from there; its doc explains the methods).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tokenstorm.reports.judging.distributions import norm_ppf
from tokenstorm.reports.judging.interval_math import (
    Interval,
    alpha_of,
    count_at_most,
    count_nan,
    level_of,
    ranks,
    values_at_ranks,
    wilson,
)

__all__ = [
    "MAX_PAIRS",
    "MAX_SAMPLES",
    "change_interval_pct",
    "needed_samples_proportion",
    "needed_samples_quantile",
    "paired_change_interval_pct",
]

MAX_SAMPLES = 10**9  # needed_samples_* answer None beyond this
MAX_PAIRS = 200_000  # paired_change_interval_pct resamples at most this many pairs (a seeded subsample)


def _smallest_total(conclusive: Callable[[int], bool]) -> int | None:
    """The smallest total sample size for which ``conclusive`` holds (doubling, then bisection), None past
    :data:`MAX_SAMPLES`."""
    high = 1
    while not conclusive(high):
        if high >= MAX_SAMPLES:
            return None
        high = min(high * 2, MAX_SAMPLES)
    low = high // 2  # not conclusive (or 0)
    while high - low > 1:
        mid = (low + high) // 2
        if conclusive(mid):
            high = mid
        else:
            low = mid
    return high


def needed_samples_quantile(
    values: np.ndarray, q_pct: float, threshold: float, confidence: float, deff: float = 1.0
) -> int | None:
    """How many samples in all (not more) the interval of percentile ``q_pct`` needs to lie wholly on one side
    of ``threshold``, assuming the share of values at or below the threshold stays what ``values`` show and the
    design effect stays ``deff``. None: the estimate sits on the threshold (or needs more than 10^9).
    ``values`` may be reordered in place, as in :func:`tokenstorm.reports.judging.intervals.quantile_interval`. At the
    margin the answer can be at or below the sample's own size (the interval is then about to settle)."""
    alpha, q = alpha_of(confidence), level_of(q_pct)
    if values.dtype.kind != "f":
        values = values.astype(np.float64)
    n = values.size - count_nan(values)
    if n == 0:
        return None
    share_below = count_at_most(values, threshold) / n  # the sample's CDF at the threshold
    h = (n - 1) * q  # numpy's (linear) percentile: the estimate compared with the threshold
    (estimate,) = values_at_ranks(values, n, [h + 1])
    if estimate is None or estimate == threshold:
        return None
    deff = max(1.0, deff)
    below_side = estimate < threshold

    def conclusive(total: int) -> bool:
        m = int(total / deff)
        low, high = ranks(m, q, alpha)
        # the r-th smallest of m is at most the threshold when at least r values are (typically m·share_below)
        if below_side:
            return high is not None and high <= m * share_below
        return low is not None and low - 1 >= m * share_below  # above it when at most r − 1 values are

    return _smallest_total(conclusive)


def needed_samples_proportion(k: int, n: int, threshold: float, confidence: float, deff: float = 1.0) -> int | None:
    """How many samples in all the interval of the share ``k / n`` needs to lie wholly on one side of
    ``threshold`` at the share observed; None when the share equals the threshold (or needs more than 10^9)."""
    alpha = alpha_of(confidence)
    if n <= 0 or k / n == threshold:
        return None
    p, z, deff = k / n, norm_ppf(1 - alpha / 2), max(1.0, deff)

    def conclusive(total: int) -> bool:
        n_eff = total / deff
        if n_eff <= 0:
            return False
        low, high = wilson(p, n_eff, z)
        return high <= threshold if p < threshold else low >= threshold

    return _smallest_total(conclusive)


def change_interval_pct(
    base: float, base_ci: Interval, new: float, new_ci: Interval
) -> tuple[float | None, float | None]:
    """The interval of ``(new / base − 1) × 100`` for two independent samples: on the log scale the two
    intervals' half-widths add in quadrature (the low end from ``new``'s lower and ``base``'s upper half-width,
    the high end the other way). An end is None where an interval it needs is open (or not positive)."""

    def half(estimate: float, end: float | None) -> float | None:
        if end is None or end <= 0:
            return None
        return abs(math.log(estimate) - math.log(end))

    if not (base > 0 and new > 0):
        return None, None
    d = math.log(new / base)
    down = (half(new, new_ci.low), half(base, base_ci.high))
    up = (half(new, new_ci.high), half(base, base_ci.low))
    low = None if None in down else (math.exp(d - math.hypot(*(h or 0.0 for h in down))) - 1) * 100
    high = None if None in up else (math.exp(d + math.hypot(*(h or 0.0 for h in up))) - 1) * 100
    return low, high


def _stat_fn(stat: str) -> Callable[[np.ndarray], float]:
    """The statistic of a 1-D array (which it may reorder): ``mean`` or a percentile ``p50``..``p99.9``
    (numpy's linear definition, from the two order statistics around it)."""
    if stat == "mean":
        return lambda a: float(a.mean())
    try:
        q = level_of(float(stat.removeprefix("p"))) if stat.startswith("p") else None
    except ValueError:
        q = None
    if q is None:
        raise ValueError(f"unknown statistic {stat!r}: use 'mean' or a percentile such as 'p50', 'p99.9'")

    def percentile(a: np.ndarray) -> float:
        (value,) = values_at_ranks(a, a.size, [(a.size - 1) * q + 1])
        return float("nan") if value is None else value

    return percentile


def paired_change_interval_pct(
    base: np.ndarray, new: np.ndarray, stat: str, confidence: float, resamples: int = 1000, seed: int = 0
) -> tuple[float | None, float | None]:
    """The interval of ``(stat(new) / stat(base) − 1) × 100`` where ``base[i]`` and ``new[i]`` are one pair
    (the same prompt sent to both targets): a percentile bootstrap that resamples whole pairs, so what the
    prompts share cancels out. Pairs with a NaN on either side are dropped. More than 200,000 pairs are first
    cut to a seeded random subsample of (at most) 200,000: the interval is then a little wider than the whole
    data's would be, and time and memory stay bounded (1,000 resamples of 200,000 pairs: ~5–8 s on one core,
    a few MB). ``seed`` makes it repeatable. (None, None) with fewer than two pairs or a base statistic that is
    not positive."""
    alpha = alpha_of(confidence)
    fn = _stat_fn(stat)
    base, new = np.asarray(base, dtype=np.float64), np.asarray(new, dtype=np.float64)
    if base.shape != new.shape or base.ndim != 1:
        raise ValueError(f"paired samples must be two 1-D arrays of one length, not {base.shape} and {new.shape}")
    rng = np.random.default_rng(seed)
    if base.size > MAX_PAIRS:  # a seeded subsample, drawn before anything the size of the whole is made
        pick = rng.choice(base.size, min(base.size, MAX_PAIRS + MAX_PAIRS // 4), replace=False)  # random order
        base, new = base[pick], new[pick]
    keep = ~(np.isnan(base) | np.isnan(new))
    b, w = base[keep][:MAX_PAIRS], new[keep][:MAX_PAIRS]
    if b.size < 2 or fn(b.copy()) <= 0:
        return None, None
    ratio = np.empty(resamples)
    for r in range(resamples):  # one resample at a time: ~20 bytes a pair in memory, ~5 ms at 200,000 pairs
        pick = rng.integers(0, b.size, b.size, dtype=np.int32 if b.size < 2**31 else np.int64)
        base_stat = fn(b[pick])
        ratio[r] = fn(w[pick]) / base_stat - 1 if base_stat > 0 else np.nan
    ratio = ratio[np.isfinite(ratio)]
    if ratio.size == 0:
        return None, None
    low, high = np.quantile(ratio, [alpha / 2, 1 - alpha / 2]) * 100
    return float(low), float(high)
