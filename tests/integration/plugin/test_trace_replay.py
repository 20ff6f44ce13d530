"""Trace replay against the emulator: every request leaves at its recorded offset (its send lag in the
report), with the prompt length the trace recorded (the emulator's own count); the run ends after the last
reply, or at -t; distributed workers split the rows; a bad trace stops the run before any traffic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, LocustRun
from tokenstorm.workloads.traffic.trace import TraceRow, read_trace

SAMPLE = ROOT / "traces" / "mooncake_sample.jsonl"
EMULATOR = "--ttft-ms 20 --itl-ms 2 --prefill-us-per-token 0"
#: how far a request may leave from its place in the trace (issue #22's bound)
OFFSET_BOUND_S = 0.050


def rows_by_line(path: Path) -> dict[int, TraceRow]:
    return {r.line: r for r in read_trace(path)}


def line_of(record: dict) -> int:
    return int(record["request_id"].rsplit("-", 1)[1])  # the trace line the request replays


def offset_errors_s(records: list[dict], rows: dict[int, TraceRow], speed: float) -> np.ndarray:
    """How late each request left against the trace's schedule, the earliest-placed request as zero."""
    placed = np.array([r["start_epoch_s"] - rows[line_of(r)].offset_s / speed for r in records])
    return placed - placed.min()


def truth(path: Path) -> dict[str, dict]:
    return {row["request_id"]: row for row in map(json.loads, path.read_text().splitlines())}


@pytest.mark.serial  # each request sent within 50 ms of its offset
def test_a_trace_replays_at_its_offsets_with_its_prompt_lengths_and_the_report_shows_send_lag(
    locust_runner, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  trace:\n    ttft_ms: {p95: 2000}\n    error_rate: {max: 0%}\n")
    truth_log = tmp_path / "truth.jsonl"
    run: LocustRun = locust_runner("trace_replay.py", "--trace", str(SAMPLE), "--slo", str(slo),
                                   "--emulator-args", f"{EMULATOR} --truth-log {truth_log}", timeout_s=120)  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    rows = rows_by_line(SAMPLE)
    records = run.records()
    assert sorted(line_of(r) for r in records) == sorted(rows)  # every row once, no -t: the run ended by itself
    assert all(r["ok"] and r["workload"] == "trace" for r in records)
    meta = run.run_json()
    assert meta["stopped_epoch_s"] - max(r["start_epoch_s"] + r["e2e_s"] for r in records) < 5

    errors = offset_errors_s(records, rows, 1.0)
    assert errors.max() < OFFSET_BOUND_S, sorted(errors)[-5:]
    lags = np.array([r["send_lag_s"] for r in records])
    assert lags.max() < OFFSET_BOUND_S

    # Prompt lengths as recorded: what the emulator counted on the wire, and what usage said.
    seen = truth(truth_log)
    assert len(seen) == len(records)
    for r in records:
        row = rows[line_of(r)]
        assert seen[r["request_id"]]["prompt_tokens"] == r["prompt_tokens"] == row.input_length
        assert r["output_tokens"] == row.output_length and r["requested_prompt_tokens"] == row.input_length

    # Send lag in the report, from these records; the options table names the trace, not arrival rates.
    assert run.run_dir is not None
    summary = json.loads((run.run_dir / "summary.json").read_text())
    assert summary["p99_send_lag_ms"] == pytest.approx(np.percentile(lags, 99) * 1000, rel=1e-4)
    assert {(s["scope"], s["metric"], s["passed"]) for s in summary["slos"]} >= {("trace", "ttft_ms", True)}
    html = (run.run_dir / "report.html").read_text()
    assert 'id="send-lag"' in html and str(SAMPLE) in html and "--arrival-rate" not in html
    rebuilt = subprocess.run([sys.executable, "-m", "tokenstorm.reports", "build", str(run.run_dir)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert rebuilt.returncode == 0 and 'id="send-lag"' in (run.run_dir / "report.html").read_text(), rebuilt.stderr


def write_trace(path: Path, stamps_ms: list[int], input_length: int = 300) -> Path:
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": input_length + i, "output_length": 3,
                                        "hash_ids": [0]}) + "\n" for i, t in enumerate(stamps_ms)))  # fmt: skip
    return path


