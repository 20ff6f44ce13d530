"""Load sweeps: one level measured from its records (the sweep shape calls this live, level by
level), and what the outputs show of ``sweep.json`` — the report's sweep section (the levels'
table with their low-sample percentiles, and the figures of :mod:`._sweep_plots`: latency and
goodput against the offered load and latency against achieved throughput, the SLO lines, the
goodput knee) and ``summary.json``'s ``sweep`` block.

A level is judged as a capacity-search step is: by the reports' own :func:`evaluate`, on the
requests that started in the level's second half (the first half is the queue settling).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenstorm.reports.data.columns import dropped_nan, selected, workloads_in
from tokenstorm.reports.data.rundir import RunData, run_from_records
from tokenstorm.reports.judging.formats import number, slo_value
from tokenstorm.reports.judging.intervals import DEFAULT_CONFIDENCE
from tokenstorm.reports.judging.slo import goodput, per_request_spec
from tokenstorm.reports.judging.slo_spec import SloSpec
from tokenstorm.reports.judging.targets import evaluate_each_target
from tokenstorm.reports.render.plots import figure_png
from tokenstorm.reports.sections.sweep.plots import sweep_figures
from tokenstorm.workloads.rundir import (
    SWEEP_METRICS,
    SWEEP_MIN_REQUESTS,
    SWEEP_PERCENTILES,
    ErrorCategory,
    ItlHistogram,
    RunMeta,
    SweepLevel,
    SweepResult,
    SweepVerdict,
    knee_span,
    level_outcome,
    read_sweep,
    sweep_knee,
)
from tokenstorm.workloads.rundir.sweep import HELD, INCONCLUSIVE

log = logging.getLogger("tokenstorm")

__all__ = [
    "LevelRow",
    "SweepView",
    "first_untrusted",
    "knee_range_words",
    "level_rows",
    "measure_sweep_level",
    "percentiles_ms",
    "read_result",
    "sweep_view",
    "workload_rows",
]

_COLUMNS = {"ttft": "ttft_s", "itl": "itl", "e2e": "e2e_s"}


def _start(row: dict[str, Any]) -> float:
    return float(row.get("start_epoch_s") or 0.0)


def measure_sweep_level(
    rows: list[dict[str, Any]],
    spec: SloSpec,
    *,
    users: int,
    kind: str,
    started_epoch_s: float,
    judged_from_epoch_s: float,
    judged_to_epoch_s: float,
    targets: list[str] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> SweepLevel:
    """One sweep level from decoded request records (any that overlap it; the rest are ignored).

    Latency and SLOs: the requests that started in ``[judged_from, judged_to)``; achieved throughput:
    the successful requests that *ended* in it, per second — a request still queued when the level
    is judged is not there to count, but one that finished is, whenever it started. ``targets``: the
    A/B run's labels (a target without a request in the level breaks it). Each SLO is judged by its
    interval at ``confidence`` (the run's ``--confidence``): the level is held, broken (one failed) or
    inconclusive (none failed, one straddles its target: too few requests to tell, not a break)."""
    lo, hi = judged_from_epoch_s, judged_to_epoch_s
    live = [r for r in rows if r.get("error_category") != ErrorCategory.CANCELLED]
    # A level has its own settling time (its first half); --warmup flags do not take its requests away.
    judged = [{**r, "warmup": False} for r in live if lo <= _start(r) < hi]
    ended = [r for r in live if r.get("ok") and lo <= _start(r) + float(r.get("e2e_s") or 0.0) < hi]
    span_s = max(hi - lo, 1e-9)
    run = run_from_records(judged, RunMeta(status="running", options={"confidence": confidence}))
    per_request = per_request_spec(spec)
    results = evaluate_each_target(run, per_request, targets) if judged else []  # A/B: each must hold
    verdicts = [
        SweepVerdict(
            f"{r.target + ' ' if r.target else ''}{r.scope} {r.metric} {r.stat} {r.op} {r.threshold:g}",
            r.measured,
            r.passed,
            r.result if r.judged else "",
            r.needed_requests,
        )
        for r in results
    ]
    result = level_outcome([v.outcome() for v in verdicts], len(judged))
    good = 0.0  # requests that met every per-request latency target, of those that ended in the level
    if ended:
        finished = run_from_records(ended, RunMeta(status="running"))
        good = goodput(finished, per_request, np.ones(len(finished.requests), dtype=bool))
    latency_ms, latency_requests = _latency_ms(run) if judged else ({}, {})
    return SweepLevel(
        users=users,
        kind=kind,
        started_epoch_s=started_epoch_s,
        judged_from_epoch_s=lo,
        judged_to_epoch_s=hi,
        requests=len(judged),
        requests_per_s=len(ended) / span_s,
        output_tokens_per_s=sum(int(r.get("output_tokens") or 0) for r in ended) / span_s,
        held=result == "held",
        latency_ms=latency_ms,
        slos=verdicts,
        latency_requests=latency_requests,
        goodput_requests_per_s=good / span_s,
        result=result,
    )


def _latency_ms(run: RunData) -> tuple[dict[str, dict[str, dict[str, float | None]]], dict[str, int]]:
    """Workload → ttft/itl/e2e → p50/p95/p99 in ms, over the successful requests; and workload →
    how many successful requests they come from."""
    df = run.requests
    ok = df["ok"].fillna(False).astype(bool).to_numpy()
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    counts: dict[str, int] = {}
    for w in workloads_in(df, ok):
        sel = ok & (df["workload"] == w).to_numpy()
        counts[str(w)] = int(sel.sum())
        out[str(w)] = percentiles_ms(run, sel)
    return out, counts


def percentiles_ms(run: RunData, sel: np.ndarray) -> dict[str, dict[str, float | None]]:
    """ttft/itl/e2e -> p50/p95/p99 in ms of the requests ``sel`` selects (successful ones)."""
    df = run.requests
    block: dict[str, dict[str, float | None]] = {}
    for name in SWEEP_METRICS:
        col = _COLUMNS[name]
        values: np.ndarray | ItlHistogram = run.itl_values(sel) if col == "itl" else dropped_nan(selected(df, col, sel))
        if not values.size:
            block[name] = {f"p{p}": None for p in SWEEP_PERCENTILES}
            continue
        ps = [float(p) for p in SWEEP_PERCENTILES]
        qs = values.percentiles(ps) if isinstance(values, ItlHistogram) else np.percentile(values, ps)
        block[name] = {f"p{p}": float(q) * 1000 for p, q in zip(SWEEP_PERCENTILES, qs, strict=True)}
    return block


# -- the outputs ---------------------------------------------------------------------------------
@dataclass
class LevelRow:
    """One row of the sweep's first-screen table: a level, or one workload of it (``workload`` set)."""

    level: SweepLevel
    workload: str  # "" for the level's own row (every workload of it together)
    #: ttft/itl/e2e -> p50/p95/p99 in ms (None: no successful request)
    latency_ms: dict[str, dict[str, float | None]]
    requests: int  # the successful judged requests behind the percentiles
    knee: bool = False

    @property
    def low(self) -> list[str]:
        """The percentiles of TTFT and E2E from too few requests to be a tail (``["p95", "p99"]``)."""
        return [f"p{p}" for p, least in SWEEP_MIN_REQUESTS.items() if self.requests < least]

    def broken(self) -> list[str]:
        """What the level broke, each SLO with its measured figure in its unit (the level's row only); an
        inconclusive level: its inconclusive SLOs, each with the requests an answer needs."""
        out = [] if self.level.timing_trustworthy else [self.level.timing_reason or "timing not trustworthy"]
        out += [sweep_slo_words(v) for v in self.level.slos if v.outcome() == "failed"]
        if not out and self.level.outcome() == INCONCLUSIVE:
            out = [
                sweep_slo_words(v) + _needs(v.needed_requests) for v in self.level.slos if v.outcome() == INCONCLUSIVE
            ]
        return out if out or self.level.requests else ["no judged requests"]

    @property
    def word(self) -> str:
        """The level's outcome as its SLO cell says it: ``held``, ``inconclusive``, ``BROKE`` or its timing."""
        if not self.level.timing_trustworthy:
            return "timing not trustworthy"
        return {HELD: "held", INCONCLUSIVE: "inconclusive"}.get(self.level.outcome(), "BROKE")

    @property
    def css(self) -> str:
        """The SLO cell's class: ``pass``, ``undecided`` (inconclusive) or ``fail``."""
        return {HELD: "pass", INCONCLUSIVE: "undecided"}.get(self.level.outcome(), "fail")


def _needs(requests: int | None) -> str:
    return f" (needs about {requests:,} requests)" if requests else ""


def sweep_slo_words(verdict: SweepVerdict) -> str:
    """``code ttft_ms p95 412 ms vs <= 250 ms``: a level's SLO as sweep.json names it, measured in its unit."""
    words = verdict.target.split()
    metric = next((w for w in words if w.endswith("_ms") or w in ("error_rate", "gpu_memory_gb")), "")
    try:
        bound = float(words[-1])
    except (ValueError, IndexError):
        return f"{verdict.target} (measured {number(verdict.measured)})"
    head = " ".join(words[:-2])
    return f"{head} {slo_value(metric, verdict.measured)} vs {words[-2]} {slo_value(metric, bound, threshold=True)}"


def level_rows(run: RunData, levels: list[SweepLevel], knee: SweepLevel | None) -> list[LevelRow]:
    """Each level's row, its percentiles over every workload of it together — from the run's records that
    started in the level's judged half, as the level was judged; one workload's straight from sweep.json."""
    rows = []
    for level in levels:
        only = list(level.latency_ms)
        if len(only) <= 1:
            w = only[0] if only else ""
            latency = level.latency_ms.get(w, {})
            n = level.latency_requests.get(w, level.requests) if only else 0
        else:
            latency, n = _pooled_latency_ms(run, level)
        rows.append(LevelRow(level, "", latency, n, knee is not None and level.users == knee.users))
    return rows


def workload_rows(levels: list[SweepLevel]) -> list[LevelRow]:
    """Each level's workloads, each its own percentiles (sweep.json's): empty when a level has only one."""
    if all(len(level.latency_ms) <= 1 for level in levels):
        return []
    return [
        LevelRow(level, w, block, level.latency_requests.get(w, level.requests))
        for level in levels
        for w, block in sorted(level.latency_ms.items())
    ]


def _pooled_latency_ms(run: RunData, level: SweepLevel) -> tuple[dict[str, dict[str, float | None]], int]:
    df = run.requests
    if not len(df):
        return {}, 0
    start = df["start_epoch_s"].to_numpy(dtype=float)
    ok = df["ok"].fillna(False).astype(bool).to_numpy()
    sel = ok & (start >= level.judged_from_epoch_s) & (start < level.judged_to_epoch_s)
    return percentiles_ms(run, sel), int(sel.sum())


@dataclass
class SweepView:
    """What the report's sweep section shows."""

    result: SweepResult
    levels: list[SweepLevel]  # by offered load
    knee: SweepLevel | None
    png: str  # against offered load: throughput, goodput, requests per level, latency
    achieved_png: str  # latency against achieved requests/s
    #: the first-screen table: each level, every workload together; then each workload of each level
    rows: list[LevelRow] = field(default_factory=list)
    workload_rows: list[LevelRow] = field(default_factory=list)
    #: a percentile from fewer requests than this is flagged low-sample (``p95``: 20, ``p99``: 100)
    min_requests: dict[int, int] = field(default_factory=lambda: dict(SWEEP_MIN_REQUESTS))
    #: the inconclusive levels above the knee and below the first broken one: the knee may be that high
    uncertain: list[SweepLevel] = field(default_factory=list)

    @property
    def knee_range(self) -> str:
        """The knee's uncertainty in words (``between 16 and 24 users: 24 inconclusive``); "" when none."""
        return knee_range_words(self.knee.users if self.knee else None, [lv.users for lv in self.uncertain])

    def low_sample(self, level: SweepLevel) -> str:
        """``level``'s low-sample percentiles in words ("" when none), e.g. ``code: p95, p99 (12 requests)``."""
        return "; ".join(
            f"{w or 'all'}: {', '.join(f'p{p}' for p in ps)} ({level.latency_requests.get(w, level.requests)} requests)"
            for w, ps in level.low_sample().items()
        )

    @property
    def timing_untrustworthy_at_users(self) -> int | None:
        """The first level (in run order) whose timing was not trustworthy, the saturating probe
        left out (it only sizes the levels and does not stop a sweep); ``None``: none."""
        return first_untrusted(self.result.levels)


def first_untrusted(levels: list[SweepLevel]) -> int | None:
    return next((lv.users for lv in levels if not lv.timing_trustworthy and lv.kind != "throughput"), None)


def sweep_view(run: RunData, spec: SloSpec) -> SweepView | None:
    """The sweep section of ``run``'s report; ``None`` when the run was not a sweep."""
    result = read_result(run)
    if result is None or not result.levels:
        return None
    levels = sorted(result.levels, key=lambda level: level.users)
    knee = sweep_knee(levels)
    uncertain = knee_span([(level.users, level.outcome()) for level in levels])[1]
    offered, achieved = sweep_figures(levels, knee, spec)
    rows = level_rows(run, levels, knee)
    return SweepView(
        result,
        levels,
        knee,
        figure_png(offered),
        figure_png(achieved),
        rows,
        workload_rows(levels),
        uncertain=[level for level in levels if level.users in uncertain],
    )


def knee_range_words(knee: int | None, uncertain: list[int], noun: str = "users") -> str:
    """``between 16 and 24 users: 24 inconclusive`` — how high a knee (or highest load held) may really be
    when the levels above it were inconclusive (no knee: ``1, 2 users inconclusive``); "" when none was."""
    if not uncertain:
        return ""
    which = ", ".join(map(str, uncertain))
    top = uncertain[-1]
    if knee is None:
        return f"{which} {noun} inconclusive"
    return f"between {knee} and {top} {noun}: {which} inconclusive"


def read_result(run: RunData) -> SweepResult | None:
    try:
        return read_sweep(run.path)
    except (OSError, ValueError) as exc:  # unreadable or newer: the rest of the report still comes
        log.warning("tokenstorm: sweep.json not used: %s", exc)
        return None
