"""Load sweeps: one level measured from its records (the sweep shape calls this live, level by
level), and what the outputs show of ``sweep.json`` — the report's sweep section (latency
percentiles against achieved throughput per workload, the SLO lines, the goodput knee) and
``summary.json``'s ``sweep`` block.

A level is judged as a capacity-search step is: by the reports' own :func:`evaluate`, on the
requests that started in the level's second half (the first half is the queue settling).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot, whatever imported this module first
import matplotlib.pyplot as plt
import numpy as np

from workloads.rundir import (
    SWEEP_METRICS,
    SWEEP_PERCENTILES,
    ErrorCategory,
    ItlHistogram,
    RunMeta,
    SweepLevel,
    SweepResult,
    SweepVerdict,
    read_sweep,
    sweep_knee,
)

from ._plots import _legend, _png
from ._rundir import RunData, run_from_records
from ._slo import SloSpec, dropped_nan, per_request_spec, selected, workloads_in
from ._targets import evaluate_each_target

log = logging.getLogger("tokenstorm")

__all__ = ["SweepView", "measure_sweep_level", "sweep_block", "sweep_view"]

_COLUMNS = {"ttft": "ttft_s", "itl": "itl", "e2e": "e2e_s"}
_SLO_METRIC = {"ttft": "ttft_ms", "itl": "itl_ms", "e2e": "e2e_ms"}
_LABELS = {"ttft": "TTFT", "itl": "ITL", "e2e": "E2E"}


def _start(row: dict[str, Any]) -> float:
    return float(row.get("start_epoch_s") or 0.0)


def measure_sweep_level(rows: list[dict[str, Any]], spec: SloSpec, *, users: int, kind: str, started_epoch_s: float,
                        judged_from_epoch_s: float, judged_to_epoch_s: float,
                        targets: list[str] | None = None) -> SweepLevel:  # fmt: skip
    """One sweep level from decoded request records (any that overlap it; the rest are ignored).

    Latency and SLOs: the requests that started in ``[judged_from, judged_to)``; achieved throughput:
    the successful requests that *ended* in it, per second — a request still queued when the level
    is judged is not there to count, but one that finished is, whenever it started. ``targets``: the
    A/B run's labels (a target without a request in the level breaks it)."""
    lo, hi = judged_from_epoch_s, judged_to_epoch_s
    live = [r for r in rows if r.get("error_category") != ErrorCategory.CANCELLED]
    # A level has its own settling time (its first half); --warmup flags do not take its requests away.
    judged = [{**r, "warmup": False} for r in live if lo <= _start(r) < hi]
    ended = [r for r in live if r.get("ok") and lo <= _start(r) + float(r.get("e2e_s") or 0.0) < hi]
    span_s = max(hi - lo, 1e-9)
    run = run_from_records(judged, RunMeta(status="running"))
    results = evaluate_each_target(run, per_request_spec(spec), targets) if judged else []  # A/B: each must hold
    verdicts = [SweepVerdict(f"{r.target + ' ' if r.target else ''}{r.scope} {r.metric} {r.stat} {r.op} "
                             f"{r.threshold:g}", r.measured, r.passed) for r in results]  # fmt: skip
    return SweepLevel(
        users=users,
        kind=kind,
        started_epoch_s=started_epoch_s,
        judged_from_epoch_s=lo,
        judged_to_epoch_s=hi,
        requests=len(judged),
        requests_per_s=len(ended) / span_s,
        output_tokens_per_s=sum(int(r.get("output_tokens") or 0) for r in ended) / span_s,
        held=bool(judged) and all(v.passed for v in verdicts),
        latency_ms=_latency_ms(run) if judged else {},
        slos=verdicts,
    )


def _latency_ms(run: RunData) -> dict[str, dict[str, dict[str, float | None]]]:
    """Workload → ttft/itl/e2e → p50/p95/p99 in ms, over the successful requests."""
    df = run.requests
    ok = df["ok"].fillna(False).astype(bool).to_numpy()
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for w in workloads_in(df, ok):
        sel = ok & (df["workload"] == w).to_numpy()
        block: dict[str, dict[str, float | None]] = {}
        for name in SWEEP_METRICS:
            col = _COLUMNS[name]
            values: np.ndarray | ItlHistogram = run.itl_values(sel) if col == "itl" else dropped_nan(
                selected(df, col, sel))  # fmt: skip
            if not values.size:
                block[name] = {f"p{p}": None for p in SWEEP_PERCENTILES}
                continue
            ps = [float(p) for p in SWEEP_PERCENTILES]
            qs = values.percentiles(ps) if isinstance(values, ItlHistogram) else np.percentile(values, ps)
            block[name] = {f"p{p}": float(q) * 1000 for p, q in zip(SWEEP_PERCENTILES, qs, strict=True)}
        out[str(w)] = block
    return out


# -- the outputs ---------------------------------------------------------------------------------
@dataclass
class SweepView:
    """What the report's sweep section shows."""

    result: SweepResult
    levels: list[SweepLevel]  # by offered load
    knee: SweepLevel | None
    png: str


