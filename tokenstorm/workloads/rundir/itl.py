"""The inter-token gaps of a report's requests, streamed from the records and counted, never all in memory.

A report asks :class:`ItlSource` for the ITL distribution of a set of requests and gets an
:class:`ItlHistogram`, built by streaming the segments' gap column once; per-request gap counts come
batch by batch (:meth:`ItlSource.gap_count_batches`), so their memory is a batch's.

The histogram counts whole microseconds exactly below 2**20 µs (1.05 s) and in buckets of
0.01% relative width above, so its percentiles equal numpy's (linear interpolation) on the
recorded gaps below a second and are within 0.01% above; mean, standard deviation and max are
exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ItlHistogram", "ItlSource"]

_EXACT_BELOW_US = 1 << 20
_HIGH_RATIO = 1.0001
_HIGH_BINS = int(np.ceil(np.log(2**31 / _EXACT_BELOW_US) / np.log(_HIGH_RATIO))) + 1
_GAPS_PER_CHUNK = 1 << 20  # bounded working memory while streaming gaps (~15 MB)


class ItlHistogram:
    """Every inter-token gap of a set of requests, as exact microsecond counts (see module doc)."""

    def __init__(self) -> None:
        self.low = np.zeros(_EXACT_BELOW_US, dtype=np.int64)
        self.high = np.zeros(_HIGH_BINS, dtype=np.int64)
        self.size = 0
        self.sum_us = 0.0
        self.sumsq_us = 0.0
        self.max_us = 0

    def add_us(self, gaps_us: np.ndarray) -> None:
        """Count gaps given in whole microseconds."""
        if gaps_us.size == 0:
            return
        gaps = np.maximum(gaps_us.astype(np.int64, copy=False), 0)  # a negative gap (a bug, flagged) counts as 0
        top = int(gaps.max())
        if top < _EXACT_BELOW_US:  # the usual batch: no bin above the longest gap is touched
            self.low[: top + 1] += np.bincount(gaps, minlength=top + 1)
        else:
            small = gaps < _EXACT_BELOW_US
            self.low += np.bincount(gaps[small], minlength=_EXACT_BELOW_US)
            big = gaps[~small].astype(np.float64)
            idx = np.minimum(np.log(big / _EXACT_BELOW_US) / np.log(_HIGH_RATIO), _HIGH_BINS - 1).astype(np.int64)
            self.high += np.bincount(idx, minlength=_HIGH_BINS)
        self.size += int(gaps.size)
        self.sum_us += float(gaps.sum())  # whole microseconds: an exact integer sum
        if top < _EXACT_BELOW_US:  # squares below 2**40: exact in int64, 2**22 of them at a time (no BLAS call)
            self.sumsq_us += float(sum(int(np.dot(c, c)) for c in np.split(gaps, range(1 << 22, gaps.size, 1 << 22))))
        else:
            f = gaps.astype(np.float64)
            self.sumsq_us += float(np.dot(f, f))
        self.max_us = max(self.max_us, top)

    def merge(self, other: ItlHistogram) -> ItlHistogram:
        """Add ``other``'s gaps to this one (histograms from workers or segments merge exactly)."""
        self.low += other.low
        self.high += other.high
        self.size += other.size
        self.sum_us += other.sum_us
        self.sumsq_us += other.sumsq_us
        self.max_us = max(self.max_us, other.max_us)
        return self

    def _values_counts(self) -> tuple[np.ndarray, np.ndarray]:
        hi_vals = _EXACT_BELOW_US * _HIGH_RATIO ** (np.arange(_HIGH_BINS) + 0.5)
        values = np.concatenate([np.arange(_EXACT_BELOW_US, dtype=np.float64), hi_vals])
        counts = np.concatenate([self.low, self.high])
        return values, counts

    def percentiles(self, ps: list[float] | np.ndarray) -> np.ndarray:
        """Percentiles in seconds, numpy's default (linear) definition over the gaps."""
        ps = np.asarray(ps, dtype=np.float64)
        if self.size == 0:
            return np.full(ps.shape, np.nan)
        values, counts = self._values_counts()
        cum = np.cumsum(counts)
        h = (self.size - 1) * ps / 100.0
        lo = np.floor(h).astype(np.int64)
        hi = np.minimum(lo + 1, self.size - 1)
        v_lo = values[np.searchsorted(cum, lo, side="right")]
        v_hi = values[np.searchsorted(cum, hi, side="right")]
        out: np.ndarray = (v_lo + (h - lo) * (v_hi - v_lo)) / 1e6
        return out

    def count_above(self, seconds: float) -> int:
        """How many gaps are longer than ``seconds`` (exact to the microsecond below ~1 s, to the bin above)."""
        values, counts = self._values_counts()
        return int(counts[values > seconds * 1e6].sum())

    def mean(self) -> float:
        """Mean gap in seconds (exact)."""
        return self.sum_us / self.size / 1e6

    def std(self) -> float:
        """Population standard deviation in seconds, as ``numpy.std``."""
        m = self.sum_us / self.size
        return float(np.sqrt(max(0.0, self.sumsq_us / self.size - m * m))) / 1e6

    def max(self) -> float:
        """Longest gap in seconds (exact)."""
        return self.max_us / 1e6

    def bars(self, upper_s: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
        """``(edges_s, counts)`` of ``bins`` equal bins over ``[0, upper_s]``, larger gaps in the last."""
        values, counts = self._values_counts()
        edges = np.linspace(0.0, upper_s, bins + 1)
        idx = np.clip(np.searchsorted(edges * 1e6, values, side="right") - 1, 0, bins - 1)
        return edges, np.bincount(idx, weights=counts, minlength=bins)


class ItlSource:
    """The gaps of a table's requests, streamed from where they were recorded.

    ``histogram(mask)`` streams the gaps once per new set of requests, counting each workload
    (``labels``) apart, so later asks for one workload of the same set are answered from memory.
    """

    def __init__(self, batches: Callable[[], Iterator[pa.Array]], n_rows: int, labels: np.ndarray) -> None:
        self._batches = batches  # yields the ITL list column, batch by batch, in table row order
        self._n = n_rows
        self._labels = labels
        self._cache: list[tuple[np.ndarray, dict[int, ItlHistogram]]] = []
        self.keep: Any = None  # what must outlive the reads (a temporary file of a parsed requests.jsonl)

    def histogram(self, mask: np.ndarray) -> ItlHistogram:
        """All gaps of the requests selected by boolean ``mask`` (aligned with the table)."""
        for known, per_label in self._cache:
            if mask.shape == known.shape and not (mask & ~known).any():
                present = np.unique(self._labels[mask])
                if np.array_equal(mask, known & np.isin(self._labels, present)):
                    return _merged(per_label[int(lab)] for lab in present if int(lab) in per_label)
        per_label = self._scan(mask)
        self._cache.append((mask.copy(), per_label))
        return _merged(per_label.values())

    def gap_counts(self, mask: np.ndarray, threshold_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Per request selected by ``mask`` (in table order): its gap count and how many of its gaps are at most
        ``threshold_s`` (the clusters of an ITL percentile's interval). One streaming pass, a batch at a time."""
        counts = np.zeros(int(mask.sum()), dtype=np.int64)
        below = np.zeros_like(counts)
        out = 0
        for _, lens, at_most in self.gap_count_batches(mask, threshold_s):
            counts[out : out + lens.size], below[out : out + lens.size] = lens, at_most
            out += lens.size
        return counts, below

    def gap_count_batches(self, mask: np.ndarray, threshold_s: float) -> Iterator[tuple[np.ndarray, ...]]:
        """:meth:`gap_counts` a batch at a time, for sums that need no array as long as the run: ``(rows, counts,
        below)``, ``rows`` the selected requests' positions in the table (int64, ascending)."""
        for rows, lens, (below,) in self.gap_count_batches_at(mask, [threshold_s]):
            yield rows, lens, below

    def gap_count_batches_at(
        self, mask: np.ndarray, thresholds_s: Sequence[float]
    ) -> Iterator[tuple[np.ndarray, np.ndarray, list[np.ndarray]]]:
        """:meth:`gap_count_batches` at several thresholds in one pass over the gaps: ``(rows, counts, belows)``,
        ``belows[k]`` each request's gaps at most ``thresholds_s[k]``."""
        thresholds_us = [t * 1e6 for t in thresholds_s]
        for row, lens, flat in self._gap_batches():
            picked = np.flatnonzero(mask[row : row + len(lens)])
            ends = np.cumsum(lens)
            belows = []
            for threshold_us in thresholds_us:
                running = np.concatenate([[0], np.cumsum(flat <= threshold_us)])  # gaps ≤ threshold so far
                belows.append((running[ends] - running[ends - lens])[picked])
            yield picked + row, lens[picked], belows

    def _gap_batches(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """The ITL column a batch at a time, up to the table's rows: ``(the batch's first row, each request's gap
        count, its gaps in microseconds)``; the pool's decoded gaps are released at the end."""
        row = 0
        for col in self._batches():
            if row >= self._n:
                break
            col = col.slice(0, self._n - row)
            lens = pc.fill_null(pc.list_value_length(col), 0).to_numpy().astype(np.int64)
            start = col.offsets[0].as_py()
            yield row, lens, col.values.slice(start, int(lens.sum())).to_numpy(zero_copy_only=False)
            row += len(col)
        pa.default_memory_pool().release_unused()  # a row group's decoded gaps, kept by the pool otherwise

    def _scan(self, mask: np.ndarray) -> dict[int, ItlHistogram]:
        out: dict[int, ItlHistogram] = {}
        labels = np.where(mask, self._labels, -1)
        row = 0
        for first, lens, flat in self._gap_batches():
            row = first + len(lens)
            gap_labels = np.repeat(labels[first:row], lens)
            for lab in np.unique(labels[first:row]):
                if lab < 0:
                    continue
                hist = out.setdefault(int(lab), ItlHistogram())
                for i in range(0, flat.size, _GAPS_PER_CHUNK):
                    part = slice(i, i + _GAPS_PER_CHUNK)
                    hist.add_us(flat[part][gap_labels[part] == lab])
        if row != self._n:
            raise RuntimeError(
                f"the records changed while being read ({row} ITL rows for {self._n} requests); build the report again"
            )
        return out


def _merged(hists: Any) -> ItlHistogram:
    total = ItlHistogram()
    for h in hists:
        total.merge(h)
    return total
