"""The report's first screen as data: the headline rows (the whole run, or each A/B target, then each
workload), the prompt and output length rows, the window each throughput covers, the accounting of
the records, and the A/B answer's figures.

The figures are :mod:`._summary`'s blocks as they are (the same numbers summary.json and the console
carry); this module only chooses the rows and says what they cover.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenstorm.reports.data.columns import chunks
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.figures import LENGTH_PERCENTILES
from tokenstorm.reports.judging.summary import RunSummary
from tokenstorm.reports.judging.targets import COMPARED

__all__ = [
    "HEADLINE_LATENCIES",
    "LENGTH_PERCENTILES",
    "HeadlineRow",
    "ab_details",
    "accounting_note",
    "accounting_text",
    "headline_rows",
    "window_note",
]

#: (summary key stem, column title): each shown as p50 / p99 in ms
HEADLINE_LATENCIES = (("ttft", "TTFT"), ("itl", "ITL"), ("tpot", "TPOT"), ("e2el", "E2E"))

#: the A/B answer's figures after the E2E sentence: (summary key, name, lower is better)
_AB_DETAILS = ("median_ttft_ms", "median_itl_ms", "median_tpot_ms", "output_throughput", "request_throughput")


@dataclass(frozen=True)
class HeadlineRow:
    """One row of the headline and length tables."""

    #: what the row covers, as shown ("all workloads", "chat", "target fast", "fast · chat")
    label: str
    #: "run" (the whole run), "target" (one A/B target, all its workloads) or "workload"
    kind: str
    #: data-scope of the row in the page (tests and scripts find rows by it): "all", "workload:chat",
    #: "target:fast", "target:fast/workload:chat"
    scope: str
    block: dict[str, Any]


def headline_rows(summary: RunSummary) -> list[HeadlineRow]:
    """The whole run then each workload; an A/B run: each target then its workloads (never pooled)."""
    targets = (summary.targets or {}).get("targets") or {}
    if not targets:
        rows = [HeadlineRow("all workloads", "run", "all", summary.overall)]
        rows += [HeadlineRow(w, "workload", f"workload:{w}", b) for w, b in summary.per_workload.items()]
        return rows
    rows = []
    for label, block in targets.items():
        rows.append(HeadlineRow(f"target {label}", "target", f"target:{label}", block))
        rows += [
            HeadlineRow(f"{label} · {w}", "workload", f"target:{label}/workload:{w}", b)
            for w, b in (block.get("workloads") or {}).items()
        ]
    return rows


def _clock(epoch_s: float, t0: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(epoch_s)) + f" UTC (+{epoch_s - t0:.0f} s)"


def window_note(run: RunData, judged: np.ndarray, t0: float) -> str:
    """Which window the whole run's rates cover, in words (empty when nothing was judged)."""
    df = run.requests
    if not judged.any():
        return ""
    starts = df["start_epoch_s"].to_numpy(dtype=float)  # views; a million rows at a time below
    e2e = df["e2e_s"].to_numpy(dtype=float)
    first, last = np.inf, -np.inf
    for p in chunks(len(df)):
        start = starts[p][judged[p]]
        if start.size:
            first = min(first, float(start.min()))
            last = max(last, float((start + np.nan_to_num(e2e[p][judged[p]])).max()))
    return f"{last - first:,.1f} s, {_clock(first, t0)} to {_clock(last, t0)}"


def accounting_text(block: dict[str, Any], warmup_s: float = 0.0, stopped: str = "") -> str:
    """How a block's records add up, naming the ones not judged: ``255 records = 230 completed + 5 failed
    + 20 cancelled (...)`` (``stopped``: when the run ended, in words)."""
    parts = [f"{block.get('completed', 0):,} completed", f"{block.get('failed', 0):,} failed"]
    if block.get("cancelled"):
        when = f", the run ended at {stopped}" if stopped else ""
        parts.append(
            f"{block['cancelled']:,} cancelled (still in flight when the load test stopped them{when}; not judged)"
        )
    else:
        parts.append("0 cancelled")
    if block.get("warmup_requests"):
        within = f"the first {warmup_s:g} s" if warmup_s else "the warm-up"
        parts.append(f"{block['warmup_requests']:,} in the warm-up (started in {within}; not judged)")
    return f"{block.get('records', 0):,} records = " + " + ".join(parts)


def accounting_note(run: RunData, summary: RunSummary, warmup_s: float, t0: float) -> str:
    """:func:`accounting_text` of the whole run, with the time it ended."""
    stopped = run.meta.stopped_epoch_s
    return accounting_text(summary.overall, warmup_s, _clock(float(stopped), t0) if stopped else "") + "."


def ab_details(summary: RunSummary) -> list[tuple[str, str, float, str]]:
    """Beside the A/B answer: each other target's deltas against the baseline on a few headline figures,
    as (target, figure name, delta %, "better" / "worse" / "" when the same at whole percents)."""
    ab = summary.targets or {}
    names = {key: (name, lower) for key, name, lower in COMPARED}
    out = []
    for label, t in (ab.get("targets") or {}).items():
        if label == ab.get("baseline"):
            continue
        for key in _AB_DETAILS:
            delta = (t.get("delta_pct_vs_baseline") or {}).get(key)
            if delta is None or key not in names:
                continue
            name, lower = names[key]
            # "better" / "worse" / "" (no difference at the precision shown)
            verdict = "" if round(delta) == 0 else "better" if (delta < 0) == lower else "worse"
            out.append((label, name.removesuffix(" ms"), float(delta), verdict))
    return out
