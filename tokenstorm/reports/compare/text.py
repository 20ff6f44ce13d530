"""``tokenstorm compare`` on the console: no line over 100 characters, the answer first.

The runs are columns labelled A, B, ... with a legend of their whole names and each one's status; then one
sentence per run against its baseline, the headline figures with their sample sizes (``n=``), what
differs in the load and the deployment, and the verdict last. ``--details`` adds each run's context and
every figure, per workload. A table too wide for 100 columns is split into several, each repeating its
first column; a cell is never cut.
"""

from __future__ import annotations

import textwrap
from typing import Any

from tokenstorm.reports.compare.headline import errors_cell, headline_rows, sentences, status_line
from tokenstorm.reports.compare.model import SECTION_TITLES, SECTIONS, fmt_delta, fmt_interval, fmt_value

__all__ = ["WIDTH", "comparison_text", "fit", "mark", "marks_legend"]

#: the widest line the console form prints
WIDTH = 100
#: marks in the figures' cells: worse beyond the threshold; beyond it but no significant difference; few samples
WORSE_MARK, UNCLEAR_MARK, FEW_MARK = "!", "?", "~"


def fit(text: str, indent: str = "", first: str = "") -> list[str]:
    """``text`` wrapped to :data:`WIDTH` (``first`` before its first line, ``indent`` before the others);
    a word longer than a line (a long path) is broken."""
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent, break_on_hyphens=False) or [
        first.rstrip()
    ]


def _table(head: str, labels: list[str], rows: list[tuple[str, list[str]]]) -> list[str]:
    """A table with a column per run (right-aligned), split into as many tables as 100 columns need."""
    left = max(len(head), *(len(what) for what, _ in rows)) if rows else len(head)
    widths = [max(len(labels[j]), *(len(cells[j]) for _, cells in rows)) for j in range(len(labels))]
    chunks: list[list[int]] = [[]]
    for j, w in enumerate(widths):
        if chunks[-1] and left + sum(widths[k] + 2 for k in chunks[-1]) + w + 2 > WIDTH:
            chunks.append([])
        chunks[-1].append(j)
    out: list[str] = []
    for chunk in chunks:
        if out:
            out.append("")
        out.append(head.ljust(left) + "".join(f"  {labels[j]:>{widths[j]}}" for j in chunk))
        out += [what.ljust(left) + "".join(f"  {cells[j]:>{widths[j]}}" for j in chunk) for what, cells in rows]
    return out


def mark(row: dict[str, Any], i: int, threshold_pct: float) -> str:
    """'!' when column ``i`` is worse beyond the threshold; '?' when its delta is beyond it, on the worse side,
    but its interval reaches inside (no significant difference)."""
    judged, delta = row["judged"][i], row["deltas"][i]
    if judged == "worse":
        return WORSE_MARK
    beyond = delta is not None and (-delta if row["higher_better"] else delta) > threshold_pct
    return UNCLEAR_MARK if judged == "unclear" and beyond else ""


def _cell(row: dict[str, Any], i: int, threshold_pct: float) -> str:
    """``13.98 (+42.1%! [+30..+55])``: the figure, its delta against its reference with its mark and its
    interval; without an interval, '~' before the delta when either figure is from few samples."""
    value = fmt_value(row["key"], row["values"][i])
    delta = row["deltas"][i]
    if delta is None:
        return value
    ci = row["ci"][i]
    few = FEW_MARK if row["few_delta"][i] and ci is None else ""
    interval = "" if ci is None else f" {fmt_interval(*ci)}"
    return f"{value} ({few}{fmt_delta(row['key'], delta)}{mark(row, i, threshold_pct)}{interval})"


def _n_cell(n: float | None) -> str:
    return "n=—" if n is None else f"n={n:,.0f}"


def _figure_rows(rows: list[dict[str, Any]], scoped: bool, threshold_pct: float) -> list[tuple[str, list[str]]]:
    """The rows' cells, each group of figures from the same samples under a line of their sizes
    (``contract: n requests   n=1   n=2``); ``scoped``: figures of several scopes (workloads)."""
    out: list[tuple[str, list[str]]] = []
    group = None
    for row in rows:
        noun = row["noun"]
        if row["section"] == "errors":  # its counts are its figures: the scope alone heads them
            if scoped and row["scope"] != group:
                group = row["scope"]
                out.append((row["scope"], [""] * len(row["values"])))
        elif noun is not None and (row["scope"], noun) != group:
            group = (row["scope"], noun)
            out.append((f"{row['scope']}: n {noun}" if scoped else f"n {noun}", [_n_cell(n) for n in row["n"]]))
        cells = [_cell(row, i, threshold_pct) for i in range(len(row["values"]))]
        out.append((("  " if scoped else "") + row["label"], cells))
    return out


def _legend(c: Any) -> list[str]:
    out = []
    for i, (label, name) in enumerate(zip(c.labels, c.runs, strict=True)):
        col = c.columns[i]
        base = " (baseline)" if i == c.baseline else ""
        url = f" — {col.target_url}" if col.target_label and col.target_url else ""
        out += fit(f"{name}{base}{url}", indent="   ", first=f"{label:<3}")
        out += fit(status_line(c, i), indent="     ", first="   ")
    return out


