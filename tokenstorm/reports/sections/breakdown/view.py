"""The report's "Where the time went" section as data: per scope (the run or each A/B target, then each
workload) the means that add up to the client's TTFT and E2E (:class:`~tokenstorm.reports.judging.breakdown.Split`) and
their figure, each part's percentiles (``summary.json``'s figures as they are), the parts' means over time beside
the users and vLLM's running / waiting, and — in a sweep or a capacity search — each level's split and which part
grew past the knee. The figures are :mod:`tokenstorm.reports.judging.breakdown`'s; every text is shown escaped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.breakdown import (
    PART_WORDS,
    Split,
    breakdown_figures,
    part_values,
    split_means,
    timed_mask,
)
from tokenstorm.reports.judging.formats import ms
from tokenstorm.reports.judging.summary import RunSummary
from tokenstorm.reports.judging.targets import target_labels, target_mask
from tokenstorm.reports.render.charts import Chart, Series, series
from tokenstorm.reports.render.plots import time_bins
from tokenstorm.reports.render.timeseries import TIME_LABEL
from tokenstorm.reports.sections.breakdown.figure import PART_COLOURS, split_png
from tokenstorm.reports.sections.headline import headline_rows
from tokenstorm.reports.sections.sweep.capacity import CapacityView, step_windows
from tokenstorm.reports.sections.sweep.model import SweepView

__all__ = ["BreakdownView", "LevelSplit", "SplitRow", "breakdown_view"]

#: the percentile table's parts: (summary key stem, name)
_TABLE_PARTS = (
    ("overhead", "overhead"),
    ("server_queue", "queue"),
    ("server_ttft", "prefill (server TTFT)"),
    ("server_decode", "decode"),
    ("server_itl", "server ITL (a request's mean gap)"),
)
_TTFT_PARTS = ("overhead", "server_queue", "server_ttft")


@dataclass(frozen=True)
class SplitRow:
    """One scope's row: its split and its ``summary.json`` block (the parts' percentiles)."""

    label: str
    kind: str  # "run", "target" or "workload", as the headline's rows
    scope: str  # data-scope, as the headline's
    split: Split
    block: dict[str, Any]

    @property
    def percentile_row(self) -> tuple[str, str, str, dict[str, Any]]:
        """(label, kind, scope, figures): its row of the percentiles' table."""
        return self.label, self.kind, self.scope, self.block


@dataclass(frozen=True)
class LevelSplit:
    """One sweep level (capacity step): its split over the requests its percentiles are from."""

    users: int
    split: Split | None  # None: the server timed none of its requests
    knee: bool  # the goodput knee (a capacity search: the highest load that held)
    block: dict[str, Any] = field(default_factory=dict)  # its parts' percentiles, as summary.json names them

    @property
    def percentile_row(self) -> tuple[str, str, str, dict[str, Any]]:
        """(users, "knee" or "", no scope, figures): its row of the levels' percentiles table."""
        return str(self.users), "knee" if self.knee else "", "", self.block


@dataclass
class BreakdownView:
    """What the section shows."""

    rows: list[SplitRow]
    untimed: list[str]  # scopes with successful requests the server timed none of
    png: str
    part_rows: list[tuple[str, str]]  # the percentile table's parts: (summary key stem, name)
    over_time: list[Chart]
    colours: dict[str, str] = field(default_factory=dict)  # part name -> the figure's colour
    levels: list[LevelSplit] = field(default_factory=list)
    level_noun: str = ""  # "level" (a sweep) or "step" (a capacity search)
    levels_png: str = ""
    growth: str = ""  # which part grew past the knee, in words


def _scope_mask(run: RunData, scope: str) -> np.ndarray:
    """The rows a headline row's data-scope (``all``, ``workload:W``, ``target:T``, ``target:T/workload:W``) covers."""
    df = run.requests
    rows = np.ones(len(df), dtype=bool)
    for part in scope.split("/"):
        kind, _, name = part.partition(":")
        if kind == "target":
            rows &= target_mask(run, name)
        elif kind == "workload":
            rows &= np.asarray(df["workload"] == name, dtype=bool)
    return rows


