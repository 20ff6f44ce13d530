"""The monitor process on a full disk: it stops at the first sample it cannot write and tells the
load test what and where (which then stops the run, as for any failed write); no traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.small_disk import needs_root, small_disk
from tokenstorm.monitors import MonitorProcess

__all__ = ["small_disk"]  # the fixture, used by name


@needs_root
def test_a_sample_that_does_not_fit_ends_the_monitor_and_says_where(small_disk: Callable[[int], Path]) -> None:
    from tokenstorm.emulator import EmulatorProcess

    disk = small_disk(16)
    try:
        with (disk / "filler").open("wb") as fh:
            while True:  # fill the disk to its last byte
                fh.write(bytes(4096))
                fh.flush()
    except OSError:
        pass
    with EmulatorProcess() as emu:
        monitor = MonitorProcess(disk, target_url=None, targets=[("", emu.url)], gpu_monitor=None, interval_s=0.2)
        assert not monitor.wait_ready(timeout_s=20)  # it ended instead of taking its first sample
        failed = monitor.write_failure()
        monitor.stop()
    assert failed is not None
    assert (
        str(failed) == f"disk full: could not write server samples to {disk / 'server.jsonl'} (No space left on device)"
    )
    assert (disk / "server.jsonl").read_bytes() == b""  # no torn line
