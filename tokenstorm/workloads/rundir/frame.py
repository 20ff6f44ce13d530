"""Request records as a table for reports, in memory bounded by the run's request count alone.

:func:`read_requests_frame` gives one pandas row per request with the scalar columns a report
reads (strings as categoricals, a session id as a 63-bit key, counts and the HTTP status as float32, a
column no record fills as one shared value: ~55 bytes a request for a plain chat run, so 20 million
requests fit in ~1.1 GB) and an :class:`ItlSource` for the inter-token gaps, which are never all in memory at
once (see :mod:`.itl`).

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

from .itl import ItlHistogram, ItlSource
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


def _frame_and_source(batches: Callable[[list[str]], Iterator[pa.RecordBatch]]) -> tuple[pd.DataFrame, ItlSource]:
    # Count first, then fill arrays of the final size: chunks concatenated at the end would need
    # twice the memory, and fragment the heap so that the process keeps it (measured: 3.9 GB
    # peak for 20 million requests that way). A column is allocated at its first value: one no
    # record of the run fills (server timing without --otlp-port, tool calls without agents)
    # costs no memory at all (see _constant).
    n = sum(b.num_rows for b in batches(["ok"]))
    data: dict[str, np.ndarray | None] = dict.fromkeys(FRAME_COLUMNS)
    cats: dict[str, dict[str, int]] = {name: {} for name in _STRING_COLUMNS}
    row = 0
    for batch in batches(list(FRAME_COLUMNS)):
        if row >= n:
            break  # the live segment grew since the count: the rows counted are the table
        batch = batch.slice(0, n - row)
        end = row + batch.num_rows
        for name in FRAME_COLUMNS:
            values = _batch_values(name, batch.column(name), cats.get(name))
            column = data[name]
            if column is None:
                if _all_missing(values):
                    continue
                column = data[name] = np.array(_constant(name, n))
            if name in cats and len(cats[name]) > np.iinfo(column.dtype).max:  # codes widen as needed
                wider = np.int16 if len(cats[name]) <= np.iinfo(np.int16).max else np.int32
                column = data[name] = column.astype(wider)
            column[row:end] = values
        row = end
    if row < n:
        raise RuntimeError(f"the records changed while being read ({row} rows for {n} counted); build the report again")
    columns: dict[str, Any] = {}
    for name in FRAME_COLUMNS:
        stored = data.pop(name)
        if stored is None:
            stored = _constant(name, n)
        if name in cats:
            dtype = pd.CategoricalDtype(list(cats[name]))
            columns[name] = pd.Categorical.from_codes(stored, dtype=dtype, validate=False)  # no copy of the codes
        else:
            columns[name] = stored
    frame = pd.DataFrame(columns, copy=False)
    pa.default_memory_pool().release_unused()  # the read's buffers: the pool keeps them otherwise (~30 MB)
    labels = np.asarray(frame["workload"].cat.codes)  # int8 for a few workloads: a byte a request

    def itl() -> Iterator[pa.Array]:
        for batch in batches([ITL_COLUMN]):
            yield batch.column(ITL_COLUMN)

    return frame, ItlSource(itl, len(frame), labels)


def _batch_values(name: str, arr: pa.Array, table: dict[str, int] | None) -> np.ndarray:
    """One batch of column ``name`` as the frame stores it (``table``: a string column's categories so far)."""
    if table is not None:
        enc = pc.dictionary_encode(arr)
        codes_of = [table.setdefault(v, len(table)) for v in enc.dictionary.to_pylist()]
        remap = np.array([*codes_of, -1], dtype=np.int32)
        codes: np.ndarray = remap[pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)]
        return codes
    if name in _KEY_COLUMNS:
        enc = pc.dictionary_encode(arr)
        keys = np.array([string_key(v) for v in enc.dictionary.to_pylist()] + [-1], dtype=np.int64)
        out: np.ndarray = keys[pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)]
        return out
    if pa.types.is_boolean(arr.type):
        return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False))
    return np.asarray(arr.to_numpy(zero_copy_only=False))  # numbers; null → NaN


def _all_missing(values: np.ndarray) -> bool:
    """Whether a batch's ``values`` are all what a column holds where no record has a value."""
    if values.dtype.kind == "f":
        return bool(np.isnan(values).all())
    if values.dtype.kind == "b":
        return not values.any()
    return bool((values == -1).all())


def _constant(name: str, n: int) -> np.ndarray:
    """Column ``name`` of ``n`` rows with no value in any: one element seen ``n`` times (read-only, 0 bytes a
    row); NaN for numbers, False for flags, -1 for category codes and keys."""
    dtype = np.dtype(np.int8 if name in _STRING_COLUMNS else _DTYPES.get(name, np.float64))
    fill = np.nan if dtype.kind == "f" else (False if dtype.kind == "b" else -1)
    return np.broadcast_to(np.array(fill, dtype=dtype), (n,))


_STRING_COLUMNS = frozenset(
    {
        "workload",
        "model",
        "worker_id",
        "error_category",
        "error_detail",
        "timing_violation",
        "target",
        "check",
        "check_results",
    }
)
#: strings unique to a few requests each (a session's id): a 63-bit key per row (-1: none or empty), not a
#: categorical whose millions of categories would cost ~100 bytes each as Python strings
_KEY_COLUMNS = frozenset({"session_id", "trace_id"})


def string_key(value: str | None) -> int:
    """A stable 63-bit key of ``value`` (-1 for none): equal strings, equal keys; a collision ~2**-63. The frame's
    ``session_id`` and ``trace_id`` columns hold these (a server span is joined to its record by it)."""
    if not value:
        return -1
    return int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "little") >> 1


#: HTTP status: exact in float32, never summed; open-loop send lag: float32 (a µs in an hour); latencies and
#: times stay float64, so that percentiles are exact; counts (prompt, output and argument tokens, token events,
#: late events, tool calls, cached tokens; a late first token as 0/1) are whole numbers below 2**24, exact in
#: float32, which the reports widen to float64 before they sum or interpolate (NaN: not reported, or an older
#: record without them)
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
    "prompt_tokens": np.float32,
    "output_tokens": np.float32,
    "token_events": np.float32,
    "late_events": np.float32,
    "ttft_late": np.float32,
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
