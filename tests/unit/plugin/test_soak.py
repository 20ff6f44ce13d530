"""Long-run helpers: the low-disk line comes once when space runs low, again only after recovery."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tokenstorm.workloads.plugin.shapes.soak import DiskWatch

GIB = 2**30


def test_low_disk_is_said_once_per_drop(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    free = [100 * GIB, 1 * GIB, 0.5 * GIB, 50 * GIB, 1.5 * GIB]
    watch = DiskWatch(tmp_path, usage=lambda _p: (200 * GIB, 0, int(free.pop(0))))
    with caplog.at_level(logging.ERROR, logger="tokenstorm"):
        seen = [watch.check() for _ in range(5)]
    assert seen == [False, True, True, False, True]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("disk space low" in line and str(tmp_path) in line for line in lines)
    assert "1.0 GiB free of 200 GiB" in lines[0]


def test_a_share_of_a_small_disk_counts_too(tmp_path: Path) -> None:
    assert DiskWatch(tmp_path, usage=lambda _p: (1000 * GIB, 0, 40 * GIB)).check()  # 4% of 1 TB
    assert not DiskWatch(tmp_path, usage=lambda _p: (1000 * GIB, 0, 60 * GIB)).check()


class _Writer:
    """What DiskWatch reads of the run's record writer."""

    record_bytes_estimate = 1000

    def __init__(self) -> None:
        self.count = 0


def test_low_disk_says_how_long_the_space_lasts_at_the_runs_rate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    writer = _Writer()
    watch = DiskWatch(tmp_path, usage=lambda _p: (10 * GIB, 0, 600_000), writer=writer, clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, logger="tokenstorm"):
        now[0] = 2.0
        assert watch.check()  # low, but no record yet to give a rate: said once one is in
        assert caplog.records == []
        writer.count = 20  # 5 records/s of ~1,000 bytes: 600,000 bytes last 2 minutes
        now[0] = 4.0
        assert watch.check()
    (line,) = [r.getMessage() for r in caplog.records]
    assert "586 KiB free of 10 GiB" in line
    assert "at the run's rate so far (5.0 records/s, about 1 KiB each on disk) that lasts about 2 min" in line
    assert "(an estimate)" in line


def test_low_disk_without_records_is_said_after_a_while_all_the_same(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    watch = DiskWatch(tmp_path, usage=lambda _p: (10 * GIB, 0, 1000), writer=_Writer(), clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, logger="tokenstorm"):
        now[0] = 2.0
        watch.check()
        now[0] = 12.0
        watch.check()
    (line,) = [r.getMessage() for r in caplog.records]
    assert "how long that lasts is not known (no request has finished yet)" in line
