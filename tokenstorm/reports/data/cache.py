"""Prefix-cache accounting: the hit rate from the records and from vLLM's ``/metrics``, per run and over time.

- **From the records** — ``sum(cached_tokens) / sum(prompt_tokens)`` over the completed judged requests
  whose response reported ``usage.prompt_tokens_details.cached_tokens`` (vLLM with
  ``--enable-prompt-tokens-details``; the emulator always): the share of the prompt tokens this load test
  sent that the server did not have to prefill. Records without the field are left out of both sums.
- **From /metrics** — the increase of ``vllm:prefix_cache_hits_total`` over the increase of
  ``vllm:prefix_cache_queries_total`` (both in tokens) between the run's first and last ``server.jsonl``
  samples of a target, warm-up included; a counter that went down (the server restarted) counts from 0 again,
  as Prometheus' ``increase()`` does. It counts every request the server scheduled, this run's or not, and
  a request preempted and scheduled again is queried again.
- **Over time** — the same two ratios per time bin: the records by request start, the counters' increase
  between consecutive samples by the later sample's time.

``summary.json``'s ``prefix_cache_hit_rate`` is the records' rate when any record reports cached tokens,
else the /metrics rate (``prefix_cache_hit_rate_source`` says which; both are there).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tokenstorm.reports.data.columns import chunks
from tokenstorm.reports.data.rundir import RunData

__all__ = ["chosen_rate", "counter_increase", "hit_rate_bins", "records_cache", "server_cache", "server_cache_bins"]


def records_cache(run: RunData, ok: np.ndarray) -> dict[str, Any]:
    """The records' prefix-cache figures of the completed judged rows ``ok``."""
    df = run.requests
    if df.empty or "cached_tokens" not in df:
        return _records_block(0, 0.0, 0.0)
    n, cached_sum, prompt_sum = 0, 0.0, 0.0
    for cached, prompt in _reported_slices(df, ok):  # whole numbers: the sum is exact in any order
        n += cached.size
        cached_sum += float(cached.sum())
        prompt_sum += float(prompt.sum())
    return _records_block(n, cached_sum, prompt_sum)


def _reported_slices(df: pd.DataFrame, rows: np.ndarray, *extra: str) -> Any:
    """Per slice of a million rows: cached and prompt tokens (float64), then ``extra`` columns, of the ``rows``
    whose response reported both — a slice's temporaries, never the whole run's."""
    names = ("cached_tokens", "prompt_tokens", *extra)
    columns = [df[name].to_numpy() for name in names]  # views
    for p in chunks(len(df)):
        picked = [np.asarray(c[p][rows[p]], dtype=np.float64) for c in columns]
        reported = ~np.isnan(picked[0]) & ~np.isnan(picked[1])
        if reported.any():
            yield [v[reported] for v in picked]


def _records_block(n: int, cached: float, prompt: float) -> dict[str, Any]:
    return {
        "cache_reporting_requests": n,
        "cached_tokens": int(cached),
        "cached_prompt_tokens": int(prompt),
        "prefix_cache_hit_rate_records": cached / prompt if prompt > 0 else None,
    }


def counter_increase(values: np.ndarray) -> float | None:
    """How much a cumulative counter grew over ``values`` (samples in time order, NaN for missing):
    a drop is a restart, after which the counter counts from 0 (Prometheus' ``increase()``, unextrapolated)."""
    v = values[~np.isnan(values)]
    if v.size < 2:
        return None
    d = np.diff(v)
    return float(np.where(d >= 0, d, v[1:]).sum())


def _server_parts(run: RunData, target: str | None) -> list[pd.DataFrame]:
    """The server samples per target (``target``: only that one), in time order."""
    server = run.server
    if server.empty or "epoch_s" not in server:
        return []
    if "target" in server and target is not None:
        server = server[server["target"].fillna("") == target]
    if "target" in server and target is None and server["target"].fillna("").nunique() > 1:
        return [g.sort_values("epoch_s") for _, g in server.groupby(server["target"].fillna(""))]
    return [server.sort_values("epoch_s")] if len(server) else []


