"""A worker's shipped records of another tokenstorm version: an older one's are read by column name, a newer
records format's are refused in one line that says what to do."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from tokenstorm.workloads.rundir import RequestRecord
from tokenstorm.workloads.rundir.meta import RECORDS_FORMAT_VERSION
from tokenstorm.workloads.rundir.segments import SCHEMA, rows_to_batch
from tokenstorm.workloads.rundir.wire import RecordsRefused, batch_rows, decode_records, encode_records


def _stream(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, batch.schema) as out:
        out.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def _rows() -> list[dict]:  # type: ignore[type-arg]
    made = [
        RequestRecord(
            "chat",
            "/v1/chat/completions",
            "m",
            True,
            1.8e9 + i,
            request_id=f"r{i}",
            output_tokens=i,
            itl_gaps_s=[0.001, 0.002 * i],
        )
        for i in range(3)
    ]
    return [r.as_row() for r in made]


def test_an_older_workers_batch_without_a_newer_field_reads_it_as_empty() -> None:
    batch = rows_to_batch(_rows())
    older = batch.drop_columns(["cached_tokens"]).replace_schema_metadata(SCHEMA.metadata)
    got = decode_records(_stream(older))
    assert got.schema == SCHEMA and got.num_rows == 3
    assert got.column("cached_tokens").null_count == 3
    assert [r["request_id"] for r in batch_rows(got)] == ["r0", "r1", "r2"]


def test_a_newer_records_format_is_refused_in_one_line() -> None:
    newer = rows_to_batch(_rows()).replace_schema_metadata({b"tokenstorm.records": str(RECORDS_FORMAT_VERSION + 1)})
    with pytest.raises(RecordsRefused, match=r"newer than this master reads.*same tokenstorm version"):
        decode_records(_stream(newer))
    with pytest.raises(RecordsRefused, match="cannot read"):
        decode_records(b"not an arrow stream")


def test_records_go_and_come_back_whole() -> None:
    rows = _rows()
    got = batch_rows(decode_records(encode_records([rows_to_batch(rows[:1]), rows_to_batch(rows[1:])])))
    assert [r["itl_gaps_s"] for r in got] == [r["itl_gaps_s"] for r in rows]
    assert [r["output_tokens"] for r in got] == [0, 1, 2]
