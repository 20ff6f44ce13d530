"""Request records as a table for reports, in memory bounded by the run's request count alone.

:func:`read_requests_frame` gives one pandas row per request with the scalar columns a report
reads (strings as categoricals, a session id as a 63-bit key, the HTTP status as float32: ~135 bytes a
request, so 20 million requests fit in ~2.7 GB) and an :class:`ItlSource` for the inter-token gaps, which are never
all in memory at once: a report asks for the ITL distribution of a set of requests and gets an
:class:`ItlHistogram`, built by streaming the segments' gap column once.

The histogram counts whole microseconds exactly below 2**20 µs (1.05 s) and in buckets of
0.01% relative width above, so its percentiles equal numpy's (linear interpolation) on the
recorded gaps below a second and are within 0.01% above; mean, standard deviation and max are
exact.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from .meta import REQUESTS_FILE
from .reading import iter_batches
from .segments import ITL_COLUMN, SCHEMA, SEGMENTS_DIR, rows_to_batch, segment_batches, segment_paths

__all__ = ["FRAME_COLUMNS", "ItlHistogram", "ItlSource", "frame_from_rows", "read_requests_frame", "string_key"]

#: the scalar columns of a report's table (see RequestRecord for their meaning; ``session_id`` as a key)
FRAME_COLUMNS = (
    "workload",
    "model",
    "worker_id",
    "start_epoch_s",
    "ok",
    "status_code",
    "error_category",
    "error_detail",
    "prompt_tokens",
    "output_tokens",
    "ttft_s",
    "e2e_s",
    "tpot_s",
    "warmup",
    "send_lag_s",
    "timing_violation",
    "target",
    "token_events",
    "late_events",
    "ttft_late",
    "read_lag_max_s",
    "session_id",
    "session_end",
    "tool_calls",
    "ttft_tool_s",
    "tool_call_s",
    "tool_call_tokens",
    "cached_tokens",
    "check",
    "check_results",
    "needle_depth",
    "server_queue_s",
    "server_ttft_s",
    "server_decode_s",
    "server_itl_s",
    "overhead_s",
    "server_frontend_s",
    "trace_id",
)
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
        small = gaps < _EXACT_BELOW_US
        self.low += np.bincount(gaps[small], minlength=_EXACT_BELOW_US)
        if not small.all():
            big = gaps[~small].astype(np.float64)
            idx = np.minimum(np.log(big / _EXACT_BELOW_US) / np.log(_HIGH_RATIO), _HIGH_BINS - 1).astype(np.int64)
            self.high += np.bincount(idx, minlength=_HIGH_BINS)
        self.size += int(gaps.size)
        f = gaps.astype(np.float64)
        self.sum_us += float(f.sum())
        self.sumsq_us += float(np.dot(f, f))
        self.max_us = max(self.max_us, int(gaps.max()))

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
        threshold_us = threshold_s * 1e6
        row = out = 0
        for col in self._batches():
            if row >= self._n:
                break
            col = col.slice(0, self._n - row)
            lens = pc.fill_null(pc.list_value_length(col), 0).to_numpy().astype(np.int64)
            start = col.offsets[0].as_py()
            flat = col.values.slice(start, int(lens.sum())).to_numpy(zero_copy_only=False)
            running = np.concatenate([[0], np.cumsum(flat <= threshold_us)])  # gaps ≤ threshold so far
            ends = np.cumsum(lens)
            at_most = running[ends] - running[ends - lens]
            picked = mask[row : row + len(col)]
            k = int(picked.sum())
            counts[out : out + k], below[out : out + k] = lens[picked], at_most[picked]
            out += k
            row += len(col)
        return counts, below

    def _scan(self, mask: np.ndarray) -> dict[int, ItlHistogram]:
        out: dict[int, ItlHistogram] = {}
        labels = np.where(mask, self._labels, -1)
        row = 0
        for col in self._batches():
            if row >= self._n:
                break
            col = col.slice(0, self._n - row)
            lens = pc.fill_null(pc.list_value_length(col), 0).to_numpy().astype(np.int64)
            start = col.offsets[0].as_py()
            flat = col.values.slice(start, int(lens.sum())).to_numpy(zero_copy_only=False)
            gap_labels = np.repeat(labels[row : row + len(col)], lens)
            for lab in np.unique(labels[row : row + len(col)]):
                if lab < 0:
                    continue
                hist = out.setdefault(int(lab), ItlHistogram())
                for i in range(0, flat.size, _GAPS_PER_CHUNK):
                    part = slice(i, i + _GAPS_PER_CHUNK)
                    hist.add_us(flat[part][gap_labels[part] == lab])
            row += len(col)
        if row != self._n:
            raise RuntimeError(f"the records changed while being read ({row} ITL rows for {self._n} requests); "
                               "build the report again")  # fmt: skip
        return out


def _merged(hists: Any) -> ItlHistogram:
    total = ItlHistogram()
    for h in hists:
        total.merge(h)
    return total


def _frame_and_source(batches: Callable[[list[str]], Iterator[pa.RecordBatch]]) -> tuple[pd.DataFrame, ItlSource]:
    # Count first, then fill arrays of the final size: chunks concatenated at the end would need
    # twice the memory, and fragment the heap so that the process keeps it (measured: 3.9 GB
    # peak for 20 million requests that way).
    n = sum(b.num_rows for b in batches(["ok"]))
    data: dict[str, np.ndarray] = {}
    for name in FRAME_COLUMNS:
        dtype = np.int8 if name in _STRING_COLUMNS else _DTYPES.get(name, np.float64)  # codes widen as needed
        data[name] = np.empty(n, dtype=dtype)
    cats: dict[str, dict[str, int]] = {name: {} for name in _STRING_COLUMNS}
    row = 0
    for batch in batches(list(FRAME_COLUMNS)):
        if row >= n:
            break  # the live segment grew since the count: the rows counted are the table
        batch = batch.slice(0, n - row)
        end = row + batch.num_rows
        for name in FRAME_COLUMNS:
            arr = batch.column(name)
            if name in _STRING_COLUMNS:
                enc = pc.dictionary_encode(arr)
                table = cats[name]
                remap = np.array([table.setdefault(v, len(table)) for v in enc.dictionary.to_pylist()] + [-1],
                                 dtype=np.int32)  # fmt: skip
                if len(table) > np.iinfo(data[name].dtype).max:
                    data[name] = data[name].astype(np.int16 if len(table) <= np.iinfo(np.int16).max else np.int32)
                data[name][row:end] = remap[pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)]
            elif name in _KEY_COLUMNS:
                enc = pc.dictionary_encode(arr)
                keys = np.array([string_key(v) for v in enc.dictionary.to_pylist()] + [-1], dtype=np.int64)
                data[name][row:end] = keys[pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)]
            elif pa.types.is_boolean(arr.type):
                data[name][row:end] = pc.fill_null(arr, False).to_numpy(zero_copy_only=False)
            else:  # numbers; null → NaN
                data[name][row:end] = arr.to_numpy(zero_copy_only=False)
        row = end
    if row < n:
        raise RuntimeError(f"the records changed while being read ({row} rows for {n} counted); build the report again")
    columns: dict[str, Any] = {}
    for name in FRAME_COLUMNS:
        values = data.pop(name)
        columns[name] = pd.Categorical.from_codes(values, categories=list(cats[name])) if name in cats else values
    frame = pd.DataFrame(columns, copy=False)
    labels = np.asarray(frame["workload"].cat.codes)  # int8 for a few workloads: a byte a request

    def itl() -> Iterator[pa.Array]:
        for batch in batches([ITL_COLUMN]):
            yield batch.column(ITL_COLUMN)

    return frame, ItlSource(itl, len(frame), labels)


_STRING_COLUMNS = frozenset({"workload", "model", "worker_id", "error_category", "error_detail", "timing_violation",
                             "target", "check", "check_results"})  # fmt: skip
#: strings unique to a few requests each (a session's id): a 63-bit key per row (-1: none or empty), not a
#: categorical whose millions of categories would cost ~100 bytes each as Python strings
_KEY_COLUMNS = frozenset({"session_id", "trace_id"})


def string_key(value: str | None) -> int:
    """A stable 63-bit key of ``value`` (-1 for none): equal strings, equal keys; a collision ~2**-63. The frame's
    ``session_id`` and ``trace_id`` columns hold these (a server span is joined to its record by it)."""
    if not value:
        return -1
    return int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "little") >> 1


#: HTTP status: exact in float32, never summed; open-loop send lag: float32 (a µs in an hour);
#: token counts and latencies stay float64, so that sums and percentiles are exact; a request's tool calls,
#: argument and cached tokens: whole numbers below 2**24, exact in float32, summed as float64 by the reports
#: (NaN: not reported, or an older record without them)
_DTYPES = {
    "ok": np.bool_,
    "warmup": np.bool_,
    "status_code": np.float32,
    "send_lag_s": np.float32,
    "session_end": np.bool_,
    "tool_calls": np.float32,
    "tool_call_tokens": np.float32,
    "cached_tokens": np.float32,
    "session_id": np.int64,
    "trace_id": np.int64,
    "needle_depth": np.float32,
}


def read_requests_frame(run_dir: Path | str) -> tuple[pd.DataFrame, ItlSource]:
    """``(table, gaps)`` of every request record in ``run_dir`` (segments or ``requests.jsonl``).

    A large ``requests.jsonl`` is parsed once into a temporary Arrow file that the table's and
    the gaps' passes then read, instead of parsing the JSON text on every pass."""
    run_dir = Path(run_dir)  # a str as README shows it, or a Path
    jsonl = run_dir / REQUESTS_FILE
    if not segment_paths(run_dir / SEGMENTS_DIR) and jsonl.is_file() and jsonl.stat().st_size > _PARSE_ONCE_BYTES:
        tmp = Path(tempfile.mkdtemp(prefix="tokenstorm-records-"))
        arrows = tmp / "requests.arrows"
        try:
            with ipc.new_stream(str(arrows), SCHEMA, options=ipc.IpcWriteOptions(compression="lz4")) as out:
                for batch in iter_batches(run_dir, batch_size=8192):
                    out.write_batch(batch)
            frame, itl = _frame_and_source(lambda columns: segment_batches(arrows, columns, 8192))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        itl.keep = weakref.finalize(itl, shutil.rmtree, tmp, ignore_errors=True)  # removed with the gaps
        return frame, itl
    return _frame_and_source(lambda columns: iter_batches(run_dir, columns=columns, batch_size=8192))


_PARSE_ONCE_BYTES = 64 << 20


def frame_from_rows(rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, ItlSource]:
    """The same of decoded records held in memory (a capacity-search step judged live)."""
    batch = rows_to_batch(rows)
    return _frame_and_source(lambda columns: iter([batch.select(columns)]))
