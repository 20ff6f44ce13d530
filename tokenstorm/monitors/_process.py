"""The in-run monitor in its own OS process, so it never delays the streams it measures.

Scraping vLLM's ``/metrics`` (~50 KB) and parsing it takes 15–25 ms of CPU each time; done
inside the load generator, that is an event-loop stall once per interval, and every stream
whose bytes arrive during it is read late: measured against vLLM, 1.6–1.8% of ITL gaps read
as 0 with the scrape in-process, 0.0–0.1% without it. A thread would not help (the GIL). So
the Locust master (or local runner) starts ``python -m tokenstorm.monitors collect`` beside itself; the
child appends to ``gpu.jsonl``/``server.jsonl`` and the parent only reads their last lines
when its web UI asks.

The child is in its own session (a terminal's Ctrl-C reaches the load test, which then stops
it after the users), takes a final sample on SIGTERM, and exits by itself if its parent dies.
Credentials (the API key, a URL's ``user:password``) travel in the environment as each target's
``Authorization`` value, never on the command line (visible in ``ps``); the URLs it gets carry none.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tokenstorm.workloads.rundir.faults import WriteFailed
from tokenstorm.workloads.rundir.procs import child_env

from ._collector import RunMonitor

__all__ = ["MonitorProcess", "run_collector"]

log = logging.getLogger("tokenstorm.monitors")

#: JSON object: target URL -> its Authorization header value
_AUTH_ENV = "TOKENSTORM_MONITOR_AUTH"
#: written by the child once its first samples are in (then removed by the parent)
READY_FILE = ".monitor-ready"
#: the child's exit code when a sample could not be written (a full disk); what and where: its stdout
WRITE_FAILED_EXIT = 75
_TAIL_BYTES = 16384


class MonitorProcess:
    """A running collector process for one run directory."""

    def __init__(
        self,
        run_dir: Path,
        *,
        target_url: str | None,
        gpu_monitor: str | None,
        interval_s: float,
        authorization: dict[str, str] | None = None,
        targets: list[tuple[str, str]] | None = None,
    ) -> None:
        self.run_dir = run_dir
        cmd = [
            sys.executable,
            "-m",
            "tokenstorm.monitors",
            "collect",
            "--run-dir",
            str(run_dir),
            "--interval",
            f"{interval_s:g}",
        ]
        for label, url in targets or ([("", target_url)] if target_url else []):
            cmd += ["--target", f"{label}={url}" if label else url]
        if gpu_monitor:
            cmd += ["--gpu-monitor", gpu_monitor]
        # The child must find this package even when the load test runs from a plain checkout.
        env = child_env({k: v for k, v in os.environ.items() if k != _AUTH_ENV})
        if authorization:
            env[_AUTH_ENV] = json.dumps(authorization)
        # stdout: the one line of a failed write (WRITE_FAILED_EXIT); the child's log goes to stderr.
        null, pipe = subprocess.DEVNULL, subprocess.PIPE
        self._proc = subprocess.Popen(cmd, env=env, stdin=null, stdout=pipe, start_new_session=True)
        self._write_failure: WriteFailed | None = None

    def wait_ready(self, timeout_s: float = 15.0) -> bool:
        """Wait until the child has taken its first samples (its baseline) or ended; ``False`` after
        ``timeout_s``. A run waits for it before its first request, so that counters on ``/metrics``
        (prefix-cache hits, preemptions) rise from a sample taken before any of its traffic."""
        marker = self.run_dir / READY_FILE
        deadline = time.monotonic() + timeout_s
        while not marker.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.02)  # cooperative under gevent: Locust has patched time.sleep
        marker.unlink(missing_ok=True)
        return True

    def latest(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The newest sample of each GPU and the newest server sample, from the files' tails."""
        gpus: dict[int, dict[str, Any]] = {}
        for row in _tail_rows(self.run_dir / "gpu.jsonl"):
            if "gpu" in row and not row.get("gap"):
                gpus[int(row["gpu"])] = row
        server: dict[str, Any] = {}
        for row in _tail_rows(self.run_dir / "server.jsonl"):
            if not row.get("gap"):
                server = row
        return [gpus[k] for k in sorted(gpus)], server

    def write_failure(self) -> WriteFailed | None:
        """What the child could not write, once it has exited for that (None: it did not)."""
        if self._write_failure is None and self._proc.poll() == WRITE_FAILED_EXIT and self._proc.stdout is not None:
            try:
                said = json.loads(self._proc.stdout.read() or b"{}")
                cause = OSError(int(said["errno"]), str(said["strerror"]))
                self._write_failure = WriteFailed(str(said["what"]), Path(said["path"]), cause)
            except (OSError, ValueError, KeyError, TypeError):
                self._write_failure = WriteFailed("GPU and server samples", self.run_dir, OSError(0, "unknown error"))
        return self._write_failure

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask for a last sample and wait for the process to end (killed after ``timeout_s``)."""
        proc = self._proc
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.write_failure()  # read before its pipe is closed
        if proc.stdout is not None:
            proc.stdout.close()


def _authorization_from_env() -> dict[str, str]:
    try:
        value = json.loads(os.environ.get(_AUTH_ENV) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _tail_rows(path: Path) -> list[dict[str, Any]]:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL_BYTES))
            lines = fh.read().splitlines()
    except OSError:
        return []
    if size > _TAIL_BYTES:
        lines = lines[1:]  # the first one is probably cut
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        if isinstance(row, dict):
            rows.append(row)
    return rows


def run_collector(
    run_dir: Path,
    *,
    target_url: str | None,
    gpu_monitor: str | None,
    interval_s: float,
    targets: list[tuple[str, str]] | None = None,
) -> int:
    """The child's loop (``python -m tokenstorm.monitors collect``): poll every interval until SIGTERM."""
    from ._gpu import open_gpu_sampler
    from ._nvml import NoGpuError

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    stop: list[bool] = []  # a plain flag: Event.set() from a signal handler can deadlock its wait()
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the load test decides when monitoring ends
    parent = os.getppid()
    local = None
    if gpu_monitor == "local":
        try:
            local = open_gpu_sampler()
        except NoGpuError as exc:
            log.warning("tokenstorm: notice — %s; running without GPU samples", exc)
    monitor = RunMonitor(
        run_dir,
        target_url=target_url,
        targets=targets,
        gpu_monitor=gpu_monitor if gpu_monitor != "local" else None,
        local_sampler=local,
        authorization=_authorization_from_env(),
    )
    try:
        return _collect(monitor, run_dir, interval_s, stop, parent)
    except OSError as exc:  # a sample that could not be written: the parent says it, once, and stops the run
        failed = exc if isinstance(exc, WriteFailed) else WriteFailed("GPU and server samples", run_dir, exc)
        said = {"what": failed.what, "path": str(failed.path), "errno": failed.errno, "strerror": failed.strerror}
        print(json.dumps(said), flush=True)
        return WRITE_FAILED_EXIT


def _collect(monitor: RunMonitor, run_dir: Path, interval_s: float, stop: list[bool], parent: int) -> int:
    """Poll every ``interval_s`` until SIGTERM or the parent's death; close the files."""
    next_t = time.monotonic()
    try:
        monitor.poll()  # the baseline, before the run's first request (the parent waits for it)
        (run_dir / READY_FILE).touch()
        while not stop and os.getppid() == parent:
            next_t += interval_s
            while not stop and time.monotonic() < next_t:
                time.sleep(min(0.05, max(0.0, next_t - time.monotonic())))
            if not stop:
                monitor.poll()
        monitor.poll()  # one last sample at the end of the run
    finally:
        monitor.close()
    return 0
