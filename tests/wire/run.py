"""A Locust run captured on the wire: the emulator and tcpdump on one core, ``locust -f chat.py`` on
the other (with busy neighbours for contention), every record matched to its exchange on the wire.
Used by the wire timing tests and ``benchmarks/bench_fidelity.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path

from tokenstorm.workloads.rundir import SUMMARY_FILE, RequestRecord, read_records

from .capture import Capture, pinned
from .compare import EventErrors, event_errors
from .procs import BusyNeighbours, PinnedEmulator, two_cpus

__all__ = ["RunFailed", "WireRun", "captured_run"]

ROOT = Path(__file__).resolve().parents[2]


class RunFailed(Exception):
    """The Locust run did not give records to compare (the message says why)."""


@dataclass
class WireRun:
    """A Locust run captured on the wire, its records set against their packets."""

    returncode: int
    output: str
    run_dir: Path
    records: list[RequestRecord]
    errors: list[EventErrors]
    dropped: int | None
    #: records the wire could not be set against (their exchange incomplete in the capture), and why
    unmatched: list[str]

    def summary(self) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.run_dir / SUMMARY_FILE).read_text())
        return data


def _locust(tmp_path: Path, host: str, users: int, tokens: int, seconds: int, cpu: int,
            timeout_s: float) -> tuple[int, str]:  # fmt: skip
    cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless", "--only-summary",
           "-u", str(users), "-r", str(users), "-t", f"{seconds}s", "--host", host, "--chat-turns", "1",
           "--chat-think-time", "0-0", "--wait-time", "0", "--max-tokens", str(tokens), "--ignore-eos",
           "--records", "jsonl", "--run-dir", str(tmp_path / "runs"), "--confidence", "0"]  # fmt: skip
    # Its own session, so that a run past its time is ended with every process it started.
    proc = subprocess.Popen(pinned(cmd, cpu), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise RunFailed(f"locust ran past {timeout_s:g} s: {out[-2000:]}") from None
    finally:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever it left behind
    return proc.returncode, out


def captured_run(
    tmp_path: Path,
    *,
    users: int,
    tokens: int,
    seconds: int,
    neighbours: int = 0,
    ttft_ms: int = 20,
    itl_ms: int = 3,
    max_num_seqs: int = 256,
) -> WireRun:
    """Emulator (TTFT 20 ms, ITL 3 ms unless asked) on one core, tcpdump beside it, Locust on the other core
    with ``neighbours`` busy loops; every record matched to its exchange on the wire."""
    cpus = two_cpus()
    if cpus is None:
        raise RunFailed("needs two CPU cores: one for the client, one for the server")
    client_cpu, server_cpu = cpus
    with ExitStack() as stack:
        timing = ("--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms), "--prefill-us-per-token", "0")
        emu = stack.enter_context(PinnedEmulator(*timing, "--max-num-seqs", str(max_num_seqs), cpu=server_cpu))
        cap = stack.enter_context(Capture(emu.port, tmp_path / "lo.pcap", cpu=server_cpu))
        if neighbours:
            stack.enter_context(BusyNeighbours(neighbours, client_cpu, duration_s=seconds + 30))
        rc, out = _locust(tmp_path, emu.url, users, tokens, seconds, client_cpu, timeout_s=seconds + 40)
    runs = sorted((tmp_path / "runs").glob("*"))
    if not runs:
        raise RunFailed(f"locust made no run directory (exit {rc}): {out[-3000:]}")
    run_dir = runs[-1]
    records = [r for r in read_records(run_dir) if r.ok and r.stream]
    wire = {ex.request_id: ex for ex in cap.exchanges() if ex.request_id}
    missing = [r.request_id for r in records if r.request_id not in wire]
    if missing:
        raise RunFailed(f"{len(missing)} of {len(records)} records have no exchange on the wire ({cap.log})")
    errors, unmatched = [], []
    for r in records:
        try:
            errors.append(event_errors(r, wire[r.request_id]))
        except ValueError as exc:  # the capture holds part of it (a segment tcpdump missed)
            unmatched.append(str(exc))
    matched = {e.request_id for e in errors}
    return WireRun(rc, out, run_dir, [r for r in records if r.request_id in matched], errors, cap.dropped, unmatched)
