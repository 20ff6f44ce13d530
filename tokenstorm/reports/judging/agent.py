"""Agent sessions and tool calls, from the raw records: the report's agent section, ``summary.json``'s session
and tool-call figures, and the ``session_ms`` SLO.

- A **session** is the records sharing a ``session_id`` (and A/B target: a request's twins share its id;
  and workload), in a workload whose traffic model marks its sessions' last steps (``session_end`` on some
  record: without it a finished session cannot be told from one the run cut short).
  It is *judged* when every one of its records is (none in the warm-up, none cancelled by the load test);
  of those, *completed* when it has its last step (a record with ``session_end``) and every step succeeded,
  *failed* when a step failed, *unfinished* when every step succeeded but the run ended before its last.
- **Session latency** (``session_ms``): the first step's send to the last token of its last step —
  ``max(start + E2E) − min(start)`` over its records — of the completed sessions.
- **Waiting on the model**: the sum of a completed session's steps' E2E; the rest of its latency is the
  agent's own time between steps (running the tool, building the next request).
- **Steps per session**: the records of a completed session.
- **Tool calls** (per step, successful requests): time to the first tool-call delta (``ttft_tool_s``:
  the call's id and name), to the complete call (``tool_call_s``: its last argument fragment, the
  ``tool_call_ms`` SLO), the calls streamed (``tool_calls``) and their argument tokens (``tool_call_tokens``).

Statistics as everywhere in the reports: numpy's linear-interpolation percentiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tokenstorm.reports.data.columns import selected
from tokenstorm.reports.data.rundir import RunData

__all__ = [
    "Sessions",
    "has_agent_records",
    "session_workloads",
    "sessions",
    "tool_call_counts",
    "tool_call_latencies",
    "tool_call_rows",
]


@dataclass
class Sessions:
    """The sessions of a scope: counts, and per completed session its latency, waiting and steps."""

    judged: int = 0
    completed: int = 0
    failed: int = 0
    unfinished: int = 0
    latency_s: np.ndarray = field(default_factory=lambda: np.empty(0))
    waiting_s: np.ndarray = field(default_factory=lambda: np.empty(0))
    steps: np.ndarray = field(default_factory=lambda: np.empty(0))

    def counts(self) -> dict[str, Any]:
        """For summary.json: how many sessions, and the completed ones' steps and share waiting on the model."""
        steps = self.steps
        total = float(self.latency_s.sum())
        return {
            "sessions": self.judged,
            "completed_sessions": self.completed,
            "failed_sessions": self.failed,
            "unfinished_sessions": self.unfinished,
            "mean_steps_per_session": float(steps.mean()) if steps.size else None,
            "median_steps_per_session": float(np.percentile(steps, 50)) if steps.size else None,
            "p90_steps_per_session": float(np.percentile(steps, 90)) if steps.size else None,
            "max_steps_per_session": int(steps.max()) if steps.size else None,
            "total_session_steps": int(steps.sum()),
            # time-weighted: the model's share of all completed sessions' time, not a mean of ratios
            "session_waiting_share": float(self.waiting_s.sum()) / total if total > 0 else None,
        }


def session_workloads(df: pd.DataFrame) -> np.ndarray:
    """The records of workloads whose traffic model marks a session's last step (``session_end`` on some
    record): only there can a session be told complete from cut short, so only there are sessions counted."""
    if df.empty or "session_end" not in df:
        return np.zeros(len(df), dtype=bool)
    ends = df["session_end"].fillna(False).astype(bool).to_numpy()
    workloads = _codes(df["workload"])
    return np.isin(workloads, np.unique(workloads[ends]))


def tool_call_rows(df: pd.DataFrame) -> np.ndarray:
    """The records that streamed a tool call."""
    if df.empty or "tool_calls" not in df:
        return np.zeros(len(df), dtype=bool)
    calls: np.ndarray = np.nan_to_num(df["tool_calls"].to_numpy(dtype=float, na_value=np.nan)) > 0
    return calls


def has_agent_records(run: RunData) -> bool:
    """Whether a workload has sessions (see :func:`session_workloads`) or a record streamed a tool call:
    the session and tool-call figures are then shown."""
    df = run.requests
    return bool(session_workloads(df).any() or tool_call_rows(df).any())


