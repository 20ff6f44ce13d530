"""The report's answer-quality parts as data: the first screen's pass-rate lines (coloured by their quality
SLOs), and the quality section — pass rate per workload and check, over time, against the load level (a
sweep's levels, a capacity search's steps), the needle table, the consistency probes, and a bounded sample
of the failed answers. The figures are :mod:`._quality`'s; every text here is shown escaped (autoescape)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.compute as pc

from tokenstorm.reports.data.columns import workloads_in
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.quality import check_names, check_status, is_quality_metric
from tokenstorm.reports.judging.slo_spec import SloSpec
from tokenstorm.reports.judging.summary import RunSummary
from tokenstorm.reports.render.charts import Chart, Series, series
from tokenstorm.reports.render.plots import figure_png, new_figure, report_style, side_legend, time_bins
from tokenstorm.reports.render.timeseries import TIME_LABEL
from tokenstorm.workloads.rundir import iter_batches, read_capacity, read_load, read_sweep

if TYPE_CHECKING:
    from matplotlib.axes import Axes

log = logging.getLogger("tokenstorm")

__all__ = ["FAILED_ANSWERS_SHOWN", "QualityLine", "QualityView", "quality_view"]

#: failed answers the report shows at most
FAILED_ANSWERS_SHOWN = 50
#: consistency pairs shown (changed ones first)
_PAIRS_SHOWN = 6
_OPS = {">=": "≥", "<=": "≤"}
_ANSWER_COLUMNS = ["workload", "target", "check", "check_detail", "prompt_tokens", "needle_depth", "answer_sample"]


@dataclass
class QualityLine:
    """One pass-rate line of the first screen."""

    label: str  # "chat", "fast · chat", "all workloads"
    scope: str  # data-scope, as the headline's: "workload:chat", "target:fast/workload:chat", "all"
    pass_rate: float | None
    checked: int
    #: "pass" / "fail" when a quality SLO judges the scope (every one held / one broke), "" when none does
    verdict: str
    slos: list[str] = field(default_factory=list)  # the quality SLOs judging it, with their outcome


@dataclass
class QualityView:
    """What the quality section shows."""

    lines: list[QualityLine]
    rows: list[dict[str, Any]]  # scope, check ("" = every check), checked, failed, pass_rate
    needle: list[dict[str, Any]]
    over_time: list[Chart]  # pass rate per time bin: per workload, per check
    load_png: str | None
    load_axis: str  # what the load figure's levels are ("" when none)
    consistency: dict[str, Any] | None
    pairs: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    failed_total: int
    failed_kept: int


def _scopes(summary: RunSummary) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    """``(label, data-scope, target, workload, block)`` of every workload with a checked answer."""
    quality = summary.quality or {}
    targets = quality.get("targets") or {}
    if not targets:
        return [(w, f"workload:{w}", "", w, b) for w, b in sorted((quality.get("workloads") or {}).items())]
    return [
        (f"{t} · {w}", f"target:{t}/workload:{w}", t, w, b)
        for t, tb in targets.items()
        for w, b in sorted((tb.get("workloads") or {}).items())
    ]


def _line(label: str, scope: str, block: dict[str, Any], results: list[Any]) -> QualityLine:
    slos = [f"{r.metric} {_OPS.get(r.op, r.op)} {r.threshold:.2%} {'held' if r.passed else 'FAILED'}" for r in results]
    verdict = "" if not results else "pass" if all(r.passed for r in results) else "fail"
    return QualityLine(label, scope, block.get("pass_rate"), int(block.get("checked") or 0), verdict, slos)


def first_screen_lines(summary: RunSummary) -> list[QualityLine]:
    """The whole run's line when a run-scope quality SLO judges it, then each workload with checks."""
    quality = [r for r in summary.slo_results if is_quality_metric(r.metric)]
    lines = []
    run_results = [r for r in quality if r.scope == "run"]
    if run_results and summary.quality is not None:
        lines.append(_line("all workloads", "all", summary.quality["run"], run_results))
    for label, scope, target, workload, block in _scopes(summary):
        mine = [r for r in quality if r.scope == workload and r.target == target]
        lines.append(_line(label, scope, block, mine))
    return lines


