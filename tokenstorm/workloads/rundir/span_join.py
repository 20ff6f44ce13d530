"""The server's spans joined to a report's table of requests by trace id (``spans.jsonl``, see :mod:`.spans`).

Per request whose span arrived:

- ``server_queue_s``, ``server_ttft_s`` (= the span's prefill: scheduled → first token), ``server_decode_s`` and
  ``server_itl_s`` (decode time / (output tokens − 1)) are filled where the record has none from its stream
  (vLLM's ``--enable-per-request-metrics``), and ``overhead_s = ttft_s − server_queue_s − server_ttft_s`` where
  the record has none;
- ``server_frontend_s`` = the span's ``time_to_first_token`` (from arrival) − queue − prefill: the server's front
  end (HTTP, chat template, tokenisation — arrival → queued), which only the span knows.

Memory: a few numbers per span (numpy arrays), never a Python object per span.
"""

from __future__ import annotations

import array
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from .frame import string_key
from .meta import SPANS_FILE

__all__ = ["join_spans", "span_table"]

_NUMBERS = ("queue_s", "ttft_s", "prefill_s", "decode_s", "output_tokens")


def span_table(path: Path) -> pd.DataFrame:
    """The spans of ``path`` (a ``spans.jsonl``) as columns ``key`` (``string_key`` of the trace id) and
    ``queue_s``, ``ttft_s``, ``prefill_s``, ``decode_s``, ``output_tokens`` (NaN: not carried, or not a number of
    zero or more); one row per trace id (its first span). Empty when the file is missing; a line that does not
    parse is skipped."""
    keys = array.array("q")
    cols = {name: array.array("d") for name in _NUMBERS}
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        fh = None
    if fh is not None:
        with fh:
            for line in fh:
                try:
                    data = orjson.loads(line)
                    key = string_key(str(data.get("trace_id") or "").lower())
                    values = [_number(data.get(name)) for name in _NUMBERS]
                except (orjson.JSONDecodeError, AttributeError):
                    continue
                if key < 0:
                    continue
                keys.append(key)
                for name, value in zip(_NUMBERS, values, strict=True):
                    cols[name].append(value)
    table = pd.DataFrame(
        {"key": np.frombuffer(keys, dtype=np.int64)}
        | {name: np.frombuffer(col, dtype=np.float64) for name, col in cols.items()}
    )
    return table.drop_duplicates("key", keep="first", ignore_index=True)


def _number(value: object) -> float:
    """A duration or count of zero or more; NaN for anything else (absent, not a number, negative)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return np.nan


def join_spans(frame: pd.DataFrame, run_dir: Path) -> int:
    """Fill ``frame``'s server timing columns (in place) from the spans in ``run_dir``; the number of rows that
    had a span."""
    path = Path(run_dir) / SPANS_FILE
    if frame.empty or "trace_id" not in frame or not path.is_file():
        return 0
    spans = span_table(path)
    if spans.empty:
        return 0
    keys = np.asarray(frame["trace_id"], dtype=np.int64)
    pos = pd.Index(spans["key"]).get_indexer(keys)
    has = (pos >= 0) & (keys >= 0)
    if not has.any():
        return 0
    at = pos[has]

    def span(name: str) -> np.ndarray:
        values = np.full(len(frame), np.nan)
        values[has] = spans[name].to_numpy()[at]
        return values

    queue, prefill, decode = span("queue_s"), span("prefill_s"), span("decode_s")
    tokens = _column(frame, "output_tokens")
    tokens = np.where(np.isnan(tokens), span("output_tokens"), tokens)
    with np.errstate(invalid="ignore", divide="ignore"):
        itl = np.where(tokens > 1, decode / (tokens - 1), np.nan)
    filled = {
        "server_queue_s": _fill(_column(frame, "server_queue_s"), queue),
        "server_ttft_s": _fill(_column(frame, "server_ttft_s"), prefill),
        "server_decode_s": _fill(_column(frame, "server_decode_s"), decode),
        "server_itl_s": _fill(_column(frame, "server_itl_s"), itl),
    }
    overhead = _column(frame, "ttft_s") - filled["server_queue_s"] - filled["server_ttft_s"]
    filled["overhead_s"] = _fill(_column(frame, "overhead_s"), overhead)
    frontend = span("ttft_s") - queue - prefill
    filled["server_frontend_s"] = np.where(np.isnan(frontend), _column(frame, "server_frontend_s"), frontend)
    for name, values in filled.items():
        frame[name] = values
    return int(has.sum())


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame:
        return np.full(len(frame), np.nan)
    return np.asarray(frame[name], dtype=np.float64).copy()


def _fill(values: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``values`` with its NaNs taken from ``other``."""
    return np.where(np.isnan(values), other, values)
