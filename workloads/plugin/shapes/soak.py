"""Long runs: report snapshots while the run goes on, and a warning before the disk fills.

A snapshot is ``python -m reports build RUN_DIR --live`` in a child process every
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

from ...rundir.procs import child_env

__all__ = ["DiskWatch", "Snapshots"]

log = logging.getLogger("tokenstorm")

#: warn when the run directory's file system has less free than this...
LOW_DISK_BYTES = 2 * 2**30
#: ... or less than this share of its size
LOW_DISK_SHARE = 0.05


class DiskWatch:
    """Says once, in one line, when the run directory's disk runs low (and again if it recovers then drops)."""

    def __init__(self, path: Path, usage: Callable[[Path], tuple[int, int, int]] = shutil.disk_usage) -> None:
        self.path = path
        self._usage = usage
        self.low = False

    def check(self) -> bool:
        """True while space is low; logs when it becomes so."""
        try:
            total, _used, free = self._usage(self.path)
        except OSError:
            return self.low
        low = free < LOW_DISK_BYTES or free < LOW_DISK_SHARE * total
        if low and not self.low:
            log.error("tokenstorm: disk space low for %s: %.1f GiB free of %.0f GiB — the run goes on, but records "
                      "are lost once it is full; free space or stop the run",
                      self.path, free / 2**30, total / 2**30)  # fmt: skip
        self.low = low
        return low


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
            log.warning("tokenstorm: a report snapshot failed (exit %s); the final report is built at the end "
                        "all the same: python -m reports build %s --live",
                        self._proc.returncode, self.run_dir)  # fmt: skip
        if self.stopped or self.every_s <= 0 or time.monotonic() < self._next:
            return
        if self._proc is not None and self._proc.poll() is None:
            return  # the previous one is still reading: skip this turn
        self._next = time.monotonic() + self.every_s
        cmd = [sys.executable, "-m", "reports", "build", str(self.run_dir), "--live"]
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
