"""The processes of a wire test: a pinned emulator, busy neighbours, and Locust as a user runs it.

Each start returns a handle whose ``stop``/context exit ends the process; every wait is bounded.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .capture import pinned

__all__ = ["BusyNeighbours", "PinnedEmulator", "stop_process", "two_cpus"]

ROOT = Path(__file__).resolve().parents[2]
_READY = "tokenstorm emulator (SIMULATED vLLM) listening on "

#: a neighbour: ~4 ms of CPU, then 0.3 ms asleep, until its deadline (issue #19's contention recipe)
_BUSY_LOOP = """
import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    spin = time.thread_time() + 0.004
    while time.thread_time() < spin:
        pass
    time.sleep(0.0003)
"""


def two_cpus() -> tuple[int, int] | None:
    """Two CPU cores this process may use (client's, server's), or ``None`` with fewer."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else None


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str], grace_s: float = 5.0) -> None:
    """Terminate ``proc`` and wait for it (killed after ``grace_s``)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class PinnedEmulator:
    """``python -m tokenstorm.emulator`` on one core (``cpu``; None: anywhere); ``url`` and ``port`` once started."""

    def __init__(self, *args: str, cpu: int | None = None, timeout_s: float = 20.0) -> None:
        cmd = [sys.executable, "-m", "tokenstorm.emulator", "--port", "0", "--exit-with-stdin", *args]
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self._proc = subprocess.Popen(pinned(cmd, cpu) if cpu is not None else cmd, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._log, env=env)  # fmt: skip
        try:
            self.url = self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        self.port = int(self.url.rsplit(":", 1)[1])

    def _wait_ready(self, timeout_s: float) -> str:
        assert self._proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        buf = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._proc.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(self._proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
                for line in buf.decode("utf-8", "replace").splitlines():
                    if line.startswith(_READY):
                        return line[len(_READY) :].strip()
        self._log.seek(0)
        raise RuntimeError(f"emulator did not start: {self._log.read().decode('utf-8', 'replace')[-500:]}")

    def stop(self) -> None:
        """End the emulator."""
        stop_process(self._proc)
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        self._log.close()

    def __enter__(self) -> PinnedEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class BusyNeighbours:
    """``count`` processes on core ``cpu`` that each spin ~4 ms and sleep 0.3 ms, for at most ``duration_s``."""

    def __init__(self, count: int, cpu: int, duration_s: float) -> None:
        self._procs: list[subprocess.Popen[bytes]] = []
        try:
            for _ in range(count):
                cmd = pinned([sys.executable, "-c", _BUSY_LOOP, str(duration_s)], cpu)
                self._procs.append(subprocess.Popen(cmd))
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """End every neighbour."""
        for proc in self._procs:
            stop_process(proc, grace_s=2.0)

    def __enter__(self) -> BusyNeighbours:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
