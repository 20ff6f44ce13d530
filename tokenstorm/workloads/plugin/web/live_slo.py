"""The live SLO status: every target of the SLO spec judged by the reports' own evaluation over the last
``SLO_WINDOW_S`` seconds of requests, and the window's timing fidelity (pass, fail, warn, wait or no data)."""

from __future__ import annotations

import time
from typing import Any

from ...rundir import (
    FIDELITY_MAX_LATE_SHARE,
    FIDELITY_MAX_LOOP_LAG_P99_MS,
    FIDELITY_MAX_READ_AT_ONCE_SHARE,
    FIDELITY_MAX_TTFT_LATE_SHARE,
    FIDELITY_MIN_LATE,
    LoadSample,
    RunMeta,
)
from .live import FIDELITY_LABEL, SLO_WINDOW_S

__all__ = ["fidelity_status", "judge_recent", "live_fidelity"]


_RATES = frozenset({"requests_per_s", "goodput_requests_per_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu"})


def _rate_scale(rows: list[dict[str, Any]], scope: str, target: str, now: float) -> float:
    """A rate over rows chosen by their *end* is per second of ``now`` − the first end, not of the
    reports' first start → last end (which adds about one E2E to a short window)."""
    sel = [
        r
        for r in rows
        if (not target or r.get("target") == target) and scope in ("run", r.get("workload")) and not r.get("warmup")
    ]
    if not sel:
        return 1.0
    ends = [float(r["start_epoch_s"] or 0) + float(r.get("done_s") or r.get("e2e_s") or 0) for r in sel]
    used = max(ends) - min(float(r["start_epoch_s"] or 0) for r in sel)
    return used / max(1.0, now - min(ends))


def judge_recent(
    spec: Any,
    rows: list[dict[str, Any]],
    started_epoch_s: float | None,
    gpu: dict[str, dict[str, list[float | None]]] | None = None,
    labels: list[str] | None = None,
    now: float | None = None,
    clock: dict[str, dict[str, float | None]] | None = None,
    load: list[LoadSample] | None = None,
) -> list[dict[str, Any]]:
    """Every target of SLO spec ``spec`` judged by the reports' own evaluation on ``rows`` (the
    requests that ended in the last ``SLO_WINDOW_S`` s, up to ``now``): ``status`` is pass, fail or
    no data. ``labels``: an A/B run's targets (one with nothing in the window fails, not vanishes).
    ``clock`` (each load generator's latest clock sample): the first row is then the window's timing
    fidelity (:func:`fidelity_status`, with the window's ``load`` samples when there are some)."""
    # reports (pandas, pyarrow) is loaded when the web UI first asks, not by every load generator.
    import pandas as pd

    from tokenstorm.reports import evaluate_each_target, run_from_records

    # A 10-s window is a glance, not a verdict: its figures are judged as they are (no interval), the run's
    # end judges every request with its interval (--confidence).
    meta = RunMeta(status="running", started_epoch_s=started_epoch_s, options={"confidence": 0})
    run = run_from_records(rows, meta)
    if gpu:
        since = max((t or 0.0 for s in gpu.values() for t in s["t"][-1:]), default=0.0) - SLO_WINDOW_S
        run.gpu = pd.DataFrame(
            [
                {"host": name, "gpu": name, "mem_used_mib": mem}
                for name, s in gpu.items()
                for t, mem in zip(s["t"], s["mem_used_mib"], strict=True)
                if mem is not None and (t or 0.0) >= since
            ]
        )
    now = time.time() if now is None else now
    out = [] if clock is None else [fidelity_status(run.requests, clock, now, load)]
    for r in evaluate_each_target(run, spec, labels):  # A/B runs: each target's own
        if r.metric == "session_ms":  # a window cuts sessions: a cut one would look complete and short
            r.measured, r.note = None, "judged at the end, on whole sessions"
        if r.metric in _RATES and r.measured is not None:
            r.measured *= _rate_scale(rows, r.scope, r.target, now)
            r.passed = r.measured <= r.threshold if r.op == "<=" else r.measured >= r.threshold
            r.result = "held" if r.passed else "failed"
        status = "no data" if r.measured is None else "pass" if r.passed else "fail"
        where = f"{r.target}: " if r.target else ""
        out.append(
            {
                "label": f"{where}{r.scope} {r.metric} {r.stat} {r.op} {r.threshold:g}",
                "scope": r.scope,
                "metric": r.metric,
                "stat": r.stat,
                "op": r.op,
                "threshold": r.threshold,
                "measured": None if r.measured is None else round(r.measured, 4),
                "status": status,
                "note": r.note,
            }
        )
    return out