def _rows(summary: RunSummary) -> list[dict[str, Any]]:
    out = []
    for label, scope, _target, _workload, block in _scopes(summary):
        out.append({"label": label, "scope": scope, "check": "", **_counts(block)})
        out += [
            {"label": label, "scope": scope, "check": name, **_counts(b)}
            for name, b in (block.get("by_check") or {}).items()
        ]
    return out


def _counts(block: dict[str, Any]) -> dict[str, Any]:
    return {k: block.get(k) for k in ("checked", "passed", "failed", "pass_rate")}


def _percent(status: np.ndarray, bins: np.ndarray, n: int) -> np.ndarray:
    """% passed per bin of the checked points (``status`` 1 pass / 0 fail; ``bins`` each one's); NaN: none."""
    checked = np.bincount(bins, minlength=n)
    passed = np.bincount(bins[status == 1], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(checked > 0, passed / np.where(checked > 0, checked, 1) * 100, np.nan)
    return out


def _rate_axes(ax: Axes, xlabel: str | None = None) -> None:
    ax.set_ylabel("answers passed (%)")
    ax.set_ylim(-2, 102)
    if xlabel:
        ax.set_xlabel(xlabel)


def _over_time(run: RunData, mask: np.ndarray, t0: float) -> list[Chart]:
    """Pass rate per time bin (by request start): per workload, then per check (every workload's answers)."""
    df = run.requests
    overall = check_status(df)
    shown = mask & (overall >= 0)
    edges = time_bins(run, t0, shown)
    mids = (edges[:-1] + edges[1:]) / 2
    start = df["start_epoch_s"].to_numpy(dtype=float) - t0
    bins = np.clip(np.digitize(start, edges) - 1, 0, len(mids) - 1)

    def line(label: str, status: np.ndarray, rows: np.ndarray) -> Series:
        sel = rows & mask & (status >= 0)
        return series(label, mids, _percent(status[sel], bins[sel], len(mids)))

    by_workload = [line(w, overall, np.asarray(df["workload"] == w, dtype=bool)) for w in workloads_in(df, shown)]
    everywhere = np.ones(len(df), dtype=bool)
    by_check = [line(name, check_status(df, name), everywhere) for name in check_names(df, shown)]
    axis = "answers passed (%)"
    workloads_title = "Answers that passed every check, per workload (judged requests, by start)"
    checks_title = "Pass rate per check (every workload's answers it applied to)"
    return [
        Chart("quality-workloads", workloads_title, TIME_LABEL, axis, by_workload, y_max=102, unit="percent"),
        Chart("quality-checks", checks_title, TIME_LABEL, axis, by_check, y_max=102, unit="percent"),
    ]


def _load_levels(run: RunData, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, str] | None:
    """``(users per record, which records count, the axis in words)``: a sweep's levels (the requests that
    started in a level's judged half) or a capacity search's steps (users at each request's start)."""
    if run.path == Path():
        return None
    df = run.requests
    start = df["start_epoch_s"].to_numpy(dtype=float)
    try:
        sweep = read_sweep(run.path)
    except (OSError, ValueError) as exc:
        log.warning("tokenstorm: sweep.json not used for the quality section: %s", exc)
        sweep = None
    if sweep is not None and sweep.levels:
        users = np.full(len(df), -1)
        for level in sweep.levels:  # a level's judged half; --warmup flags do not take its requests away
            users[(start >= level.judged_from_epoch_s) & (start < level.judged_to_epoch_s)] = level.users
        live = np.asarray(df["error_category"] != "cancelled", dtype=bool)
        return users, live & (users >= 0), "sweep level (offered users; requests that started in its judged half)"
    try:
        capacity = read_capacity(run.path)
    except (OSError, ValueError):
        capacity = None
    load = read_load(run.path) if capacity is not None and capacity.steps else []
    if not load:
        return None
    t = np.array([s.epoch_s for s in load])
    at = np.array([s.users for s in load])[np.clip(np.searchsorted(t, start, side="right") - 1, 0, len(t) - 1)]
    assert capacity is not None  # load was read only for a capacity search
    return at, mask & np.isin(at, [s.users for s in capacity.steps]), "capacity step (users when the request started)"


def _load_png(run: RunData, mask: np.ndarray) -> tuple[str | None, str]:
    found = _load_levels(run, mask)
    if found is None:
        return None, ""
    users, counted, axis = found
    df = run.requests
    overall = check_status(df)
    levels = np.unique(users[counted & (overall >= 0)])
    if levels.size < 2:
        return None, axis
    index = np.searchsorted(levels, users)
    fig, axes = new_figure(1, 2, 3.6)
    with report_style():
        for ax, title, groups in (
            (
                axes[0][0],
                "Every check, per workload",
                [(w, overall, np.asarray(df["workload"] == w)) for w in workloads_in(df, counted & (overall >= 0))],
            ),
            (
                axes[0][1],
                "Per check",
                [(n, check_status(df, n), np.ones(len(df), dtype=bool)) for n in check_names(df, counted)],
            ),
        ):
            for label, status, rows in groups:
                sel = counted & rows & (status >= 0) & np.isin(users, levels)
                ax.plot(levels, _percent(status[sel], index[sel], levels.size), "-o", label=label)
            ax.set_title(title)
            _rate_axes(ax, "users")
            ax.set_xlim(left=0)
            side_legend(ax)
    return figure_png(fig), axis


def _failed_answers(run: RunData, mask: np.ndarray) -> tuple[list[dict[str, Any]], int]:
    """Up to :data:`FAILED_ANSWERS_SHOWN` judged failed answers with their kept text, spread round-robin over
    (workload, check); and how many judged records kept one."""
    if run.path == Path():
        return [], 0
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    offset, kept = 0, 0
    try:
        for batch in iter_batches(run.path, columns=_ANSWER_COLUMNS, batch_size=65536):
            n = batch.num_rows
            has = np.asarray(pc.is_valid(batch.column("answer_sample")).to_numpy(zero_copy_only=False), dtype=bool)
            within = mask[offset : offset + n] if offset + n <= len(mask) else np.zeros(n, dtype=bool)
            offset += n
            for i in np.flatnonzero(has & within):
                row = {c: batch.column(c)[int(i)].as_py() for c in _ANSWER_COLUMNS}
                if row["check"] in (None, "pass"):
                    continue
                kept += 1
                by.setdefault((str(row["workload"]), str(row["check"])), []).append(row)
    except (OSError, ValueError) as exc:  # a torn or unreadable file: the rest of the report still comes
        log.warning("tokenstorm: failed answers not read: %s", exc)
    shown: list[dict[str, Any]] = []
    queues = [by[k] for k in sorted(by)]
    while queues and len(shown) < FAILED_ANSWERS_SHOWN:
        for q in queues:
            if q and len(shown) < FAILED_ANSWERS_SHOWN:
                shown.append(q.pop(0))
        queues = [q for q in queues if q]
    return shown, kept


def quality_view(run: RunData, spec: SloSpec, summary: RunSummary, mask: np.ndarray, t0: float) -> QualityView | None:
    """The quality section (None: no answer was checked and the run has no consistency probes)."""
    if summary.quality is None and summary.consistency is None:
        return None
    consistency = summary.consistency
    pairs = sorted((consistency or {}).get("pairs") or [], key=lambda p: (not p["changed"], p["target"], p["probe"]))
    if summary.quality is None:
        return QualityView([], [], [], [], None, "", consistency, pairs[:_PAIRS_SHOWN], [], 0, 0)
    failed, kept = _failed_answers(run, mask)
    load_png, load_axis = _load_png(run, mask)
    ok = mask & run.requests["ok"].fillna(False).astype(bool).to_numpy()
    total = int((check_status(run.requests) == 0)[ok].sum())
    return QualityView(
        first_screen_lines(summary),
        _rows(summary),
        summary.quality.get("needle") or [],
        _over_time(run, mask, t0),
        load_png,
        load_axis,
        consistency,
        pairs[:_PAIRS_SHOWN],
        failed,
        total,
        kept,
    )
