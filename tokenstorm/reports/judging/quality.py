"""Answer quality from the raw records and the consistency probes: pass rates per scope and check, the
needle table, the ``quality`` / ``quality_<check>`` / ``consistency_changed`` SLO figures, and ``summary.json``'s
``quality`` and ``consistency`` blocks.

- A record is **checked** when a check applied to its answer (``check`` is not None: ``"pass"`` or the first
  failed check's name); only judged records count (not in the warm-up, not cancelled) — checks run on
  successful answers only, so a failed request is never a checked one.
- **Pass rate** (``quality``): the checked records whose every check passed ÷ the checked records.
- **One check's pass rate** (``quality_<check>``): from ``check_results`` (``needle:pass,script:fail``): the
  records it passed ÷ those it applied to.
- **Needle table** (contract): the ``needle`` check by context length — the record's ``prompt_tokens``, in
  buckets named by their upper bound (``2K``: up to 2,048 tokens, ``4K``: 2,049–4,096, … ``64K``, then
  ``>64K``) — and by the needle's depth in the document (quartiles, ``0–25%`` … ``75–100%``).
- **Consistency** (``consistency_changed``): of the probes answered (ok) in both passes of ``probes.jsonl`` —
  before the load and under it — the share whose text differs (exactly), per A/B target.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tokenstorm.reports.data.columns import workloads_in
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.workloads.rundir import CHECK_NAMES, PROBES_FILE
from tokenstorm.workloads.rundir.probes import UNDER_LOAD, ProbeLine, compared, probe_pairs, read_probes

__all__ = [
    "BUILT_IN_CHECKS",
    "CONSISTENCY_METRIC",
    "NEEDLE_CONTEXTS",
    "NEEDLE_DEPTHS",
    "PROBES_FILE",
    "QUALITY_METRIC",
    "check_names",
    "check_status",
    "consistency_block",
    "is_quality_metric",
    "measure_consistency",
    "measure_quality",
    "needle_rows",
    "quality_applies",
    "quality_block",
    "quality_summary",
    "rate_block",
    "read_probes",
    "valid_quality_metric",
]

QUALITY_METRIC = "quality"
CONSISTENCY_METRIC = "consistency_changed"
#: the built-in checks, in the order the report lists them
BUILT_IN_CHECKS = CHECK_NAMES
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: needle table: context buckets' upper bounds (prompt tokens) and names, then the depth quartiles
_CONTEXT_EDGES = (2048, 4096, 8192, 16384, 32768, 65536)
NEEDLE_CONTEXTS = ("2K", "4K", "8K", "16K", "32K", "64K", ">64K")
NEEDLE_DEPTHS = ("0–25%", "25–50%", "50–75%", "75–100%")


def is_quality_metric(metric: str) -> bool:
    """``quality`` or ``quality_<check>``."""
    return metric == QUALITY_METRIC or metric.startswith(QUALITY_METRIC + "_")


def valid_quality_metric(metric: str) -> str | None:
    """Why ``metric`` (``quality_<check>``) names no check, or None when it does: a built-in, or any
    identifier (a user's own check is named by its function's ``__name__``)."""
    name = metric.removeprefix(QUALITY_METRIC + "_")
    if metric == QUALITY_METRIC or _IDENTIFIER.match(name):
        return None
    return (
        f"{metric}: {name!r} is not a check name (built-in: {', '.join(BUILT_IN_CHECKS)}; "
        "or your own check function's name)"
    )


def _codes(col: pd.Series) -> tuple[np.ndarray, list[str]]:
    if not isinstance(col.dtype, pd.CategoricalDtype):
        col = col.astype("category")
    return np.asarray(col.cat.codes), [str(c) for c in col.cat.categories]  # int8 codes for a few: a byte a row


def _parsed(results: str) -> dict[str, bool]:
    out = {}
    for part in results.split(","):
        name, _, outcome = part.strip().rpartition(":")
        if name:
            out[name] = outcome == "pass"
    return out


def check_status(df: pd.DataFrame, check: str | None = None) -> np.ndarray:
    """Per record: 1 passed, 0 failed, -1 not checked — every check (``check``: None), or one check by name."""
    if df.empty:
        return np.zeros(0, dtype=np.int8)
    column = "check" if check is None else "check_results"
    if column not in df:
        return np.full(len(df), -1, dtype=np.int8)
    codes, categories = _codes(df[column])
    if check is None:
        lut = [-1 if c == "" else 1 if c == "pass" else 0 for c in categories]
    else:
        lut = [int(_parsed(c)[check]) if check in _parsed(c) else -1 for c in categories]
    table = np.array([*lut, -1], dtype=np.int8)  # code -1 (none) reads the last entry
    out: np.ndarray = table[codes]
    return out


def check_names(df: pd.DataFrame, mask: np.ndarray) -> list[str]:
    """The checks that applied to a record in ``mask``: built-ins in their order, then users' own, sorted."""
    if df.empty or "check_results" not in df:
        return []
    codes, categories = _codes(df["check_results"])
    sel = codes[mask]
    seen = np.bincount(sel[sel >= 0], minlength=len(categories))
    names = {n for i in np.flatnonzero(seen) for n in _parsed(categories[i])}
    return [n for n in BUILT_IN_CHECKS if n in names] + sorted(names - set(BUILT_IN_CHECKS))


