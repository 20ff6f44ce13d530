"""Long runs: report snapshots while the run goes on, and a warning before the disk fills.

A snapshot is ``python -m tokenstorm.reports build RUN_DIR --live`` in a child process every
``--report-every`` seconds (default an hour): reading a day of records takes the report builder
seconds to minutes, which must not stall the event loop that times the streams. At most one
snapshot runs at a time, and a running one is stopped before the final report is written.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...rundir.procs import child_env

__all__ = ["DiskWatch", "Snapshots"]

log = logging.getLogger("tokenstorm")

#: warn when the run directory's file system has less free than this...
LOW_DISK_BYTES = 2 * 2**30
#: ... or less than this share of its size
LOW_DISK_SHARE = 0.05
#: the low-disk line waits this long for a first record, to estimate how long the space lasts from the run's rate
RATE_WAIT_S = 10.0


class DiskWatch:
    """Says once, in one line, when the run directory's disk runs low (and again if it recovers then drops),
    with an estimate of how long the free space lasts at the run's rate so far (``writer``: the run's
    record writer, its ``count`` and ``record_bytes_estimate``)."""

    def __init__(
        self,
        path: Path,
        usage: Callable[[Path], tuple[int, int, int]] = shutil.disk_usage,
        writer: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._usage = usage
        self._writer = writer
        self._clock = clock
        self._started = clock()
        self.low = False

    def check(self) -> bool:
        """True while space is low; logs when it becomes so."""
        try:
            total, _used, free = self._usage(self.path)
        except OSError:
            return self.low
        low = free < LOW_DISK_BYTES or free < LOW_DISK_SHARE * total
        if low and not self.low:
            lasts = self._lasts(free)
            if lasts is None:
                return low  # said once the first records give the run's rate
            log.error(
                "tokenstorm: disk space low for %s: %s free of %s — %s; the run stops (exit code 3) at "
                "the first write that fails",
                self.path,
                _size(free, 1),
                _size(total, 0),
                lasts,
            )
        self.low = low
        return low

    def _lasts(self, free: int) -> str | None:
        """How long ``free`` bytes last at the run's record rate so far, in words (None: wait for a rate)."""
        elapsed_s = self._clock() - self._started
        count = int(getattr(self._writer, "count", 0) or 0)
        if self._writer is None or (count == 0 and elapsed_s >= RATE_WAIT_S):
            return "how long that lasts is not known (no request has finished yet)"
        if count == 0:
            return None
        per_record = int(getattr(self._writer, "record_bytes_estimate", 1000))
        rate = count / max(elapsed_s, 1e-3)
        return (
            f"at the run's rate so far ({rate:.1f} records/s, about {_size(per_record, 0)} each on disk) "
            f"that lasts about {_duration(free / (rate * per_record))} (an estimate)"
        )


def _size(n_bytes: float, digits: int) -> str:
    """``n_bytes`` in GiB, MiB or KiB, whichever reads best."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.{digits}f} {unit}"
    return f"{n_bytes / 2**10:.0f} KiB"


def _duration(seconds: float) -> str:
    """``seconds`` as a person says it: 40 s, 12 min, 3.5 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Snapshots:
    """Rebuilds ``report.html`` from what is on disk every ``every_s`` seconds, in a child process."""

    def __init__(self, run_dir: Path, every_s: float) -> None:
        self.run_dir = run_dir
        self.every_s = every_s
        self._next = time.monotonic() + every_s
        self._proc: subprocess.Popen[bytes] | None = None
        self.started = 0
        self.stopped = False
        self._said_failure = False

    def tick(self) -> None:
        """Start a snapshot when one is due and none is running."""
        if self._proc is not None and self._proc.poll() not in (None, 0) and not self._said_failure:
            self._said_failure = True
            log.warning(
                "tokenstorm: a report snapshot failed (exit %s); the final report is built at the end "
                "all the same: python -m tokenstorm.reports build %s --live",
                self._proc.returncode,
                self.run_dir,
            )
        if self.stopped or self.every_s <= 0 or time.monotonic() < self._next:
            return
        if self._proc is not None and self._proc.poll() is None:
            return  # the previous one is still reading: skip this turn
        self._next = time.monotonic() + self.every_s
        cmd = [sys.executable, "-m", "tokenstorm.reports", "build", str(self.run_dir), "--live"]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env())
        self.started += 1

    def stop(self) -> None:
        """Stop a running snapshot and start no more (the final report follows)."""
        self.stopped = True
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
