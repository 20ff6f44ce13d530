"""A run directory written by a newer tokenstorm: its report refuses it in one line naming the file (exit 2),
whichever of its versioned files is newer; nothing is written beside it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_run_dir, request


@pytest.mark.parametrize("newer", ["run.json", "server.jsonl", "requests.jsonl"])
def test_a_newer_file_in_a_run_is_one_line_naming_it_and_exit_2(tmp_path: Path, newer: str) -> None:
    run_dir = make_run_dir(tmp_path / "run", [request(i, 100.0 + i) for i in range(20)])
    (run_dir / "server.jsonl").write_text(json.dumps({"epoch_s": 1000.0, "running": 1.0, "schema": 1}) + "\n")
    path = run_dir / newer
    if newer == "run.json":
        path.write_text(json.dumps({**json.loads(path.read_text()), "schema": 7}))
    else:
        path.write_text(path.read_text().replace('"schema": 1', '"schema": 7').replace('"schema":1', '"schema":7'))
    built = subprocess.run(
        [sys.executable, "-m", "tokenstorm.reports", "build", str(run_dir)], capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 2 and "Traceback" not in built.stderr, built.stderr
    assert built.stderr.strip() == f"tokenstorm.reports: {path}: schema 7 is newer than this tokenstorm reads (1)"
    assert not (run_dir / "report.html").exists() and not (run_dir / "summary.json").exists()