def sweep_view(run: RunData, spec: SloSpec) -> SweepView | None:
    """The sweep section of ``run``'s report; ``None`` when the run was not a sweep."""
    result = _read(run)
    if result is None or not result.levels:
        return None
    levels = sorted(result.levels, key=lambda level: level.users)
    knee = sweep_knee(levels)
    return SweepView(result, levels, knee, _sweep_png(levels, knee, spec))


def _read(run: RunData) -> SweepResult | None:
    try:
        return read_sweep(run.path)
    except (OSError, ValueError) as exc:  # unreadable or newer: the rest of the report still comes
        log.warning("tokenstorm: sweep.json not used: %s", exc)
        return None


def sweep_verdict(block: dict[str, Any]) -> tuple[str, str]:
    """A sweep run's verdict: it passes when it found a goodput knee (a sweep means to break its
    top levels; their pooled SLO figures are no verdict) and fails when not even its lowest level
    met every per-request SLO."""
    levels = block.get("levels") or []
    if block.get("knee_users") is None:
        lowest = min((lv["users"] for lv in levels), default=None)
        which = f", not even {lowest} user(s)" if lowest is not None else " (no level was judged)"
        return "failed", f"sweep: no level met every per-request SLO{which}"
    partial = "" if block.get("complete") else " (the sweep was stopped before its last level: a lower bound)"
    return "passed", (f"sweep: goodput knee {block['knee_users']} users, {block['knee_requests_per_s']:.3g} req/s, "
                      f"{block['knee_output_tokens_per_s']:.0f} output tok/s with every per-request SLO met"
                      f"{partial}; the SLO table pools every level")  # fmt: skip


def sweep_block(run: RunData) -> dict[str, Any] | None:
    """``summary.json``'s ``sweep`` block: the knee and how far the sweep got; ``None``: not a sweep."""
    result = _read(run)
    if result is None:
        return None
    knee = sweep_knee(result.levels)
    return {
        "knee_users": knee.users if knee else None,
        "knee_requests_per_s": knee.requests_per_s if knee else None,
        "knee_output_tokens_per_s": knee.output_tokens_per_s if knee else None,
        "max_requests_per_s": max((level.requests_per_s for level in result.levels), default=None),
        "levels": [_level_block(level) for level in sorted(result.levels, key=lambda level: level.users)],
        "complete": result.complete,
        "stopped_early": result.stopped_early,
    }


def _level_block(level: SweepLevel) -> dict[str, Any]:
    return {"users": level.users, "kind": level.kind, "requests_per_s": level.requests_per_s,
            "output_tokens_per_s": level.output_tokens_per_s, "held": level.held}  # fmt: skip


def _sweep_png(levels: list[SweepLevel], knee: SweepLevel | None, spec: SloSpec) -> str:
    """Per workload (rows): TTFT, ITL and E2E p50/p95/p99 (columns) against achieved requests/s, each
    level's users written at its p99."""
    workloads = sorted({w for level in levels for w in level.latency_ms})
    targets = per_request_spec(spec).targets
    fig, axes = plt.subplots(max(1, len(workloads)), 3, figsize=(12, 3.0 * max(1, len(workloads))), squeeze=False)
    x = np.array([level.requests_per_s for level in levels])
    broke = np.array([not level.held for level in levels])
    for row, w in zip(axes, workloads or [""], strict=True):
        for ax, name in zip(row, SWEEP_METRICS, strict=True):
            for p, style in zip(SWEEP_PERCENTILES, ("o-", "s--", "^:"), strict=True):
                y = np.array([_value(level, w, name, p) for level in levels], dtype=float)
                ax.plot(x, y, style, markersize=4, label=f"p{p}")
                if broke.any():
                    ax.plot(x[broke], y[broke], "x", color="red", markersize=8)
            for level, top in zip(levels, (_value(lv, w, name, 99) for lv in levels), strict=True):
                if top == top:  # not NaN: say which level a point is
                    ax.annotate(str(level.users), (level.requests_per_s, top), fontsize=7, xytext=(3, 3),
                                textcoords="offset points")  # fmt: skip
            for t in targets:
                if t.metric == _SLO_METRIC[name] and t.scope in (w, "*", "run"):
                    ax.axhline(t.threshold, color="red", linestyle="--", linewidth=1,
                               label=f"SLO {t.stat} ≤ {t.threshold:g}")  # fmt: skip
            if knee is not None:
                ax.axvline(knee.requests_per_s, color="green", linestyle=":", linewidth=1.5,
                           label=f"knee: {knee.users} users")  # fmt: skip
            ax.set_title(f"{w} {_LABELS[name]} (ms)", fontsize=9, loc="left")
            ax.set_xlabel("achieved requests/s", fontsize=8)
            ax.grid(alpha=0.3)
            _legend(ax)
    return _png(fig)


def _value(level: SweepLevel, workload: str, metric: str, p: int) -> float:
    value = level.latency_ms.get(workload, {}).get(metric, {}).get(f"p{p}")
    return float("nan") if value is None else float(value)
