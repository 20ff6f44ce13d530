"""The run directory's small files read back as they were written — and as tokenstorm 0.1 wrote them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tokenstorm.workloads.rundir import (
    CapacityResult,
    CapacityStep,
    LoadSample,
    LoadWriter,
    NewerSchema,
    RequestRecord,
    RunMeta,
    read_capacity,
    read_load,
    read_records,
    read_run_meta,
    read_samples,
    read_summary,
    read_sweep,
    write_capacity,
    write_run_meta,
    write_summary,
)

#: run.json as tokenstorm 0.1 wrote it (before the typed schema), plus a key a newer writer might add.
RUN_JSON_0_1 = {
    "schema": 1, "target": "http://gpu:8000", "simulated": False, "model": "m", "started_epoch_s": 100.0,
    "host": "box", "pid": 7, "versions": {"locust": "2.47.0"}, "options": {"gpus": 4, "slo": "slo.yaml"},
    "workers_seen": ["local"], "requests_by_workload": {"chat": 3}, "records": 3, "status": "finished",
    "problem": None, "slo_spec_text": "slos: {}", "slo_spec_source": "slo.yaml", "workers_lost": {},
    "client_bound": [], "gc": {"collections": [1, 0, 0]}, "stopped_epoch_s": 160.0, "added_later": {"x": 1},
}  # fmt: skip


def test_run_json_of_0_1_reads_and_writes_back_unchanged(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps(RUN_JSON_0_1))
    meta = read_run_meta(tmp_path)
    assert meta is not None
    assert (meta.status, meta.model, meta.started_epoch_s, meta.option("gpus")) == ("finished", "m", 100.0, 4)
    assert meta.option("missing", "default") == "default"
    # client_bound (0.1 until the timing-fidelity verdict replaced it) is kept as it was, not read
    assert meta.extra == {"client_bound": [], "added_later": {"x": 1}}
    write_run_meta(tmp_path, meta)
    assert json.loads((tmp_path / "run.json").read_text()) == RUN_JSON_0_1
    assert "client_bound" not in RunMeta(status="finished").to_dict()  # a run of today writes none


def test_a_newer_schema_is_refused_with_the_file_named(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({**RUN_JSON_0_1, "schema": 99}))
    with pytest.raises(ValueError, match=r"run\.json: schema 99 is newer"):
        read_run_meta(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"schema": 99}))
    with pytest.raises(ValueError, match=r"summary\.json: schema 99 is newer"):
        read_summary(tmp_path)
    assert read_run_meta(tmp_path / "nothing-here") is None


def _record_line(schema: int) -> str:
    record = RequestRecord(request_id="r1", workload="chat", endpoint="chat", model="m", stream=True, start_epoch_s=1.0)
    return json.dumps({**record.as_row(), "schema": schema})


_NEWER = [
    ("capacity.json", json.dumps({"highest_users_that_held": 4, "steps": [], "schema": 99}), read_capacity),
    ("sweep.json", json.dumps({"level_time_s": 10, "levels": [], "schema": 99}), read_sweep),
    (
        "gpu.jsonl",
        json.dumps({"epoch_s": 1.0, "gpu": 0, "schema": 1}) + "\n" + json.dumps({"epoch_s": 2.0, "schema": 99}),
        lambda d: read_samples(d / "gpu.jsonl"),
    ),
    ("server.jsonl", json.dumps({"epoch_s": 1.0, "schema": 99}) + "\n", lambda d: read_samples(d / "server.jsonl")),
    ("requests.jsonl", _record_line(1) + "\n" + _record_line(99) + "\n", lambda d: list(read_records(d))),
]


@pytest.mark.parametrize(("name", "newer", "read"), _NEWER)
def test_every_versioned_file_of_a_newer_schema_is_refused_with_the_file_named(
    tmp_path: Path, name: str, newer: str, read: Any
) -> None:
    """docs/run-directory.md: readers refuse a newer schema with the file named (a file of today's is read)."""
    (tmp_path / name).write_text(newer.replace('"schema": 99', '"schema": 1'))
    read(tmp_path)
    (tmp_path / name).write_text(newer)
    with pytest.raises(NewerSchema, match=rf"{re.escape(name)}: schema 99 is newer than this tokenstorm reads \(1\)"):
        read(tmp_path)


CLOCK = {"interval_s": 1.0, "cpu_pct": 37.5, "runq_wait_ms_per_s": 12.25, "throttled_ms_per_s": None,
         "nr_throttled": None, "loop_lag_p99_ms": 0.4, "loop_lag_max_ms": 7.0}  # fmt: skip


def test_load_samples_round_trip_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    samples = [
        LoadSample(1.0, 4, {"local": 37.5}, {"local": CLOCK}),
        LoadSample(2.0, 8, {"w1": 12.0}, {"w1": {**CLOCK, "cpu_pct": 12.0}, "w2": {**CLOCK, "cpu_pct": None}}),
    ]
    writer = LoadWriter(tmp_path)
    for sample in samples:
        writer.write(sample)
    writer.close()
    with (tmp_path / "load.jsonl").open("a") as fh:
        fh.write('{"epoch_s": 3.0, "us')  # a crash mid-line
    # the figures a probe could not take (None) stay None: not 0, which would read as "measured: fine"
    assert read_load(tmp_path) == samples
    # 0.1 wrote the same fields with json.dumps, without the timekeeping figures
    (tmp_path / "load.jsonl").write_text('{"epoch_s": 5.5, "users": 2, "cpu": {"local": 0.0}}\n')
    assert read_load(tmp_path) == [LoadSample(5.5, 2, {"local": 0.0}, {})]


def test_capacity_round_trip_and_0_1_file(tmp_path: Path) -> None:
    result = CapacityResult(6, 8, [CapacityStep(6, 40, True, {"code ttft_ms p95": 120.0}),
                                   CapacityStep(8, 51, False, {"code ttft_ms p95": None})])  # fmt: skip
    write_capacity(tmp_path, result)
    assert read_capacity(tmp_path) == result
    (tmp_path / "capacity.json").write_text(json.dumps(
        {"highest_users_that_held": 12, "broke_at_users": 15,
         "steps": [{"users": 12, "requests": 99, "held": True, "measured": {"code ttft_ms p95": 250.0}}]}))  # fmt: skip
    old = read_capacity(tmp_path)
    assert old is not None and old.highest_users_that_held == 12
    assert old.steps[0].measured == {"code ttft_ms p95": 250.0}


def test_summary_carries_its_version_and_0_1_files_read(tmp_path: Path) -> None:
    write_summary(tmp_path, {"completed": 3, "verdict": "passed"})
    assert read_summary(tmp_path) == {"completed": 3, "verdict": "passed", "schema": 1}
    (tmp_path / "summary.json").write_text(json.dumps({"completed": 2}))  # 0.1: no schema key
    assert read_summary(tmp_path) == {"completed": 2}


def test_the_readers_take_the_run_directory_as_a_string_as_readme_shows(tmp_path: Path) -> None:
    from tests.conftest import make_run_dir, request
    from tokenstorm.workloads.rundir import read_records, read_requests_frame, read_run_meta

    run_dir = make_run_dir(tmp_path / "run", [request(i, 100.0) for i in range(3)], {"status": "finished"})
    assert [r.ttft_s for r in read_records(str(run_dir))] == [0.1, 0.1, 0.1]
    assert read_run_meta(str(run_dir)).status == "finished"  # type: ignore[union-attr]
    assert len(read_requests_frame(str(run_dir))[0]) == 3
