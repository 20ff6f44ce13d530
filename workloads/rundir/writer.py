"""The record writer of format 2: buffered Arrow batches into rotating segments (see
:mod:`workloads.rundir.segments` for the layout)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from .procs import child_env
from .records import TailedWriter
from .segments import BATCH_ROWS, SCHEMA, compact_segments, numbered_segments, rows_to_batch

__all__ = ["SegmentWriter"]

log = logging.getLogger("tokenstorm")


class SegmentWriter(TailedWriter):
    """Appends records to ``RUN_DIR/requests/`` segments; safe from many greenlets.

    Records are converted 64 at a time into compressed Arrow batches (each ~1 ms of CPU, so the
    process timing streams never stalls for long) and pushed to the OS at least every
    ``flush_interval_s`` (the run's flusher calls :meth:`flush` every 2 s): a busy run pays no
    syscall per record, and a crash loses seconds, not the run.
    """

    def __init__(self, directory: Path, flush_interval_s: float = 2.0, rotate_rows: int = 100_000,
                 rotate_s: float = 900.0, compact_in_child: bool = True) -> None:  # fmt: skip
        super().__init__()
        self.directory = self.location = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._flush_interval_s = flush_interval_s
        self._rotate_rows, self._rotate_s = rotate_rows, rotate_s
        self._compact_in_child = compact_in_child
        self._lock = threading.Lock()
        self._buffer: list[dict[str, Any]] = []
        self._last_flush = time.monotonic()
        self._seq = max((n for n, _ in numbered_segments(directory)), default=0)
        self._sink: Any = None
        self._stream: Any = None
        self._seg_rows = 0
        self._seg_opened = 0.0
        self._children: list[subprocess.Popen[bytes]] = []
        self._closed = False
        self.count = 0
        #: records that could not be converted (logged once; never expected)
        self.rejected = 0

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        """Append decoded records (``RequestRecord`` fields)."""
        if not rows:
            return
        self._feed_tails(rows)
        with self._lock:
            self._buffer.extend(rows)
            self.count += len(rows)
            if self._closed:  # a straggler after the run ended (a worker's last report): kept, as Parquet
                self._flush_locked()
                self._close_segment()
                compact_segments(self.directory)
            elif time.monotonic() - self._last_flush >= self._flush_interval_s:
                self._flush_locked()
            elif len(self._buffer) >= BATCH_ROWS:
                self._write_buffer()  # small steps: a pause of ~1 ms, never one of 10+ ms, in a timing process

    def flush(self) -> None:
        """Write what is buffered as one batch and push it to the OS."""
        with self._lock:
            self._flush_locked()

    def _write_buffer(self) -> None:
        if self._buffer:
            rows, self._buffer = self._buffer, []
            try:
                batch = rows_to_batch(rows)
            except (TypeError, ValueError, OverflowError, pa.ArrowException):
                batch = self._good_rows(rows)
            if batch.num_rows == 0:
                return
            if self._stream is None:
                self._open()
            self._stream.write_batch(batch)
            self._seg_rows += batch.num_rows

    def _good_rows(self, rows: list[dict[str, Any]]) -> pa.RecordBatch:
        """The rows that convert, one by one; each that does not is counted and named once in
        the log (a worker of another version, a bug) — it never stops the records after it."""
        good = []
        for row in rows:
            try:
                rows_to_batch([row])
            except (TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
                self.rejected += 1
                if self.rejected == 1:
                    log.error("tokenstorm: a request record could not be stored (%s: %s); request %s — "
                              "please report it", type(exc).__name__, exc, row.get("request_id"))  # fmt: skip
                continue
            good.append(row)
        return rows_to_batch(good)

    def _flush_locked(self) -> None:
        self._last_flush = time.monotonic()
        self._write_buffer()
        if self._sink is not None:
            self._sink.flush()
        if self._stream is not None and (self._seg_rows >= self._rotate_rows
                                         or time.monotonic() - self._seg_opened >= self._rotate_s):  # fmt: skip
            self._rotate()

    def _open(self) -> None:
        self._seq += 1
        self._sink = (self.directory / f"seg-{self._seq:06d}.live.arrows").open("wb")
        options = ipc.IpcWriteOptions(compression="zstd")
        self._stream = ipc.new_stream(self._sink, SCHEMA, options=options)
        self._seg_rows, self._seg_opened = 0, time.monotonic()

    def _close_segment(self) -> None:
        if self._stream is None:
            return
        self._stream.close()
        self._sink.close()
        live = self.directory / f"seg-{self._seq:06d}.live.arrows"
        live.rename(live.with_name(f"seg-{self._seq:06d}.arrows"))
        self._stream = self._sink = None

    def _rotate(self) -> None:
        self._close_segment()
        self._children = [c for c in self._children if c.poll() is None]
        if self._compact_in_child and not self._children:
            # Compaction costs a fraction of a second of CPU: never in the process timing streams.
            self._children.append(subprocess.Popen(
                [sys.executable, "-m", "workloads.rundir.segments", str(self.directory)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, env=child_env(),
            ))  # fmt: skip

    def close(self) -> None:
        """Flush, close the open segment and compact every closed one (the run is over)."""
        with self._lock:
            self._flush_locked()
            self._close_segment()
            for child in self._children:
                try:
                    child.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    child.kill()  # compacted here instead; two compactors never race on a file
                    child.wait()
            self._children = []
            self._closed = True
            compact_segments(self.directory)
