"""``reports compare --html``: the comparison as a self-contained page styled like the report
(jinja2 with autoescape: run names, URLs, model names and server-provided settings are untrusted text).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from reports.compare.model import SECTIONS, fmt_delta, fmt_value

__all__ = ["render_comparison"]

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def render_comparison(comparison: Any) -> str:
    """The page of a ``reports.compare.runs.Comparison`` as one HTML string (typed ``Any``: _compare imports
    this module, and the architecture test allows no cycle, not even a type-only one)."""
    sections: list[dict[str, Any]] = []
    for name in SECTIONS:
        rows = [r for r in comparison.rows if r["section"] == name]
        if rows:
            sections.append({"id": name, "title": name.capitalize(), "rows": [
                {**r, "cells": [(fmt_value(r["key"], v), fmt_delta(r["key"], d), bad)
                                for v, d, bad in zip(r["values"], r["deltas"], r["regressed"], strict=True)]}
                for r in rows]})  # fmt: skip
    against = {i: comparison.runs[ref] for i, ref in enumerate(comparison.refs)
               if ref is not None and ref != comparison.baseline}  # fmt: skip
    return _ENV.get_template("compare.html.j2").render(
        c=comparison,
        base=comparison.runs[comparison.baseline],
        context=comparison.context_rows(),
        sections=sections,
        against=against,
        simulated=any(col.simulated for col in comparison.columns),
        notes=sorted({n for col in comparison.columns for n in col.notes}),
    )
