"""An SLO judged by its interval: held, failed or inconclusive, and how many requests an answer needs.

A figure measured on a sample of requests is an estimate: a p99 of 40 requests is their second-largest value.
Each judged figure gets an interval at the run's ``--confidence`` (95% by default; the methods are in
:mod:`tokenstorm.reports.judging.intervals`), and the SLO is

* **held** when the whole interval meets the target (``p99 ≤ 500 ms`` and the interval's top ≤ 500 ms),
* **failed** when none of it does (its bottom > 500 ms),
* **inconclusive** otherwise — with how many judged requests in all a conclusive answer would need at the
  spread observed (``needed``).

Correlated samples are not counted as independent: the turns of one session (``session_id``) are one cluster,
the gaps of one request another (ITL). ``--confidence 0`` judges the point estimates, as before intervals.
Figures without an interval here — a GPU's memory (one maximum), answer consistency (a handful of probes), a
``max`` — are judged on their value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenstorm.reports.data.columns import chunks, dropped_nan, selected
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging import intervals as iv
from tokenstorm.reports.judging.intervals import DEFAULT_CONFIDENCE, Interval
from tokenstorm.workloads.rundir import ItlHistogram

__all__ = [
    "DEFAULT_CONFIDENCE",
    "FAILED",
    "HELD",
    "INCONCLUSIVE",
    "Evidence",
    "clusters_of",
    "error_evidence",
    "headline_intervals",
    "latency_evidence",
    "outcome",
    "rate_evidence",
    "run_confidence",
]

HELD, FAILED, INCONCLUSIVE = "held", "failed", "inconclusive"


@dataclass(frozen=True)
class Evidence:
    """A figure's interval (same unit as the figure) and, when it straddles the target, the samples needed."""

    interval: Interval | None
    needed: int | None = None


def run_confidence(run: RunData, override: float | None = None) -> float:
    """The confidence ``run`` is judged at: ``override``, else its ``--confidence`` (0: point estimates)."""
    if override is not None:
        return float(override)
    return float(run.meta.option("confidence", DEFAULT_CONFIDENCE))


def outcome(op: str, threshold: float, measured: float | None, interval: Interval | None) -> str:
    """``held`` / ``failed`` / ``inconclusive`` of ``measured op threshold`` judged by ``interval`` (None:
    by the point estimate). An end the sample cannot bound (None) is on both sides of any target."""
    if measured is None:
        return FAILED
    if interval is None:
        return HELD if (measured <= threshold if op == "<=" else measured >= threshold) else FAILED
    low, high = interval.low, interval.high
    if op == "<=":
        if high is not None and high <= threshold:
            return HELD
        return FAILED if low is not None and low > threshold else INCONCLUSIVE
    if low is not None and low >= threshold:
        return HELD
    return FAILED if high is not None and high < threshold else INCONCLUSIVE


def clusters_of(run: RunData, mask: np.ndarray) -> np.ndarray | None:
    """Per selected record, its cluster: its session (the turns of one conversation or agent task are not
    independent), else itself. None when every record is its own (no sessions)."""
    df = run.requests
    if "session_id" not in df.columns:
        return None
    column = np.asarray(df["session_id"].to_numpy(dtype=np.int64, na_value=-1))  # a view of the keys
    if not any(np.any(column[p][mask[p]] >= 0) for p in chunks(len(column))):
        return None  # no sessions: no copy of the keys
    keys: np.ndarray = column[mask]  # a copy
    alone = keys < 0
    keys[alone] = -2 - np.arange(int(alone.sum()), dtype=np.int64)  # a record without a session stands alone
    return keys


def latency_evidence(
    values_s: np.ndarray | ItlHistogram,
    stat: str,
    threshold_ms: float,
    op: str,
    confidence: float,
    clusters: np.ndarray | None = None,
    itl_deff: float = 1.0,
) -> Evidence:
    """The interval (ms) of ``stat`` (``p50``...``p99.9``, ``mean``) of latencies ``values_s`` (seconds, NaN
    dropped, any order; an :class:`ItlHistogram` of gaps whose requests' design effect is ``itl_deff``)."""
    if not confidence or stat == "max":
        return Evidence(None)
    if isinstance(values_s, ItlHistogram):
        if stat == "mean" or values_s.size == 0:
            return Evidence(None)
        q = float(stat[1:])
        interval = iv.histogram_quantile_interval(values_s, q, confidence, deff=itl_deff)
        ms = _scaled(interval, 1000)
        return Evidence(
            ms,
            None if _conclusive(op, threshold_ms, ms) else _needed_itl(values_s, q, threshold_ms, confidence, itl_deff),
        )
    values = dropped_nan(values_s)  # no copy of millions of rows when there is no NaN
    if values.size == 0:
        return Evidence(None)
    if stat == "mean":
        return Evidence(_scaled(iv.mean_interval(values, confidence, clusters), 1000))
    q = float(stat[1:])
    ms = _scaled(iv.quantile_interval(values, q, confidence, clusters), 1000)
    if _conclusive(op, threshold_ms, ms):
        return Evidence(ms)
    deff = ms.n / ms.n_eff if ms.n_eff else 1.0
    n = int(values.size)  # before needed_samples_quantile reorders them
    return Evidence(ms, _more(iv.needed_samples_quantile(values, q, threshold_ms / 1000, confidence, deff), n))


