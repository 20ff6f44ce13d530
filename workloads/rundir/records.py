"""Typed request records and the writer that puts them in the run directory.

A :class:`RequestRecord` is the one fact tokenstorm keeps per request; SLOs and reports are
computed from these records, never from Locust's rounded live stats. Records are JSON
lines, versioned by ``schema``, and read back by :func:`read_records` — the same code that
wrote them.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

import orjson

__all__ = [
    "RECORD_SCHEMA_VERSION",
    "REPORT_COLUMNS",
    "ErrorCategory",
    "RecordTail",
    "RecordWriter",
    "RequestRecord",
    "read_records",
    "read_requests_frame",
]

RECORD_SCHEMA_VERSION = 1


class ErrorCategory:
    """The failure categories a request can end in (``RequestRecord.error_category``)."""

    RATE_LIMITED = "http_429"
    CLIENT_ERROR = "http_4xx"
    SERVER_ERROR = "http_5xx"
    CONNECT = "connect_error"
    TIMEOUT = "timeout"
    STREAM_DROPPED = "stream_dropped"
    MALFORMED_CHUNK = "malformed_chunk"
    MISSING_DONE = "missing_done"
    NO_FINISH_REASON = "no_finish_reason"
    ERROR_EVENT = "error_event"
    NO_TOKENS = "no_tokens"
    #: Stopped by the load test itself (run ended, user stopped) — kept, but not a server failure.
    CANCELLED = "cancelled"

    ALL = (
        RATE_LIMITED,
        CLIENT_ERROR,
        SERVER_ERROR,
        CONNECT,
        TIMEOUT,
        STREAM_DROPPED,
        MALFORMED_CHUNK,
        MISSING_DONE,
        NO_FINISH_REASON,
        ERROR_EVENT,
        NO_TOKENS,
        CANCELLED,
    )


@dataclass(slots=True)
class RequestRecord:
    """One request as the client saw it. Durations are seconds from the request being sent."""

    workload: str
    endpoint: str
    model: str
    stream: bool
    start_epoch_s: float
    request_id: str = ""
    response_id: str | None = None
    user_id: int = 0
    worker_id: str = "local"
    ok: bool = False
    status_code: int | None = None
    error_category: str | None = None
    error_detail: str | None = None
    prompt_tokens: int | None = None
    requested_prompt_tokens: int | None = None
    output_tokens: int | None = None
    requested_max_tokens: int | None = None
    ttfc_s: float | None = None
    ttft_s: float | None = None
    ttft_visible_s: float | None = None
    ttft_answer_s: float | None = None
    e2e_s: float | None = None
    done_s: float | None = None
    tpot_s: float | None = None
    itl_gaps_s: list[float] = field(default_factory=list)
    token_events: int = 0
    reasoning_events: int = 0
    finish_reason: str | None = None
    warmup: bool = False
    #: open-loop runs: how late the request was sent after its scheduled arrival time
    send_lag_s: float | None = None
    #: set only when the record breaks ``ttfc <= ttft <= e2e <= done`` or has a negative gap —
    #: a measurement bug, counted in run.json (``timing_violations``), never expected
    timing_violation: str | None = None
    schema: int = RECORD_SCHEMA_VERSION

    def check_timing(self) -> str | None:
        """Say how this record breaks the one-clock invariant, or ``None`` when it holds."""
        chain = [(n, v) for n, v in (("ttfc_s", self.ttfc_s), ("ttft_s", self.ttft_s), ("e2e_s", self.e2e_s),
                                     ("done_s", self.done_s)) if v is not None]  # fmt: skip
        if chain and chain[0][1] < 0:
            return f"{chain[0][0]} < 0"
        for (name_a, a), (name_b, b) in itertools.pairwise(chain):
            if a > b:
                return f"{name_a} {a:.6f} > {name_b} {b:.6f}"
        if any(g < 0 for g in self.itl_gaps_s):
            return "negative ITL gap"
        return None

    def to_json(self) -> str:
        """Serialise as one compact JSON line (no trailing newline)."""
        # Shallow: dataclasses.asdict deep-copies every ITL gap (measured: ~1 ms per record).
        return orjson.dumps({name: getattr(self, name) for name in _FIELD_ORDER}).decode()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        """Build a record from a decoded JSON line, ignoring fields a newer writer added."""
        known = _FIELD_NAMES
        return cls(**{k: v for k, v in data.items() if k in known})


_FIELD_ORDER = tuple(f.name for f in fields(RequestRecord))
_FIELD_NAMES = frozenset(_FIELD_ORDER)


class RecordWriter:
    """Appends records to ``requests.jsonl``; flushes at least every ``flush_interval_s``.

    Safe to call from many greenlets; the file is flushed on a timer rather than per record
    so high request rates do not pay a syscall each, yet a crash loses seconds, not the run.
    """

    def __init__(self, path: Path, flush_interval_s: float = 2.0) -> None:
        self.path = path
        self._fh: IO[str] = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._flush_interval_s = flush_interval_s
        self._last_flush = time.monotonic()
        self.count = 0

    def write(self, record: RequestRecord) -> None:
        """Append one record."""
        self.write_lines([record.to_json()])

    def write_lines(self, lines: list[str]) -> None:
        """Append already-serialised records (a batch from a worker)."""
        if not lines:
            return
        with self._lock:
            if self._fh.closed:  # a straggler after the run closed the file: keep it anyway
                self._fh = self.path.open("a", encoding="utf-8")
            self._fh.write("\n".join(lines) + "\n")
            self.count += len(lines)
            now = time.monotonic()
            if now - self._last_flush >= self._flush_interval_s:
                self._fh.flush()
                self._last_flush = now

    def flush(self) -> None:
        """Push buffered records to the OS (called by the periodic flusher too)."""
        with self._lock:
            if not self._fh.closed:
                self._fh.flush()
                self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush and close the file."""
        with self._lock:
            if not self._fh.closed:
                self._fh.flush()
                self._fh.close()


