"""The live window's records as a worker shipped them: one batch's columns, kept as numpy arrays.

:class:`~.live.LiveWindow` keeps a local runner's records one by one; the master's come in batches
(:mod:`tokenstorm.workloads.rundir.wire`) and stay columns here, so a chart point sums up tens of thousands of requests
with a few numpy calls, and a record becomes a row (a dict) only when the live status asks for the newest
ones — at most ``SLO_MAX_REQUESTS`` of them, each made once.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...rundir import ErrorCategory
from ...rundir.wire import itl_gaps_s, null_filled

__all__ = ["Chunk", "GapPieces", "add_chunk", "joined", "sampled_gaps"]


def _floats(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """Column ``name`` as float64, nulls as NaN."""
    return np.asarray(pc.fill_null(pc.cast(batch.column(name), pa.float64()), np.nan), dtype=np.float64)


@dataclass(slots=True)
class GapPieces:
    """ITL gaps of many requests: their values end to end, and each request's count of them."""

    values: list[np.ndarray] = field(default_factory=list)
    lengths: list[np.ndarray] = field(default_factory=list)

    def add(self, values: np.ndarray, lengths: np.ndarray) -> None:
        """Add requests' gaps (``values``, seconds) and how many each request has (``lengths``)."""
        self.values.append(values)
        self.lengths.append(lengths)


def sampled_gaps(pieces: GapPieces | None, max_gaps: int) -> np.ndarray:
    """The gaps of ``pieces`` — every one, or, past ``max_gaps``, an even stride of each request's (its gaps
    0, step, 2·step…), so a point stays cheap however heavy the load."""
    if pieces is None or not pieces.values:
        return np.zeros(0)
    values, lengths = np.concatenate(pieces.values), np.concatenate(pieces.lengths).astype(np.int64)
    total = values.size
    if not total:
        return np.zeros(0)
    step = max(1, -(-total // max_gaps))
    if step == 1:
        return values
    starts = np.cumsum(lengths) - lengths
    within = np.arange(total) - np.repeat(starts, lengths)
    sampled: np.ndarray = values[within % step == 0]
    return sampled


class Chunk:
    """One shipped batch's records (the cancelled left out), in the live window."""

    __slots__ = (
        "_batch",
        "_lengths",
        "_offsets",
        "_rows",
        "_rows_from",
        "e2e",
        "end",
        "gaps",
        "group",
        "keys",
        "ok",
        "tokens",
        "tpot",
        "ttft",
    )

    def __init__(self, batch: pa.RecordBatch, keys: list[str], groups: np.ndarray, kept: tuple[str, ...]) -> None:
        cancelled = pc.fill_null(pc.equal(batch.column("error_category"), ErrorCategory.CANCELLED), False)
        mask = ~cancelled.to_numpy(zero_copy_only=False)
        if not mask.all():
            batch, groups = batch.filter(pa.array(mask)), groups[mask]
        self.keys, self.group = keys, groups
        self._batch = batch.select(list(kept))
        self.ttft, self.e2e, self.tpot = _floats(batch, "ttft_s"), _floats(batch, "e2e_s"), _floats(batch, "tpot_s")
        done = _floats(batch, "done_s")
        done = np.where(np.isnan(done) | (done == 0), self.e2e, done)  # as ``done_s or e2e_s or 0``
        self.end = _floats(batch, "start_epoch_s") + np.nan_to_num(done)
        self.tokens = null_filled(batch, "output_tokens", 0).astype(np.float64)
        self.ok = null_filled(batch, "ok", False).astype(bool)
        self._offsets, self.gaps = itl_gaps_s(batch)
        self._lengths = np.diff(self._offsets)
        self._rows: list[dict[str, Any]] = []
        self._rows_from = batch.num_rows  # the rows made so far: the newest, from this index on

    def __len__(self) -> int:
        return int(self.end.size)

    @property
    def newest_end_s(self) -> float:
        """The latest end of a request in this chunk (epoch s)."""
        return float(self.end.max()) if self.end.size else float("-inf")

    def gaps_of(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ITL gaps of the requests ``mask`` selects, end to end, and how many each has."""
        return self.gaps[np.repeat(mask, self._lengths)], self._lengths[mask]

    def row(self, i: int) -> dict[str, Any]:
        """Record ``i`` as the live window's row: the kept fields, the ITL gaps as ``array('d')``."""
        if i < self._rows_from:  # made from the newest back, once each
            start = max(0, min(i, self._rows_from - 256))
            made = self._batch.slice(start, self._rows_from - start).to_pylist()
            for n, row in enumerate(made, start):
                gaps = array("d")
                gaps.frombytes(self.gaps[self._offsets[n] : self._offsets[n + 1]].tobytes())
                row["itl_gaps_s"] = gaps
            self._rows[:0] = made
            self._rows_from = start
        kept: dict[str, Any] = self._rows[i - self._rows_from]
        return kept


def add_chunk(
    chunk: Chunk,
    lo: float,
    t: float,
    latencies: tuple[dict[str, list[Any]], ...],
    pieces: dict[str, GapPieces],
    counts: dict[str, list[float]],
) -> None:
    """Add the requests of ``chunk`` that ended in ``(lo, t]`` to a point's figures, by chart line."""
    window = (chunk.end > lo) & (chunk.end <= t)
    if not window.any():
        return
    ttft, e2e, tpot = latencies
    for g in np.unique(chunk.group[window]):
        w = chunk.keys[g]
        mine = window & (chunk.group == g)
        good = mine & chunk.ok
        c = counts.setdefault(w, [0.0, 0.0, 0.0])
        c[0] += float(mine.sum())
        c[1] += float((mine & ~chunk.ok).sum())
        c[2] += float(chunk.tokens[mine].sum())
        for values, into in ((chunk.ttft, ttft), (chunk.e2e, e2e), (chunk.tpot, tpot)):
            picked = values[good]
            into.setdefault(w, []).append(picked[~np.isnan(picked)])
        pieces.setdefault(w, GapPieces()).add(*chunk.gaps_of(good))


def joined(parts: dict[str, list[Any]]) -> dict[str, np.ndarray]:
    """Per workload, its floats and arrays as one array."""
    out = {}
    for w, items in parts.items():
        floats = [x for x in items if isinstance(x, float)]
        arrays = [x for x in items if not isinstance(x, float)]
        out[w] = np.concatenate([np.asarray(floats, dtype=np.float64), *arrays])
    return out