def _codes(col: pd.Series) -> np.ndarray:
    """Integer codes of a string column, -1 for none and for the empty string (a key column — the report
    table's session ids — as it is: -1 is none there already)."""
    if col.dtype.kind == "i":
        return np.asarray(col, dtype=np.int64)
    if not isinstance(col.dtype, pd.CategoricalDtype):
        col = col.astype("category")
    codes = np.asarray(col.cat.codes).astype(np.int64)
    empty = [i for i, c in enumerate(col.cat.categories) if c == ""]
    if empty:
        codes = np.where(codes == empty[0], -1, codes)
    return codes


def sessions(run: RunData, judged: np.ndarray, rows: np.ndarray | None = None) -> Sessions:
    """The sessions of ``rows`` (None: every record), ``judged`` being the records that are judged."""
    df = run.requests
    if df.empty or "session_id" not in df:
        return Sessions()
    codes = _codes(df["session_id"])
    in_scope = (codes >= 0) & session_workloads(df)
    if rows is not None:
        in_scope &= rows
    idx = np.flatnonzero(in_scope)
    if not idx.size:
        return Sessions()
    _, key = np.unique(codes[idx], return_inverse=True)  # dense: 63-bit keys would overflow below
    # A/B: twins share the session id, each target's steps are a session of their own; and a session is of
    # one workload (ids are unique in a run: this only keeps two traffic models' ids apart if they were not)
    for col in ("target", "workload"):
        if col in df:
            other = _codes(df[col])[idx] + 1
            key = key.astype(np.int64) * (int(other.max()) + 1) + other
    _, inv = np.unique(key, return_inverse=True)
    n = int(inv.max()) + 1
    count = np.bincount(inv, minlength=n)
    ok = df["ok"].fillna(False).astype(bool).to_numpy()[idx]
    end = df["session_end"].fillna(False).astype(bool).to_numpy()[idx]
    start = df["start_epoch_s"].to_numpy(dtype=float)[idx]
    e2e = np.nan_to_num(df["e2e_s"].to_numpy(dtype=float, na_value=np.nan)[idx])
    all_judged = np.bincount(inv, weights=judged[idx], minlength=n) == count
    all_ok = np.bincount(inv, weights=ok, minlength=n) == count
    ended = np.bincount(inv, weights=end, minlength=n) > 0
    first = np.full(n, np.inf)
    np.minimum.at(first, inv, start)
    last = np.full(n, -np.inf)
    np.maximum.at(last, inv, start + e2e)
    waiting = np.bincount(inv, weights=e2e, minlength=n)
    completed = all_judged & all_ok & ended
    return Sessions(
        judged=int(all_judged.sum()),
        completed=int(completed.sum()),
        failed=int((all_judged & ~all_ok).sum()),
        unfinished=int((all_judged & all_ok & ~ended).sum()),
        latency_s=(last - first)[completed],
        waiting_s=waiting[completed],
        steps=count[completed].astype(float),
    )


def tool_call_latencies(run: RunData, ok: np.ndarray) -> dict[str, np.ndarray]:
    """Seconds per successful request that streamed a tool call: ``ttft_tool`` and ``tool_call``."""
    df = run.requests
    out = {}
    for name, col in (("ttft_tool", "ttft_tool_s"), ("tool_call", "tool_call_s")):
        out[name] = selected(df, col, ok) if col in df else np.empty(0)
    return out


def tool_call_counts(run: RunData, ok: np.ndarray) -> dict[str, Any]:
    """Of the successful requests ``ok``: how many streamed a tool call, the calls, their argument tokens."""
    df = run.requests
    if df.empty or "tool_calls" not in df:
        return {
            "tool_call_requests": 0,
            "tool_calls": 0,
            "total_tool_call_tokens": 0,
            "mean_tool_call_tokens": None,
            "p99_tool_call_tokens": None,
        }
    calls = selected(df, "tool_calls", ok)
    with_call = np.nan_to_num(calls) > 0
    tokens = selected(df, "tool_call_tokens", ok)[with_call]
    tokens = tokens[~np.isnan(tokens)]
    return {
        "tool_call_requests": int(with_call.sum()),
        "tool_calls": int(np.nansum(calls)),
        "total_tool_call_tokens": int(tokens.sum()),
        "mean_tool_call_tokens": float(tokens.mean()) if tokens.size else None,
        "p99_tool_call_tokens": float(np.percentile(tokens, 99)) if tokens.size else None,
    }
