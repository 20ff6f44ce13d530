"""The record writer of format 2: buffered Arrow batches into rotating segments (see
:mod:`tokenstorm.workloads.rundir.segments` for the layout)."""

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

from .faults import AppendFile, WriteFailed
from .procs import child_env
from .records import TailedWriter
from .segments import BATCH_ROWS, SCHEMA, compact_segments, numbered_segments, rows_to_batch
from .wire import batch_rows

__all__ = ["SegmentWriter"]

log = logging.getLogger("tokenstorm")


class SegmentWriter(TailedWriter):
    """Appends records to ``RUN_DIR/requests/`` segments; safe from many greenlets.

    Records are converted 64 at a time into compressed Arrow batches (each ~1 ms of CPU, so the
    process timing streams never stalls for long) and pushed to the OS at least every
    ``flush_interval_s`` (the run's flusher calls :meth:`flush` every 2 s): a busy run pays no
    syscall per record, and a crash loses seconds, not the run. Whole batches only: a push that
    fails (disk full) leaves the open segment ending on the last batch written before it, and the
    writer takes no more (``failure``, ``on_failure``).
    """

    #: pushed to the OS before the timer when this much is buffered
    PUSH_BYTES = 1 << 20
    #: what one record takes on disk, roughly, in the open segment (compacted to Parquet: about half)
    record_bytes_estimate = 1000

    def __init__(
        self,
        directory: Path,
        flush_interval_s: float = 2.0,
        rotate_rows: int = 100_000,
        rotate_s: float = 900.0,
        compact_in_child: bool = True,
    ) -> None:
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
        self._sink: AppendFile | None = None
        self._stream: Any = None
        self._unpushed_rows = 0  # in batches written to the sink, not yet pushed to the OS
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
            if self.failure is not None:
                self.lost += len(rows)
                return
            self._buffer.extend(rows)
            self.count += len(rows)
            if self._closed:  # a straggler after the run ended (a worker's last report): kept, as Parquet
                self._flush_locked()
                self._close_segment()
                self._compact()
            elif time.monotonic() - self._last_flush >= self._flush_interval_s:
                self._flush_locked()
            elif len(self._buffer) >= BATCH_ROWS:
                self._write_buffer()  # small steps: a pause of ~1 ms, never one of 10+ ms, in a timing process
                if self._sink is not None and self._sink.pending_bytes >= self.PUSH_BYTES:
                    self._push()

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append records already in the segment format (a worker's shipped batch) as they are: none of
        them is decoded (unless a tail, a load shape's live judge, reads rows)."""
        if not batch.num_rows:
            return
        if self._tails:
            self._feed_tails(batch_rows(batch))
        with self._lock:
            if self.failure is not None:
                self.lost += batch.num_rows
                return
            self.count += batch.num_rows
            self._write_buffer()  # rows taken before it go first
            self._append(batch)
            if self._closed:  # a straggler after the run ended (a worker's last report): kept, as Parquet
                self._flush_locked()
                self._close_segment()
                self._compact()
            elif time.monotonic() - self._last_flush >= self._flush_interval_s:
                self._flush_locked()
            elif self._sink is not None and self._sink.pending_bytes >= self.PUSH_BYTES:
                self._push()

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
            if batch.num_rows:
                self._append(batch)

    def _append(self, batch: pa.RecordBatch) -> None:
        """Write ``batch`` to the open segment (opened here if none is), counted toward its rotation and push."""
        if self._stream is None:
            self._open()
        assert self._sink is not None  # opened with the stream
        self._stream.write_batch(batch)
        self._sink.mark(batch.num_rows)
        self._seg_rows += batch.num_rows
        self._unpushed_rows += batch.num_rows

    def _push(self) -> None:
        """Hand the written batches to the OS; when that fails, the records not on disk are lost and said."""
        if self._sink is None:
            return
        try:
            self._sink.push()
        except WriteFailed as exc:
            lost = self._unpushed_rows - self._sink.kept_records + len(self._buffer)
            self._buffer, self._unpushed_rows = [], 0
            self._stream = self._sink = None  # the segment ends on its last whole batch
            self._failed(exc, lost)
            return
        self._unpushed_rows = 0

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
                    log.error(
                        "tokenstorm: a request record could not be stored (%s: %s); request %s — please report it",
                        type(exc).__name__,
                        exc,
                        row.get("request_id"),
                    )
                continue
            good.append(row)
        return rows_to_batch(good)

    def _flush_locked(self) -> None:
        self._last_flush = time.monotonic()
        if self.failure is not None:
            return
        self._write_buffer()
        self._push()
        if self._stream is not None and (
            self._seg_rows >= self._rotate_rows or time.monotonic() - self._seg_opened >= self._rotate_s
        ):
            self._rotate()

    def _open(self) -> None:
        self._seq += 1
        self._sink = AppendFile(self.directory / f"seg-{self._seq:06d}.live.arrows", "records")
        options = ipc.IpcWriteOptions(compression="zstd")
        self._stream = ipc.new_stream(self._sink, SCHEMA, options=options)
        self._sink.mark()  # the schema: a stream of no batch yet, whole
        self._seg_rows, self._seg_opened = 0, time.monotonic()

    def _close_segment(self) -> None:
        if self._stream is None or self._sink is None:
            return
        self._stream.close()  # its end-of-stream marker: readers need none, a torn one would not matter
        self._push()
        if self._sink is None:
            return  # that push failed: the live segment stays as it is, readable
        self._sink.close()
        live = self.directory / f"seg-{self._seq:06d}.live.arrows"
        live.rename(live.with_name(f"seg-{self._seq:06d}.arrows"))
        self._stream = self._sink = None

    def _rotate(self) -> None:
        self._close_segment()
        self._children = [c for c in self._children if c.poll() is None]
        if self._compact_in_child and not self._children:
            # Compaction costs a fraction of a second of CPU: never in the process timing streams.
            self._children.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tokenstorm.workloads.rundir.segments", str(self.directory)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    env=child_env(),
                )
            )

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
            self._compact()

    def _compact(self) -> None:
        """Rewrite the closed segments as Parquet; with no room for that they stay Arrow streams (readable),
        and the failure is said as any other (the run stops)."""
        if self.failure is not None:
            return
        try:
            compact_segments(self.directory)
        except OSError as exc:
            self._failed(WriteFailed("records", self.directory, exc), 0)
