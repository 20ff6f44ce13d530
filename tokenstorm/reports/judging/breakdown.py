"""Where the time went: each request's client-side TTFT and E2E split by the server's own timing of it.

A record the server timed (vLLM's ``--enable-per-request-metrics``, or its ``llm_request`` span joined by trace
id) carries ``server_queue_s`` (queued → scheduled), ``server_ttft_s`` (scheduled → first token: prefill),
``server_decode_s`` (first → last token), ``server_itl_s`` (the server's mean gap) and ``overhead_s``
(``ttft_s − server_queue_s − server_ttft_s``: everything outside the engine — the HTTP and chat-template front
end, tokenisation, the network and the client's own reading). Per request, then::

    TTFT = overhead + queue + prefill
    E2E  = overhead + queue + prefill + decode + tail       (tail = E2E − TTFT − decode: the last token's way
                                                              to the client, and how late it was read)

The *means* over the same requests add up the same way (:class:`Split`); percentiles do not add (the p99 of
TTFT is not the sum of the parts' p99s), so they are given part by part (:func:`breakdown_figures`). The
requests are those the TTFT figures are from: judged and successful — of them, those the server timed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenstorm.reports.data.columns import selected
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.stats import metric_block

__all__ = ["PARTS", "PART_WORDS", "Split", "breakdown_figures", "part_values", "split_means", "timed_mask"]

#: (summary.json key stem, record column): the parts in the order they add up to TTFT, then E2E
PARTS = (
    ("overhead", "overhead_s"),
    ("server_queue", "server_queue_s"),
    ("server_ttft", "server_ttft_s"),
    ("server_decode", "server_decode_s"),
)
#: figures of the server that are no part of the sum: its mean gap between tokens, and its front end (arrival
#: → queued, known from a span only; it is part of the overhead)
OTHERS = (("server_itl", "server_itl_s"), ("server_frontend", "server_frontend_s"))
#: each part (and the tail) as the outputs name it
PART_WORDS = {
    "overhead": "overhead",
    "server_queue": "queue",
    "server_ttft": "prefill",
    "server_decode": "decode",
    "tail": "tail",
    "server_itl": "server ITL",
    "server_frontend": "server front end",
}


def _known(run: RunData, col: str, rows: np.ndarray) -> np.ndarray:
    """``rows`` whose ``col`` holds a value (a column the table lacks: none)."""
    df = run.requests
    if col not in df.columns or not len(df):
        return np.zeros(len(df), dtype=bool)
    column = df[col]
    # A float column as it is (a view): ``na_value`` would copy all of it first, 8 bytes a request.
    values = column.to_numpy() if column.dtype.kind == "f" else column.to_numpy(dtype=float, na_value=np.nan)
    known: np.ndarray = rows & ~np.isnan(values)
    return known


def timed_mask(run: RunData, ok: np.ndarray) -> np.ndarray:
    """The rows of ``ok`` (judged, successful) whose TTFT the server's timing splits: queue and server TTFT
    known (the overhead is the rest of the client's TTFT)."""
    timed: np.ndarray = _known(run, "server_queue_s", ok) & _known(run, "server_ttft_s", ok) & _known(run, "ttft_s", ok)
    return timed


def part_values(run: RunData, stem: str, rows: np.ndarray) -> np.ndarray:
    """Part ``stem``'s seconds for ``rows`` (NaN where unknown, a new array). The overhead is the record's,
    else ``ttft_s − server_queue_s − server_ttft_s`` — its definition, for a record that left it out."""
    col = dict(PARTS + OTHERS)[stem]
    df = run.requests
    values = selected(df, col, rows) if col in df.columns else np.full(int(rows.sum()), np.nan)
    if stem == "overhead":
        rest = selected(df, "ttft_s", rows) - part_values(run, "server_queue", rows)
        rest -= part_values(run, "server_ttft", rows)
        values = np.where(np.isnan(values), rest, values)
    return values


def breakdown_figures(run: RunData, ok: np.ndarray) -> dict[str, float | int | None]:
    """``summary.json``'s figures of where the time went, over the successful judged requests ``ok``:
    ``server_timed_requests`` and ``server_timing_share`` (of ``ok``), each part's ``mean_/median_/std_/p50_/p90_/
    p95_/p99_/max_<part>_ms`` (overhead, queue and server TTFT over the timed requests; decode, server ITL and
    front end over those that have them), and ``mean_ttft_server_timed_ms``: the client's mean TTFT over the
    timed requests, which the three parts' means add up to. Empty when the server timed none of them: no
    figure is made up from nothing."""
    timed = timed_mask(run, ok)
    n = int(timed.sum())
    if n == 0:
        return {}
    out: dict[str, float | int | None] = {"server_timed_requests": n, "server_timing_share": n / int(ok.sum())}
    for stem, col in PARTS + OTHERS:
        rows = timed if stem in ("overhead", "server_queue", "server_ttft") else _known(run, col, ok)
        if stem == "server_frontend" and not rows.any():
            continue  # only a span says it: absent, not a row of empty figures, in a run without one
        out.update(metric_block(part_values(run, stem, rows), stem))
    ttft = selected(run.requests, "ttft_s", timed)
    out["mean_ttft_server_timed_ms"] = float(ttft.mean() * 1000)
    # The server's ITL per gap (each request's mean counted once per gap, output tokens − 1): the mean vLLM's
    # inter-token histogram and the Prometheus series give; the percentiles above are of each request's mean.
    itl_rows = _known(run, "server_itl_s", ok)
    itl = selected(run.requests, "server_itl_s", itl_rows)
    gaps = np.nan_to_num(selected(run.requests, "output_tokens", itl_rows)) - 1
    if (gaps >= 1).any():
        out["mean_server_itl_per_gap_ms"] = float(np.average(itl[gaps >= 1], weights=gaps[gaps >= 1]) * 1000)
    return out


@dataclass(frozen=True)
class Split:
    """Means in ms over the same requests that add up: ``overhead + queue + prefill == ttft`` over
    ``requests`` (the timed ones), and ``overhead + queue + prefill + decode + tail == e2e`` over
    ``e2e_requests`` (those of them the server also timed the decode of); the E2E figures are None when none."""

    requests: int
    share: float  # of the successful requests asked about
    overhead_ms: float
    queue_ms: float
    prefill_ms: float
    ttft_ms: float
    e2e_requests: int = 0
    e2e_parts_ms: tuple[float, float, float, float, float] | None = None  # overhead, queue, prefill, decode, tail
    e2e_ms: float | None = None

    @property
    def ttft_parts_ms(self) -> tuple[float, float, float]:
        """Overhead, queue, prefill."""
        return self.overhead_ms, self.queue_ms, self.prefill_ms


def _means_ms(run: RunData, rows: np.ndarray) -> list[float]:
    return [float(np.mean(part_values(run, stem, rows)) * 1000) for stem, _ in PARTS[:3]]


def split_means(run: RunData, ok: np.ndarray) -> Split | None:
    """The means that add up, over the timed requests of ``ok`` (None: the server timed none)."""
    timed = timed_mask(run, ok)
    n = int(timed.sum())
    if n == 0:
        return None
    df = run.requests
    overhead, queue, prefill = _means_ms(run, timed)
    ttft = float(np.mean(selected(df, "ttft_s", timed)) * 1000)
    whole = _known(run, "server_decode_s", timed) & _known(run, "e2e_s", timed)
    if not whole.any():
        return Split(n, n / int(ok.sum()), overhead, queue, prefill, ttft)
    first = _means_ms(run, whole)
    decode = float(np.mean(part_values(run, "server_decode", whole)) * 1000)
    e2e = float(np.mean(selected(df, "e2e_s", whole)) * 1000)
    tail = e2e - float(np.mean(selected(df, "ttft_s", whole)) * 1000) - decode
    parts = (first[0], first[1], first[2], decode, tail)
    return Split(n, n / int(ok.sum()), overhead, queue, prefill, ttft, int(whole.sum()), parts, e2e)
