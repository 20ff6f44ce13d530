"""The confidence interval of each compared figure of a tokenstorm run, from the run's raw records.

What ``reports compare`` judges a change by (:mod:`tokenstorm.reports.compare.significance`). Every interval is of the
figure ``summary.json`` gives, over the same records (the judged ones of its scope: a workload, an A/B
target), in the figure's unit:

- latency percentiles (TTFT, TPOT, E2E, a session, a tool call): distribution-free, of the completed
  requests' values, a session's requests one cluster (the steps of a chat are not independent samples);
  means: the mean's, clustered alike; ITL: of the run's gaps, the gaps of one request a cluster, and of the
  requests that ran at the same moments one too, whichever counts fewer independent samples;
- requests/s and goodput: a count over the measured window; tokens/s: the requests' count with the spread
  of their token counts (a compound count), scaled to tokens; per GPU and cost per 1M tokens from it;
- error rate, answers passing their checks, needle recall, probe answers changed: a share of a count;
- the records' prefix-cache hit rate: cached over prompt tokens, the sessions clusters (a ratio's interval).

A figure without one (the server's timing, the hit rate read from /metrics, steps per session) is judged on
its point estimate. The mean prompt and output lengths get theirs too (``prompt_tokens_mean``,
``output_tokens_mean``): whether two runs' loads differ is judged by them. An A/B target also keeps each
completed request's TTFT, TPOT and E2E keyed by its twin (session and step), so that its change against
another target of the same run is judged on the pairs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd

from tokenstorm.reports.compare.model import ALL, ComparedRun
from tokenstorm.reports.data.columns import selected
from tokenstorm.reports.data.rundir import RunData, load_run
from tokenstorm.reports.judging.agent import sessions
from tokenstorm.reports.judging.intervals import (
    Interval,
    histogram_quantile_interval,
    mean_interval,
    proportion_interval,
    quantile_interval,
    rate_interval,
    run_itl_design_effect,
)
from tokenstorm.reports.judging.slo import judged_mask
from tokenstorm.reports.judging.slo_spec import SloSpec, SloSpecError, load_slo_spec
from tokenstorm.reports.judging.targets import target_mask
from tokenstorm.reports.judging.twins import twin_keys
from tokenstorm.workloads.rundir import ItlHistogram

__all__ = ["NO_RECORDS", "PAIRED_STEMS", "attach_intervals", "ratio_interval", "stat_of_key"]

#: why a column has no intervals
NO_RECORDS = "no raw records"
#: the latencies an A/B target's requests pair on: (figure stem, record column)
PAIRED_STEMS = (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("e2el", "e2e_s"))
#: figure stat prefix -> the statistic (``mean`` or a percentile)
_STATS = {"mean": "mean", "median": "p50", "p95": "p95", "p99": "p99"}
#: per-request latencies of a scope: (figure stem, record column)
_LATENCIES = (*PAIRED_STEMS, ("tool_call", "tool_call_s"), ("ttft_tool", "ttft_tool_s"))
#: shares of a count: (figure key, the scope's figure that counts its samples)
_SHARES = (
    ("error_rate", ""),
    ("quality_pass_rate", "quality_checked"),
    ("needle_pass_rate", "needle_checked"),
    ("consistency_changed_share", "consistency_compared"),
)


def stat_of_key(key: str) -> tuple[str, str] | None:
    """``("p95", "ttft")`` for ``p95_ttft_ms``: the statistic and the latency's stem; None for another figure."""
    if not key.endswith("_ms"):
        return None
    stat, _, stem = key.removesuffix("_ms").partition("_")
    return (_STATS[stat], stem) if stat in _STATS and stem else None


def attach_intervals(columns: list[ComparedRun], confidence: float) -> None:
    """Give each tokenstorm column the intervals of its figures at ``confidence`` (and an A/B target its
    pairs), each run's records read once; another tool's file is marked :data:`NO_RECORDS`."""
    if confidence <= 0:
        return
    by_source: dict[Path, list[ComparedRun]] = {}
    for col in columns:
        if col.is_tokenstorm:
            by_source.setdefault(col.source, []).append(col)
        else:
            col.no_interval = NO_RECORDS
    for source, cols in by_source.items():
        try:
            run = load_run(source)
        except FileNotFoundError:
            run = None
        if run is None or run.requests.empty:
            for col in cols:
                col.no_interval = NO_RECORDS
            continue
        judged = judged_mask(run, _spec(run))
        workloads = run.requests["workload"].astype(str).to_numpy()
        for col in cols:
            lane = target_mask(run, col.target_label) if col.target_label else np.ones(len(run.requests), dtype=bool)
            twins = twin_keys(run, lane) if len(cols) > 1 else None
            ok = judged & lane & _ok(run)
            clusters = _session_keys(run, ok)
            for attr, column in (("prompt_tokens_mean", "prompt_tokens"), ("output_tokens_mean", "output_tokens")):
                values = selected(run.requests, column, ok)
                col.intervals.setdefault(ALL, {})[attr] = mean_interval(values, confidence, clusters)
            for scope, figures in col.figures.items():
                rows = lane if scope == ALL else lane & (workloads == scope)
                col.intervals.setdefault(scope, {}).update(
                    scope_intervals(run, judged & rows, rows, figures, confidence)
                )
                if twins is not None:
                    ok = judged & rows & _ok(run)
                    col.pairs[scope] = {
                        stem: pd.Series(selected(run.requests, c, ok), index=twins[ok[lane]])
                        for stem, c in PAIRED_STEMS
                    }


