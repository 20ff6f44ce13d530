"""Records survive the round trip to disk, and a crash-torn last line loses only that line."""

from pathlib import Path

from tokenstorm.workloads.rundir import RecordWriter, RequestRecord, read_records


def test_records_round_trip_and_torn_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    writer = RecordWriter(path, flush_interval_s=0)
    rec = RequestRecord(
        workload="chat",
        endpoint="/v1/chat/completions",
        model="m",
        stream=True,
        start_epoch_s=1.5,
        ttft_s=0.3,
        itl_gaps_s=[0.02, 0.021],
        output_tokens=3,
        ok=True,
    )
    writer.write(rec)
    writer.write(rec)
    # Records reach the file before close: a crash loses at most the flush interval.
    assert len(path.read_text().splitlines()) == 2
    writer.close()
    with path.open("a") as fh:
        fh.write('{"workload": "chat", "endp')
    back = list(read_records(path))
    assert back == [rec, rec]


def test_reader_ignores_fields_from_a_newer_writer(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text(
        '{"workload":"w","endpoint":"/v1/completions","model":"m","stream":false,'
        '"start_epoch_s":2.0,"some_future_field":1}\n'
    )
    (rec,) = read_records(path)
    assert rec.workload == "w" and rec.stream is False


def test_a_record_breaking_the_one_clock_invariant_says_how() -> None:
    base = {"workload": "chat", "endpoint": "/v1/chat/completions", "model": "m", "stream": True,
            "start_epoch_s": 1.0, "ttfc_s": 0.09, "ttft_s": 0.10, "e2e_s": 0.50, "done_s": 0.51}  # fmt: skip
    assert RequestRecord(**base, itl_gaps_s=[0.2, 0.2]).check_timing() is None
    # The bug issue #9 found: bytes read with the headers on another clock than later reads.
    bad = RequestRecord(**{**base, "ttft_s": 0.0979, "e2e_s": 0.0961, "done_s": 0.0962})
    assert bad.check_timing() == "ttft_s 0.097900 > e2e_s 0.096100"
    assert RequestRecord(**base, itl_gaps_s=[0.2, -0.001]).check_timing() == "negative ITL gap"
