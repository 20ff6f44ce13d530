"""The arithmetic under :mod:`tokenstorm.reports.judging.intervals`: the interval type, the exact binomial ranks of a
percentile's interval (see that module's doc for the method in words), order statistics selected in place, and
Wilson's score bounds. Import the public functions from :mod:`tokenstorm.reports.judging.intervals`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from tokenstorm.reports.judging.distributions import binom_cdf, binom_ppf

__all__ = [
    "CHUNK",
    "CLUSTER_SLOTS",
    "DEFAULT_CONFIDENCE",
    "Interval",
    "alpha_of",
    "cluster_chunks",
    "cluster_slots",
    "count_at_most",
    "count_nan",
    "level_of",
    "lower_rank",
    "ranks",
    "upper_rank",
    "values_at_ranks",
    "whole_ranks",
    "wilson",
]

DEFAULT_CONFIDENCE = 0.95
CHUNK = 1 << 20  # values per pass over a large array (bounded temporaries: ~1 MB of flags)
CLUSTER_SLOTS = 1 << 20  # clusters' totals are summed in this many slots (16 MB), however many clusters
_SLOT_BITS = 20
_FIBONACCI = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: consecutive keys land far apart


@dataclass(frozen=True)
class Interval:
    """A confidence interval; an end is None where the sample cannot bound it at this confidence."""

    low: float | None  # None: unbounded below (too few samples for this confidence)
    high: float | None  # None: unbounded above
    confidence: float
    n: int  # samples behind it
    n_eff: float  # effective independent samples (n / design effect; == n for independent samples)

    def contains(self, x: float) -> bool:
        """Whether ``x`` lies in the interval (an open end holds everything on its side)."""
        return (self.low is None or self.low <= x) and (self.high is None or x <= self.high)


def alpha_of(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), not {confidence}")
    return 1.0 - confidence


def level_of(q_pct: float) -> float:
    if not 0 < q_pct < 100:
        raise ValueError(f"a percentile's interval needs 0 < q < 100, not {q_pct}")
    return q_pct / 100.0


def lower_rank(m: int, q: float, a: float) -> float | None:
    """The (1-based, fractional) rank in ``m`` samples whose chance of lying above the true q-quantile is ``a``:
    rank l is above it when fewer than l samples are at or below it, P = binom.cdf(l − 1, m, q)."""
    if m < 1 or binom_cdf(0, m, q) > a:
        return None
    lo = binom_ppf(a, m, q)  # smallest k with cdf(k) >= a
    lo = max(1, min(lo, m))
    while lo > 1 and binom_cdf(lo - 1, m, q) > a:  # guard ppf's rounding
        lo -= 1
    while lo < m and binom_cdf(lo, m, q) <= a:
        lo += 1
    c0, c1 = binom_cdf(lo - 1, m, q), binom_cdf(lo, m, q)
    w = (a - c0) / (c1 - c0) if c1 > c0 else 0.0
    return min(lo + max(0.0, min(1.0, w)), float(m))


def upper_rank(m: int, q: float, a: float) -> float | None:
    """The rank whose chance of lying below the true q-quantile is ``a`` (the lower rank of the mirrored sample)."""
    r = lower_rank(m, 1.0 - q, a)
    return None if r is None else m + 1.0 - r


@lru_cache(maxsize=4096)
def ranks(m: int, q: float, alpha: float) -> tuple[float | None, float | None]:
    """The interval's ranks in ``m`` independent samples, alpha/2 a side; an open end gives the other all of it."""
    low, high = lower_rank(m, q, alpha / 2), upper_rank(m, q, alpha / 2)
    if low is None and high is not None:
        high = upper_rank(m, q, alpha)
    elif high is None and low is not None:
        low = lower_rank(m, q, alpha)
    return low, high


def whole_ranks(n: int, n_eff: float, q: float, alpha: float) -> tuple[float | None, float | None]:
    """The ranks at ``n_eff`` effective samples mapped to the same levels of the whole sample of ``n``."""
    m = math.floor(n_eff + 1e-9)
    low, high = ranks(m, q, alpha)
    return (None if low is None else low * n / m), (None if high is None else high * n / m)


def count_nan(values: np.ndarray) -> int:
    return sum(int(np.count_nonzero(np.isnan(values[i : i + CHUNK]))) for i in range(0, values.size, CHUNK))


def count_at_most(values: np.ndarray, x: float) -> int:
    return sum(int(np.count_nonzero(values[i : i + CHUNK] <= x)) for i in range(0, values.size, CHUNK))


def values_at_ranks(values: np.ndarray, n: int, ranks: list[float | None]) -> list[float | None]:
    """Values at fractional 1-based ``ranks`` of the ``n`` non-NaN ``values`` (linear between neighbours),
    selecting only the order statistics needed, in place (NaN sorts last)."""
    spots = [None if r is None else min(max(r - 1.0, 0.0), n - 1.0) for r in ranks]  # 0-based positions
    kth = sorted({k for h in spots if h is not None for k in (math.floor(h), min(math.floor(h) + 1, n - 1))})
    if kth:
        values.partition(kth)
    out: list[float | None] = []
    for h in spots:
        if h is None:
            out.append(None)
            continue
        lo = math.floor(h)
        hi = min(lo + 1, n - 1)
        out.append(float(values[lo] + (h - lo) * (values[hi] - values[lo])))
    return out


def cluster_slots(keys: np.ndarray) -> np.ndarray:
    """The slot (0 .. CLUSTER_SLOTS − 1) of each cluster key, by a multiplicative hash. Clusters sharing a slot
    have their totals summed: as independent clusters' totals are centred on 0, the cluster-robust variance
    keeps its expectation and gains ~0.1% noise at most, while memory stays 16 MB however many clusters (a
    table of millions of sessions would cost as much as the values). A few thousand clusters rarely share."""
    if keys.dtype.kind not in "iub":
        keys = pd.factorize(keys)[0]
    mixed = keys.astype(np.int64, copy=False).view(np.uint64) * _FIBONACCI  # wraps modulo 2^64, as meant
    return (mixed >> np.uint64(64 - _SLOT_BITS)).astype(np.intp)


def cluster_chunks(clusters: np.ndarray) -> tuple[int, Iterator[np.ndarray]]:
    """``(slots, codes)``: each cluster's index among ``slots``, CHUNK values at a time. Up to CLUSTER_SLOTS
    values every cluster has its own (exact); above, the hashed slots of :func:`cluster_slots`."""
    if clusters.size <= CLUSTER_SLOTS:
        codes, uniques = pd.factorize(clusters)
        return len(uniques), (codes[i : i + CHUNK] for i in range(0, codes.size, CHUNK))
    return CLUSTER_SLOTS, (cluster_slots(clusters[i : i + CHUNK]) for i in range(0, clusters.size, CHUNK))


def wilson(p: float, n_eff: float, z: float) -> tuple[float, float]:
    z2n = z * z / n_eff
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n_eff + z2n / (4 * n_eff))
    return max(0.0, centre - half), min(1.0, centre + half)
