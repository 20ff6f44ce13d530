"""The master's way in for workers' records: a shipped batch is stored whole and counted by its columns.

A worker ships its records as one Arrow batch of the segment format (:mod:`tokenstorm.workloads.rundir.wire`). The
master
appends it to the run directory as it came (``SegmentWriter.write_batch``) and gives what watches the run —
token rates and request counts, the progress lines' outcomes, the server-timing hint, the live view and the
Prometheus export — figures computed from the batch's columns (numpy, pyarrow compute), not one call per
record: the master of a distributed run is the funnel of every request. Reports of older workers (JSON lines)
are still taken, one record at a time (:func:`receive_lines`).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ...rundir import ErrorCategory, RecordWriter
from ...rundir.wire import batch_rows, null_filled
from ..web.live import series_key
from .server_timing import TIMING_FIELDS

if TYPE_CHECKING:
    from .context import RunContext

__all__ = ["receive_batch", "receive_lines", "series_groups"]

log = logging.getLogger("tokenstorm")

#: the record fields the server-timing hint reads
_HINT_FIELDS = ("ok", "stream", *TIMING_FIELDS)
#: the hint looks at this many records at a time while it watches (it stops at the first with server timing)
_HINT_SLICE = 32


def series_groups(batch: pa.RecordBatch) -> tuple[list[str], np.ndarray]:
    """The chart lines of ``batch`` (:func:`..web.live.series_key`: workload, and target in A/B runs) and, for
    each record, the index of its line among them."""
    workload = pc.fill_null(batch.column("workload"), "").dictionary_encode()
    target = pc.fill_null(batch.column("target"), "").dictionary_encode()
    n_targets = max(1, len(target.dictionary))
    combined = workload.indices.to_numpy().astype(np.int64) * n_targets + target.indices.to_numpy()
    codes, inverse = np.unique(combined, return_inverse=True)
    names, targets = workload.dictionary.to_pylist(), target.dictionary.to_pylist()
    keys = [series_key({"workload": names[c // n_targets], "target": targets[c % n_targets]}) for c in codes]
    return keys, inverse.reshape(-1)


def receive_batch(ctx: RunContext, batch: pa.RecordBatch) -> None:
    """Store a batch of records a worker shipped, and count it everywhere the run is watched."""
    if not batch.num_rows:
        return
    keys, groups = series_groups(batch)
    _account(ctx, batch, keys, groups)
    if ctx.metrics is not None:
        ctx.metrics.observe_batch(batch)
    ctx.live.observe_batch(batch, keys, groups)
    _outcomes(ctx, batch)
    _server_timing(ctx, batch)
    if isinstance(ctx.writer, RecordWriter):  # --records jsonl: its lines are rows
        ctx.writer.write_rows(batch_rows(batch))
    elif ctx.writer is not None:
        ctx.writer.write_batch(batch)


def receive_lines(ctx: RunContext, lines: list[str]) -> None:
    """Store records an older worker sent as JSON lines (one decoded at a time)."""
    rows = []
    for line in lines:
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        rows.append(data)
        ctx.account(series_key(data), int(data.get("output_tokens") or 0), str(data.get("worker_id")))
        if ctx.metrics is not None:
            ctx.metrics.observe(data)
        ctx.live.observe(data)
        ctx.outcomes.add(data)
        ctx.server_timing.observe(data)
    if ctx.writer is not None:
        ctx.writer.write_rows(rows)


def _account(ctx: RunContext, batch: pa.RecordBatch, keys: list[str], groups: np.ndarray) -> None:
    tokens = null_filled(batch, "output_tokens", 0).astype(np.int64)
    tokens_by_key = np.bincount(groups, weights=tokens, minlength=len(keys))
    count_by_key = np.bincount(groups, minlength=len(keys))
    ctx.token_rate.add(int(tokens.sum()))
    for key, n_tokens, n in zip(keys, tokens_by_key, count_by_key, strict=True):
        ctx.account_group(key, int(n_tokens), int(n))
    ctx.workers_seen.update(str(w) for w in pc.unique(batch.column("worker_id")).to_pylist())


def _outcomes(ctx: RunContext, batch: pa.RecordBatch) -> None:
    category = batch.column("error_category")
    kept = ~pc.fill_null(pc.equal(category, ErrorCategory.CANCELLED), False).to_numpy(zero_copy_only=False)
    failed = kept & ~null_filled(batch, "ok", False).astype(bool)
    counts: Counter[str] = Counter()
    if failed.any():
        for item in pc.value_counts(pc.filter(category, pa.array(failed))).to_pylist():
            counts[str(item["values"] or "error")] += int(item["counts"])
    ctx.outcomes.add_counts(int(kept.sum()), counts)


def _server_timing(ctx: RunContext, batch: pa.RecordBatch) -> None:
    """The hint watches only a run's first records (until one has server timing, or it has spoken)."""
    hint = ctx.server_timing
    for start in range(0, batch.num_rows, _HINT_SLICE):
        if not hint.watching:
            return
        for row in batch.slice(start, _HINT_SLICE).select(list(_HINT_FIELDS)).to_pylist():
            hint.observe(row)