def read_records(path: Path) -> Iterator[RequestRecord]:
    """Yield the records of a ``requests.jsonl`` file; a torn last line (crash) is skipped."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            yield RequestRecord.from_dict(data)


# -- the fast reader for reports -------------------------------------------------------------
#: Columns a report reads, with their Arrow types, derived from :class:`RequestRecord` itself.
_ARROW_TYPES = {"str": "string", "float": "float64", "int": "int64", "bool": "bool_", "list[float]": "list_float64"}
_REPORT_SKIP = frozenset({"endpoint", "stream", "request_id", "response_id", "user_id", "requested_prompt_tokens",
                          "requested_max_tokens", "ttft_visible_s", "ttft_answer_s", "done_s", "token_events",
                          "reasoning_events", "finish_reason", "schema"})  # fmt: skip
REPORT_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (f.name, _ARROW_TYPES[str(f.type).removesuffix(" | None")]) for f in fields(RequestRecord)
    if f.name not in _REPORT_SKIP
)  # fmt: skip


def read_requests_frame(path: Path) -> tuple[Any, Any, Any]:
    """``(frame, itl_flat, itl_counts)`` of a ``requests.jsonl``: one pandas row per request with
    the scalar :data:`REPORT_COLUMNS`; every ITL gap as one flat float32 array plus a count per request.

    Read with pyarrow's JSON reader (C++, multi-threaded) in blocks, so a million records load
    in seconds; a line torn by a crash (no final newline) is left out, everything before it read.
    """
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as paj

    def arrow(kind: str) -> Any:
        return pa.list_(pa.float64()) if kind == "list_float64" else getattr(pa, kind)()

    schema = pa.schema([(name, arrow(kind)) for name, kind in REPORT_COLUMNS])
    scalars = [name for name, kind in REPORT_COLUMNS if kind != "list_float64"]
    empty = (pd.DataFrame(columns=scalars), np.empty(0, np.float32), np.empty(0, np.int64))
    if not path.exists() or path.stat().st_size == 0:
        return empty
    size = path.stat().st_size
    end = _complete_prefix_length(path)
    if end == 0:
        return empty
    source: Any = path if end == size else pa.BufferReader(pa.memory_map(str(path)).read_buffer(end))
    reader = paj.open_json(
        source,
        read_options=paj.ReadOptions(block_size=8 << 20),
        parse_options=paj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    )
    tables, flats, counts = [], [], []
    for batch in reader:
        itl = batch.column("itl_gaps_s")
        counts.append(pc.fill_null(pc.list_value_length(itl), 0).to_numpy().astype(np.int64))
        flats.append(pc.list_flatten(itl).to_numpy(zero_copy_only=False).astype(np.float32))
        tables.append(pa.Table.from_batches([batch]).drop_columns(["itl_gaps_s"]))
    if not tables:
        return empty
    return pa.concat_tables(tables).to_pandas(), np.concatenate(flats), np.concatenate(counts)


def _complete_prefix_length(path: Path) -> int:
    """Bytes up to and including the last newline (0 when no line is complete)."""
    pos = path.stat().st_size
    with path.open("rb") as fh:
        while pos > 0:
            step = min(65536, pos)
            pos -= step
            fh.seek(pos)
            idx = fh.read(step).rfind(b"\n")
            if idx >= 0:
                return pos + idx + 1
    return 0


class RecordTail:
    """Reads the records appended to a ``requests.jsonl`` since the last call (complete lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def read_new(self) -> list[dict[str, Any]]:
        """The decoded records written since the previous call."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            chunk = fh.read()
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        out = []
        for line in chunk[:end].splitlines():
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
        return out
