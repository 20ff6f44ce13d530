"""Confidence intervals for the figures a run is judged on, and how many samples a clear answer needs.

A figure measured on the requests of one run is an estimate of what the deployment does: run the same test
again and the p99 comes out different. An interval at 95% confidence is a range built so that, over many runs,
it holds the true figure 95 times in 100. The methods, in plain words:

* **Percentiles** (:func:`quantile_interval`): no assumption about the shape of the latency distribution.
  Of n independent samples, the number at or below the true p99 is binomial (n, 0.99), so the chance that the
  k-th smallest sample lies above the true p99 is an exact binomial probability. The interval runs from the
  sample that is above the true value with a chance of 2.5% to the one below it with a chance of 2.5%,
  interpolated between neighbouring samples (linearly in that chance), so the interval holds the truth about
  95% of the time rather than jumping to 98%. When the sample is too small to bound one end — a p99 of 200
  requests: with a chance of 0.99^200 = 13% no request at all is above the true p99 — that end is left open
  (``None``) and the other end takes the whole 5%. Only the few order statistics needed are selected
  (``numpy.partition``, in place), so 20 million latencies need no second copy.
* **Correlated samples** (the turns of one chat session, the token gaps of one request) are not independent:
  ten gaps of one slow request do not make ten independent slow observations. A *design effect* measures it:
  the variance of the share of samples below the estimate when whole clusters are resampled (Woodruff's
  cluster-robust variance) over the variance if every sample were independent (at least 1). The interval is
  then built as for ``n / design effect`` independent samples (``n_eff``) and read off the whole sample at the
  same levels.
* **Error shares** (:func:`proportion_interval`): Wilson's score interval, with n replaced by ``n_eff``.
* **Rates** (requests/s, tokens/s; :func:`rate_interval`): the count of events in the window as Poisson, with
  the mid-p exact interval (near 95%; the classic exact one holds the truth 97–98% of the time at small counts).
* **Means** (:func:`mean_interval`): Student's t, with the clusters' variance when clusters are given.
* **Samples needed** (:func:`needed_samples_quantile`, :func:`needed_samples_proportion`): at the spread
  observed (the sample's own share of values below the target), the smallest total number of samples whose
  interval would lie wholly on one side of the target; ``None`` when the estimate sits on the target (no
  sample size settles it) or more than 10^9 would be needed.
* **Changes** between two runs (:func:`change_interval_pct`, :func:`paired_change_interval_pct`): the interval
  of ``(new / base − 1) × 100``. Independent runs combine the two intervals' half-widths on the log scale;
  paired samples (the same prompt sent to both targets) are resampled pair by pair (bootstrap).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from tokenstorm.reports.data.columns import dropped_nan, selected
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.distributions import chi2_ppf, gammainc, gammaincc, norm_ppf, root, t_ppf
from tokenstorm.reports.judging.interval_changes import (
    change_interval_pct,
    needed_samples_proportion,
    needed_samples_quantile,
    paired_change_interval_pct,
)
from tokenstorm.reports.judging.interval_math import (
    CHUNK,
    DEFAULT_CONFIDENCE,
    Interval,
    alpha_of,
    cluster_chunks,
    count_nan,
    level_of,
    values_at_ranks,
    whole_ranks,
    wilson,
)
from tokenstorm.workloads.rundir import ItlHistogram, ItlSource

__all__ = [
    "DEFAULT_CONFIDENCE",
    "Interval",
    "change_interval_pct",
    "histogram_quantile_interval",
    "itl_design_effect",
    "mean_interval",
    "needed_samples_proportion",
    "needed_samples_quantile",
    "paired_change_interval_pct",
    "proportion_interval",
    "quantile_interval",
    "rate_interval",
    "run_itl_design_effect",
    "run_itl_design_effects",
    "scopes_itl_design_effects",
    "share_design_effect",
]

_ESTIMATE_SAMPLE = 1 << 20  # values a clustered sample's point estimate is taken from (every k-th above this)


def _design_effect(below: np.ndarray, counts: np.ndarray) -> float:
    """Woodruff: the cluster-robust variance of the share below (clusters' ``below`` of ``counts``) over the
    binomial one, at least 1 (1 when it cannot be told: one cluster, or every sample on one side)."""
    total = float(counts.sum())
    used = counts > 0
    g = int(np.count_nonzero(used))
    p = float(below.sum()) / total if total else 0.0
    if g < 2 or not 0 < p < 1:
        return 1.0
    resid = below[used] - p * counts[used]
    var_cluster = g / (g - 1) * float(np.dot(resid, resid)) / total**2
    return max(1.0, var_cluster / (p * (1 - p) / total))


def _cluster_design_effect(values: np.ndarray, q: float, clusters: np.ndarray) -> float:
    """The design effect of ``values`` grouped by ``clusters`` at the q-quantile (values keep their order)."""
    if clusters.shape != values.shape:
        raise ValueError(f"clusters ({clusters.shape}) must match the values ({values.shape}) one for one")
    step = max(1, -(-values.size // _ESTIMATE_SAMPLE))
    sub = values[::step].copy()
    sub = sub[~np.isnan(sub)]
    if sub.size == 0:
        return 1.0
    estimate = float(np.quantile(sub, q))  # from every step-th value when there are millions: the same point
    slots, codes = cluster_chunks(clusters)
    below, counts = np.zeros(slots), np.zeros(slots)
    for i, slot in zip(range(0, values.size, CHUNK), codes, strict=True):
        part = values[i : i + CHUNK]
        counts += np.bincount(slot[~np.isnan(part)], minlength=slots)
        below += np.bincount(slot[part <= estimate], minlength=slots)
    return _design_effect(below, counts)


def share_design_effect(flags: np.ndarray, clusters: np.ndarray | None) -> float:
    """The design effect of a share (``flags``: a bool per sample, e.g. failed) whose samples are grouped by
    ``clusters`` (a key per sample; None: independent, 1.0), for :func:`proportion_interval`'s ``deff``."""
    if clusters is None or flags.size < 2:
        return 1.0
    if clusters.shape != flags.shape:
        raise ValueError(f"clusters ({clusters.shape}) must match the flags ({flags.shape}) one for one")
    slots, codes = cluster_chunks(np.asarray(clusters))
    below, counts = np.zeros(slots), np.zeros(slots)
    for i, slot in zip(range(0, flags.size, CHUNK), codes, strict=True):
        counts += np.bincount(slot, minlength=slots)
        below += np.bincount(slot, weights=flags[i : i + CHUNK].astype(float), minlength=slots)
    return _design_effect(below, counts)


def quantile_interval(
    values: np.ndarray, q_pct: float, confidence: float, clusters: np.ndarray | None = None
) -> Interval:
    """The distribution-free interval of percentile ``q_pct`` of ``values`` (1-D float, any order, NaN
    ignored; **reordered in place**: pass a copy to keep the order). ``clusters``: a key per value; values
    sharing a key are one cluster (a session), not independent. See the module doc for the method."""
    alpha, q = alpha_of(confidence), level_of(q_pct)
    if values.ndim != 1:
        raise ValueError("quantile_interval takes a 1-D array of values")
    if values.dtype.kind != "f":
        values = values.astype(np.float64)
    n = values.size - count_nan(values)
    if n == 0:
        return Interval(None, None, confidence, 0, 0.0)
    deff = 1.0 if clusters is None else _cluster_design_effect(values, q, np.asarray(clusters))
    n_eff = n / deff
    low, high = values_at_ranks(values, n, list(whole_ranks(n, n_eff, q, alpha)))
    return Interval(low, high, confidence, n, n_eff)


def histogram_quantile_interval(hist: ItlHistogram, q_pct: float, confidence: float, deff: float = 1.0) -> Interval:
    """The interval of percentile ``q_pct`` (seconds) of the gaps counted in ``hist``, as
    :func:`quantile_interval` for ``hist.size / deff`` effective samples (``deff``: :func:`itl_design_effect`)."""
    alpha, q = alpha_of(confidence), level_of(q_pct)
    n = int(hist.size)
    if n == 0:
        return Interval(None, None, confidence, 0, 0.0)
    n_eff = n / max(1.0, deff)
    ranks = whole_ranks(n, n_eff, q, alpha)
    levels = [0.0 if r is None or n == 1 else 100.0 * (r - 1) / (n - 1) for r in ranks]
    low, high = (float(v) for v in hist.percentiles(levels))
    return Interval(None if ranks[0] is None else low, None if ranks[1] is None else high, confidence, n, n_eff)


def itl_design_effect(run_itl_column: ItlSource | None, mask: np.ndarray, q_pct: float) -> float:
    """The design effect of the ITL gaps of the requests selected by ``mask`` at their percentile ``q_pct``:
    the gaps of one request are one cluster. Streams the gaps twice (the histogram, then per-request counts).
    1.0 without gaps (``None``: a run that recorded none)."""
    if run_itl_column is None:
        return 1.0
    hist = run_itl_column.histogram(mask)
    if hist.size == 0:
        return 1.0
    clusters = _ClusterShares()
    for _, counts, below in run_itl_column.gap_count_batches(mask, float(hist.percentiles([q_pct])[0])):
        clusters.add(below, counts)
    return clusters.design_effect()


def proportion_interval(k: int, n: int, confidence: float, deff: float = 1.0) -> Interval:
    """Wilson's score interval of the share ``k / n`` (an error rate) with ``n / deff`` effective samples."""
    alpha = alpha_of(confidence)
    if n <= 0:
        return Interval(0.0, 1.0, confidence, 0, 0.0)
    n_eff = n / max(1.0, deff)
    low, high = wilson(k / n, n_eff, norm_ppf(1 - alpha / 2))
    return Interval(low, high, confidence, n, n_eff)


def rate_interval(count: int, window_s: float, confidence: float, deff: float = 1.0) -> Interval:
    """The interval of ``count / window_s`` events per second: the count as Poisson (mid-p exact interval),
    its variance ``deff`` times the Poisson one (clustered or bursty events)."""
    alpha = alpha_of(confidence)
    if window_s <= 0:
        raise ValueError(f"a rate needs a window longer than 0 s, not {window_s}")
    deff = max(1.0, deff)
    x = count / deff
    low, high = _poisson_mid_p(x, alpha)
    return Interval(low * deff / window_s, high * deff / window_s, confidence, int(count), x)


def _poisson_mid_p(x: float, alpha: float) -> tuple[float, float]:
    """Mid-p bounds of a Poisson mean from observed (possibly fractional, effective) count ``x``."""
    a = alpha / 2
    if x <= 0:
        return 0.0, -math.log(alpha)  # ½·P(X = 0) = α/2

    def pmf(lam: float) -> float:
        return math.exp(x * math.log(lam) - lam - math.lgamma(x + 1))

    def above(lam: float) -> float:  # P(X > x) + ½P(X = x), rising with lam
        return float(gammainc(x, lam)) - 0.5 * pmf(lam) - a

    def below(lam: float) -> float:  # P(X < x) + ½P(X = x), falling with lam
        return float(gammaincc(x + 1, lam)) - 0.5 * pmf(lam) - a

    exact_low = max(chi2_ppf(a, 2 * x) / 2, 1e-300)  # Garwood's bounds contain the mid-p ones
    exact_high = chi2_ppf(1 - a, 2 * x + 2) / 2
    low = root(above, exact_low, x + 1) if above(exact_low) < 0 < above(x + 1) else exact_low
    high = root(below, x, exact_high) if below(x) > 0 > below(exact_high) else exact_high
    return float(low), float(high)


def mean_interval(values: np.ndarray, confidence: float, clusters: np.ndarray | None = None) -> Interval:
    """Student's t interval of the mean of ``values`` (NaN ignored); with ``clusters``, the standard error is the
    cluster-robust one (at least the independent one) and the degrees of freedom clusters − 1."""
    alpha = alpha_of(confidence)
    values = np.asarray(values, dtype=np.float64)
    ok_parts = [(i, ~np.isnan(values[i : i + CHUNK])) for i in range(0, values.size, CHUNK)]
    n = sum(int(np.count_nonzero(ok)) for _, ok in ok_parts)
    if n < 2:
        return Interval(None, None, confidence, n, float(n))
    total = sum(float(values[i : i + CHUNK][ok].sum()) for i, ok in ok_parts)
    mean = total / n
    ss = sum(float(np.sum((values[i : i + CHUNK][ok] - mean) ** 2)) for i, ok in ok_parts)
    var_iid = ss / (n - 1) / n
    deff, df = 1.0, n - 1
    if clusters is not None:
        clusters = np.asarray(clusters)
        if clusters.shape != values.shape:
            raise ValueError(f"clusters ({clusters.shape}) must match the values ({values.shape}) one for one")
        slots, codes = cluster_chunks(clusters)
        sums, counts = np.zeros(slots), np.zeros(slots)
        for (i, ok), slot in zip(ok_parts, codes, strict=True):
            sums += np.bincount(slot[ok], weights=values[i : i + CHUNK][ok], minlength=slots)
            counts += np.bincount(slot[ok], minlength=slots)
        g = int(np.count_nonzero(counts))
        if g < 2:
            return Interval(None, None, confidence, n, 1.0)
        resid = sums - mean * counts
        var_cluster = g / (g - 1) * float(np.dot(resid, resid)) / n**2
        deff, df = (max(1.0, var_cluster / var_iid) if var_iid > 0 else 1.0), g - 1
    half = t_ppf(1 - alpha / 2, df) * math.sqrt(var_iid * deff)
    return Interval(mean - half, mean + half, confidence, n, n / deff)


def run_itl_design_effect(run: RunData, ok: np.ndarray, hist: ItlHistogram, q_pct: float) -> float:
    """The design effect of the gaps of requests ``ok`` at their percentile ``q_pct``: the larger of two, the gaps
    of one request a cluster (:func:`itl_design_effect`'s), and the requests that ran at
    the same moments one — grouped by when they started, in windows of a typical request's length (their median
    E2E, at least 1 s). Gaps read at one moment share the machine's state (a stall of the server or of the client
    delays every stream at once), so a tail made in a few busy seconds is not a tail of thousands of independent
    gaps. One pass over the gaps."""
    return run_itl_design_effects(run, ok, hist, [q_pct])[0]


def run_itl_design_effects(run: RunData, ok: np.ndarray, hist: ItlHistogram, qs_pct: list[float]) -> list[float]:
    """:func:`run_itl_design_effect` at each percentile of ``qs_pct``, all in one pass over the gaps."""
    return scopes_itl_design_effects(run, [(ok, hist)], qs_pct)[0]


def scopes_itl_design_effects(
    run: RunData, scopes: list[tuple[np.ndarray, ItlHistogram]], qs_pct: list[float]
) -> list[list[float]]:
    """:func:`run_itl_design_effect` of each scope (its requests ``ok`` and their gaps' histogram) at each percentile
    of ``qs_pct``: ``out[scope][k]``, every scope and percentile in one pass over the gaps."""
    live = [(i, _ScopeShares(run, ok, hist, qs_pct)) for i, (ok, hist) in enumerate(scopes) if hist.size]
    out = [[1.0] * len(qs_pct) for _ in scopes]
    if run.itl is None or not live:
        return out
    union = np.zeros(len(run.requests), dtype=bool)
    for i, _ in live:
        union |= scopes[i][0]
    thresholds = [t for _, shares in live for t in shares.thresholds]
    for rows, counts, belows in run.itl.gap_count_batches_at(union, thresholds):
        for k, (i, shares) in enumerate(live):
            sel = scopes[i][0][rows]
            below = belows[k * len(qs_pct) : (k + 1) * len(qs_pct)]
            shares.add(rows[sel], counts[sel], [b[sel] for b in below])
    for i, shares in live:
        out[i] = shares.design_effects()
    return out


class _ScopeShares:
    """One scope's :func:`run_itl_design_effect` at several percentiles, its requests met a batch at a time."""

    def __init__(self, run: RunData, ok: np.ndarray, hist: ItlHistogram, qs_pct: list[float]) -> None:
        e2e = dropped_nan(selected(run.requests, "e2e_s", ok))
        # the median in place (numpy.nanmedian's, without its copy); none: the gaps of one request a cluster only
        self.window = max(1.0, float(np.median(e2e, overwrite_input=True))) if e2e.size else None
        del e2e
        self.start = run.requests["start_epoch_s"].to_numpy(dtype=float)  # a view
        firsts = [
            np.min(self.start[i : i + CHUNK], where=ok[i : i + CHUNK], initial=np.inf) for i in range(0, ok.size, CHUNK)
        ]
        self.t0 = float(min(firsts, default=np.inf))
        self.thresholds = [float(v) for v in hist.percentiles(qs_pct)]
        self.per_request = [_ClusterShares() for _ in qs_pct]
        self.grouped_counts, self.grouped_below = np.zeros(0), np.zeros((len(qs_pct), 0))

    def add(self, rows: np.ndarray, counts: np.ndarray, belows: list[np.ndarray]) -> None:
        """The scope's requests at table positions ``rows``: their gap counts and, per percentile, gaps below it."""
        for shares, below in zip(self.per_request, belows, strict=True):
            shares.add(below, counts)
        if self.window is None or not rows.size:
            return
        moment = ((self.start[rows] - self.t0) // self.window).astype(np.int64)
        size = max(self.grouped_counts.size, int(moment.max()) + 1)
        self.grouped_counts = np.pad(self.grouped_counts, (0, size - self.grouped_counts.size))
        self.grouped_below = np.pad(self.grouped_below, ((0, 0), (0, size - self.grouped_below.shape[1])))
        self.grouped_counts += np.bincount(moment, weights=counts.astype(float), minlength=size)
        for k, below in enumerate(belows):
            self.grouped_below[k] += np.bincount(moment, weights=below.astype(float), minlength=size)

    def design_effects(self) -> list[float]:
        """The larger of the two clusterings' design effects, per percentile."""
        if self.window is None:
            return [shares.design_effect() for shares in self.per_request]
        return [
            max(shares.design_effect(), _design_effect(self.grouped_below[k], self.grouped_counts))
            for k, shares in enumerate(self.per_request)
        ]


class _ClusterShares:
    """:func:`_design_effect` of clusters met a batch at a time: exact integer sums, no array per cluster."""

    def __init__(self) -> None:
        self.g = self.below = self.total = self.below_sq = self.cross = self.total_sq = 0

    def add(self, below: np.ndarray, counts: np.ndarray) -> None:
        """Clusters with ``counts`` samples each, ``below`` of them below the estimate (int64 arrays)."""
        b, c = below.astype(np.int64), counts.astype(np.int64)
        self.g += int(np.count_nonzero(c))
        self.below += int(b.sum())
        self.total += int(c.sum())
        # Python ints: the squares of a batch fit int64 (a cluster below 3e9 samples), their sum over a run need not
        self.below_sq += int(np.dot(b, b))
        self.cross += int(np.dot(b, c))
        self.total_sq += int(np.dot(c, c))

    def design_effect(self) -> float:
        """Woodruff's, as :func:`_design_effect`: sum((b - p c)^2) expanded, in exact rationals."""
        g, total = self.g, self.total
        if g < 2 or not 0 < self.below < total:
            return 1.0
        p = Fraction(self.below, total)
        resid_sq = self.below_sq - 2 * p * self.cross + p * p * self.total_sq
        var_cluster = Fraction(g, g - 1) * resid_sq / total**2
        return max(1.0, float(var_cluster / (p * (1 - p) / total)))