def _spec(run: RunData) -> SloSpec:
    """The SLO spec the run was judged by (its warm-up decides which records count); the default one else."""
    try:
        return load_slo_spec(text=run.meta.slo_spec_text) if run.meta.slo_spec_text else load_slo_spec()
    except SloSpecError:
        return load_slo_spec()


def _ok(run: RunData) -> np.ndarray:
    return np.asarray(run.requests["ok"].fillna(False).astype(bool).to_numpy())


def _session_keys(run: RunData, rows: np.ndarray) -> np.ndarray | None:
    """Each row's session (an int key; a row of no session its own negative one); None: no row has one."""
    df = run.requests
    if "session_id" not in df:
        return None
    col = df["session_id"]
    codes = col.to_numpy() if col.dtype.kind == "i" else col.astype("category").cat.codes.to_numpy()
    keys: np.ndarray = np.asarray(codes, dtype=np.int64)[rows]
    none = keys < 0
    if none.all():
        return None
    keys[none] = -2 - np.arange(int(none.sum()))
    return keys


def _scaled(iv: Interval, factor: float) -> Interval:
    """``iv`` in another unit (``factor`` > 0: seconds to ms, requests to tokens)."""
    return replace(
        iv, low=None if iv.low is None else iv.low * factor, high=None if iv.high is None else iv.high * factor
    )


