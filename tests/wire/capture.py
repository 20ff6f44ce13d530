"""A loopback packet capture (tcpdump) of one server port, started before and stopped after a run.

tcpdump stamps each packet in the kernel as it crosses ``lo``, the same moment, give or take
microseconds, that the receiving socket stamps it (``SO_TIMESTAMPNS``): a busy load generator
does not move these stamps, so they are the reference its own stamps are checked against.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from .exchanges import WireExchange, exchanges
from .pcap import TcpConnection, read_packets, tcp_connections

__all__ = ["Capture", "capture_unavailable", "pinned"]


def capture_unavailable() -> str | None:
    """Why a loopback capture cannot run here (a reason to skip with), or ``None`` when it can."""
    if not sys.platform.startswith("linux"):
        return "the wire check captures Linux loopback traffic (tcpdump -i lo)"
    if os.geteuid() != 0:
        return "capturing packets needs root (CI runs these tests as root)"
    if shutil.which("tcpdump") is None:
        return "tcpdump is not installed (apt-get install tcpdump; scripts/test.sh installs it)"
    return None


class Capture:
    """``tcpdump -i lo`` of TCP port ``port`` into ``path``; a context manager.

    ``cpu`` pins tcpdump to one core (so that it does not compete with the process under test); it
    ends by itself after ``max_s`` seconds at the latest.
    Entering returns once tcpdump has captured a probe connection: nothing sent after is missed.
    """

    def __init__(self, port: int, path: Path, cpu: int | None = None, host: str = "127.0.0.1", max_s: int = 300):
        self.port = port
        self._max_s = max_s
        self.path = path
        self.host = host
        self._cpu = cpu
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: list[str] = []
        self._reader: threading.Thread | None = None
        #: packets tcpdump reported as dropped by the kernel (its buffer overflowed); set by stop()
        self.dropped: int | None = None

    def start(self, timeout_s: float = 10.0) -> None:
        """Start tcpdump and wait until it captures."""
        # -U/--immediate-mode: each packet reaches the file at once (the probe below sees it);
        # -B 131072: a 128 MiB kernel buffer, so a busy machine does not make tcpdump drop packets;
        # -Z root: Debian's tcpdump would otherwise drop to a user that cannot write a test's tmp dir.
        # Under timeout(1), which passes our SIGINT on: it ends after max_s even if this process dies.
        cmd = ["timeout", "-s", "INT", str(self._max_s), "tcpdump", "-i", "lo", "-n", "-U", "--immediate-mode",
               "-s", "0", "-B", "131072", "--time-stamp-precision", "nano", "-Z", "root", "-w", str(self.path),
               f"tcp port {self.port}"]  # fmt: skip
        if self._cpu is not None:
            cmd = pinned(cmd, self._cpu)
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout_s
        while not any("listening on" in line for line in self._stderr):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"tcpdump did not start capturing: {' '.join(self._stderr)[-500:]}")
            time.sleep(0.02)
        # "listening" is printed once the filter is on the socket; a probe proves packets reach the file.
        if not self._probe(24, deadline):
            self.stop()
            raise RuntimeError(f"tcpdump captured nothing of a probe connection to port {self.port}")

    def _probe(self, size: int, deadline: float) -> bool:
        """Open and close a connection to the port; True once the file has grown past ``size`` bytes."""
        with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=2):
            pass
        while not self.path.exists() or self.path.stat().st_size <= size:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for raw in self._proc.stderr:
            self._stderr.append(raw.decode("utf-8", "replace").strip())

    def stop(self) -> None:
        """Stop tcpdump (its buffers flushed to the file) and note how many packets it dropped."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            # tcpdump stops at SIGINT without draining its kernel buffer: first make sure a probe sent
            # now has reached the file, so everything sent before it has too.
            self._probe(self.path.stat().st_size if self.path.exists() else 24, time.monotonic() + 5)
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._reader is not None:
            self._reader.join(5)
        if proc.stderr is not None:
            proc.stderr.close()
        for line in self._stderr:
            m = re.match(r"(\d+) packets? dropped by kernel", line)
            if m:
                self.dropped = int(m.group(1))
        self._proc = None

    @property
    def log(self) -> str:
        """What tcpdump printed (for assertion messages)."""
        return "\n".join(self._stderr)

    def connections(self) -> list[TcpConnection]:
        """The captured connections to the port, in the order they were opened."""
        return tcp_connections(read_packets(self.path), self.port)

    def exchanges(self) -> list[WireExchange]:
        """Every request/response exchange captured, connection by connection."""
        return [ex for conn in self.connections() for ex in exchanges(conn)]

    def __enter__(self) -> Capture:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pinned(cmd: list[str], cpu: int) -> list[str]:
    """``cmd`` run on one CPU core, its threads and children too (``taskset -c``, without util-linux)."""
    pin = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); os.execvp(sys.argv[2], sys.argv[2:])"
    return [sys.executable, "-c", pin, str(cpu), *cmd]
