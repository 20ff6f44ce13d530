"""Timing fidelity: how much of a run's timing can be trusted, and what limited it.

A token event's stamp is the time its read returned. When the load generator reads late, Linux
coalesces the queued packets into one buffer that keeps only the newest packet's receive stamp,
so the earlier events' arrival times are lost: the client flags them (``late_events``,
``ttft_late`` per record) and notes each response's worst read lag (``read_lag_max_s``). Each
load generator also samples, every second, how long it waited for a CPU, how long a cgroup limit
throttled it, its own CPU use and its event loop's lag (``load.jsonl``, ``LoadSample.clock``).

The run's timing is *trustworthy* when

* at most ``FIDELITY_MAX_LATE_SHARE`` (5%) of its token events were late,
* at most ``FIDELITY_MAX_TTFT_LATE_SHARE`` (5%) of its first tokens (TTFT) were late — a share
  is only broken by at least ``FIDELITY_MIN_LATE`` (5) late ones, so one late TTFT of 40 is not,
* at most ``FIDELITY_MAX_READ_AT_ONCE_SHARE`` (1%) of its streams were *read at once* — more than
  half of their gaps (of streams with 2 or more) after a late event, so their ITLs and TPOT are the
  reader's: late events bunched into a few streams pass the 5% but make up the records a p99 is made
  of, and
* where records were read without kernel stamps (TLS, non-Linux: lateness cannot be seen per
  event), the event loop's lag p99, averaged over the run's seconds (the worst load generator's),
  stayed within ``FIDELITY_MAX_LOOP_LAG_P99_MS`` (5 ms).

Runs recorded before these were measured are *not measured*: trustworthy, and the reason says so.

Where records carry the server's own timing, the reason goes on with the *second clock*
(:mod:`.second_clock`): the overhead and ITL residual distributions, and whether they agree with the flags.

``limited_by`` names what held the load generators back, per generator, in words a user acts on.
A cause is named when its mean over the run passes its threshold, or, on a run whose timing is not
trustworthy, when its worst second does:

* run-queue wait above ``RUNQ_WAIT_MS_PER_S`` (50 ms per second: 5% of the time ready to run but
  waiting for a CPU) — other processes on its cores;
* any cgroup CPU throttling (``THROTTLED_MS_PER_S``: above 0 ms per second) — a container CPU limit;
* CPU use above ``CPU_PCT`` (90% of a core) — the process itself is the bottleneck;
* event-loop lag p99 above ``LOOP_LAG_P99_MS`` (= ``FIDELITY_MAX_LOOP_LAG_P99_MS``, 5 ms) — work
  between reads delays them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tokenstorm.reports.judging.formats import ms
from tokenstorm.reports.judging.second_clock import second_clock
from tokenstorm.workloads.rundir import (
    FIDELITY_MAX_LATE_SHARE,
    FIDELITY_MAX_LOOP_LAG_P99_MS,
    FIDELITY_MAX_READ_AT_ONCE_SHARE,
    FIDELITY_MAX_TTFT_LATE_SHARE,
    FIDELITY_MIN_LATE,
    FIDELITY_READ_AT_ONCE_MIN_GAPS,
    LoadSample,
)

__all__ = [
    "CPU_PCT",
    "LOOP_LAG_P99_MS",
    "RUNQ_WAIT_MS_PER_S",
    "THROTTLED_MS_PER_S",
    "UNTRUSTED",
    "Fidelity",
    "evaluate_fidelity",
]

#: limited_by thresholds (see the module docstring)
RUNQ_WAIT_MS_PER_S = 50.0
THROTTLED_MS_PER_S = 0.0
CPU_PCT = 90.0
LOOP_LAG_P99_MS = FIDELITY_MAX_LOOP_LAG_P99_MS
#: how a reason that does not trust the timing begins (the run's verdict quotes what follows)
UNTRUSTED = "timing NOT trustworthy: "

#: per-second figures of a LoadSample.clock entry summarised per load generator (mean and max)
_FIGURES = ("runq_wait_ms_per_s", "throttled_ms_per_s", "loop_lag_p99_ms", "cpu_pct")
_COLUMNS = ("late_events", "ttft_late", "read_lag_max_s")


@dataclass
class Fidelity:
    """How trustworthy a run's (or a part of it's) timing is; ``summary.json``'s ``timing_fidelity``."""

    trustworthy: bool
    reason: str  # one line
    events: int  # token events of streamed records with a first token
    late_events: int
    late_share: float | None  # late_events / events; None: no events
    ttft_records: int  # streamed records with a first token
    ttft_late: int
    ttft_late_share: float | None
    read_lag_p99_ms: float | None  # over records' worst read lag; None: no kernel-stamped record
    unstamped_records: int  # records with a first token read without kernel stamps
    #: load generator -> mean_/max_ of runq_wait_ms_per_s, throttled_ms_per_s, loop_lag_p99_ms, cpu_pct
    per_worker: dict[str, dict[str, float | None]] = field(default_factory=dict)
    limited_by: list[str] = field(default_factory=list)
    #: False: the run predates these measurements (or had nothing to measure); trustworthy stays True
    measured: bool = True
    #: streams with more than half of their gaps after a late event; their share of ttft_records
    read_at_once: int = 0
    read_at_once_share: float | None = None
    #: the residuals between the client's and the server's timing (:mod:`.second_clock`); None: no record has
    #: the server's timing
    second_clock: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON object (``summary.json``'s ``timing_fidelity``)."""
        return asdict(self)


def evaluate_fidelity(requests: pd.DataFrame, load: list[LoadSample], mask: np.ndarray | None = None) -> Fidelity:
    """The timing fidelity of the records of ``requests`` selected by ``mask`` (all when ``None``),
    with the load generators' clock samples ``load`` (see the module docstring for the rules)."""
    per_worker = _per_worker(load)
    # The run's typical lag, not its worst second: a second's p99 over ~50 ticks is its maximum, so one
    # 5 ms hiccup (a segment rotated) would fail a quiet run. The worst generator's mean counts.
    worst_loop_lag = max(
        (f["mean_loop_lag_p99_ms"] for f in per_worker.values() if f["mean_loop_lag_p99_ms"] is not None), default=None
    )
    n = len(requests)
    sel = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if n and "ttft_s" in requests.columns:
        sel = sel & ~np.isnan(_floats(requests, "ttft_s"))  # streamed with a first token
    else:
        sel = np.zeros(n, dtype=bool)
    if "stream" in requests.columns:
        sel &= requests["stream"].fillna(False).astype(bool).to_numpy()
    ttft_records = int(sel.sum())
    events = int(_sum(requests, "token_events", sel))
    if not all(c in requests.columns for c in _COLUMNS) or (
        ttft_records and np.isnan(_floats(requests, "late_events")[sel]).all()
    ):
        return _unmeasured(
            "the records predate late-read flags (a run from before tokenstorm measured them)",
            events,
            ttft_records,
            per_worker,
        )
    if ttft_records == 0:
        return _unmeasured("no streamed response with a token to judge", 0, 0, per_worker)
    late = int(_sum(requests, "late_events", sel))
    ttft_late = int(_sum(requests, "ttft_late", sel))
    lags = _floats(requests, "read_lag_max_s")[sel]
    stamped = lags[~np.isnan(lags)]
    unstamped = int(lags.size - stamped.size)
    if unstamped == ttft_records and worst_loop_lag is None:
        return _unmeasured(
            f"none of the {ttft_records:,} records was read with kernel stamps and load.jsonl has "
            "no event-loop lag samples",
            events,
            ttft_records,
            per_worker,
            unstamped,
        )
    late_share = late / events if events else None
    ttft_share = ttft_late / ttft_records
    at_once = int(np.sum(_read_at_once(requests) & sel))
    at_once_share = at_once / ttft_records
    loop_ok = not unstamped or worst_loop_lag is None or worst_loop_lag <= FIDELITY_MAX_LOOP_LAG_P99_MS
    events_ok = (late_share or 0.0) <= FIDELITY_MAX_LATE_SHARE or late < FIDELITY_MIN_LATE
    ttfts_ok = ttft_share <= FIDELITY_MAX_TTFT_LATE_SHARE or ttft_late < FIDELITY_MIN_LATE
    at_once_ok = at_once_share <= FIDELITY_MAX_READ_AT_ONCE_SHARE
    trustworthy = events_ok and ttfts_ok and loop_ok and at_once_ok
    fid = Fidelity(
        trustworthy=trustworthy,
        reason="",
        events=events,
        late_events=late,
        late_share=late_share,
        ttft_records=ttft_records,
        ttft_late=ttft_late,
        ttft_late_share=ttft_share,
        read_lag_p99_ms=float(np.percentile(stamped, 99)) * 1000 if stamped.size else None,
        unstamped_records=unstamped,
        per_worker=per_worker,
        limited_by=_limited_by(per_worker, strict=not trustworthy),
        read_at_once=at_once,
        read_at_once_share=at_once_share,
    )
    fid.reason = _reason(fid, worst_loop_lag, loop_ok)
    clock = second_clock(requests, sel)
    if clock is not None:  # the server's clock beside the late-read counts, and whether the two agree
        fid.second_clock = clock.as_dict()
        fid.reason += f"; {clock.sentence}"
    return fid


def _limited_by(per_worker: dict[str, dict[str, float | None]], strict: bool = False) -> list[str]:
    """What held each load generator back, in words (``strict``: name a cause whose worst second
    passed its threshold too, not only its mean — for a run whose timing is not trustworthy)."""
    out = []
    for worker, f in sorted(per_worker.items()):
        for figure, above, words in _CAUSES:
            mean, top = f.get(f"mean_{figure}"), f.get(f"max_{figure}")
            if mean is not None and mean > above:
                out.append(words(worker, mean, ""))
            elif strict and top is not None and top > above:
                out.append(words(worker, top, "up to "))
    return out


_CAUSES: tuple[tuple[str, float, Callable[[str, float, str], str]], ...] = (
    (
        "runq_wait_ms_per_s",
        RUNQ_WAIT_MS_PER_S,
        lambda w, v, up: (
            f"load generator {w} waited {up}{v:,.0f} ms per second for a CPU (run queue): other processes on its cores"
        ),
    ),
    (
        "throttled_ms_per_s",
        THROTTLED_MS_PER_S,
        lambda w, v, up: (
            f"cgroup CPU limit throttled load generator {w} for {up}{v:,.0f} ms per second: "
            "raise the container's CPU limit"
        ),
    ),
    (
        "cpu_pct",
        CPU_PCT,
        lambda w, v, up: (
            f"load generator {w} used {up}{v:.0f}% of a core: add load-generator processes (--processes N)"
        ),
    ),
    (
        "loop_lag_p99_ms",
        LOOP_LAG_P99_MS,
        lambda w, v, up: f"event loop of {w} lagged {up}{ms(v)} ms (p99): work between reads delayed them",
    ),
)


def _per_worker(load: Iterable[LoadSample]) -> dict[str, dict[str, float | None]]:
    """Interval-weighted mean and max of each clock figure per load generator. Old ``load.jsonl``
    files have no clock: their CPU % is taken from ``cpu``, without each generator's first sample
    (it spanned the idle time before the start and read several hundred percent)."""
    values: dict[str, dict[str, list[tuple[float, float]]]] = {}
    first_cpu_seen: set[str] = set()
    for sample in load:
        clock = sample.clock or {}
        for worker, figures in clock.items():
            interval = _number((figures or {}).get("interval_s")) or 1.0
            per = values.setdefault(worker, {})
            for name in _FIGURES:
                v = _number((figures or {}).get(name))
                if v is not None:
                    per.setdefault(name, []).append((v, interval))
        for worker, pct in (sample.cpu or {}).items():
            if worker in clock:
                continue
            if worker not in first_cpu_seen:
                first_cpu_seen.add(worker)
                values.setdefault(worker, {})
                continue
            v = _number(pct)
            if v is not None:
                values.setdefault(worker, {}).setdefault("cpu_pct", []).append((v, 1.0))
    out: dict[str, dict[str, float | None]] = {}
    for worker, per in values.items():
        out[worker] = {}
        for name in _FIGURES:
            pts = per.get(name) or []
            weights = sum(w for _, w in pts)
            out[worker][f"mean_{name}"] = sum(v * w for v, w in pts) / weights if weights else None
            out[worker][f"max_{name}"] = max((v for v, _ in pts), default=None)
    return out


def _reason(f: Fidelity, worst_loop_lag: float | None, loop_ok: bool) -> str:
    lag = "" if f.read_lag_p99_ms is None else f", read lag p99 {ms(f.read_lag_p99_ms)} ms"
    unstamped = ""
    if f.unstamped_records:
        judged = (
            "not judged (no event-loop lag samples)"
            if worst_loop_lag is None
            else f"event-loop lag p99 {ms(worst_loop_lag)} ms (bound {FIDELITY_MAX_LOOP_LAG_P99_MS:g} ms)"
        )
        unstamped = f"{f.unstamped_records:,} records read without kernel stamps: {judged}"
    if f.trustworthy:
        on_time = "" if f.late_share is None else f"{_share(1 - f.late_share)} of {f.events:,} token events and "
        return (
            f"timing trustworthy: {on_time}{_share(1 - (f.ttft_late_share or 0.0))} of TTFTs read on time"
            f"{lag}{'; ' + unstamped if unstamped else ''}"
        )
    parts = []
    if (f.late_share or 0.0) > FIDELITY_MAX_LATE_SHARE or (f.ttft_late_share or 0.0) > FIDELITY_MAX_TTFT_LATE_SHARE:
        same = FIDELITY_MAX_LATE_SHARE == FIDELITY_MAX_TTFT_LATE_SHARE
        bounds = (
            f"{FIDELITY_MAX_LATE_SHARE:.0%}"
            if same
            else f"{FIDELITY_MAX_LATE_SHARE:.0%} and {FIDELITY_MAX_TTFT_LATE_SHARE:.0%}"
        )
        parts.append(
            f"{_share(f.late_share or 0.0)} of {f.events:,} token events and "
            f"{_share(f.ttft_late_share or 0.0)} of TTFTs read late (bounds {bounds})"
        )
    if (f.read_at_once_share or 0.0) > FIDELITY_MAX_READ_AT_ONCE_SHARE:
        parts.append(
            f"{f.read_at_once:,} of {f.ttft_records:,} streams ({_share(f.read_at_once_share or 0.0)}) "
            f"read at once, more than half of their gaps late (bound "
            f"{FIDELITY_MAX_READ_AT_ONCE_SHARE:.0%}): their ITL and TPOT are not the server's"
        )
    if parts:
        parts[-1] += lag
    if unstamped:
        parts.append(unstamped)
    # With no sign of a starved client and reads that returned promptly after their newest packet,
    # the events probably left the server together: from here that looks the same as a late read.
    prompt = f.read_lag_p99_ms is not None and f.read_lag_p99_ms <= 1.0
    causes = "; ".join(f.limited_by) or (
        "no cause seen in the load generators' samples"
        + (
            " — reads returned promptly: the server may have sent these events together (a server that "
            "sends in bursts is flagged too)"
            if prompt
            else ""
        )
    )
    return f"{UNTRUSTED}{'; '.join(parts)}; limited by: {causes}"


def _unmeasured(
    why: str, events: int, ttft_records: int, per_worker: dict[str, dict[str, float | None]], unstamped: int = 0
) -> Fidelity:
    return Fidelity(
        True,
        f"timing not measured: {why}",
        events,
        0,
        None,
        ttft_records,
        0,
        None,
        None,
        unstamped,
        per_worker,
        _limited_by(per_worker),
        measured=False,
    )


def _read_at_once(df: pd.DataFrame) -> np.ndarray:
    """Per record: it has ``FIDELITY_READ_AT_ONCE_MIN_GAPS`` gaps (token events - 1) or more, and more
    than half of them follow a late event."""
    late = np.nan_to_num(_floats(df, "late_events"))
    events = np.nan_to_num(_floats(df, "token_events")) if "token_events" in df.columns else np.zeros(len(df))
    gaps = events - 1
    return np.asarray((gaps >= FIDELITY_READ_AT_ONCE_MIN_GAPS) & (late * 2 > gaps), dtype=bool)


def _share(x: float) -> str:
    """A share as people read it: whole percents between 1% and 99%, a decimal (or more) outside,
    so that 100% means all and 0% none."""
    if x >= 1.0:
        return "100%"
    if x <= 0.0:
        return "0%"
    for digits in range(0 if 0.01 <= x <= 0.99 else 1, 6):
        text = f"{x * 100:.{digits}f}"
        if 0 < float(text) < 100:
            return f"{text}%"
    return f"{x:%}"


def _floats(df: pd.DataFrame, col: str) -> np.ndarray:
    column = df[col]
    if column.dtype.kind == "f":  # a float64 column as it is (a view); counts stored as float32 widened
        return np.asarray(column.to_numpy(), dtype=np.float64)
    return np.asarray(column.to_numpy(dtype=float, na_value=np.nan))


def _sum(df: pd.DataFrame, col: str, mask: np.ndarray) -> float:
    if col not in df.columns:
        return 0.0
    values = _floats(df, col)
    return float(np.sum(values, where=mask & ~np.isnan(values)))


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x:
        return None
    return float(x)