def rate_block(status: np.ndarray, mask: np.ndarray) -> dict[str, Any]:
    """``checked``, ``passed``, ``failed`` and ``pass_rate`` (None: none checked) of the rows in ``mask``."""
    checked = int(((status >= 0) & mask).sum())
    passed = int(((status == 1) & mask).sum())
    return {
        "checked": checked,
        "passed": passed,
        "failed": checked - passed,
        "pass_rate": passed / checked if checked else None,
    }


def quality_block(run: RunData, mask: np.ndarray) -> dict[str, Any]:
    """One scope's pass rate and each check's (``mask``: its judged records)."""
    df = run.requests
    block = rate_block(check_status(df), mask)
    block["by_check"] = {name: rate_block(check_status(df, name), mask) for name in check_names(df, mask)}
    return block


def _workload(df: pd.DataFrame, w: str) -> np.ndarray:
    return np.asarray(df["workload"] == w, dtype=bool)


def quality_applies(run: RunData, judged: np.ndarray, workload: str, metric: str) -> bool:
    """Whether ``"*"`` judges ``workload`` by ``metric``: a judged record of it was checked (by that check)."""
    df = run.requests
    if df.empty:
        return False
    check = None if metric == QUALITY_METRIC else metric.removeprefix(QUALITY_METRIC + "_")
    return bool(((check_status(df, check) >= 0) & judged & _workload(df, workload)).any())


def measure_quality(run: RunData, metric: str, mask: np.ndarray) -> tuple[float | None, str]:
    """``(pass rate, note)`` of ``metric`` over the judged records ``mask`` (None: nothing was checked)."""
    check = None if metric == QUALITY_METRIC else metric.removeprefix(QUALITY_METRIC + "_")
    block = rate_block(check_status(run.requests, check), mask)
    if block["pass_rate"] is None:
        what = "answer was checked" if check is None else f"answer was checked by {check!r}"
        return None, f"no data: no judged {what}"
    return block["pass_rate"], f"{block['passed']:,} of {block['checked']:,} passed"


def needle_rows(run: RunData, mask: np.ndarray) -> list[dict[str, Any]]:
    """The needle table: per context bucket × depth quartile with a needle checked, its pass rate."""
    df = run.requests
    status = check_status(df, "needle")
    sel = mask & (status >= 0)
    if not sel.any():
        return []
    tokens = df["prompt_tokens"].to_numpy(dtype=float, na_value=np.nan)[sel]
    depth = (
        df["needle_depth"].to_numpy(dtype=float, na_value=np.nan)[sel]
        if "needle_depth" in df
        else np.full(int(sel.sum()), np.nan)
    )
    context = np.where(np.isnan(tokens), len(NEEDLE_CONTEXTS), np.searchsorted(_CONTEXT_EDGES, tokens, side="left"))
    quartile = np.where(np.isnan(depth), len(NEEDLE_DEPTHS), np.clip(np.floor(np.nan_to_num(depth) * 4), 0, 3))
    passed = status[sel] == 1
    contexts, depths = (*NEEDLE_CONTEXTS, "unknown"), (*NEEDLE_DEPTHS, "unknown")
    rows = []
    for c in range(len(contexts)):
        for d in range(len(depths)):
            cell = (context == c) & (quartile == d)
            n = int(cell.sum())
            if n:
                ok = int(passed[cell].sum())
                rows.append(
                    {"context": contexts[c], "depth": depths[d], "checked": n, "passed": ok, "pass_rate": ok / n}
                )
    return rows


