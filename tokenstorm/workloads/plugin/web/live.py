"""The web UI's live view, kept in memory: a rolling window of the newest records and the points
of the LLM charts (the GPU and vLLM samples: :mod:`.server_history`).

The master (or a local runner) hands every record it stores to :class:`LiveWindow` — a local runner's one
by one from ``RunContext.emit``, a worker's shipped batch as columns (:mod:`.live_chunks`) — and nothing is
read back from the run directory. Every ``POINT_EVERY_S`` seconds a point per workload sums up the
``POINT_WINDOW_S`` seconds before it (the window of Locust's own "current" figures): TTFT, E2E
and TPOT p50/p95 and ITL p50/p99 of successful requests (numpy's linear percentiles, as the reports),
output tokens/s, errors/s and requests/s. A point is made ``SETTLE_S`` after its time, so the
records a worker ships every few seconds are in before it is drawn. Requests are placed by when
they ended, as Locust counts them. Memory stays bounded: the records of the last
``KEEP_S`` seconds, and at most ``MAX_POINTS`` points — past that every other point is dropped
and the spacing doubles, so a day-long run still shows from its start.

The live status judges every SLO target on the window's newest requests, and above them the timing
fidelity of the same requests (:func:`tokenstorm.reports.evaluate_fidelity` with each load generator's latest
clock sample): whether they were read on time, and what held the load generators back. It fails
only on as many late reads as the final verdict needs (``FIDELITY_MIN_LATE``) and with a cause seen
in the load generators' samples; short of that it waits for more, or says it saw no cause
(:func:`.live_slo.live_fidelity`).
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ...rundir import (
    ErrorCategory,
)
from .live_chunks import Chunk, GapPieces, add_chunk, joined, sampled_gaps

__all__ = [
    "FIDELITY_LABEL",
    "LLM_SERIES",
    "MAX_POINTS",
    "POINT_EVERY_S",
    "POINT_WINDOW_S",
    "SETTLE_S",
    "SLO_WINDOW_S",
    "LiveWindow",
    "percentile",
]

POINT_EVERY_S = 2.0
POINT_WINDOW_S = 10.0
SETTLE_S = 7.0  # a worker ships its records every 3 s (after sending): a point waits for two batches
#: a chart point's ITL percentiles read at most this many gaps (an even stride of each request's beyond)
POINT_MAX_GAPS = 200_000
#: the live SLO status judges the requests that ended in the last this many seconds — at most the
#: newest SLO_MAX_REQUESTS of them, with at most SLO_MAX_GAPS ITL gaps: a judgement costs the master
#: tens of milliseconds however heavy the load (a contiguous stretch of requests, so rates stay right)
SLO_WINDOW_S = 30.0
SLO_MAX_REQUESTS = 2_000
SLO_MAX_GAPS = 250_000
KEEP_S = max(SLO_WINDOW_S, POINT_WINDOW_S + SETTLE_S) + 5.0
MAX_POINTS = 600
#: a safety cap on the window's records (at 3,000 requests/s the last 30 s still fit)
MAX_RECORDS = 100_000
LLM_SERIES = (
    "ttft_p50_ms",
    "ttft_p95_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "e2e_p95_ms",
    "tpot_p50_ms",
    "tpot_p95_ms",
    "tokens_per_s",
    "errors_per_s",
    "requests_per_s",
)
#: the live status's row of the window's timing fidelity
FIDELITY_LABEL = "Timing fidelity"
#: the record fields the SLO evaluation and the timing fidelity read (the rest of a record is not kept)
_KEEP = (
    "workload",
    "ok",
    "error_category",
    "warmup",
    "start_epoch_s",
    "e2e_s",
    "done_s",
    "ttft_s",
    "tpot_s",
    "output_tokens",
    "target",
    "token_events",
    "late_events",
    "ttft_late",
    "read_lag_max_s",
    "tool_call_s",
    "check",
    "check_results",
)


def percentile(values: Any, pct: float) -> float | None:
    """``pct`` percentile of ``values`` (numpy's linear interpolation, as the reports); None when empty."""
    arr = np.asarray(values, dtype=np.float64)
    return float(np.percentile(arr, pct)) if arr.size else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


@dataclass(frozen=True, slots=True)
class _Done:
    end_epoch_s: float
    row: dict[str, Any]  # the fields in _KEEP, and the ITL gaps as a compact array


class LiveWindow:
    """The newest records and the chart points made from them (thread-safe)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._records: deque[_Done | Chunk] = deque()  # in arrival order: records one by one, or batches
        self._count = 0  # records in the window
        self._times: list[float] = []
        self._series: dict[str, dict[str, list[float | None]]] = {}
        self._every_s = POINT_EVERY_S
        self._next_t: float | None = None

    def start(self, now: float | None = None) -> None:
        """Forget everything and make points from ``now`` (a new run started)."""
        now = self._clock() if now is None else now
        with self._lock:
            self._records.clear()
            self._count = 0
            self._times, self._series, self._every_s = [], {}, POINT_EVERY_S
            self._next_t = math.ceil(now / POINT_EVERY_S) * POINT_EVERY_S

    def observe(self, row: dict[str, Any]) -> None:
        """Keep one record (``RequestRecord`` fields, as written); cancelled ones are no result."""
        if row.get("error_category") == ErrorCategory.CANCELLED:
            return
        start = float(row.get("start_epoch_s") or 0.0)
        slim = {k: row.get(k) for k in _KEEP}
        slim["itl_gaps_s"] = array("d", row.get("itl_gaps_s") or ())  # 8 bytes a gap, not a float object's 32
        done = _Done(start + float(row.get("done_s") or row.get("e2e_s") or 0.0), slim)
        with self._lock:
            self._records.append(done)
            self._count += 1
            key = series_key(row)
            if key not in self._series:  # (not setdefault: its default would be built for every record)
                self._series[key] = {k: [None] * len(self._times) for k in LLM_SERIES}
            self._advance(self._clock())

    def observe_batch(self, batch: Any, keys: list[str], groups: Any) -> None:
        """Keep a shipped batch's records (cancelled ones are no result) as columns; ``keys`` are its chart
        lines and ``groups`` each record's index among them (``ingest.series_groups``)."""
        chunk = Chunk(batch, keys, groups, _KEEP)
        with self._lock:
            if len(chunk):
                self._records.append(chunk)
                self._count += len(chunk)
                for key in {keys[g] for g in np.unique(chunk.group)}:
                    if key not in self._series:
                        self._series[key] = {k: [None] * len(self._times) for k in LLM_SERIES}
            self._advance(self._clock())

    def advance(self, now: float | None = None) -> None:
        """Make the points that are due (the web UI asks while the run goes on, records or none)."""
        with self._lock:
            self._advance(self._clock() if now is None else now)

    def finish(self, end_epoch_s: float) -> None:
        """The run ended at ``end_epoch_s`` with every record in: make its last points now (a point
        otherwise waits ``SETTLE_S`` for records still on their way, and none would come after Stop)."""
        with self._lock:
            self._advance(end_epoch_s + SETTLE_S)

    def snapshot(self) -> dict[str, Any]:
        """The chart points: ``t`` (epoch s) and, per workload, one list per series (None: no data)."""
        with self._lock:
            return {
                "every_s": self._every_s,
                "window_s": POINT_WINDOW_S,
                "t": list(self._times),
                "workloads": {w: {k: list(v) for k, v in s.items()} for w, s in sorted(self._series.items())},
            }

    def recent_rows(
        self, window_s: float = SLO_WINDOW_S, max_requests: int = SLO_MAX_REQUESTS, max_gaps: int = SLO_MAX_GAPS
    ) -> list[dict[str, Any]]:
        """The records that ended in the last ``window_s`` seconds, oldest first (ITL gaps as
        arrays) — only the newest ``max_requests`` of them, holding at most ``max_gaps`` gaps."""
        lo, gaps = self._clock() - window_s, 0
        out: list[dict[str, Any]] = []
        with self._lock:
            for item in reversed(self._records):
                for row in _newest_first(item, lo):
                    gaps += len(row()["itl_gaps_s"])
                    if len(out) >= max_requests or (out and gaps > max_gaps):
                        break
                    out.append(row())
                else:
                    continue
                break
        out.reverse()
        return out

    def _advance(self, now: float) -> None:
        if self._next_t is None:
            return  # no run yet
        if now - self._next_t > MAX_POINTS * self._every_s:  # long asleep: skip to the last screenful
            self._next_t += math.floor((now - self._next_t) / self._every_s - MAX_POINTS) * self._every_s
        while self._next_t + SETTLE_S <= now:
            self._add_point(self._next_t)
            self._next_t += self._every_s
        while self._records and (_newest(self._records[0]) < now - KEEP_S or self._count > MAX_RECORDS):
            old = self._records.popleft()
            self._count -= len(old) if isinstance(old, Chunk) else 1

    def _add_point(self, t: float) -> None:
        lo = t - POINT_WINDOW_S
        ttft: dict[str, list[Any]] = {}  # workload -> floats (records one by one) and arrays (batches)
        e2e: dict[str, list[Any]] = {}
        tpot: dict[str, list[Any]] = {}
        itl: dict[str, list[array[float]]] = {}
        pieces: dict[str, GapPieces] = {}
        counts: dict[str, list[float]] = {}  # workload -> [requests, errors, output tokens]
        for d in self._records:
            if isinstance(d, Chunk):
                add_chunk(d, lo, t, (ttft, e2e, tpot), pieces, counts)
                continue
            if not lo < d.end_epoch_s <= t:
                continue
            row = d.row
            w = series_key(row)
            c = counts.setdefault(w, [0.0, 0.0, 0.0])
            c[0] += 1
            c[2] += float(row["output_tokens"] or 0)  # as the table's tok/s: partial outputs of failures too
            if not row["ok"]:
                c[1] += 1
                continue
            if row["ttft_s"] is not None:
                ttft.setdefault(w, []).append(float(row["ttft_s"]))
            if row["e2e_s"] is not None:
                e2e.setdefault(w, []).append(float(row["e2e_s"]))
            if row["tpot_s"] is not None:
                tpot.setdefault(w, []).append(float(row["tpot_s"]))
            itl.setdefault(w, []).append(row["itl_gaps_s"])
        for w, arrays in itl.items():
            lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
            pieces.setdefault(w, GapPieces()).add(np.concatenate([np.frombuffer(a) for a in arrays]), lengths)
        ttft_v, e2e_v, tpot_v = joined(ttft), joined(e2e), joined(tpot)
        self._times.append(t)
        for w, series in self._series.items():
            gaps = sampled_gaps(pieces.get(w), POINT_MAX_GAPS)
            requests, errors, tokens = counts.get(w, (0.0, 0.0, 0.0))
            point = {
                "ttft_p50_ms": _ms(percentile(ttft_v.get(w, ()), 50)),
                "ttft_p95_ms": _ms(percentile(ttft_v.get(w, ()), 95)),
                "itl_p50_ms": _ms(percentile(gaps, 50)),
                "itl_p99_ms": _ms(percentile(gaps, 99)),
                "e2e_p50_ms": _ms(percentile(e2e_v.get(w, ()), 50)),
                "e2e_p95_ms": _ms(percentile(e2e_v.get(w, ()), 95)),
                "tpot_p50_ms": _ms(percentile(tpot_v.get(w, ()), 50)),
                "tpot_p95_ms": _ms(percentile(tpot_v.get(w, ()), 95)),
                "tokens_per_s": round(tokens / POINT_WINDOW_S, 2),
                "errors_per_s": round(errors / POINT_WINDOW_S, 3),
                "requests_per_s": round(requests / POINT_WINDOW_S, 3),
            }
            for k, v in point.items():
                series[k].append(v)
        if len(self._times) > MAX_POINTS:
            self._times = self._times[::2]
            for series in self._series.values():
                for k in series:
                    series[k] = series[k][::2]
            self._every_s *= 2
            self._next_t = self._times[-1] + self._every_s


def _newest(item: _Done | Chunk) -> float:
    return item.newest_end_s if isinstance(item, Chunk) else item.end_epoch_s


def _newest_first(item: _Done | Chunk, lo: float) -> Iterator[Callable[[], dict[str, Any]]]:
    """The records of ``item`` that ended after ``lo``, newest arrival first: each a call that makes its row."""
    if isinstance(item, Chunk):
        yield from (partial(item.row, int(i)) for i in np.flatnonzero(item.end > lo)[::-1])
    elif item.end_epoch_s > lo:
        yield partial(getattr, item, "row")


def series_key(row: dict[str, Any]) -> str:
    """A chart's (and the LLM table's) line: the workload, and in A/B runs its target."""
    workload, target = str(row.get("workload") or ""), row.get("target")
    return f"{workload} @ {target}" if target else workload