def _column(part: pd.DataFrame, col: str) -> np.ndarray:
    if col not in part:
        return np.full(len(part), np.nan)
    return np.asarray(pd.to_numeric(part[col], errors="coerce"), dtype=float)


def server_cache(run: RunData, target: str | None = None) -> dict[str, Any]:
    """The /metrics figures over the run: prefix-cache hits and queries (tokens), their ratio, preemptions,
    KV-cache usage (max and mean of the samples; several targets: summed counters, the fullest cache)."""
    hits = queries = preemptions = None
    kv: list[np.ndarray] = []
    for part in _server_parts(run, target):
        h, q, p = (
            counter_increase(_column(part, c)) for c in ("prefix_cache_hits", "prefix_cache_queries", "preemptions")
        )
        hits = h if hits is None else hits + (h or 0.0)
        queries = q if queries is None else queries + (q or 0.0)
        preemptions = p if preemptions is None else preemptions + (p or 0.0)
        usage = _column(part, "kv_cache_usage")
        kv.append(usage[~np.isnan(usage)])
    usage = np.concatenate(kv) if kv else np.empty(0)
    return {
        "prefix_cache_hits": hits,
        "prefix_cache_queries": queries,
        "prefix_cache_hit_rate_server": hits / queries if hits is not None and queries else None,
        "preemptions": preemptions,
        "max_kv_cache_usage": float(usage.max()) if usage.size else None,
        "mean_kv_cache_usage": float(usage.mean()) if usage.size else None,
    }


def chosen_rate(block: dict[str, Any]) -> tuple[float | None, str | None]:
    """``(prefix_cache_hit_rate, its source)``: the records' rate when they report one, else /metrics'."""
    if block.get("prefix_cache_hit_rate_records") is not None:
        return block["prefix_cache_hit_rate_records"], "records"
    if block.get("prefix_cache_hit_rate_server") is not None:
        return block["prefix_cache_hit_rate_server"], "server_metrics"
    return None, None


def hit_rate_bins(run: RunData, t0: float, edges: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
    """The records' hit rate per time bin (``edges``: s after ``t0``; by request start) of ``rows``;
    NaN in a bin with no reported prompt tokens; None when no record reports cached tokens."""
    df = run.requests
    if df.empty or "cached_tokens" not in df:
        return None
    hit, asked, seen = np.zeros(len(edges) - 1), np.zeros(len(edges) - 1), False
    for cached, prompt, start in _reported_slices(df, rows, "start_epoch_s"):
        seen = True
        hit += np.histogram(start - t0, bins=edges, weights=cached)[0]
        asked += np.histogram(start - t0, bins=edges, weights=prompt)[0]
    if not seen:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(asked > 0, hit / np.where(asked > 0, asked, 1), np.nan)
    return out


def server_cache_bins(run: RunData, t0: float, edges: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per target label (``""`` in a one-target run): ``(hit rate per bin, preemptions per second per bin)``
    from the counters' increases between consecutive samples, placed at the later sample's time."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    width = np.diff(edges)
    for part in _server_parts(run, None):
        label = str(part["target"].iloc[0] or "") if "target" in part and len(part) else ""
        t = part["epoch_s"].to_numpy(dtype=float)[1:] - t0
        sums = {}
        for col in ("prefix_cache_hits", "prefix_cache_queries", "preemptions"):
            v = _column(part, col)
            d = np.diff(v)
            inc = np.where(np.isnan(d), np.nan, np.where(d >= 0, d, v[1:]))
            keep = ~np.isnan(inc)
            seen = np.histogram(t[keep], bins=edges)[0] > 0  # a bin no sample fell in has no figure, not 0
            total = np.histogram(t[keep], bins=edges, weights=inc[keep])[0]
            sums[col] = (np.where(seen, total, np.nan), bool(keep.any()))
        hits, queries = sums["prefix_cache_hits"][0], sums["prefix_cache_queries"][0]
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(queries > 0, hits / np.where(queries > 0, queries, 1), np.nan)  # NaN > 0: False
        if not sums["prefix_cache_queries"][1]:
            rate = np.full(len(width), np.nan)
        pre = sums["preemptions"][0] / width if sums["preemptions"][1] else np.full(len(width), np.nan)
        out[label] = (rate, pre)
    return out