def quality_summary(run: RunData, mask: np.ndarray, labels: list[str]) -> dict[str, Any] | None:
    """summary.json's ``quality`` block (None: no judged answer was checked): the run, each workload with
    a checked answer, the needle table; an A/B run: each target's too (``targets``)."""
    df = run.requests
    checked = check_status(df) >= 0
    if not (checked & mask).any():
        return None

    def scoped(within: np.ndarray) -> dict[str, Any]:
        block = quality_block(run, mask & within)
        names = workloads_in(df, checked & mask & within)
        block["workloads"] = {w: quality_block(run, mask & within & _workload(df, w)) for w in names}
        return block

    everything = np.ones(len(df), dtype=bool)
    whole = scoped(everything)
    out: dict[str, Any] = {
        "run": {k: v for k, v in whole.items() if k != "workloads"},
        "workloads": whole["workloads"],
        "needle": needle_rows(run, mask),
    }
    if labels and "target" in df:
        out["targets"] = {label: scoped(np.asarray(df["target"] == label, dtype=bool)) for label in labels}
    return out


# -- consistency probes ------------------------------------------------------------------------------------
def _compare(lines: list[ProbeLine]) -> dict[str, Any]:
    """Counts of one target's (or every target's) probes, and the compared pairs (as the console counts them:
    ``tokenstorm.workloads.rundir.probes``)."""
    passes = probe_pairs(lines)
    pairs = [
        {
            "target": target,
            "probe": probe,
            "before": a.text,
            "under_load": b.text,
            "changed": a.text != b.text,
            "users": b.users,
        }
        for (target, probe), (a, b) in sorted(passes.items())
        if compared((a, b)) and a is not None and b is not None
    ]
    changed = sum(1 for p in pairs if p["changed"])
    under = [line for line in lines if line.phase == UNDER_LOAD]
    users = [line.users for line in under if type(line.users) is int]
    return {
        "probes": len(passes),
        "compared": len(pairs),
        "changed": changed,
        "changed_share": changed / len(pairs) if pairs else None,
        "failed": len(passes) - len(pairs),
        "measured_under_load": bool(under),
        "under_load_users": max(users) if users else None,
        "pairs": pairs,
    }


def consistency_block(run: RunData) -> dict[str, Any] | None:
    """summary.json's ``consistency`` block (None: the run has no ``probes.jsonl``); ``pairs`` (the texts
    compared) are the report's, not summary.json's."""
    if run.path == Path():  # a window of records (live, a capacity step): no run directory
        return None
    read = read_probes(run.path)
    if read is None:
        return None
    lines, bad = read
    block = _compare(lines)
    block["unreadable_lines"] = bad
    targets = sorted({line.target for line in lines})
    if len(targets) > 1 or (targets and targets[0]):
        block["targets"] = {t: _compare([x for x in lines if x.target == t]) for t in targets}
    return block


def measure_consistency(run: RunData, target: str = "") -> tuple[float | None, str]:
    """``(changed share, note)`` of the probes (``target``: that A/B target's); None when not measured."""
    if run.path == Path():
        return None, "judged at the end of the run, from probes.jsonl"
    read = read_probes(run.path)
    if read is None:
        return None, f"no data: the run has no {PROBES_FILE} (--consistency-probes N sends the probes)"
    lines = [x for x in read[0] if not target or x.target == target]
    block = _compare(lines)
    if not block["compared"]:
        if not block["measured_under_load"] and block["probes"]:
            return None, "no data: the run ended before the probes under load were sent"
        return None, f"no data: no probe was answered in both passes ({block['failed']} failed)"
    return block["changed_share"], f"{block['changed']} of {block['compared']} probe answers changed under load"
