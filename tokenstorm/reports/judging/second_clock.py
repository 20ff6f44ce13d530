"""The second clock: the server's own timing of each request, as a check on the client's reads.

A record with the server's timing (vLLM's ``--enable-per-request-metrics``, or its span) carries two
residuals that measure how late the client read, without any kernel stamp:

* the **overhead** (``overhead_s`` = TTFT − server queue − server TTFT): everything outside the engine —
  the HTTP and chat-template front end, tokenisation, the network — and the client's own lateness in reading
  the first token;
* the **ITL residual**: the client's mean ITL of the record − the server's (``tpot_s − server_itl_s``). Both
  are the span first → last token over ``output_tokens − 1`` (vLLM's ``mean_itl_ms`` has the same divisor), so
  the residual is how much later (or, a late first read, earlier) the client saw that span end than it began.

Their p50/p95/p99 (overall and per workload) sit beside the late-read counts, and the two are checked
against each other: where at least ``FIDELITY_MIN_LATE`` (5) records with server timing had their first token
read late (``ttft_late``) and as many on time, the late ones' median overhead must be larger than the on-time
ones' — the server's clock then *agrees* with the late-read flags; below the on-time ones' 25th percentile
it does *not agree*; in between it *cannot tell* (``agrees`` is ``None``: the lateness flagged, more than 1 ms,
may be smaller than the overhead's own spread, the front end's). Where too few TTFTs were late to compare,
streams *read at once* (more than half of their gaps after a late event) are compared with the others by their
median absolute ITL residual the same way. With fewer records than that on either side, nothing is compared
(``compared`` is empty, ``agrees`` ``None``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tokenstorm.reports.judging.formats import ms
from tokenstorm.workloads.rundir import FIDELITY_MIN_LATE, FIDELITY_READ_AT_ONCE_MIN_GAPS

__all__ = ["SecondClock", "second_clock"]

_STATS = (50, 95, 99)


@dataclass
class SecondClock:
    """The residuals between the client's and the server's view of the judged streamed records;
    ``summary.json``'s ``timing_fidelity.second_clock``."""

    records: int  # judged streamed records with the server's timing (an overhead)
    without: int  # judged streamed records without it
    overhead_ms: dict[str, float | None]  # p50 / p95 / p99
    itl_residual_ms: dict[str, float | None]  # p50 / p95 / p99, records of two or more output tokens
    #: median overhead of the records whose first token was read late, and of those read on time
    late_overhead_p50_ms: float | None
    on_time_overhead_p50_ms: float | None
    late_records: int  # records with server timing whose TTFT was read late
    #: the comparison made: "ttft" (overhead of late vs on-time TTFTs), "itl" (|ITL residual| of streams
    #: read at once vs the others), "" (too few on a side to compare)
    compared: str
    agrees: bool | None
    sentence: str  # one line, quoted by the fidelity verdict
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return asdict(self)


def second_clock(requests: pd.DataFrame, sel: np.ndarray) -> SecondClock | None:
    """The residuals of the records of ``requests`` selected by ``sel`` (streamed, with a first token);
    ``None`` when none of them has the server's timing."""
    if "overhead_s" not in requests.columns or not len(requests):
        return None
    overhead = _floats(requests, "overhead_s")
    timed = sel & ~np.isnan(overhead)
    n = int(timed.sum())
    if n == 0:
        return None
    residual = _itl_residual(requests)
    late = (
        np.asarray(requests["ttft_late"].fillna(0).astype(bool), dtype=bool)
        if "ttft_late" in requests
        else np.zeros(len(requests), dtype=bool)
    )
    late_p50 = _median_ms(overhead[timed & late])
    on_time_p50 = _median_ms(overhead[timed & ~late])
    n_late, n_on_time = int((timed & late).sum()), int((timed & ~late).sum())
    compared, agrees = "", None
    if min(n_late, n_on_time) >= FIDELITY_MIN_LATE:
        compared, agrees = "ttft", _agrees(overhead[timed & late], overhead[timed & ~late])
    else:
        at_once = _read_at_once(requests)
        has = timed & ~np.isnan(residual)
        a, b = np.abs(residual[has & at_once]), np.abs(residual[has & ~at_once])
        if min(a.size, b.size) >= FIDELITY_MIN_LATE:
            compared, agrees = "itl", _agrees(a, b)
    workloads = {}
    if "workload" in requests.columns:
        names = requests["workload"].astype(object).to_numpy()
        for w in sorted({str(x) for x in names[timed]}):
            mine = timed & (names == w)
            workloads[w] = {
                "records": int(mine.sum()),
                "overhead_ms": _stats_ms(overhead[mine]),
                "itl_residual_ms": _stats_ms(residual[mine]),
            }
    clock = SecondClock(
        records=n,
        without=int(sel.sum()) - n,
        overhead_ms=_stats_ms(overhead[timed]),
        itl_residual_ms=_stats_ms(residual[timed]),
        late_overhead_p50_ms=late_p50,
        on_time_overhead_p50_ms=on_time_p50,
        late_records=n_late,
        compared=compared,
        agrees=agrees,
        sentence="",
        workloads=workloads,
    )
    clock.sentence = _sentence(clock)
    return clock


