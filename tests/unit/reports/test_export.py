"""``python -m tokenstorm.reports export``: a folder that does not exist is said as such, and a write that fails
(a full disk) is one line naming the file, with no traceback and no ``.tmp`` file left."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.small_disk import needs_root, small_disk
from tokenstorm.reports.__main__ import main
from tokenstorm.workloads.rundir import SEGMENTS_DIR, RequestRecord, SegmentWriter

__all__ = ["small_disk"]  # the fixture, used by name


def _run_dir(where: Path, records: int) -> Path:
    writer = SegmentWriter(where / SEGMENTS_DIR, compact_in_child=False)
    for i in range(records):
        writer.write(
            RequestRecord(
                workload="code",
                endpoint="/v1/completions",
                model="m",
                stream=True,
                start_epoch_s=1_800_000_000.0 + i,
                request_id=f"{i:032x}",
                ok=True,
                itl_gaps_s=[0.01] * 100,
            )
        )
    writer.close()
    return where


def test_a_folder_that_does_not_exist_is_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "runs" / "no-such-run"
    assert main(["export", str(missing), "--jsonl"]) == 2
    err = capsys.readouterr().err
    assert err == f"tokenstorm.reports: {missing}: no such folder\n"


def test_a_run_without_segments_says_its_records_are_json_lines_already(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(tmp_path), "--jsonl"]) == 2
    assert (
        capsys.readouterr().err
        == f"tokenstorm.reports: {tmp_path} has no requests/ segments (its records are already JSON lines?)\n"
    )


@needs_root
def test_a_full_disk_is_one_line_naming_the_file(
    tmp_path: Path, small_disk: Callable[[int], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _run_dir(tmp_path / "run", 500)
    target = small_disk(16) / "requests.jsonl"
    assert main(["export", str(run_dir), "--jsonl", "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert err == f"tokenstorm.reports: disk full: could not write records to {target} (No space left on device)\n"
    assert list(target.parent.iterdir()) == []  # neither the file nor its .tmp
