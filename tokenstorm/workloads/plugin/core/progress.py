"""What a headless run shows while it goes on: elapsed and remaining time (or the load shape's step or
level), users, requests/s, output tokens/s and TTFT p50/p95 over the last ``WINDOW_S`` seconds, the
errors so far (count, share, commonest category) and the timing fidelity of the newest requests.

The figures come from the records the master (or a local runner) stores — workers' too, shipped with
their reports — through the web UI's live window (:class:`.context.RunContext.live`), and the timing
fidelity is the web UI's own live judgement (:func:`..web.live.fidelity_status`). A master hears of a
worker's requests a few seconds after they end: its window ends ``SHIP_LAG_S`` before now, so a rate
is not lowered by requests still on their way. :mod:`.progress_display` prints them.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ...rundir import ErrorCategory, LoadSample, RunMeta
from ..web.live import POINT_WINDOW_S, percentile
from ..web.live_slo import fidelity_status

__all__ = [
    "SHIP_LAG_S",
    "WINDOW_S",
    "Outcomes",
    "Progress",
    "Timing",
    "clock_text",
    "errors_text",
    "judge_timing",
    "plain_line",
    "time_text",
    "timing_text",
    "ttft_text",
    "window_figures",
]

#: the window of the rates and TTFT percentiles (that of Locust's "current" figures and the live charts)
WINDOW_S = POINT_WINDOW_S
#: a worker ships its records every ~3 s: a master's window ends this long before now
SHIP_LAG_S = 4.0
#: a progress line is kept to this many characters (the timing reason is cut to fit)
LINE_CHARS = 100


class Outcomes:
    """The run's requests so far and its failures by category (cancelled ones are no result)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.failed: Counter[str] = Counter()

    def add(self, row: dict[str, Any]) -> None:
        """Count one record (``RequestRecord`` fields, as written)."""
        category = row.get("error_category")
        if category == ErrorCategory.CANCELLED:
            return
        with self._lock:
            self.requests += 1
            if not row.get("ok"):
                self.failed[str(category or "error")] += 1

    def add_counts(self, requests: int, failed: Counter[str]) -> None:
        """Count ``requests`` records (none cancelled), ``failed`` of them by category (a shipped batch's)."""
        with self._lock:
            self.requests += requests
            self.failed.update(failed)

    def reset(self) -> None:
        """Forget everything (a new run started)."""
        with self._lock:
            self.requests = 0
            self.failed = Counter()

    def snapshot(self) -> tuple[int, int, str | None, int]:
        """``(requests, failed, commonest category, its count)``."""
        with self._lock:
            top = self.failed.most_common(1)
            return self.requests, sum(self.failed.values()), top[0][0] if top else None, top[0][1] if top else 0


@dataclass(frozen=True, slots=True)
class Timing:
    """The live timing-fidelity judgement: ``status`` pass, fail, warn, wait or no data
    (:func:`..web.live.live_fidelity`), and what it says."""

    #: pass, fail, warn, wait or no data (:func:`..web.live.live_fidelity`)
    status: str
    note: str


@dataclass(frozen=True, slots=True)
class Progress:
    """One look at the run while it goes on."""

    elapsed_s: float
    #: seconds left by --run-time or the shape's plan (None: open-ended)
    remaining_s: float | None
    #: the load shape's step or level ("sweep level 3 of 5"), when it has one
    stage: str | None
    warmup: bool
    users: int
    requests_per_s: float | None
    output_tokens_per_s: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    requests: int
    errors: int
    top_error: str | None
    top_error_count: int
    #: errors in the window (they show as they happen, however long the run has gone on)
    recent_errors: int
    timing: Timing
    simulated: bool = False

    @property
    def error_share(self) -> float:
        """Errors as a share of the requests so far."""
        return self.errors / self.requests if self.requests else 0.0


def window_figures(
    rows: list[dict[str, Any]], now: float, lag_s: float, started_epoch_s: float | None
) -> dict[str, float | int | None]:
    """Requests/s, output tokens/s, TTFT p50/p95 (ms, of successful requests) and errors of ``rows`` that
    ended in the ``WINDOW_S`` seconds up to ``now - lag_s`` — a shorter window in the run's first seconds."""
    hi = now - lag_s
    span = min(WINDOW_S, hi - started_epoch_s) if started_epoch_s is not None else WINDOW_S
    if span <= 0.5:  # too early: a rate over half a second says nothing
        return {
            "requests_per_s": None,
            "output_tokens_per_s": None,
            "ttft_p50_ms": None,
            "ttft_p95_ms": None,
            "errors": 0,
        }
    lo = hi - span
    ttfts: list[float] = []
    count = errors = tokens = 0
    for row in rows:
        end = float(row.get("start_epoch_s") or 0.0) + float(row.get("done_s") or row.get("e2e_s") or 0.0)
        if not lo < end <= hi:
            continue
        count += 1
        tokens += int(row.get("output_tokens") or 0)
        if not row.get("ok"):
            errors += 1
        elif row.get("ttft_s") is not None:
            ttfts.append(float(row["ttft_s"]))
    p50, p95 = percentile(ttfts, 50), percentile(ttfts, 95)
    return {
        "requests_per_s": count / span,
        "output_tokens_per_s": tokens / span,
        "ttft_p50_ms": None if p50 is None else p50 * 1000,
        "ttft_p95_ms": None if p95 is None else p95 * 1000,
        "errors": errors,
    }


