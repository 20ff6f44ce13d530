"""What README promises about the records' formats: segments by default, exportable as JSON lines
with one command; ``--records jsonl`` writes ``requests.jsonl`` directly."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT
from tokenstorm.workloads.rundir import read_records

ARGS = ("-u", "2", "-r", "2", "-t", "4s", "--chat-think-time", "0-0.1", "--max-tokens", "8")


def test_segments_by_default_exported_as_json_lines_and_jsonl_on_request(locust_runner, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner("chat.py", *ARGS)
    assert run.returncode == 0, run.output[-3000:]
    assert (run.run_dir / "requests").is_dir() and not (run.run_dir / "requests.jsonl").exists()
    records = [r.as_row() for r in read_records(run.run_dir)]
    assert records
    out = subprocess.run([sys.executable, "-m", "tokenstorm.reports", "export", str(run.run_dir), "--jsonl"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in (run.run_dir / "requests.jsonl").read_text().splitlines()]
    assert [r["request_id"] for r in lines] == [r["request_id"] for r in records]
    assert lines[0]["itl_gaps_s"] == records[0]["itl_gaps_s"]

    jsonl = locust_runner("chat.py", *ARGS, "--records", "jsonl")
    assert jsonl.returncode == 0, jsonl.output[-3000:]
    assert (jsonl.run_dir / "requests.jsonl").stat().st_size > 0 and not (jsonl.run_dir / "requests").exists()
    assert len(jsonl.records()) == len((jsonl.run_dir / "requests.jsonl").read_text().splitlines())