def error_evidence(
    failed: np.ndarray, threshold: float, op: str, confidence: float, clusters: np.ndarray | None = None
) -> Evidence:
    """The interval of the share of ``failed`` (a bool per judged request). A bound of 0 is judged on the count:
    no interval of a share ever reaches down to 0, so ``error_rate <= 0`` would be inconclusive for ever."""
    if not confidence or not failed.size or (threshold <= 0 and op == "<="):
        return Evidence(None)
    deff = iv.share_design_effect(failed, clusters)
    k, n = int(failed.sum()), int(failed.size)
    interval = iv.proportion_interval(k, n, confidence, deff)
    if _conclusive(op, threshold, interval):
        return Evidence(interval)
    return Evidence(interval, _more(iv.needed_samples_proportion(k, n, threshold, confidence, deff), n))


def rate_evidence(
    count: float, events: int, window_s: float, confidence: float, per_event: np.ndarray | None = None
) -> Evidence:
    """The interval of ``count / window_s``, a rate carried by ``events`` requests (requests/s: ``count`` is
    ``events``; tokens/s: the tokens of ``events`` requests, ``per_event`` each: their spread widens it by the
    compound-Poisson design effect 1 + CV²)."""
    if not confidence or events <= 0 or window_s <= 0:
        return Evidence(None)
    deff = 1.0
    if per_event is not None and per_event.size > 1 and float(per_event.mean()) > 0:
        deff = 1.0 + float(per_event.var() / per_event.mean() ** 2)
    per_request = count / events
    return Evidence(_scaled(iv.rate_interval(events, window_s, confidence, deff), per_request))


def _conclusive(op: str, threshold: float, interval: Interval) -> bool:
    return outcome(op, threshold, 0.0, interval) != INCONCLUSIVE


def _scaled(interval: Interval, factor: float) -> Interval:
    def times(x: float | None) -> float | None:
        return None if x is None else x * factor

    return Interval(times(interval.low), times(interval.high), interval.confidence, interval.n, interval.n_eff)


def _needed_itl(hist: ItlHistogram, q: float, threshold_ms: float, confidence: float, deff: float) -> int | None:
    """Gaps a conclusive ITL answer needs: ``p{q} ≤ T`` holds exactly when the share of gaps above T is at most
    ``1 − q``, so the share's interval answers it."""
    above = hist.count_above(threshold_ms / 1000)
    return _more(iv.needed_samples_proportion(above, hist.size, 1 - q / 100, confidence, deff), hist.size)


def _more(needed: int | None, has: int) -> int | None:
    """An answer needs more than the samples it has (at the edge the search can land at or below them)."""
    return None if needed is None else max(needed, has + 1)


#: the headline figures given an interval in summary.json (``median_ttft_ms_ci``: [low, high], ms)
_HEADLINE = (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("e2el", "e2e_s"), ("itl", "itl"))


def headline_itl_design_effects(run: RunData, masks: list[np.ndarray], confidence: float) -> list[dict[float, float]]:
    """The design effects :func:`headline_intervals` gives the ITL's median and p99 of each scope of ``masks`` (its
    judged records): ``{50.0: deff, 99.0: deff}`` a scope, every scope's in one pass over the gaps; none at
    ``confidence`` 0."""
    if not confidence:
        return [{} for _ in masks]
    ok_all = run.requests["ok"].fillna(False).astype(bool).to_numpy()
    scopes = [(ok, run.itl_values(ok)) for ok in (mask & ok_all for mask in masks)]
    return [dict(zip(_QS, deffs, strict=True)) for deffs in iv.scopes_itl_design_effects(run, scopes, list(_QS))]


_QS = (50.0, 99.0)


def headline_intervals(
    run: RunData, mask: np.ndarray, window_s: float, confidence: float, itl_deffs: dict[float, float] | None = None
) -> dict[str, Any]:
    """summary.json's intervals of a scope's headline figures (``mask``: its judged records): the median and
    p99 of TTFT, TPOT, E2E and ITL (``median_ttft_ms_ci`` = [low, high] in ms, None for an end the sample
    cannot bound), ``request_throughput_ci`` and ``error_rate_ci``; empty at ``confidence`` 0. ``itl_deffs``:
    the ITL's design effects from :func:`headline_itl_design_effects` (None: computed here)."""
    if not confidence or not mask.any():
        return {}
    df = run.requests
    ok = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    out: dict[str, Any] = {}
    for name, column in _HEADLINE:
        for stat, q in zip(("median", "p99"), _QS, strict=True):
            if column == "itl":
                gaps = run.itl_values(ok)
                if not gaps.size:
                    continue
                if not itl_deffs:  # both percentiles' in one pass over the gaps
                    itl_deffs = dict(zip(_QS, iv.run_itl_design_effects(run, ok, gaps, list(_QS)), strict=True))
                interval = iv.histogram_quantile_interval(gaps, q, confidence, deff=itl_deffs[q])
            else:
                values = selected(df, column, ok)
                clusters = clusters_of(run, ok)
                if clusters is not None:
                    clusters = clusters[~np.isnan(values)]
                values = dropped_nan(values)
                if not values.size:
                    continue
                interval = iv.quantile_interval(values, q, confidence, clusters)
            out[f"{stat}_{name}_ms_ci"] = _pair(_scaled(interval, 1000))
    if window_s > 0 and ok.any():
        out["request_throughput_ci"] = _pair(iv.rate_interval(int(ok.sum()), window_s, confidence))
    failed = ~ok[mask]
    out["error_rate_ci"] = _pair(
        iv.proportion_interval(
            int(failed.sum()), int(failed.size), confidence, iv.share_design_effect(failed, clusters_of(run, mask))
        )
    )
    return out


def _pair(interval: Interval) -> list[float | None]:
    return [interval.low, interval.high]
