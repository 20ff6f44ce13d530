"""Writers on a disk that fills: the first failed write is said once (``on_failure``), the writer
takes nothing after it, and what is on disk is whole lines / whole Arrow batches that the
project's readers read back, as many as the writer counts. No ``.tmp`` file is left behind."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from tests.small_disk import needs_root, small_disk
from tokenstorm.workloads.rundir import RecordWriter, RequestRecord, SegmentWriter, read_records, write_json_atomic
from tokenstorm.workloads.rundir.faults import WriteFailed

__all__ = ["small_disk"]  # the fixture, used by name

pytestmark = needs_root


def _row(i: int) -> dict[str, object]:
    return RequestRecord(
        workload="code",
        endpoint="/v1/completions",
        model="m",
        stream=True,
        start_epoch_s=1_800_000_000.0 + i,
        request_id=f"{i:032x}",
        ok=True,
        output_tokens=200,
        ttft_s=0.1,
        e2e_s=1.0,
        itl_gaps_s=[0.004 + (i * 7919 + k * 104729) % 1000 / 1e6 for k in range(200)],  # little to compress
    ).as_row()


def _fill(writer: RecordWriter | SegmentWriter, said: list[WriteFailed]) -> int:
    """Write records in small flushed batches until the writer says a write failed; how many were given."""
    writer.on_failure = said.append
    given = 0
    while not said and given < 100_000:
        writer.write_rows([_row(given + k) for k in range(10)])  # never raises, full disk or not
        writer.flush()
        given += 10
    writer.write_rows([_row(given)])  # after the failure: taken, not written, not said again
    writer.close()
    return given + 1


def test_json_lines_on_a_full_disk_end_on_a_whole_line(small_disk: Callable[[int], Path]) -> None:
    path = small_disk(64) / "requests.jsonl"
    said: list[WriteFailed] = []
    writer = RecordWriter(path)
    given = _fill(writer, said)
    assert len(said) == 1 and said[0].disk_full and said[0].path == path
    assert str(said[0]) == f"disk full: could not write records to {path} (No space left on device)"
    data = path.read_bytes()
    assert data.endswith(b"\n")
    assert [json.loads(line)["request_id"] for line in data.splitlines()] == [f"{i:032x}" for i in range(writer.count)]
    assert len(list(read_records(path.parent))) == writer.count > 0
    assert writer.count + writer.lost == given


def test_segments_on_a_full_disk_end_on_a_whole_batch(small_disk: Callable[[int], Path]) -> None:
    directory = small_disk(64) / "requests"
    said: list[WriteFailed] = []
    writer = SegmentWriter(directory, compact_in_child=False)
    given = _fill(writer, said)
    assert len(said) == 1 and said[0].disk_full and said[0].path.parent == directory
    (segment,) = directory.iterdir()  # nothing half-written beside it (no Parquet .tmp)
    strict = ipc.open_stream(pa.memory_map(str(segment))).read_all()  # no torn batch at its end
    assert strict.num_rows == writer.count > 0
    back = [r.request_id for r in read_records(directory.parent)]
    assert back == [f"{i:032x}" for i in range(writer.count)]
    assert writer.count + writer.lost == given


def test_run_json_on_a_full_disk_keeps_the_old_one_and_leaves_no_tmp(small_disk: Callable[[int], Path]) -> None:
    disk = small_disk(16)
    write_json_atomic(disk / "run.json", {"status": "running"})
    (disk / "filler").write_bytes(b"")
    with pytest.raises(OSError), (disk / "filler").open("ab") as fh:
        while True:  # fill the disk to its last byte
            fh.write(bytes(4096))
            fh.flush()
    with pytest.raises(WriteFailed, match=r"disk full: could not write run.json to .*run.json \(No space left"):
        write_json_atomic(disk / "run.json", {"status": "failed", "problem": "x" * 20_000})
    assert json.loads((disk / "run.json").read_text()) == {"status": "running"}
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "run.json"]
