"""``reports compare --html``: the comparison as a self-contained page styled like the report
(jinja2 with autoescape: run names, URLs, model names and server-provided settings are untrusted text).
It leads with what the console leads with: the runs' legend and status, one sentence per run against its
baseline, the headline figures with their sample sizes; then the context, the deployment and every figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenstorm.reports.compare.headline import errors_cell, headline_rows, sentences, status_line
from tokenstorm.reports.compare.model import SECTION_TITLES, SECTIONS, fmt_delta, fmt_interval, fmt_value
from tokenstorm.reports.compare.text import mark as text_mark
from tokenstorm.reports.compare.text import marks_legend
from tokenstorm.reports.render.templates import page_environment

__all__ = ["render_comparison"]

_ENV = page_environment([Path(__file__).resolve().parent])


def _cell(row: dict[str, Any], i: int, value: str, threshold_pct: float) -> dict[str, Any]:
    """One figure's cell: its value, its delta with the mark and the change's interval, its class (``fail``:
    worse beyond the threshold; ``unclear``: beyond it with no significant difference) and what a hover says."""
    ci, judged = row["ci"][i], row["judged"][i]
    few = bool(row["few_delta"][i]) and ci is None
    mark = text_mark(row, i, threshold_pct)
    title = "from few samples" if few else ""
    if mark == "?":
        title = f"no significant difference: the change's interval reaches inside ±{threshold_pct:g}%"
    elif judged == "worse" and ci is not None:
        title = f"worse by more than {threshold_pct:g}%: the whole interval of the change is beyond it"
    return {
        "value": value,
        "delta": fmt_delta(row["key"], row["deltas"][i]),
        "mark": mark,
        "ci": "" if ci is None else fmt_interval(*ci),
        "cls": "fail" if judged == "worse" else "unclear" if mark == "?" else "",
        "few": few,
        "title": title,
    }


def _table_rows(rows: list[dict[str, Any]], threshold_pct: float) -> list[dict[str, Any]]:
    """Rows for the page: each figure's cells (:func:`_cell`), with a row of sample sizes above each group of
    figures from the same samples (``n``: its cells are the sizes)."""
    out: list[dict[str, Any]] = []
    group = None
    for r in rows:
        if r["noun"] is not None and r["section"] != "errors" and (r["scope"], r["noun"]) != group:
            group = (r["scope"], r["noun"])
            out.append(
                {
                    "n": True,
                    "scope": r["scope"],
                    "label": f"n {r['noun']}",
                    "cells": ["—" if n is None else f"n={n:,.0f}" for n in r["n"]],
                }
            )
        out.append(
            {
                **r,
                "n": False,
                "cells": [_cell(r, i, fmt_value(r["key"], v), threshold_pct) for i, v in enumerate(r["values"])],
            }
        )
    return out


def render_comparison(comparison: Any) -> str:
    """The page of a ``tokenstorm.reports.compare.runs.Comparison`` as one HTML string (typed ``Any``: runs.py imports
    this module, and the architecture test allows no cycle, not even a type-only one)."""
    sections: list[dict[str, Any]] = []
    for name in SECTIONS:
        rows = [r for r in comparison.rows if r["section"] == name]
        if rows:
            title = SECTION_TITLES.get(name, name).capitalize()
            sections.append({"id": name, "title": title, "rows": _table_rows(rows, comparison.threshold_pct)})
    against = {
        i: comparison.labels[ref]
        for i, ref in enumerate(comparison.refs)
        if ref is not None and ref != comparison.baseline
    }
    threshold = comparison.threshold_pct
    headline = _table_rows([r for r in headline_rows(comparison) if r["key"] != "error_rate"], threshold)
    errors = next((r for r in headline_rows(comparison) if r["key"] == "error_rate"), None)
    if errors is not None:
        cells = [_cell(errors, i, errors_cell(comparison, i), threshold) for i in range(len(errors["values"]))]
        headline.append({"n": False, "scope": "all", "label": "errors (failed of all)", "cells": cells})
    return _ENV.get_template("compare.html.j2").render(
        c=comparison,
        base=comparison.runs[comparison.baseline],
        context=comparison.context_rows(),
        sections=sections,
        against=against,
        sentences=[s.text(comparison.threshold_pct) for s in sentences(comparison)],
        statuses=[status_line(comparison, i) for i in range(len(comparison.runs))],
        marks=marks_legend(comparison),
        headline=headline,
        simulated=any(col.simulated for col in comparison.columns),
        notes=sorted({n for col in comparison.columns for n in col.notes}),
    )