def fidelity_status(
    requests: Any, clock: dict[str, dict[str, float | None]], now: float, load: list[LoadSample] | None = None
) -> dict[str, Any]:
    """The live status's timing-fidelity row for the report table ``requests`` (the window's): the
    reports' :func:`tokenstorm.reports.evaluate_fidelity` with the load generators' clock samples of the window
    (``load``; when there are none, one sample of each load generator's latest figures, ``clock``).
    ``status`` (:func:`live_fidelity`): pass (read on time), fail (not trustworthy:
    ``note`` says why and ``limited_by`` what held the load generators back), warn (not trustworthy,
    but no cause seen in the load generators' samples: said, not failed), wait (too few late reads
    to judge yet) or no data (nothing to judge yet)."""
    from tokenstorm.reports import evaluate_fidelity

    samples = load or [LoadSample(now, 0, clock={w: dict(f) for w, f in clock.items()})]
    fid = evaluate_fidelity(requests, samples)
    status, note = live_fidelity(fid)
    late = None if fid.late_share is None else round(fid.late_share, 6)
    return {
        "label": FIDELITY_LABEL,
        "scope": "run",
        "metric": "timing_fidelity",
        "stat": "late share",
        "op": "<=",
        "threshold": FIDELITY_MAX_LATE_SHARE,
        "measured": late,
        "status": status,
        "note": note[:500],
        "limited_by": list(fid.limited_by),
    }


def live_fidelity(fid: Any) -> tuple[str, str]:
    """The live status and note of a window's :class:`tokenstorm.reports.Fidelity` ``fid``. A window judges
    with the final verdict's minimums: a share is broken only by ``FIDELITY_MIN_LATE`` or more late
    reads (the run's verdict waives this for streams read at once; a 30 s window's one stream of 96 is
    no evidence yet: ``wait``). Untrustworthy timing with no cause seen in the load generators'
    samples is said (``warn``), not failed: there is nothing to act on here, and the verdict judges
    the whole run."""
    if not fid.measured:
        return "no data", str(fid.reason)
    if fid.trustworthy:  # an untrustworthy reason names what limited the load generators already
        return "pass", fid.reason + ("; limited by: " + "; ".join(fid.limited_by) if fid.limited_by else "")
    events = (fid.late_share or 0.0) > FIDELITY_MAX_LATE_SHARE and fid.late_events >= FIDELITY_MIN_LATE
    ttfts = (fid.ttft_late_share or 0.0) > FIDELITY_MAX_TTFT_LATE_SHARE and fid.ttft_late >= FIDELITY_MIN_LATE
    lags = [f.get("mean_loop_lag_p99_ms") for f in fid.per_worker.values()]
    loop = fid.unstamped_records > 0 and any(v is not None and v > FIDELITY_MAX_LOOP_LAG_P99_MS for v in lags)
    at_once = (fid.read_at_once_share or 0.0) > FIDELITY_MAX_READ_AT_ONCE_SHARE
    if at_once and fid.read_at_once < FIDELITY_MIN_LATE and not (events or ttfts or loop):
        return "wait", (
            f"too few to judge yet: {fid.read_at_once:,} of {fid.ttft_records:,} streams read at once "
            f"(a share is judged from {FIDELITY_MIN_LATE} late reads)"
        )
    if not fid.limited_by:
        return "warn", f"no cause seen, so not failed live (the verdict judges the whole run): {fid.reason}"
    return "fail", str(fid.reason)