def _headline(c: Any) -> list[str]:
    """The whole run's headline figures, their sample sizes above them, the errors last."""
    headline = headline_rows(c)
    rows = _figure_rows([r for r in headline if r["key"] != "error_rate"], scoped=False, threshold_pct=c.threshold_pct)
    for row in headline:
        if row["key"] == "error_rate":
            cells = [
                errors_cell(c, i)
                + (
                    ""
                    if d is None
                    else f" ({fmt_delta('error_rate', d)}{mark(row, i, c.threshold_pct)}"
                    + ("" if row["ci"][i] is None else f" {fmt_interval(*row['ci'][i])}")
                    + ")"
                )
                for i, d in enumerate(row["deltas"])
            ]
            rows.append(("errors (failed of all)", cells))
    labels = [label + (" (base)" if i == c.baseline else "") for i, label in enumerate(c.labels)]
    return _table("whole run", labels, rows)


def _context(c: Any) -> list[str]:
    """Each run's context: one line when every run has the same, else a line per run."""
    out = ["RUN CONTEXT"]
    for what, values in c.context_rows():
        if len(set(values)) == 1:
            out += fit(f"{values[0]} (all)", indent=" " * 29, first=f"{what:<28} ")
            continue
        for i, value in enumerate(values):
            out += fit(value, indent=" " * 32, first=f"{what if i == 0 else '':<28} {c.labels[i]:<2} ")
    return out


def _deployment(c: Any) -> list[str]:
    if not c.deployment_diffs:
        captured = any(col.deployment for col in c.columns)
        alike = f" ({c.deployment_alike} alike)" if c.deployment_alike else ""
        return fit(
            f"Deployment: no differences found ({c.deployment_alike} settings alike)"
            if captured
            else "Deployment: not captured in these runs (no run.json deployment block): only the options were "
            f"compared{alike}"
        )
    title = f"Deployment and options — what differs ({c.deployment_alike} settings alike):"
    return [title, *_table("setting", c.labels, c.deployment_diffs)]


def _details(c: Any) -> list[str]:
    out = ["", *_context(c)]
    against = [
        f"{c.labels[i]} against {c.labels[ref]}"
        for i, ref in enumerate(c.refs)
        if ref is not None and ref != c.baseline
    ]
    if against:
        out += fit("A/B targets against the baseline run's same target: " + "; ".join(against))
    for section in SECTIONS:
        rows = [r for r in c.rows if r["section"] == section]
        if rows:
            title = SECTION_TITLES.get(section, section).upper()
            out += ["", *_table(title, c.labels, _figure_rows(rows, scoped=True, threshold_pct=c.threshold_pct))]
    return out


def marks_legend(c: Any) -> str:
    """What the cells' marks mean (the console's line under the headline table)."""
    if not c.confidence:
        return (
            f"'{WORSE_MARK}' worse by more than {c.threshold_pct:g}%, '{FEW_MARK}' a delta from few samples "
            "(n under 10; for a p95 under 20, a p99 under 100), '—' not given by that run's tool"
        )
    paired = " (an A/B target's: its requests paired with their twins)" if any(any(r["paired"]) for r in c.rows) else ""
    return (
        f"[low..high] the change's {c.confidence:.0%} interval{paired}; '{WORSE_MARK}' worse by more than "
        f"{c.threshold_pct:g}% (the whole interval beyond), '{UNCLEAR_MARK}' beyond {c.threshold_pct:g}% but "
        f"no significant difference (the interval reaches inside); no interval: judged on the figure, '{FEW_MARK}'"
        " from few samples; '—' not given by that run's tool"
    )


def comparison_text(c: Any, details: bool = False) -> str:
    """The console form of a ``tokenstorm.reports.compare.runs.Comparison`` (typed ``Any``: runs.py imports this
    module)."""
    out = [
        f"tokenstorm compare: {len(c.runs)} runs, {c.labels[c.baseline]} the baseline"
        + (f"; changes judged by their {c.confidence:.0%} intervals" if c.confidence else ""),
        *_legend(c),
        "",
    ]
    if c.load_diffs:  # before any figure: it says what the deltas cannot be read as
        out += fit(
            "LOAD DIFFERS: these runs did not offer the same load, so their deltas are not the deployment's alone:"
        )
        for line in c.load_diffs:
            out += fit(line, indent="    ", first="  - ")
        out.append("")
    for sentence in sentences(c):
        out += fit(sentence.text(c.threshold_pct), indent="  ")
    out += ["", *_headline(c), *fit(marks_legend(c))]
    out += ["", *_deployment(c)]
    if details:
        out += _details(c)
    notes = sorted({n for col in c.columns for n in col.notes})
    if notes:
        out += ["", "Notes:"]
        for note in notes:
            out += fit(note, indent="    ", first="  - ")
    hint = "" if details else " (--details: every figure, per workload, and each run's context)"
    return "\n".join([*out, "", *fit(c.verdict + hint)])
