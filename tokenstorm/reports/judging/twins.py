"""A/B twins: every request of an A/B run (``--targets``) is sent to each target alike — the same session, the
same step of it, the same prompt — so two targets' latencies pair request by request. Paired, the prompts'
own spread (a long prompt is slow on both) cancels out of the change between them, and a difference far
smaller than that spread can be told from noise
(:func:`tokenstorm.reports.judging.intervals.paired_change_interval_pct`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tokenstorm.reports.data.columns import selected
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.intervals import paired_change_interval_pct

__all__ = ["LEAST_PAIRS", "PAIRED", "enough_pairs", "paired_change", "paired_deltas", "twin_keys"]

#: a change with fewer pairs than this is judged as of two independent samples
LEAST_PAIRS = 10
#: the per-request latencies twins pair on: figure stem -> record column
PAIRED = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "e2e_s"}
#: figure stat prefix -> the statistic paired_change_interval_pct takes
_STATS = {"mean": "mean", "median": "p50", "p95": "p95", "p99": "p99"}


def twin_keys(run: RunData, lane: np.ndarray) -> pd.MultiIndex:
    """Each request of an A/B target's ``lane`` (a row mask) keyed by its twin on every other target: its session
    and its step in it (the session's requests on this target in the order sent). A request of no session gets
    a key of its own (paired with nothing)."""
    df = run.requests
    n = int(lane.sum())
    keys = np.asarray(df["session_id"].to_numpy(), dtype=np.int64)[lane] if "session_id" in df else np.full(n, -1)
    none = keys < 0
    keys[none] = -2 - np.arange(int(none.sum()))
    start = df["start_epoch_s"].to_numpy(dtype=float)[lane]
    order = np.lexsort((start, keys))
    first = np.r_[True, keys[order][1:] != keys[order][:-1]]
    step = np.empty(n, dtype=np.int64)
    step[order] = np.arange(n) - np.maximum.accumulate(np.where(first, np.arange(n), 0))
    return pd.MultiIndex.from_arrays([keys, step], names=["session", "step"])


def enough_pairs(stat: str, pairs: int) -> bool:
    """Whether ``pairs`` pairs can be resampled for ``stat``: at least :data:`LEAST_PAIRS`, and for a percentile
    at least two expected beyond it (a p95 40, a p99 200: below that, resampling only reshuffles the largest)."""
    if stat == "mean" or stat == "p50":
        return pairs >= LEAST_PAIRS
    beyond = 1 - float(stat.removeprefix("p")) / 100
    return pairs >= max(LEAST_PAIRS, 2 / beyond)


def paired_change(
    stat: str, base: pd.Series, new: pd.Series, confidence: float
) -> tuple[float | None, float | None] | None:
    """The interval of the change of ``stat`` ("mean", "p50", ...) from ``base`` to ``new``, each request's value
    keyed by its twin (:func:`twin_keys`): the pairs where both completed, resampled together; None when there are
    not :func:`enough_pairs`."""
    both = pd.concat([base.rename("base"), new.rename("new")], axis=1, join="inner").dropna()
    if not enough_pairs(stat, len(both)):
        return None
    return paired_change_interval_pct(
        np.asarray(both["base"], dtype=float), np.asarray(both["new"], dtype=float), stat, confidence
    )


def _values(run: RunData, label: str, judged: np.ndarray) -> dict[str, pd.Series]:
    df = run.requests
    lane = np.asarray(df["target"] == label, dtype=bool) if "target" in df else np.zeros(len(df), dtype=bool)
    ok = judged & lane & np.asarray(df["ok"].fillna(False).astype(bool).to_numpy())
    keys = twin_keys(run, lane)[ok[lane]]
    return {stem: pd.Series(selected(df, column, ok), index=keys) for stem, column in PAIRED.items()}


def paired_deltas(
    run: RunData, base: str, label: str, keys: list[str], judged: np.ndarray, confidence: float
) -> dict[str, list[float | None] | None]:
    """summary.json's ``delta_ci_pct_vs_baseline`` of A/B target ``label``: per figure of ``keys`` that pairs
    (``median_ttft_ms``, ``p95_e2el_ms``...) the interval ``[low, high]`` of its change in percent against target
    ``base`` at ``confidence`` (an end None: unbounded); None where the pairs are too few to tell."""
    if confidence <= 0:
        return {}
    mine, theirs = _values(run, label, judged), _values(run, base, judged)
    out: dict[str, list[float | None] | None] = {}
    for key in keys:
        stat, _, stem = key.removesuffix("_ms").partition("_")
        if stat in _STATS and stem in PAIRED and key.endswith("_ms"):
            change = paired_change(_STATS[stat], theirs[stem], mine[stem], confidence)
            out[key] = None if change is None else list(change)
    return out
