"""Request records on disk, compact: Arrow and Parquet segments under ``RUN_DIR/requests/``.

=============================  =====================================================================
``seg-000007.live.arrows``     the open segment: an Arrow IPC stream of zstd batches (≤ 64
                               records each), pushed to the OS every flush (≤ 2 s apart), so a
                               crash (even SIGKILL) loses at most that much
``seg-000006.arrows``          a closed segment waiting to be compacted
``seg-000005.parquet``         a compacted segment: zstd, ITL gaps as int32 microseconds and
                               floats stored byte-stream-split (~1.5-2 bytes a gap), strings
                               dictionary-encoded; a field no record of it filled is left out
=============================  =====================================================================

A segment is rotated every ``rotate_rows`` records or ``rotate_s`` seconds; closed segments are
compacted to Parquet by a child process (never in the process that times requests) and at the
end of the run. Readers take, per segment number, the Parquet file if there is one, else the
Arrow stream — a batch torn by a crash is left out, everything before it read. ``requests.jsonl``
(format 1, one JSON object per line) is read the same way, so runs of 0.1 stay readable.

The on-disk format is versioned in the Arrow schema's metadata (``tokenstorm.records``); a
reader refuses a newer version by name instead of misreading it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from .meta import RECORDS_FORMAT_VERSION, SEGMENTS_DIR, NewerSchema
from .records import RequestRecord

__all__ = [
    "RECORDS_FORMAT_VERSION",
    "SEGMENTS_DIR",
    "compact_segments",
    "filled_columns",
    "records_schema",
    "rows_to_batch",
    "segment_batches",
    "segment_paths",
    "write_parquet_segment",
]

ITL_COLUMN = "itl_gaps_us"
_META_KEY = b"tokenstorm.records"
_SEG = re.compile(r"^seg-(\d{6})\.(parquet|arrows|live\.arrows)$")
_INT32_MAX = 2**31 - 1
_ROW_GROUP = 65536
BATCH_ROWS = 64


def _arrow_type(kind: str) -> pa.DataType:
    return {
        "str": pa.string(),
        "float": pa.float64(),
        "int": pa.int64(),
        "bool": pa.bool_(),
        "list[float]": pa.list_(pa.int32()),
    }[kind]


def records_schema() -> pa.Schema:
    """The Arrow schema of format 2, derived from :class:`RequestRecord` (``itl_gaps_s`` → µs)."""
    cols = [
        (ITL_COLUMN if f.name == "itl_gaps_s" else f.name, _arrow_type(str(f.type).removesuffix(" | None")))
        for f in fields(RequestRecord)
    ]
    return pa.schema(cols, metadata={_META_KEY: str(RECORDS_FORMAT_VERSION).encode()})


SCHEMA = records_schema()
FIELD_ORDER = tuple(f.name for f in fields(RequestRecord))
_STRINGS = [f.name for f in SCHEMA if pa.types.is_string(f.type)]


def gaps_to_us(gaps: pa.ListArray) -> pa.ListArray:
    """Seconds (float lists) → whole microseconds (int32 lists), offsets kept."""
    start, stop = gaps.offsets[0].as_py(), gaps.offsets[-1].as_py()
    flat = gaps.values.slice(start, stop - start)  # null lists have no values of their own
    us = pc.cast(pc.round(pc.min_element_wise(pc.multiply(flat, 1e6), float(_INT32_MAX))), pa.int32())
    offsets = pc.subtract(gaps.offsets, start)
    return pa.ListArray.from_arrays(offsets, us)


def rows_to_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """Decoded records (``RequestRecord`` fields, gaps in seconds) → one batch of format 2."""
    arrays = []
    for f in SCHEMA:
        if f.name == ITL_COLUMN:
            gaps = pa.array([r.get("itl_gaps_s") or [] for r in rows], pa.list_(pa.float64()))
            arrays.append(gaps_to_us(gaps))
        else:
            arrays.append(pa.array([r.get(f.name) for r in rows], f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def numbered_segments(directory: Path) -> list[tuple[int, Path]]:
    out = []
    if directory.is_dir():
        for p in directory.iterdir():
            m = _SEG.match(p.name)
            if m:
                out.append((int(m.group(1)), p))
    return out


def segment_paths(directory: Path) -> list[Path]:
    """One file per segment, in order: Parquet where compacted, else the Arrow stream."""
    rank = {"parquet": 0, "arrows": 1, "live.arrows": 2}
    best: dict[int, Path] = {}
    for n, p in numbered_segments(directory):
        kind = _SEG.match(p.name).group(2)  # type: ignore[union-attr]
        if n not in best or rank[kind] < rank[_SEG.match(best[n].name).group(2)]:  # type: ignore[union-attr]
            best[n] = p
    return [best[n] for n in sorted(best)]


def _check_version(schema: pa.Schema, path: Path) -> None:
    version = int((schema.metadata or {}).get(_META_KEY, b"2"))
    if version > RECORDS_FORMAT_VERSION:
        raise NewerSchema(
            f"{path}: request records format {version} is newer than this tokenstorm reads "
            f"({RECORDS_FORMAT_VERSION}); upgrade tokenstorm to read it"
        )


def _stream_batches(path: Path, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
    """The complete batches of an Arrow IPC stream; a torn last batch (crash) ends it quietly."""
    try:
        reader = ipc.open_stream(pa.memory_map(str(path)))
    except FileNotFoundError:
        raise  # renamed by a rotation or compaction: the caller looks for its newer form
    except (pa.ArrowInvalid, OSError):
        return  # crashed before the schema was written: nothing to read
    _check_version(reader.schema, path)
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except (pa.ArrowInvalid, OSError):
            return  # a batch torn by a crash: the ones before it are read
        yield _conform(batch, columns)


def segment_batches(path: Path, columns: list[str] | None, batch_size: int) -> Iterator[pa.RecordBatch]:
    """The records of one segment, as batches, from ``path`` or — when a rotation or compaction
    renamed it since it was listed — from the same segment's newer file. (An open file stays
    readable on POSIX when it is unlinked, so only the moment of opening can race.)"""
    m = _SEG.match(path.name)
    stem = f"seg-{m.group(1)}" if m else path.stem
    candidates = [path, *(path.with_name(f"{stem}.{kind}") for kind in ("parquet", "arrows", "live.arrows"))]
    for candidate in candidates:
        try:
            if candidate.suffix == ".parquet":
                batches = _parquet_batches(candidate, columns, batch_size)
            else:
                batches = _stream_batches(candidate, columns)
            first = next(batches, None)  # opens the file: FileNotFoundError here if it moved
        except FileNotFoundError:
            continue
        if first is not None:
            yield first
            yield from batches
        return
    raise FileNotFoundError(f"{path}: segment vanished while being read (every form of it is gone)")


def _parquet_batches(path: Path, columns: list[str] | None, batch_size: int) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    _check_version(pf.schema_arrow, path)
    present = set(pf.schema_arrow.names)
    wanted = [c for c in (columns if columns is not None else SCHEMA.names) if c in present]
    for batch in pf.iter_batches(batch_size=batch_size, columns=wanted):
        yield _conform(batch, columns)


def _conform(batch: pa.RecordBatch, columns: list[str] | None) -> pa.RecordBatch:
    """``batch`` with exactly ``columns`` (every field of today's schema when ``None``): a field
    an older writer did not have reads as nulls, one this version does not know is left out."""
    names = columns if columns is not None else SCHEMA.names
    if batch.schema.names == names:
        return batch
    have = set(batch.schema.names)
    arrays = [batch.column(n) if n in have else pa.nulls(batch.num_rows, SCHEMA.field(n).type) for n in names]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def filled_columns(batches: Iterable[pa.RecordBatch]) -> list[str]:
    """The fields of format-2 ``batches`` that hold a value in any row (in schema order): the ones a segment
    stores; a field no record filled is left out and reads back as missing (see :func:`_conform`)."""
    seen = {"ok", ITL_COLUMN}  # a segment always has these, so that an empty one is still a table of requests
    for batch in batches:
        seen.update(f.name for f, col in zip(batch.schema, batch.columns, strict=True) if col.null_count < len(col))
    return [name for name in SCHEMA.names if name in seen]


def write_parquet_segment(target: Path, batches: Iterator[pa.RecordBatch], columns: list[str] | None = None) -> None:
    """Write format-2 ``batches`` as one Parquet segment, atomically (temporary name, then rename); ``columns``:
    the fields to store (:func:`filled_columns`; None: every one).

    Encodings (all lossless): strings dictionary-encoded; ITL gaps (int32 µs) and every float column
    byte-stream-split, which lets zstd see a latency's sign, exponent and high mantissa bytes apart (~6 bytes a
    250-token record); no min/max statistics (no reader filters on them; ~1 KB of footer a segment)."""
    import pyarrow.parquet as pq

    names = list(SCHEMA.names) if columns is None else columns
    schema = pa.schema([SCHEMA.field(n) for n in names], metadata=SCHEMA.metadata)
    split = [f"{ITL_COLUMN}.list.element"] + [n for n in names if pa.types.is_floating(SCHEMA.field(n).type)]
    strings = [n for n in _STRINGS if n in names]
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.tmp")
    try:
        with pq.ParquetWriter(
            tmp,
            schema,
            compression="zstd",
            use_dictionary=strings,
            column_encoding=dict.fromkeys(split, "BYTE_STREAM_SPLIT"),
            write_statistics=False,
        ) as out:
            pending: list[pa.RecordBatch] = []
            for batch in batches:  # row groups of ~64k rows, not one per flush
                pending.append(batch.select(names))
                if sum(b.num_rows for b in pending) >= _ROW_GROUP:
                    out.write_table(pa.Table.from_batches(pending, schema=schema), row_group_size=_ROW_GROUP)
                    pending = []
            if pending:
                out.write_table(pa.Table.from_batches(pending, schema=schema), row_group_size=_ROW_GROUP)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def compact_segments(directory: Path) -> int:
    """Rewrite every closed Arrow segment in ``directory`` as Parquet; returns how many.

    Written to a temporary name and renamed, so a reader or a second compactor never sees half
    a file; the Arrow segment is removed only once its Parquet twin is complete.
    """

    done = 0
    for n, path in sorted(numbered_segments(directory)):
        if not path.name.endswith(".arrows") or path.name.endswith(".live.arrows"):
            continue
        target = directory / f"seg-{n:06d}.parquet"
        if not target.exists():
            try:
                # Two reads of the stream (mapped, decoded a batch at a time): which fields any record filled, then
                # the segment itself; never the whole segment in memory.
                write_parquet_segment(target, _stream_batches(path, None), filled_columns(_stream_batches(path, None)))
            except FileNotFoundError:
                continue  # another compactor finished it first
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        done += 1
    return done


if __name__ == "__main__":  # the compactor child: python -m tokenstorm.workloads.rundir.segments DIR
    os.nice(10)  # behind the load generator's own processes on a small machine
    compact_segments(Path(sys.argv[1]))