def _parent(scope: str) -> str:
    """The scope a workload row is one workload of: ``all`` or ``target:T``."""
    return scope.rsplit("/", 1)[0] if "/" in scope else "all"


def _ok(run: RunData) -> np.ndarray:
    ok: np.ndarray = run.requests["ok"].fillna(False).astype(bool).to_numpy()
    return ok


def breakdown_view(
    run: RunData,
    summary: RunSummary,
    mask: np.ndarray,
    t0: float,
    sweep: SweepView | None = None,
    capacity: CapacityView | None = None,
) -> BreakdownView | None:
    """The section of a run the server timed (None: it timed none of the judged successful requests)."""
    if not len(run.requests):
        return None
    ok = mask & _ok(run)
    if not timed_mask(run, ok).any():
        return None
    rows: list[SplitRow] = []
    untimed: list[str] = []
    headline = headline_rows(summary)
    parents = [_parent(r.scope) for r in headline if r.kind == "workload"]
    for r in headline:
        if r.kind == "workload" and parents.count(_parent(r.scope)) == 1:
            continue  # its scope's only workload: the same requests as the row above it
        split = split_means(run, ok & _scope_mask(run, r.scope))
        if split is not None:
            rows.append(SplitRow(r.label, r.kind, r.scope, split, r.block))
        elif r.block.get("completed"):
            untimed.append(r.label)
    parts = list(_TABLE_PARTS)
    if any(r.block.get("mean_server_frontend_ms") is not None for r in rows):
        parts.append(("server_frontend", "server front end (in the overhead)"))
    view = BreakdownView(
        rows,
        untimed,
        split_png([r.label for r in rows], [r.split for r in rows]),
        parts,
        _over_time(run, ok, t0),
        dict(zip(("overhead", "queue", "prefill", "decode", "tail"), PART_COLOURS, strict=True)),
    )
    levels, noun = _levels(run, sweep, capacity)
    if levels:
        timed = [lv for lv in levels if lv.split is not None]
        view.levels, view.level_noun, view.growth = levels, noun, _growth(levels, noun)
        if timed:
            labels = [f"{lv.users} user{'s' if lv.users != 1 else ''}" for lv in timed]
            view.levels_png = split_png(labels, [lv.split for lv in timed if lv.split])
    return view


def _levels(run: RunData, sweep: SweepView | None, capacity: CapacityView | None) -> tuple[list[LevelSplit], str]:
    """Each sweep level's (capacity step's) split, over the successful requests its percentiles are from."""
    df = run.requests
    start = df["start_epoch_s"].to_numpy(dtype=float)
    ok = _ok(run)
    if sweep is not None:
        knee = sweep.knee.users if sweep.knee is not None else None
        out = []
        for lv in sweep.levels:
            sel = ok & (start >= lv.judged_from_epoch_s) & (start < lv.judged_to_epoch_s)  # as the level's row
            out.append(LevelSplit(lv.users, split_means(run, sel), lv.users == knee, breakdown_figures(run, sel)))
        return out, "level"
    if capacity is not None:
        windows = step_windows(run, capacity.result)
        ended = start + np.nan_to_num(df["e2e_s"].to_numpy(dtype=float))
        out = []
        for row in capacity.rows:
            lo, hi = windows.get(row.step.users, (0.0, 0.0))
            sel = ok & (start >= lo) & (start < hi) & (ended <= hi)  # as the search judged the step
            out.append(LevelSplit(row.step.users, split_means(run, sel), row.highest, breakdown_figures(run, sel)))
        return out, "step"
    return [], ""


