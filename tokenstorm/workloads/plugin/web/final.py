"""What the web UI shows once a run has ended (Stop, ``--run-time``, a shape's last step): the
final verdict with its reason and timing-fidelity line, the link to the HTML report, and the SLO
status judged on the whole run — all from the run's own ``summary.json``, so the LLM tab says
exactly what the report, the console and the exit code say.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ...rundir import REPORT_FILE, SUMMARY_FILE, read_run_meta, read_summary
from .live import FIDELITY_LABEL

__all__ = [
    "ENDED_RATE",
    "REPORT_URL",
    "UNTRUSTED",
    "FinalOutcome",
    "final_slo_rows",
    "final_timing_status",
    "total_label",
]

#: where the web UI serves the run's report (relative, as Locust's own links)
REPORT_URL = "./tokenstorm/report"
#: the Total row's marker while the live status says the window's timing is not trustworthy
UNTRUSTED = "TIMING NOT TRUSTWORTHY (see Timing fidelity in the live status)"
#: a rate of the last seconds once the run has ended (no request is sent; Locust asks no more)
ENDED_RATE = "— (run ended)"


def final_slo_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The live status's rows (same fields as :func:`.live.judge_recent`'s), judged on the whole run
    by the report: the timing fidelity first, then every SLO."""
    rows: list[dict[str, Any]] = []
    fid = summary.get("timing_fidelity")
    if isinstance(fid, dict):
        status = final_timing_status(summary)
        rows.append(
            {
                "label": FIDELITY_LABEL,
                "scope": "run",
                "metric": "timing_fidelity",
                "stat": "late share",
                "op": "<=",
                "threshold": None,
                "measured": fid.get("late_share"),
                "status": status,
                "note": str(fid.get("reason") or "")[:500],
                "limited_by": list(fid.get("limited_by") or []),
            }
        )
    for r in summary.get("slos") or []:
        measured = r.get("measured")
        status = "no data" if measured is None else "pass" if r.get("passed") else "fail"
        note = r.get("note") or ""
        if r.get("result") == "inconclusive":  # the interval straddles the target: neither pass nor fail
            status, note = "inconclusive", _undecided(r)
        where = f"{r['target']}: " if r.get("target") else ""
        threshold = r.get("threshold")
        rows.append(
            {
                "label": f"{where}{r.get('scope')} {r.get('metric')} {r.get('stat')} {r.get('op')} {threshold:g}"
                if isinstance(threshold, (int, float))
                else f"{where}{r.get('scope')} {r.get('metric')}",
                "scope": r.get("scope"),
                "metric": r.get("metric"),
                "stat": r.get("stat"),
                "op": r.get("op"),
                "threshold": threshold,
                "measured": None if measured is None else round(float(measured), 4),
                "status": status,
                "note": note,
            }
        )
    return rows


def _undecided(slo: dict[str, Any]) -> str:
    """``95% interval 280–∞: needs ~370 requests (has 180)`` for an inconclusive SLO row."""
    low, high = slo.get("ci_low"), slo.get("ci_high")
    level = f"{float(slo.get('confidence') or 0) * 100:g}% interval"
    ends = f"{'—' if low is None else f'{low:,.4g}'}–{'∞' if high is None else f'{high:,.4g}'}"
    needed, has = slo.get("needed_requests"), slo.get("samples")
    more = f": needs ~{needed:,} (has {has:,})" if isinstance(needed, int) and isinstance(has, int) else ""
    return f"inconclusive — {level} {ends}{more}"


def final_timing_status(summary: dict[str, Any]) -> str:
    """The timing-fidelity row's status, as the run's verdict took it: fail when the timing made the
    verdict (unreliable), warn when it did not (``--timing-verdict warn``: the verdict is passed or
    failed, its reason says the timing was not trustworthy), pass, or no data (not measured)."""
    fid = summary.get("timing_fidelity")
    if not isinstance(fid, dict) or not fid.get("measured", True):
        return "no data"
    if fid.get("trustworthy", True):
        return "pass"
    return "warn" if summary.get("verdict") in ("passed", "failed", "inconclusive") else "fail"


def total_label(ended: bool, live_timing: str | None, final: dict[str, Any] | None) -> str:
    """The LLM table's Total row: while the run goes on, marked when the live status's timing
    (``live_timing``) fails; once it has ``ended``, only the run's own verdict (``final``, from
    ``summary.json``; None while its report is being built) speaks — the last live judgement is not
    carried past Stop (Locust stops asking for its table then, so what the row says last must hold)."""
    if not ended:
        return "Total" + (f" — {UNTRUSTED}" if live_timing == "fail" else "")
    if final is None:
        return "Total — run ended: the verdict is above"
    if final.get("trustworthy") is False:
        return "Total — TIMING NOT TRUSTWORTHY (the run's verdict, above)"
    return "Total — final (the run's verdict is above)"


class FinalOutcome:
    """The ended run's outcome, read once per run directory (``summary.json`` is written once, at the end)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._of: Path | None = None
        self._outcome: dict[str, Any] | None = None

    def read(self, run_dir: Path | None, built: bool) -> dict[str, Any] | None:
        """The outcome of ``run_dir`` once its report is ``built`` (None before: still running, or
        being built). Keys: verdict, reason, fidelity (one line or None), trustworthy, report_url,
        report_path, requests, requests_per_s and output_tokens_per_s (the report's, of the whole run),
        stopped_epoch_s, slo (the final SLO rows)."""
        if run_dir is None or not built or not (run_dir / SUMMARY_FILE).exists():
            return None
        with self._lock:
            if self._of != run_dir or self._outcome is None:
                try:
                    summary = read_summary(run_dir)
                except (OSError, ValueError):
                    return None
                if summary is None:
                    return None
                self._of, self._outcome = run_dir, _outcome(run_dir, summary)
            return self._outcome


def _outcome(run_dir: Path, summary: dict[str, Any]) -> dict[str, Any]:
    fid = summary.get("timing_fidelity") if isinstance(summary.get("timing_fidelity"), dict) else None
    try:
        meta = read_run_meta(run_dir)
        stopped = meta.stopped_epoch_s if meta is not None else None
    except (OSError, ValueError):
        stopped = None
    return {
        "verdict": str(summary.get("verdict") or ""),
        "reason": str(summary.get("verdict_reason") or ""),
        "fidelity": str(fid.get("reason") or "") if fid else None,
        "trustworthy": bool(fid.get("trustworthy", True)) if fid else None,
        "report_url": REPORT_URL,
        "report_path": str(run_dir / REPORT_FILE),
        "run_dir": str(run_dir),
        "requests": summary.get("completed"),
        "requests_per_s": _number(summary.get("request_throughput")),
        "output_tokens_per_s": _number(summary.get("output_throughput")),
        "simulated": bool(summary.get("simulated")),
        "stopped_epoch_s": stopped,
        "slo": final_slo_rows(summary),
    }


def _number(value: Any) -> float | None:
    return round(float(value), 2) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
