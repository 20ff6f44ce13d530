"""Compact records (format 2): what goes in comes out, a crash loses only the unflushed tail,
closed segments become Parquet, 0.1's JSON lines stay readable, and disk use is a fraction."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from tokenstorm.workloads.rundir import (
    SEGMENTS_DIR,
    RequestRecord,
    SegmentWriter,
    export_jsonl,
    iter_batches,
    read_records,
    read_requests_frame,
)
from tokenstorm.workloads.rundir.segments import SCHEMA, compact_segments, segment_batches, segment_paths


def _record(i: int, gaps: list[float] | None = None, **kw: object) -> RequestRecord:
    base: dict[str, object] = {
        "workload": "chat" if i % 2 else "code", "endpoint": "/v1/chat/completions", "model": "m", "stream": True,
        "start_epoch_s": 1_800_000_000.0 + i * 0.25, "request_id": f"{i:032x}", "response_id": f"chatcmpl-{i}",
        "user_id": 3_000_000_000 + i, "worker_id": "w1", "ok": True, "status_code": 200, "prompt_tokens": 512,
        "output_tokens": 4, "requested_max_tokens": 4, "ttfc_s": 0.1234567891, "ttft_s": 0.2345678912,
        "e2e_s": 0.5 + i, "done_s": 0.51 + i, "tpot_s": 0.0123456789, "itl_gaps_s": gaps or [0.020001, 0.0, 1.5],
        "token_events": 4, "finish_reason": "length", "send_lag_s": 0.001,
    }  # fmt: skip
    base.update(kw)
    return RequestRecord(**base)  # type: ignore[arg-type]


def test_records_come_back_field_for_field_with_gaps_to_the_microsecond(tmp_path: Path) -> None:
    written = [_record(i) for i in range(5)]
    failed = {
        "ok": False,
        "status_code": 503,
        "error_category": "http_5xx",
        "error_detail": "HTTP 503: busy",
        "ttft_s": None,
        "e2e_s": None,
        "done_s": None,
        "tpot_s": None,
        "itl_gaps_s": [],
        "output_tokens": None,
    }
    written.append(_record(5, **failed))
    writer = SegmentWriter(tmp_path / SEGMENTS_DIR)
    for rec in written:
        writer.write(rec)
    writer.close()
    back = list(read_records(tmp_path))
    assert back == written  # every field, floats bit for bit; gaps are whole microseconds already
    assert [p.suffix for p in (tmp_path / SEGMENTS_DIR).iterdir()] == [".parquet"]


def test_gaps_are_stored_in_whole_microseconds(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path / SEGMENTS_DIR)
    writer.write_rows([_record(0, gaps=[0.0200004, 0.0200006, 3e-7]).as_row()])
    writer.close()
    (rec,) = read_records(tmp_path)
    assert rec.itl_gaps_s == [0.02, 0.020001, 0.0]


def test_a_crash_loses_only_what_was_not_flushed_and_a_torn_batch_is_skipped(tmp_path: Path) -> None:
    directory = tmp_path / SEGMENTS_DIR
    writer = SegmentWriter(directory, flush_interval_s=3600)
    writer.write_rows([_record(i).as_row() for i in range(100)])
    writer.flush()  # what the run's flusher does every 2 s
    writer.write_rows([_record(i).as_row() for i in range(100, 110)])  # not flushed yet: a crash loses these
    # SIGKILL now: nothing closes the stream, there is no Parquet footer, only the live segment.
    (live,) = directory.iterdir()
    assert live.name.endswith(".live.arrows")
    assert [r.request_id for r in read_records(tmp_path)] == [f"{i:032x}" for i in range(100)]
    # A batch torn half-way (the OS wrote part of it) is left out; the batches before it are read.
    size = live.stat().st_size
    writer.flush()
    with live.open("r+b") as fh:
        fh.truncate(size + (live.stat().st_size - size) // 2)
    assert len(list(read_records(tmp_path))) == 100
    frame, _ = read_requests_frame(tmp_path)
    assert len(frame) == 100
    writer.close()  # (the crashed process's file handle, closed here so the test leaks nothing)


def test_segments_rotate_and_are_compacted_to_parquet_by_a_child_process(tmp_path: Path) -> None:
    directory = tmp_path / SEGMENTS_DIR
    writer = SegmentWriter(directory, flush_interval_s=0, rotate_rows=20)
    for i in range(0, 50, 5):
        writer.write_rows([_record(j).as_row() for j in range(i, i + 5)])
    deadline = time.monotonic() + 60
    while not (directory / "seg-000001.parquet").exists() and time.monotonic() < deadline:
        time.sleep(0.2)  # the child compacts while the writer goes on
    assert (directory / "seg-000001.parquet").exists()
    writer.close()
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["seg-000001.parquet", "seg-000002.parquet", "seg-000003.parquet"]
    assert [r.request_id for r in read_records(tmp_path)] == [f"{i:032x}" for i in range(50)]


def test_a_newer_format_is_refused_by_name(tmp_path: Path) -> None:
    directory = tmp_path / SEGMENTS_DIR
    directory.mkdir()
    schema = SCHEMA.with_metadata({b"tokenstorm.records": b"3"})
    with ipc.new_stream(str(directory / "seg-000001.arrows"), schema) as stream:
        stream.write_batch(pa.RecordBatch.from_pylist([], schema=schema))
    with pytest.raises(ValueError, match=r"seg-000001.arrows: request records format 3 is newer"):
        list(read_records(tmp_path))


def test_0_1_json_lines_are_read_and_an_export_beside_segments_is_not_read_twice(tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    rows = [_record(i).as_row() for i in range(3)]
    (old / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"workload": "ch')
    assert [r.request_id for r in read_records(old)] == [r["request_id"] for r in rows]
    frame, itl = read_requests_frame(old)
    assert len(frame) == 3 and itl.histogram(np.ones(3, dtype=bool)).size == 9

    new = tmp_path / "new"
    writer = SegmentWriter(new / SEGMENTS_DIR)
    writer.write_rows(rows)
    writer.close()
    buf = io.BytesIO()
    assert export_jsonl(new, buf) == 3
    (new / "requests.jsonl").write_bytes(buf.getvalue())
    exported = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert exported == [{**r, "itl_gaps_s": [0.020001, 0.0, 1.5]} for r in rows]
    assert sum(b.num_rows for b in iter_batches(new)) == 3  # the export is not counted again


def test_segments_take_under_a_sixth_of_the_disk_of_json_lines(tmp_path: Path) -> None:
    # 250-token answers with 1 ms of jitter on 10 ms gaps: what the emulator measures on a busy machine.
    rng = np.random.default_rng(1)
    rows = [_record(i, gaps=np.round(rng.normal(0.010, 0.001, 249), 6).tolist()).as_row() for i in range(2000)]
    writer = SegmentWriter(tmp_path / SEGMENTS_DIR)
    writer.write_rows(rows)
    writer.close()
    parquet = sum(p.stat().st_size for p in (tmp_path / SEGMENTS_DIR).iterdir()) / len(rows)
    jsonl = sum(len(RequestRecord(**r).to_json()) + 1 for r in rows) / len(rows)
    print(f"{parquet:.0f} B/record in segments, {jsonl:.0f} B/record as JSON lines")
    assert parquet <= 400 and jsonl / parquet > 6, (parquet, jsonl)  # issue 32: 396 B, then 390 B


def test_a_field_no_record_filled_is_left_out_of_the_segment_and_reads_back_as_missing(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    writer = SegmentWriter(tmp_path / SEGMENTS_DIR)
    writer.write_rows([_record(i, cached_tokens=7 if i == 3 else None).as_row() for i in range(10)])
    writer.close()
    (segment,) = (tmp_path / SEGMENTS_DIR).iterdir()
    stored = set(pq.ParquetFile(segment).schema_arrow.names)
    assert "cached_tokens" in stored and "server_ttft_s" not in stored and "needle_depth" not in stored
    back = list(read_records(tmp_path))
    assert [r.cached_tokens for r in back] == [None, None, None, 7] + [None] * 6
    assert all(r.server_ttft_s is None and r.needle_depth is None for r in back)
    assert [r.ttft_s for r in back] == [r.ttft_s for r in (_record(i) for i in range(10))]


def test_a_record_that_cannot_be_stored_is_counted_and_never_stops_the_ones_after_it(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path / SEGMENTS_DIR)
    bad = {**_record(1).as_row(), "status_code": "two hundred"}  # a worker of another version, say
    writer.write_rows([_record(0).as_row(), bad, _record(2).as_row()])
    writer.write_rows([_record(3).as_row()])
    writer.close()
    assert [r.request_id for r in read_records(tmp_path)] == [f"{i:032x}" for i in (0, 2, 3)]
    assert writer.rejected == 1


def test_records_arriving_after_close_are_kept_as_parquet(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path / SEGMENTS_DIR)
    writer.write_rows([_record(0).as_row()])
    writer.close()
    writer.write_rows([_record(1).as_row()])  # a worker's last report, after the run closed
    assert sorted(p.suffix for p in (tmp_path / SEGMENTS_DIR).iterdir()) == [".parquet", ".parquet"]
    assert [r.request_id for r in read_records(tmp_path)] == [f"{i:032x}" for i in (0, 1)]


def test_a_segment_compacted_between_listing_and_reading_is_read_from_its_new_file(tmp_path: Path) -> None:
    directory = tmp_path / SEGMENTS_DIR
    writer = SegmentWriter(directory, flush_interval_s=0, rotate_rows=5, compact_in_child=False)
    writer.write_rows([_record(i).as_row() for i in range(5)])  # rotated: seg-000001.arrows, closed
    listed = segment_paths(directory)
    assert [p.name for p in listed] == ["seg-000001.arrows"]
    compact_segments(directory)  # the child compactor, between a report's listing and its read
    rows = sum(b.num_rows for b in segment_batches(listed[0], None, 100))
    assert rows == 5
    writer.close()


def test_segments_of_an_older_writer_without_a_newer_field_read_it_as_missing(tmp_path: Path) -> None:
    directory = tmp_path / SEGMENTS_DIR
    directory.mkdir()
    older = pa.schema([f for f in SCHEMA if f.name != "send_lag_s"], metadata=SCHEMA.metadata)
    row = {k: v for k, v in _record(0).as_row().items() if k not in ("send_lag_s", "itl_gaps_s")}
    batch = pa.RecordBatch.from_pylist([{**row, "itl_gaps_us": [20001]}], schema=older)
    with ipc.new_stream(str(directory / "seg-000001.arrows"), older) as stream:
        stream.write_batch(batch)
    (rec,) = read_records(tmp_path)
    assert rec.send_lag_s is None and rec.itl_gaps_s == [0.020001] and rec.request_id == _record(0).request_id
    compact_segments(directory)  # and the same once it is Parquet
    (rec,) = read_records(tmp_path)
    assert rec.send_lag_s is None and rec.ttft_s == _record(0).ttft_s
    frame, _ = read_requests_frame(tmp_path)
    assert np.isnan(frame["send_lag_s"][0])
