"""A disk that fills mid-run is a run-level fault: the run stops within seconds of the first failed
write, says in one line what could not be written and where, keeps every record written before it
readable, leaves no ``.tmp`` file, marks ``run.json`` failed and exits 3 (issue #28, item 1).

Each run writes into a small tmpfs mounted for the test (root only; CI runs as root).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT
from tests.small_disk import needs_root, small_disk
from tokenstorm.workloads.rundir import EXIT_RUN_FAILED, read_records, read_run_meta

__all__ = ["small_disk"]  # the fixture, used by name

pytestmark = needs_root

#: what the line may name: records, or a sample that happened to be the first write not to fit
WHAT = "(records|load samples|server samples)"


def _run_until_full(disk: Path, emu_url: str, *extra: str) -> tuple[int, list[tuple[float, str]], float]:
    """Run code_completion.py into ``disk`` with -t 60s; (exit code, stderr lines with their arrival
    time, when the process ended)."""
    locustfile = str(ROOT / "locustfiles" / "code_completion.py")
    flags = ["--headless", "-u", "8", "-r", "8", "-t", "60s", "--wait-time", "0", "--max-tokens", "16"]
    cmd = [sys.executable, "-m", "locust", "-f", locustfile, *flags, "--host", emu_url, "--run-dir", str(disk), *extra]
    proc = subprocess.Popen(
        cmd, cwd=disk.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=90)  # never a hang: the run is 60 s long at most, and this disk fills in seconds
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail("the run did not end within 90 s:\n" + "\n".join(line for _, line in lines[-40:]))
    ended = time.monotonic()
    reader.join(timeout=10)
    assert proc.stderr is not None
    proc.stderr.close()
    return rc, lines, ended


def _check_the_failed_run(disk: Path, rc: int, lines: list[tuple[float, str]], ended: float) -> Path:
    """What every disk-full run must show; returns its run directory."""
    text = "\n".join(line for _, line in lines)
    (run_dir,) = disk.iterdir()
    said = [(t, line) for t, line in lines if "could not write" in line]
    assert len(said) == 1, text  # one line, however many writes failed after it
    said_at, line = said[0]
    # Records fill this disk first as a rule (a push holds 2 s of them); a sample line may be the one that does not fit.
    said_right = re.fullmatch(
        rf"RUN_FAILED — (disk full: could not write {WHAT} to {re.escape(str(run_dir))}/\S+ "
        r"\(No space left on device\)); the run stops, .* \(exit code 3\)",
        line,
    )
    assert said_right, line
    assert rc == EXIT_RUN_FAILED, text
    assert ended - said_at < 5.0, f"ended {ended - said_at:.1f} s after the first failed write"
    assert "Traceback" not in text, text
    assert "SLOs held" not in text and "PASSED" not in text  # no verdict on partial data
    # Nothing half-written is left: no temporary file, no reserve.
    leftovers = [p.name for p in run_dir.rglob("*") if "tmp" in p.name or p.name == ".reserve"]
    assert leftovers == [], leftovers
    assert not (run_dir / "report.html").exists() and not (run_dir / "summary.json").exists()
    meta = read_run_meta(run_dir)
    assert meta is not None and meta.status == "failed", meta
    assert meta.problem == said_right.group(1)
    return run_dir


def test_jsonl_records_on_a_full_disk_stop_the_run_and_stay_readable(small_disk: Callable[[int], Path]) -> None:
    from tokenstorm.emulator import EmulatorProcess

    disk = small_disk(160)
    with EmulatorProcess("--ttft-ms", "20", "--itl-ms", "5") as emu:
        rc, lines, ended = _run_until_full(disk, emu.url, "--records", "jsonl")
    run_dir = _check_the_failed_run(disk, rc, lines, ended)
    data = (run_dir / "requests.jsonl").read_bytes()
    assert data.endswith(b"\n")  # no torn last line
    rows = [json.loads(line) for line in data.splitlines()]  # every line whole
    records = list(read_records(run_dir))
    assert len(records) == len(rows) >= 5
    meta = read_run_meta(run_dir)
    assert meta is not None and meta.records == len(records)


def test_segments_on_a_full_disk_stop_the_run_and_stay_readable(small_disk: Callable[[int], Path]) -> None:
    from tokenstorm.emulator import EmulatorProcess

    disk = small_disk(160)
    with EmulatorProcess("--ttft-ms", "20", "--itl-ms", "5") as emu:
        rc, lines, ended = _run_until_full(disk, emu.url)
    run_dir = _check_the_failed_run(disk, rc, lines, ended)
    segments = sorted((run_dir / "requests").iterdir())
    assert segments, "no segment at all"
    on_disk = 0
    for segment in segments:
        if segment.suffix == ".parquet":
            on_disk += pq.ParquetFile(segment).metadata.num_rows
        else:  # whole batches only: a strict read to the end of the file, no torn batch
            on_disk += ipc.open_stream(pa.memory_map(str(segment))).read_all().num_rows
    records = list(read_records(run_dir))
    assert len(records) == on_disk >= 5
    meta = read_run_meta(run_dir)
    assert meta is not None and meta.records == len(records)