def judge_timing(
    rows: list[dict[str, Any]],
    clock: dict[str, dict[str, float | None]],
    now: float,
    started_epoch_s: float | None,
    load: list[LoadSample],
) -> Timing:
    """The web UI's live timing-fidelity judgement (:func:`..web.live.fidelity_status`) of ``rows``, the
    newest records, with the load generators' latest ``clock`` figures and their ``load`` samples."""
    from tokenstorm.reports import run_from_records  # loaded at start-up already (the SLO file's check)

    run = run_from_records(rows, RunMeta(status="running", started_epoch_s=started_epoch_s))
    row = fidelity_status(run.requests, clock, now, load)
    return Timing(str(row["status"]), str(row["note"]))


def clock_text(seconds: float) -> str:
    """``75.2`` -> ``1:15``; ``3700`` -> ``1:01:40``."""
    total = max(0, math.floor(seconds))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _num(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def time_text(p: Progress) -> str:
    """``1:15 (3:45 left)``, ``1:15 (3:45 left), step 2 of 3``, ``1:15, sweep level 2 of 5``, ``0:05 warm-up``."""
    text = clock_text(p.elapsed_s)
    if p.remaining_s is not None:
        text += f" ({clock_text(p.remaining_s)} left)"
    if p.stage:
        text += f", {p.stage}"
    return text + (" warm-up" if p.warmup else "")


def errors_text(p: Progress) -> str:
    """``no errors``, or ``12 errors (9.1% http_5xx)``: the commonest category, and its count when others
    occurred too (``http_5xx ×10``)."""
    if not p.errors:
        return "no errors"
    top = ""
    if p.top_error:
        top = f" {p.top_error}" + ("" if p.top_error_count == p.errors else f" ×{p.top_error_count:,}")
    return f"{p.errors:,} error{'s' if p.errors != 1 else ''} ({p.error_share:.1%}{top})"


def timing_text(p: Progress) -> str:
    """The web UI's live timing status in words: ``timing ok``, ``TIMING NOT TRUSTWORTHY: <why>``, ``timing:
    late reads, no cause seen``, ``timing: too few late reads to judge yet``, or ``timing: no data yet``."""
    status = p.timing.status
    if status == "pass":
        return "timing ok"
    if status == "fail":
        return f"TIMING NOT TRUSTWORTHY: {p.timing.note.removeprefix('timing NOT trustworthy: ')}"
    if status == "warn":
        return "timing: late reads, no cause seen"
    if status == "wait":
        return "timing: too few late reads to judge yet"
    return "timing: no data yet"


def ttft_text(p: Progress) -> str:
    """``TTFT p50/p95 45/120 ms`` (of the successful requests in the window)."""
    ttft = "—" if p.ttft_p50_ms is None else f"{p.ttft_p50_ms:,.0f}/{p.ttft_p95_ms or 0:,.0f} ms"
    return f"TTFT p50/p95 {ttft}"


def plain_line(p: Progress) -> str:
    """One progress line: time, users, req/s, tok/s, TTFT, errors, timing. Past ``LINE_CHARS`` characters
    tok/s is left out, then the timing verdict's reason is cut (its verdict words stay)."""
    rates = [
        f"{p.users:,} user{'' if p.users == 1 else 's'}",
        f"{_num(p.requests_per_s, 1)} req/s",
        f"{_num(p.output_tokens_per_s)} tok/s",
    ]
    figures = ", ".join([*rates, ttft_text(p)])
    line = " · ".join([time_text(p), figures, errors_text(p), timing_text(p)])
    if len(line) > LINE_CHARS:
        figures = ", ".join([*rates[:2], ttft_text(p)])
        line = " · ".join([time_text(p), figures, errors_text(p), timing_text(p)])
    if len(line) > LINE_CHARS and p.timing.status == "fail":
        head = " · ".join([time_text(p), figures, errors_text(p), "TIMING NOT TRUSTWORTHY"])
        room = LINE_CHARS - len(head) - 3
        note = timing_text(p).removeprefix("TIMING NOT TRUSTWORTHY: ")
        line = head + (f": {note[:room]}…" if room >= 20 else "")
    return line
