"""Reading a run's request records, whatever wrote them: segments (format 2) or
``requests.jsonl`` (format 1, tokenstorm 0.1 and ``--records jsonl``); and exporting the first
as the second (``python -m tokenstorm.reports export RUN_DIR --jsonl``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from .meta import REQUESTS_FILE, refuse_newer
from .records import RECORD_SCHEMA_VERSION, RequestRecord
from .segments import FIELD_ORDER, ITL_COLUMN, SCHEMA, SEGMENTS_DIR, gaps_to_us, segment_batches, segment_paths

__all__ = ["export_jsonl", "iter_batches", "read_records"]


def _jsonl_batches(path: Path, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
    """Format 1 (``requests.jsonl``) as format-2 batches; a torn last line is left out."""
    import pyarrow.compute as pc
    import pyarrow.json as paj

    end = _complete_prefix_length(path)
    if end == 0:
        return
    src_schema = pa.schema(
        [(("itl_gaps_s", pa.list_(pa.float64())) if f.name == ITL_COLUMN else (f.name, f.type)) for f in SCHEMA]
    )
    source: Any = path if end == path.stat().st_size else pa.BufferReader(pa.memory_map(str(path)).read_buffer(end))
    reader = paj.open_json(
        source,
        read_options=paj.ReadOptions(block_size=8 << 20),
        parse_options=paj.ParseOptions(explicit_schema=src_schema, unexpected_field_behavior="ignore"),
    )
    for batch in reader:
        refuse_newer(path, pc.max(batch.column("schema")).as_py(), RECORD_SCHEMA_VERSION)
        gaps = batch.column("itl_gaps_s")
        arrays = [gaps_to_us(gaps) if f.name == ITL_COLUMN else batch.column(f.name) for f in SCHEMA]
        out = pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)
        yield out.select(columns) if columns is not None else out


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


def iter_batches(
    run_dir: Path | str, columns: list[str] | None = None, batch_size: int = 65536
) -> Iterator[pa.RecordBatch]:
    """Every request record of ``run_dir`` as format-2 Arrow batches, in the order written: the
    segments under ``requests/``, or ``requests.jsonl`` (format 1) in a run that has none."""
    run_dir = Path(run_dir)  # a str as README shows it, or a Path
    segments = segment_paths(run_dir / SEGMENTS_DIR)
    jsonl = run_dir / REQUESTS_FILE
    if not segments and jsonl.is_file() and jsonl.stat().st_size:  # beside segments it is an export of them
        yield from _jsonl_batches(jsonl, columns)
    for path in segments:
        yield from segment_batches(path, columns, batch_size)


def read_records(path: Path | str) -> Iterator[RequestRecord]:
    """Yield the records of a run directory (segments or ``requests.jsonl``) or of one
    ``requests.jsonl`` file; what a crash tore (a last line, a last batch) is skipped."""
    path = Path(path)  # a str as README shows it, or a Path
    if path.is_file():
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
        return
    for batch in iter_batches(path, batch_size=4096):
        for row in batch.to_pylist():
            row["itl_gaps_s"] = [g / 1e6 for g in row.pop(ITL_COLUMN) or ()]
            yield RequestRecord.from_dict(row)


def export_jsonl(run_dir: Path | str, out: Any) -> int:
    """Write every record of ``run_dir`` to binary file ``out`` as JSON lines; returns how many."""
    run_dir = Path(run_dir)  # a str as README shows it, or a Path
    n = 0
    for batch in iter_batches(run_dir, batch_size=4096):
        lines = []
        for row in batch.to_pylist():
            row["itl_gaps_s"] = [g / 1e6 for g in row.pop(ITL_COLUMN) or ()]
            lines.append(orjson.dumps({k: row[k] for k in FIELD_ORDER}))
        if lines:
            out.write(b"\n".join(lines) + b"\n")
        n += len(lines)
    return n
