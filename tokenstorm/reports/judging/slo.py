"""SLO evaluation against a run's raw records: judged requests, statistics, verdicts, goodput.

The file format and its parser are in :mod:`tokenstorm.reports.judging.slo_spec`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from tokenstorm.reports.data.columns import chunks, dropped_nan, masked_sum, measures, selected, workloads_in
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging import quality as _quality
from tokenstorm.reports.judging.agent import sessions
from tokenstorm.reports.judging.confidence import (
    FAILED,
    HELD,
    INCONCLUSIVE,
    Evidence,
    clusters_of,
    error_evidence,
    latency_evidence,
    outcome,
    rate_evidence,
    run_confidence,
)
from tokenstorm.reports.judging.intervals import run_itl_design_effect
from tokenstorm.reports.judging.quality import CONSISTENCY_METRIC, is_quality_metric
from tokenstorm.reports.judging.slo_spec import (
    GPU_SAMPLED_METRICS,
    LATENCY_METRICS,
    NO_SERVER_TIMING,
    NOT_JUDGED_NO_GPU,
    SERVER_TIMING_METRICS,
    SESSION_METRICS,
    SloSpec,
    SloTarget,
)
from tokenstorm.workloads.rundir import ItlHistogram

__all__ = ["SloResult", "evaluate", "goodput", "judged_mask", "latency_column", "per_request_spec", "stat_of"]


@dataclass
class SloResult:
    """The verdict on one target."""

    scope: str
    metric: str
    stat: str
    op: str
    threshold: float
    measured: float | None
    passed: bool
    note: str = ""
    margin_pct: float | None = field(default=None)
    target: str = ""  # the A/B target judged (--targets); empty in a one-target run
    #: False: not judged (a GPU SLO on a run that sampled no GPU): ``passed`` then holds, ``note`` says why
    judged: bool = True
    #: "held", "failed" or "inconclusive" (the interval straddles the target); "" when not judged
    result: str = ""
    #: the interval of ``measured`` at ``confidence`` (None: that end unbounded, or no interval: ``confidence`` 0
    #: or a figure judged on its value)
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float = 0.0
    #: inconclusive: judged requests (ITL: gaps) in all that a conclusive answer needs at the spread observed
    needed_requests: int | None = None
    #: the judged samples behind ``measured`` (requests, sessions or ITL gaps)
    samples: int | None = None

    def __post_init__(self) -> None:
        if not self.result and self.judged:  # judged on its value (no interval): held or failed
            self.result = HELD if self.passed else FAILED

    def as_dict(self) -> dict[str, Any]:
        """For JSON."""
        return asdict(self)


# -- evaluation --------------------------------------------------------------------------
def judged_mask(run: RunData, spec: SloSpec) -> np.ndarray:
    """Requests that count: not cancelled by the load test, not in the warm-up window."""
    df = run.requests
    if df.empty:
        return np.zeros(0, dtype=bool)
    mask: np.ndarray = np.asarray(df["error_category"] != "cancelled", dtype=bool).copy()
    mask &= ~df["warmup"].fillna(False).astype(bool).to_numpy()
    if spec.warmup_s > 0:
        start = run.meta.started_epoch_s or float(df["start_epoch_s"].min())
        mask &= (df["start_epoch_s"] >= start + spec.warmup_s).to_numpy()
    return mask


def latency_column(run: RunData, metric: str) -> str:
    """The column a latency SLO on ``metric`` reads (``"itl"``: the run's gaps, :meth:`RunData.itl_values`): the
    client's record, or on a run judged on the server's timing (``--timing-source``, a view that names its own
    ``server_columns``) the server's figure where the server times it."""
    columns: dict[str, str] = getattr(run, "server_columns", None) or {}
    return columns.get(metric, LATENCY_METRICS[metric])


def stat_of(values: np.ndarray | ItlHistogram, stat: str) -> float | None:
    """One statistic of ``values`` (seconds in, the same unit out); None when empty. An array
    is sorted in place (pass a copy: :func:`selected` makes one)."""
    if isinstance(values, ItlHistogram):
        if values.size == 0:
            return None
        if stat in ("mean", "max"):
            return values.mean() if stat == "mean" else values.max()
        return float(values.percentiles([float(stat[1:])])[0])
    values = dropped_nan(values)
    if values.size == 0:
        return None
    if stat in ("mean", "max"):
        return float(values.mean() if stat == "mean" else values.max())
    return float(np.percentile(values, float(stat[1:]), overwrite_input=True))


def run_window_s(run: RunData, mask: np.ndarray) -> float:
    """Seconds from the first judged request's start to the last one's end."""
    if not mask.any():
        return 0.0
    start, e2e = run.requests["start_epoch_s"].to_numpy(), run.requests["e2e_s"].to_numpy()
    first, last = np.inf, -np.inf
    for part in chunks(len(start)):
        sel = mask[part]
        if sel.any():
            first = min(first, float(start[part][sel].min()))
            last = max(last, float((start[part][sel] + np.nan_to_num(e2e[part][sel])).max()))
    return max(1e-9, last - first)


def gpu_cost_per_hour(run: RunData, spec: SloSpec) -> float | None:
    """Price of one GPU-hour: the run's ``--gpu-cost-per-hour``, else the SLO file's
    ``gpu_cost_per_hour`` (``reports build --gpu-cost-per-hour`` overrides both); 0 or none: no cost."""
    value = float(run.meta.option("gpu_cost_per_hour", 0.0) or 0.0) or (spec.gpu_cost_per_hour or 0.0)
    return value or None


def gpu_count(run: RunData, spec: SloSpec) -> int:
    """GPUs behind the target: from GPU samples, else the SLO file's ``gpus``, else ``--gpus``, else 1."""
    if not run.gpu.empty and "gpu" in run.gpu.columns:
        keys = run.gpu[["host", "gpu"]] if "host" in run.gpu.columns else run.gpu[["gpu"]]
        return max(1, len(keys.drop_duplicates()))
    return spec.gpus or int(run.meta.option("gpus", 0) or 0) or 1


def evaluate(
    run: RunData, spec: SloSpec, within: np.ndarray | None = None, target: str = "", confidence: float | None = None
) -> list[SloResult]:
    """Judge every target of ``spec`` on ``run``'s raw records (``within``: only those; an A/B ``target``'s), each
    by its interval at ``confidence`` (default: the run's ``--confidence``; 0: the point estimates)."""
    df = run.requests
    judged = judged_mask(run, spec) if within is None else judged_mask(run, spec) & within
    workloads = workloads_in(df, judged)
    results = []
    expanded: list[SloTarget] = []
    for t in spec.targets:
        if t.scope == "*" and is_quality_metric(t.metric):  # the workloads with a checked answer; none: no data
            found = [
                SloTarget(w, t.metric, t.stat, t.threshold, t.line)
                for w in workloads
                if _quality.quality_applies(run, judged, w, t.metric)
            ]
            expanded.extend(found or [t])
        elif t.scope == "*":
            expanded.extend(
                SloTarget(w, t.metric, t.stat, t.threshold, t.line)
                for w in workloads
                if measures(df, judged, w, t.metric)
            )
        else:
            expanded.append(t)
    ok_all = df["ok"].fillna(False).astype(bool).to_numpy() if len(df) else np.zeros(0, dtype=bool)
    level = run_confidence(run, confidence)
    for t in expanded:
        scope_mask = judged.copy()
        if t.scope not in ("run", "*"):  # "*" here: a quality target no workload's answers were checked for
            scope_mask &= (df["workload"] == t.scope).to_numpy()
        if t.metric in GPU_SAMPLED_METRICS and run.gpu.empty:  # not judged (said so), never failed for no sample
            results.append(
                SloResult(
                    t.scope,
                    t.metric,
                    t.stat,
                    t.op,
                    t.threshold,
                    None,
                    True,
                    NOT_JUDGED_NO_GPU,
                    target=target,
                    judged=False,
                )
            )
            continue
        measured, note, evidence, samples = _measure(run, spec, t, scope_mask, ok_all, (within, judged, target), level)
        result = outcome(t.op, t.threshold, measured, evidence.interval)
        margin = (measured - t.threshold) / t.threshold * 100 if measured is not None and t.threshold else None
        interval = evidence.interval
        results.append(
            SloResult(
                t.scope,
                t.metric,
                t.stat,
                t.op,
                t.threshold,
                measured,
                result == HELD,
                note,
                margin,
                target,
                result=result,
                ci_low=None if interval is None else interval.low,
                ci_high=None if interval is None else interval.high,
                confidence=level if interval is not None else 0.0,
                needed_requests=evidence.needed if result == INCONCLUSIVE else None,
                samples=samples,
            )
        )
    return results


def _measure(
    run: RunData,
    spec: SloSpec,
    t: SloTarget,
    scope_mask: np.ndarray,
    ok_all: np.ndarray,
    rows: tuple[np.ndarray | None, np.ndarray, str],
    level: float,
) -> tuple[float | None, str, Evidence, int | None]:
    """One target's figure on its scope's records (``rows``: the A/B target's records or None, the judged ones,
    the target's name): (measured, note, its interval, the samples behind it)."""
    df = run.requests
    within, judged, target = rows
    none = Evidence(None)
    if t.metric == "gpu_memory_gb":
        return float(run.gpu["mem_used_mib"].max()) * 2**20 / 1e9, "", none, None
    if t.metric == CONSISTENCY_METRIC:
        measured, note = _quality.measure_consistency(run, target)
        return measured, note, none, None
    if not scope_mask.any():
        return None, f"no judged requests for {t.scope!r}", none, 0
    if t.metric == "error_rate":
        failed = ~ok_all[scope_mask]
        evidence = error_evidence(failed, t.threshold, t.op, level, clusters_of(run, scope_mask))
        return float(failed.mean()), "", evidence, int(failed.size)
    if is_quality_metric(t.metric):
        measured, note = _quality.measure_quality(run, t.metric, scope_mask & ok_all)
        return measured, note, none, None
    if t.metric in LATENCY_METRICS:
        ok_mask = scope_mask & ok_all
        column = latency_column(run, t.metric)
        if column == "itl":
            gaps = run.itl_values(ok_mask)
            seconds = stat_of(gaps, t.stat)
            deff = (
                run_itl_design_effect(run, ok_mask, gaps, float(t.stat[1:]))
                if seconds and level and t.stat[0] == "p"
                else 1
            )
            return _latency(
                seconds,
                latency_evidence(gaps, t.stat, t.threshold, t.op, level, itl_deff=deff),
                gaps.size,
                t.metric,
                ok_mask,
            )
        values = selected(df, column, ok_mask)
        clusters = clusters_of(run, ok_mask)
        if clusters is not None:  # aligned with the values measured
            clusters = clusters[~np.isnan(values)]
        values = dropped_nan(values)
        evidence = latency_evidence(values, t.stat, t.threshold, t.op, level, clusters)  # before the sort below
        return _latency(stat_of(values, t.stat), evidence, int(values.size), t.metric, ok_mask)
    if t.metric in SESSION_METRICS:
        chosen = np.ones(len(df), dtype=bool) if within is None else within.copy()
        if t.scope != "run":
            chosen &= (df["workload"] == t.scope).to_numpy()
        latency = sessions(run, judged, chosen).latency_s
        seconds = stat_of(latency, t.stat)
        if seconds is None:
            return None, "no completed sessions to measure", none, 0
        return seconds * 1000, "", latency_evidence(latency, t.stat, t.threshold, t.op, level), int(latency.size)
    window = run_window_s(run, scope_mask)
    ok_mask = scope_mask & ok_all
    completed = int(ok_mask.sum())
    tokens = None
    if t.metric == "requests_per_s":
        count = float(completed)
    elif t.metric == "goodput_requests_per_s":
        count = goodput(run, spec, scope_mask)
    else:
        count = masked_sum(df, "output_tokens", ok_mask)
        tokens = np.nan_to_num(selected(df, "output_tokens", ok_mask)) if level else None  # their spread counts too
        if t.metric == "output_tokens_per_s_per_gpu":
            count /= gpu_count(run, spec)
    events = int(count) if t.metric == "goodput_requests_per_s" else completed
    return count / window, "", rate_evidence(count, events, window, level, tokens), events


def _latency(
    seconds: float | None, evidence: Evidence, samples: int, metric: str, ok_mask: np.ndarray
) -> tuple[float | None, str, Evidence, int | None]:
    """A latency target's figure in ms, or why there is none."""
    if seconds is not None:
        return seconds * 1000, "", evidence, samples
    note = "no tool calls to measure" if metric == "tool_call_ms" else "no successful requests to measure"
    return None, NO_SERVER_TIMING if metric in SERVER_TIMING_METRICS and ok_mask.any() else note, Evidence(None), 0


def per_request_spec(spec: SloSpec) -> SloSpec:
    """``spec`` cut to the targets any slice of requests can be judged by — latencies, error rate and
    answer quality, no warm-up — for judging a window of a run (a capacity-search step, a sweep level)."""
    keep = [
        t
        for t in spec.targets
        if t.metric in LATENCY_METRICS or t.metric == "error_rate" or is_quality_metric(t.metric)
    ]
    return replace(spec, targets=keep, warmup_s=0.0)


def goodput(run: RunData, spec: SloSpec, mask: np.ndarray) -> float:
    """How many judged requests met every per-request latency target of their workload."""
    df = run.requests
    good = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    for t in spec.targets:
        if t.metric not in ("ttft_ms", "e2e_ms", "tpot_ms", "tool_call_ms"):
            continue
        col = latency_column(run, t.metric)
        values = np.multiply(df[col].to_numpy(dtype=float, na_value=np.nan), 1000)
        applies = np.ones(len(df), dtype=bool) if t.scope in ("*", "run") else (df["workload"] == t.scope).to_numpy()
        if t.metric == "tool_call_ms":
            applies = applies & ~np.isnan(values)  # a step that answered without a tool call has none to be late
        good &= ~applies | (values <= t.threshold)
    return float(good.sum())