def _growth(levels: list[LevelSplit], noun: str) -> str:
    """``Past the knee (8 → 32 users) mean TTFT went from 40.1 to 412 ms: queue +360 ms, ...; the queue grew
    most.``: the knee's split against the highest timed level's; empty when there is nothing past it."""
    knee = next((i for i, lv in enumerate(levels) if lv.knee), None)
    if knee is None or levels[knee].split is None:
        return ""
    past = [lv for lv in levels[knee + 1 :] if lv.split is not None]
    if not past:
        return ""
    a, b = levels[knee], past[-1]
    sa, sb = a.split, b.split
    assert sa is not None and sb is not None
    deltas = {
        "overhead": sb.overhead_ms - sa.overhead_ms,
        "queue": sb.queue_ms - sa.queue_ms,
        "prefill": sb.prefill_ms - sa.prefill_ms,
    }
    if sa.e2e_parts_ms is not None and sb.e2e_parts_ms is not None:
        deltas["decode"] = sb.e2e_parts_ms[3] - sa.e2e_parts_ms[3]
    most = max(deltas, key=lambda k: deltas[k])
    said = ", ".join(f"{k} {'+' if v >= 0 else '−'}{ms(abs(v))} ms" for k, v in deltas.items())
    knee_words = "knee" if noun == "level" else "highest load that held"
    return (
        f"Past the {knee_words} ({a.users} → {b.users} users) mean TTFT went from {ms(sa.ttft_ms)} to "
        f"{ms(sb.ttft_ms)} ms; the parts' means: {said} — the {most} grew most."
    )


def _over_time(run: RunData, ok: np.ndarray, t0: float) -> list[Chart]:
    """The TTFT parts' means per time bin (by request start) of the timed requests, per A/B target; and beside
    them the users and vLLM's running / waiting requests."""
    df = run.requests
    timed = timed_mask(run, ok)
    edges = time_bins(run, t0, timed)
    mids = (edges[:-1] + edges[1:]) / 2
    start = df["start_epoch_s"].to_numpy(dtype=float)
    groups = [(f" {t}", target_mask(run, t)) for t in target_labels(run)] or [("", np.ones(len(df), dtype=bool))]
    lines: list[Series] = []
    for suffix, within in groups:
        sel = timed & within
        if not sel.any():
            continue
        idx = np.clip(np.digitize(start[sel] - t0, edges) - 1, 0, len(mids) - 1)
        counts = np.bincount(idx, minlength=len(mids)).astype(float)
        for stem in _TTFT_PARTS:
            sums = np.bincount(idx, weights=part_values(run, stem, sel) * 1000, minlength=len(mids))
            with np.errstate(invalid="ignore", divide="ignore"):
                lines.append(series(f"{PART_WORDS[stem]}{suffix}", mids, sums / counts))
    title = "Where TTFT went, by request start: the mean overhead, queue and prefill per time bin"
    charts = [Chart("split-over-time", title, TIME_LABEL, "mean (ms)", lines, unit="ms")]
    load = _load_lines(run, t0)
    if load:
        charts.append(
            Chart(
                "split-load",
                "Beside it: users and vLLM requests running / waiting",
                TIME_LABEL,
                "requests, users",
                load,
                unit="count",
            )
        )
    return charts


def _load_lines(run: RunData, t0: float) -> list[Series]:
    """The users (load samples) and vLLM's running and waiting requests (server samples, per A/B target)."""
    out = []
    if run.load:
        out.append(series("users", [s.epoch_s - t0 for s in run.load], [s.users for s in run.load], step=True))
    server = run.server
    if not server.empty:
        parts = [(f" {t}", g) for t, g in server.groupby("target") if t] if "target" in server.columns else []
        for suffix, part in parts or [("", server)]:
            out += [
                series(f"vLLM {col}{suffix}", part["epoch_s"] - t0, part[col], dash=col == "waiting")
                for col in ("running", "waiting")
                if col in part.columns
            ]
    return out
