"""Long-run helpers: the low-disk line comes once when space runs low, again only after recovery."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from workloads.plugin.shapes.soak import DiskWatch

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