def expected_cached_tokens(rows: list[TraceRow], trace_block: int, server_block: int) -> dict[int, int]:
    """Each row's prefix-cache hit as the trace implies it (no eviction): the longest prefix its hash ids
    share with an earlier row's, in the server's full blocks, the last prompt token never a hit."""
    out = {}
    for n, row in enumerate(rows):
        best = 0
        for earlier in rows[:n]:
            same = 0
            while same < min(len(row.hash_ids), len(earlier.hash_ids)) and (
                row.hash_ids[same] == earlier.hash_ids[same]
            ):
                same += 1
            common = min(same * trace_block, earlier.input_length, row.input_length)
            best = max(best, common // server_block)
        out[row.line] = min(best, (row.input_length - 1) // server_block) * server_block
    return out


def test_requests_sharing_hash_ids_hit_the_servers_prefix_cache_as_the_trace_says(
    locust_runner, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # The sample's prefix structure, its requests 80 ms apart (ties could reach the server in either order).
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    trace = tmp_path / "spaced.jsonl"
    trace.write_text("".join(json.dumps({**row, "timestamp": 80 * i}) + "\n" for i, row in enumerate(sample)))
    run = locust_runner("trace_replay.py", "--trace", str(trace), "--trace-speed", "2", "--emulator-args",
                        f"{EMULATOR} --block-size 16 --prefix-cache-blocks 100000", timeout_s=120)  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    expected = expected_cached_tokens(read_trace(trace), 512, 16)
    cached = {line_of(r): r["cached_tokens"] for r in run.records()}
    assert cached == expected
    assert sum(v > 0 for v in expected.values()) > 20  # most of the sample shares a prefix


def test_trace_speed_compresses_the_recorded_time(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace = write_trace(tmp_path / "t.jsonl", [i * 200 for i in range(40)])  # 7.8 s recorded
    run = locust_runner("trace_replay.py", "--trace", str(trace), "--trace-speed", "4", "--emulator-args", EMULATOR,
                        timeout_s=120)  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    records = run.records()
    assert len(records) == 40
    starts = sorted(r["start_epoch_s"] for r in records)
    assert starts[-1] - starts[0] == pytest.approx(7.8 / 4, abs=OFFSET_BOUND_S)
    assert offset_errors_s(records, rows_by_line(trace), 4.0).max() < OFFSET_BOUND_S


def test_run_time_ends_a_longer_trace(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace = write_trace(tmp_path / "long.jsonl", [i * 500 for i in range(120)])  # a minute
    run = locust_runner("trace_replay.py", "--trace", str(trace), "-t", "3s", "--emulator-args", EMULATOR,
                        timeout_s=120)  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    lines = sorted(line_of(r) for r in run.records())
    assert 4 <= len(lines) <= 8 and lines == list(range(1, len(lines) + 1))  # the first rows, in order


def test_distributed_workers_split_the_rows_on_one_timeline(locust_runner) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner("trace_replay.py", "--trace", str(SAMPLE), "--processes", "2", "--emulator-args", EMULATOR,
                        timeout_s=120)  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    records = run.records()
    rows = rows_by_line(SAMPLE)
    assert sorted(line_of(r) for r in records) == sorted(rows)  # each row once, the run ended by itself
    by_worker: dict[str, int] = {}
    for r in records:
        by_worker[r["worker_id"]] = by_worker.get(r["worker_id"], 0) + 1
    assert sorted(by_worker.values()) == [18, 18]
    assert offset_errors_s(records, rows, 1.0).max() < OFFSET_BOUND_S


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (
            '{"timestamp": 0, "input_length": 10, "output_length": 2}\n{"timestamp": 5, "input_length": -3, '
            '"output_length": 2}\n',
            (),
            ":2: input_length -3: expected a whole number >= 1",
        ),
        ("", (), ": no requests — a Mooncake trace"),
        (None, (), "tokenstorm: trace_replay.py needs --trace FILE (a Mooncake JSONL trace)"),
        (
            '{"timestamp": 0, "input_length": 10, "output_length": 2}\n',
            ("--trace-speed", "0"),
            "tokenstorm: --trace-speed 0.0: must be > 0",
        ),
    ],
    ids=["bad-row", "empty", "no-trace", "bad-speed"],
)
def test_a_bad_trace_stops_the_run_before_any_traffic(locust_runner, tmp_path: Path, content: str | None,
                                                      args: tuple[str, ...], message: str) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    trace = tmp_path / "bad.jsonl"
    given = () if content is None else ("--trace", str(trace))
    if content is not None:
        trace.write_text(content)
    run = locust_runner("trace_replay.py", *given, *args, "-t", "10s", timeout_s=60)
    assert run.returncode == 3, run.output[-2000:]
    assert message in run.output and run.run_dir is None, run.output[-2000:]
    if content is not None and not args:  # the trace itself is what is wrong
        assert f"tokenstorm: --trace {trace}:" in run.output


def test_a_trace_given_to_another_locustfile_is_refused_not_ignored(locust_runner) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner("chat.py", "--trace", str(SAMPLE), "-t", "10s", timeout_s=60)
    assert run.returncode == 3 and run.run_dir is None, run.output[-2000:]
    assert "tokenstorm: --trace replays with locustfiles/trace_replay.py" in run.output
