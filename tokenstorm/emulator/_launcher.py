"""Start the emulator as a child process on a free loopback port and stop it again."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import IO

from ._args import check_args

__all__ = ["EmulatorProcess"]

_READY_PREFIX = "tokenstorm emulator (SIMULATED vLLM) listening on "


class EmulatorProcess:
    """A running ``python -m tokenstorm.emulator``; ``url`` is where it listens.

    Use as a context manager, or call :meth:`stop`. Extra CLI flags (``--ttft-ms 300``,
    ``--fault drop=1``...) are passed through; ones it cannot run with raise ``ValueError``
    with the one line :func:`~tokenstorm.emulator.check_args` gives, before any process starts.
    """

    def __init__(self, *args: str, startup_timeout_s: float = 20.0) -> None:
        problem = check_args(args)
        if problem is not None:
            raise ValueError(problem)
        cmd = [sys.executable, "-m", "tokenstorm.emulator", "--port", "0", "--exit-with-stdin", *args]
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tokenstorm's folder
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        # stderr goes to a file, not a pipe: nobody reads a pipe after start-up, and a full one
        # (64 KB of warnings) would block the emulator's event loop on its next log line.
        self._log = tempfile.TemporaryFile(mode="w+", prefix="tokenstorm-emulator-")  # noqa: SIM115 (closed in stop)
        # Its own session: a terminal's Ctrl-C (SIGINT to the foreground process group) must not
        # kill the server under the users' in-flight requests; whoever started it stops it, after
        # the users. (--exit-with-stdin ends it if that process dies without stopping it.)
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.url = self._wait_ready(startup_timeout_s)

    def _wait_ready(self, timeout_s: float) -> str:
        assert self._proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        out: IO[str] = self._proc.stdout
        while time.monotonic() < deadline:
            line = out.readline()
            if line.startswith(_READY_PREFIX):
                return line[len(_READY_PREFIX) :].strip()
            if not line and self._proc.poll() is not None:
                self._log.seek(0)
                err = self._log.read()
                raise RuntimeError(f"emulator exited with {self._proc.returncode}: {err.strip()[-500:]}")
        self.stop()
        raise RuntimeError(f"emulator did not start within {timeout_s:g} s")

    def stop(self) -> None:
        """Terminate the emulator process."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()
        self._log.close()

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