def _sentence(c: SecondClock) -> str:
    """``server's clock (96 of 100 records): overhead p50/p99 4.1/12 ms, ITL residual p50/p99 0.02/0.50 ms;
    TTFTs read late had overhead p50 48 ms vs 4.1 ms on time — agrees with the late-read flags``."""
    of = f"{c.records:,} of {c.records + c.without:,} records" if c.without else f"{c.records:,} records"
    o, r = c.overhead_ms, c.itl_residual_ms
    text = f"server's clock ({of}): overhead p50/p99 {_ms(o['p50'])}/{_ms(o['p99'])} ms"
    if r["p50"] is not None:
        text += f", ITL residual p50/p99 {_ms(r['p50'])}/{_ms(r['p99'])} ms"
    if c.compared == "ttft":
        text += (
            f"; TTFTs read late had overhead p50 {_ms(c.late_overhead_p50_ms)} ms vs "
            f"{_ms(c.on_time_overhead_p50_ms)} ms on time"
        )
    elif c.compared == "itl":
        text += "; streams read at once vs the others, by their |ITL residual|"
    if c.agrees is True:
        text += " — agrees with the late-read flags"
    elif c.compared and c.agrees is None:
        text += " — the server's clock cannot tell them apart (within the others' own spread)"
    elif c.agrees is False:
        text += (
            " — does NOT agree with the late-read flags: the records flagged late were not later by the "
            "server's clock (the server may have sent those events together)"
        )
    return text


def _agrees(flagged: np.ndarray, others: np.ndarray) -> bool | None:
    """True: the flagged records' median is above the others'; False: below the others' 25th percentile (clearly
    earlier by the server's clock); None: in between — within the others' own spread, the clock cannot tell."""
    if np.median(flagged) > np.median(others):
        return True
    return None if np.median(flagged) >= np.percentile(others, 25) else False


def _read_at_once(df: pd.DataFrame) -> np.ndarray:
    """Per record: more than half of its gaps (of 2 or more) follow a late event (the fidelity verdict's rule)."""
    if "late_events" not in df.columns or "token_events" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    gaps = np.nan_to_num(_floats(df, "token_events")) - 1
    late = np.nan_to_num(_floats(df, "late_events"))
    return np.asarray((gaps >= FIDELITY_READ_AT_ONCE_MIN_GAPS) & (late * 2 > gaps), dtype=bool)


def _itl_residual(df: pd.DataFrame) -> np.ndarray:
    """Per record: the client's mean ITL (``tpot_s``) − the server's (``server_itl_s``); NaN without both."""
    if "tpot_s" not in df.columns or "server_itl_s" not in df.columns:
        return np.full(len(df), np.nan)
    residual: np.ndarray = _floats(df, "tpot_s") - _floats(df, "server_itl_s")
    return residual


def _stats_ms(values_s: np.ndarray) -> dict[str, float | None]:
    values = values_s[~np.isnan(values_s)]
    if not values.size:
        return {f"p{p}": None for p in _STATS}
    return {f"p{p}": float(q) * 1000 for p, q in zip(_STATS, np.percentile(values, _STATS), strict=True)}


def _median_ms(values_s: np.ndarray) -> float | None:
    return float(np.median(values_s)) * 1000 if values_s.size else None


def _ms(x: float | None) -> str:
    return "—" if x is None else ms(x)


def _floats(df: pd.DataFrame, col: str) -> np.ndarray:
    column = df[col]
    if column.dtype.kind == "f":  # a float64 column as it is (a view); counts stored as float32 widened
        return np.asarray(column.to_numpy(), dtype=np.float64)
    return np.asarray(column.to_numpy(dtype=float, na_value=np.nan))
