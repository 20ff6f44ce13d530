"""What a comparison says first: each run against its baseline in one sentence (the headline figures
that got worse or better beyond the threshold, each with its change's interval, those with no significant
difference, the ones within it, the errors, how many other figures got worse), each run's short status, and
the headline figures' rows. The console (:mod:`tokenstorm.reports.compare.text`)
and the page (:mod:`tokenstorm.reports.compare.html`) both lead with these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenstorm.reports.compare.model import ALL, fmt_delta, fmt_interval

__all__ = ["HEADLINE", "Sentence", "change_text", "errors_cell", "headline_rows", "sentences", "status_line"]

#: the figures of the whole run a comparison leads with, in this order (those no run has are left out)
HEADLINE = (
    "median_ttft_ms",
    "p95_ttft_ms",
    "median_itl_ms",
    "p95_itl_ms",
    "median_e2el_ms",
    "p95_e2el_ms",
    "output_throughput",
    "request_throughput",
    "error_rate",
    "quality_pass_rate",
)


@dataclass
class Sentence:
    """One run against its reference: ``B vs A: worse: ... ; better: ...; within 10%: ...; errors ...``."""

    label: str  # "B"
    against: str  # "A"
    worse: list[str]  # "ITL p50 +42.1% [+30..+55]", "E2E p95 +11.7% (few samples)"
    better: list[str]
    within: list[str]  # "TTFT p50"
    errors: str  # "errors 0 of 28 → 2 of 30 (+6.7pp)"
    more_worse: dict[str, int]  # scope -> how many more figures (beyond the headline) got worse
    #: figures whose change's interval reaches across the threshold: "E2E p95 +17.7% [-21..+∞]"
    unclear: list[str] = field(default_factory=list)

    def text(self, threshold_pct: float) -> str:
        """The sentence, unwrapped."""
        parts = []
        if self.worse:
            parts.append("worse: " + ", ".join(self.worse))
        if self.better:
            parts.append("better: " + ", ".join(self.better))
        if self.unclear:
            parts.append("no significant difference: " + ", ".join(self.unclear))
        if self.within:
            parts.append(f"within {threshold_pct:g}%: " + ", ".join(self.within))
        if self.errors:
            parts.append(self.errors)
        out = f"{self.label} vs {self.against}: " + "; ".join(parts or ["no figure to compare"]) + "."
        if self.more_worse:
            total = sum(self.more_worse.values())
            where = ", ".join(f"{'whole run' if scope == ALL else scope} {n}" for scope, n in self.more_worse.items())
            out += f" Beyond these, {total} more figure(s) worse by > {threshold_pct:g}% ({where})."
        return out


def _name(row: dict[str, Any]) -> str:
    return str(row["label"]).removesuffix(" ms")


def headline_rows(comparison: Any) -> list[dict[str, Any]]:
    """The whole run's headline figures (:data:`HEADLINE`), as rows of ``comparison.rows``."""
    rows = {r["key"]: r for r in comparison.rows if r["scope"] == ALL}
    return [rows[k] for k in HEADLINE if k in rows]


def errors_cell(comparison: Any, i: int) -> str:
    """Column ``i``'s errors as ``2 of 30`` (failed of every request), or its error rate when it has no counts."""
    rows = {r["key"]: r for r in comparison.rows if r["scope"] == ALL}
    done = rows["completed"]["values"][i] if "completed" in rows else None
    failed = rows["failed"]["values"][i] if "failed" in rows else None
    if done is not None:
        return f"{failed or 0:,.0f} of {done + (failed or 0):,.0f}"
    rate = rows["error_rate"]["values"][i] if "error_rate" in rows else None
    return "—" if rate is None else f"{rate:.2%}"


def change_text(row: dict[str, Any], i: int) -> str:
    """Column ``i``'s delta with its interval: ``+42.1% [+30..+55]``; the delta alone when it has none."""
    ci = row["ci"][i]
    return fmt_delta(row["key"], row["deltas"][i]) + ("" if ci is None else f" {fmt_interval(*ci)}")


def sentences(comparison: Any) -> list[Sentence]:
    """One :class:`Sentence` per column compared with another (every column but the baseline)."""
    labels = comparison.labels
    headline = headline_rows(comparison)
    shown = {id(r) for r in headline}
    out = []
    for i, ref in enumerate(comparison.refs):
        if ref is None:
            continue
        said: dict[str, list[str]] = {"worse": [], "better": [], "within": [], "unclear": []}
        errors = ""
        for row in headline:
            judged = row["judged"][i]
            if judged is None:
                continue
            few = " (few samples)" if row["few_delta"][i] and row["ci"][i] is None else ""
            if row["key"] == "error_rate":
                word = {"within": "", "unclear": ", no significant difference"}.get(judged, f", {judged}")
                change = f" ({change_text(row, i)}{word}){few}" if row["deltas"][i] else ""
                errors = f"errors {errors_cell(comparison, ref)} → {errors_cell(comparison, i)}{change}"
            elif judged == "within":
                said["within"].append(_name(row))
            else:
                said[judged].append(f"{_name(row)} {change_text(row, i)}{few}")
        more: dict[str, int] = {}
        for row in comparison.rows:
            if row["regressed"][i] and id(row) not in shown:
                more[row["scope"]] = more.get(row["scope"], 0) + 1
        out.append(
            Sentence(
                labels[i], labels[ref], said["worse"], said["better"], said["within"], errors, more, said["unclear"]
            )
        )
    return out


def _clause(text: str) -> str:
    """A status sentence's first clause: up to its first ``;`` outside parentheses."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == ";" and depth <= 0:
            return text[:i].strip()
    return text.strip()


def status_line(comparison: Any, i: int) -> str:
    """Column ``i``'s verdict and timing fidelity in a few words: ``SLOs held — all 5 SLOs held; timing
    trustworthy``; its tool when the runs were measured by different tools; SIMULATED when it was."""
    col = comparison.columns[i]
    parts = []
    if len({c.tool for c in comparison.columns}) > 1:
        parts.append(col.tool)
    if col.simulated:
        parts.append("SIMULATED")
    verdict = _clause(col.verdict) if col.verdict else "no SLOs judged"
    fidelity = _clause(col.fidelity) if col.fidelity else ""
    if fidelity and verdict.lower().startswith(fidelity.split(":")[0].lower()):
        verdict = ""  # the verdict is the fidelity's ("timing not trustworthy"): said once
    parts += [p for p in (verdict, fidelity.split(":")[0] if col.fidelity_ok else fidelity) if p]
    if col.no_interval:
        parts.append(f"no interval ({col.no_interval})")
    return "; ".join(parts)