def scope_intervals(
    run: RunData, judged: np.ndarray, rows: np.ndarray, figures: dict[str, object], confidence: float
) -> dict[str, Interval]:
    """The intervals of one scope's ``figures`` (``judged``: its judged rows, ``rows``: all of them)."""
    df = run.requests
    ok = judged & _ok(run)
    clusters = _session_keys(run, ok)
    out: dict[str, Interval] = {}
    wanted = {k for k, v in figures.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    for stem, column in _LATENCIES:
        keys = [k for k in wanted if (stat_of_key(k) or ("", ""))[1] == stem]
        if not keys or column not in df:
            continue
        values = selected(df, column, ok)
        for key in keys:
            stat = _STATS[key.split("_")[0]]
            cl = None if clusters is None else clusters.copy()
            iv = (
                mean_interval(values.copy(), confidence, cl)
                if stat == "mean"
                else quantile_interval(values.copy(), float(stat[1:]), confidence, cl)
            )
            out[key] = _scaled(iv, 1000.0)
    itl_keys = [k for k in wanted if (stat_of_key(k) or ("", ""))[1] == "itl"]
    if itl_keys and run.itl is not None:
        hist = run.itl_values(ok)
        deffs: dict[float, float] = {}  # one pass over the gaps per percentile (the mean's: the median's)
        for key in itl_keys:
            if hist.size == 0:
                continue
            stat = _STATS[key.split("_")[0]]
            q = 50.0 if stat == "mean" else float(stat[1:])
            deff = deffs.setdefault(q, run_itl_design_effect(run, ok, hist, q))
            iv = (
                _histogram_mean_interval(hist, confidence, deff)
                if stat == "mean"
                else (histogram_quantile_interval(hist, q, confidence, deff))
            )
            out[key] = _scaled(iv, 1000.0)
    out.update(_rate_intervals(run, ok, figures, confidence))
    out.update(_share_intervals(figures, confidence))
    if {"median_session_ms", "p95_session_ms", "p99_session_ms"} & wanted:
        found = sessions(run, judged, None if rows.all() else rows)
        for key in ("median_session_ms", "p95_session_ms", "p99_session_ms"):
            if key in wanted and found.latency_s.size:
                q = float(_STATS[key.split("_")[0]][1:])
                out[key] = _scaled(quantile_interval(found.latency_s.copy(), q, confidence), 1000.0)
    if "prefix_cache_hit_rate" in wanted and figures.get("prefix_cache_hit_rate_source") == "records":
        cached, prompt = selected(df, "cached_tokens", ok), selected(df, "prompt_tokens", ok)
        reported = ~np.isnan(cached) & ~np.isnan(prompt)
        if reported.any():
            cl = None if clusters is None else clusters[reported]
            out["prefix_cache_hit_rate"] = ratio_interval(cached[reported], prompt[reported], confidence, cl)
    return out


def _histogram_mean_interval(hist: ItlHistogram, confidence: float, deff: float) -> Interval:
    """The mean gap's interval: normal, its spread over the gaps' effective count (``deff``: a request's gaps
    are one cluster)."""
    size, mean, std = int(hist.size), float(hist.mean()), float(hist.std())
    n_eff = size / max(deff, 1.0)
    half = NormalDist().inv_cdf(0.5 + confidence / 2) * std / np.sqrt(max(n_eff, 1.0))
    return Interval(mean - half, mean + half, confidence, size, n_eff)


def _rate_intervals(run: RunData, ok: np.ndarray, figures: dict[str, object], confidence: float) -> dict[str, Interval]:
    """Requests/s and goodput as counts over the window; tokens/s as the requests' count whose tokens per
    request vary (a compound count: its design effect 1 + CV² of the tokens per request); per GPU and the cost
    per 1M tokens from tokens/s."""
    window, completed = _number(figures.get("duration")), _number(figures.get("completed"))
    if not window or completed is None or completed <= 0:
        return {}
    out: dict[str, Interval] = {}
    if _number(figures.get("request_throughput")) is not None:
        out["request_throughput"] = rate_interval(int(completed), window, confidence)
    good = _number(figures.get("request_goodput"))
    if good is not None:
        out["request_goodput"] = rate_interval(round(good * window), window, confidence)
    df = run.requests
    output = selected(df, "output_tokens", ok)
    total = output + np.nan_to_num(selected(df, "prompt_tokens", ok))
    for key, tokens, cost in (
        ("output_throughput", output, "cost_per_1m_output_tokens"),
        ("total_token_throughput", total, "cost_per_1m_total_tokens"),
    ):
        value = _number(figures.get(key))
        tokens = tokens[~np.isnan(tokens)]
        if not value or tokens.size < 2 or not tokens.mean():
            continue
        deff = 1.0 + float(tokens.var() / tokens.mean() ** 2)
        iv = _scaled(rate_interval(int(completed), window, confidence, deff), value / (completed / window))
        out[key] = iv
        per_gpu = _number(figures.get("output_throughput_per_gpu"))
        if key == "output_throughput" and per_gpu:
            out["output_throughput_per_gpu"] = _scaled(iv, per_gpu / value)
        price = _number(figures.get(cost))
        if price:  # cost = price per hour / tokens per hour: the interval's ends swap
            low = None if iv.high is None else price * value / iv.high
            high = None if not iv.low else price * value / iv.low
            out[cost] = replace(iv, low=low, high=high)
    return out


def _share_intervals(figures: dict[str, object], confidence: float) -> dict[str, Interval]:
    """Shares of a count: the error rate (failed of every judged request), answers passing their checks,
    needle recall, probe answers changed under load."""
    out: dict[str, Interval] = {}
    for key, count_key in _SHARES:
        share = _number(figures.get(key))
        if share is None:
            continue
        if key == "error_rate":
            done, failed = _number(figures.get("completed")), _number(figures.get("failed")) or 0.0
            n = None if done is None else done + failed
        else:
            n = _number(figures.get(count_key))
        if n:
            out[key] = proportion_interval(round(share * n), int(n), confidence)
    return out


def ratio_interval(
    numerator: np.ndarray, denominator: np.ndarray, confidence: float, clusters: np.ndarray | None = None
) -> Interval:
    """The interval of ``sum(numerator) / sum(denominator)`` (a share of tokens), normal by linearisation over
    the clusters' totals (each row its own cluster when None): the survey ratio estimator's."""
    x, y = np.asarray(denominator, dtype=float), np.asarray(numerator, dtype=float)
    if clusters is not None:
        _, inv = np.unique(clusters, return_inverse=True)
        x, y = np.bincount(inv, weights=x), np.bincount(inv, weights=y)
    total = float(x.sum())
    m = len(x)
    if not total or m < 2:
        return Interval(None, None, confidence, len(numerator), float(m))
    ratio = float(y.sum()) / total
    residual = y - ratio * x
    se = float(np.sqrt(m / (m - 1) * float(residual @ residual))) / total
    half = NormalDist().inv_cdf(0.5 + confidence / 2) * se
    return Interval(max(0.0, ratio - half), min(1.0, ratio + half), confidence, len(numerator), float(m))


def _number(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None
