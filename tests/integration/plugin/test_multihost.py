"""Distributed runs across hosts: the master, two workers and the emulated server each on a host of its own
(network namespaces on one bridge, tests/lan.py), started with the command lines README shows. Every
worker's records reach the master's run directory and its web UI lists the workers; a worker whose cable is
pulled mid-run is named, what it shipped before is kept, and the run exits 4."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen

import pytest

from tests.conftest import ROOT
from tests.lan import Host, Lan, lan, lan_unavailable
from tokenstorm.workloads.rundir import read_records

_UNAVAILABLE = lan_unavailable()
pytestmark = pytest.mark.skipif(_UNAVAILABLE is not None, reason=_UNAVAILABLE or "")

TOKENSTORM = [sys.executable, "-m", "tokenstorm"]
EMULATOR_PORT = 8000
#: small, quick requests; a few seconds' run judged at 95% would be inconclusive (exit 6), not the point here
LOAD = ["--max-tokens", "16", "--chat-think-time", "0-0.2", "--timing-verdict", "warn", "--confidence", "0"]


@pytest.fixture
def net() -> Iterator[Lan]:
    with lan() as made:
        yield made


def _emulator(host: Host) -> Popen[str]:
    """``python -m tokenstorm.emulator`` listening on ``host``'s address (it ends when this process's pipe closes)."""
    argv = [sys.executable, "-m", "tokenstorm.emulator", "--host", host.address, "--port", str(EMULATOR_PORT)]
    proc = subprocess.Popen(
        host.command([*argv, "--ttft-ms", "30", "--itl-ms", "5", "--exit-with-stdin"]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert "listening on" in ready, ready
    return proc


def _as_written(marker: str, values: dict[str, str]) -> list[str]:
    """README's distributed command line that contains ``marker``, its comment dropped, with each word (a
    placeholder, the locustfile) or option's value named in ``values`` replaced: the line a user copies."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("### Distributed", 1)[1]
    (line,) = [line for line in section.split("```")[1].splitlines() if marker in line]
    words = shlex.split(line, comments=True)
    assert words[:2] == ["tokenstorm", "run"], line
    assert set(values) <= set(words), f"README's line lacks {set(values) - set(words)}: {line}"
    argv = [w if w.startswith("-") else values.get(w, w) for w in words]
    for i, word in enumerate(words[:-1]):
        if word.startswith("-") and word in values:
            argv[i + 1] = values[word]
    return [*TOKENSTORM, *argv[1:]]


def _start(host: Host, argv: list[str], cwd: Path) -> Popen[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(host.command(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _master(host: Host, emulator: Host, cwd: Path, users: int, run_time: str, *, web_ui: bool = False) -> Popen[str]:
    """The master started with README's line for two workers, ``users`` and ``run_time`` against the emulator;
    with ``web_ui``, its web UI starts the run (``--autostart``) instead of ``--headless``."""
    url = f"http://{emulator.address}:{EMULATOR_PORT}"
    values = {
        "mixed": "chat",
        "--expect-workers": "2",
        "-u": str(users),
        "-r": str(users),
        "-t": run_time,
        "--host": url,
    }
    argv = _as_written("--master ", values)
    if web_ui:
        at = argv.index("--headless")
        argv[at : at + 1] = ["--autostart", "--autoquit", "0"]
    return _start(host, [*argv, "--run-dir", str(cwd / "runs"), *LOAD], cwd)


def _worker(host: Host, master: Host, cwd: Path) -> Popen[str]:
    """A worker started with README's line: the locustfile and the master's address, nothing else."""
    return _start(host, _as_written("--worker", {"mixed": "chat", "MASTER_HOST": master.address}), cwd)


def _stop(procs: list[Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _load_seen(emulator: Host, requests: int, timeout_s: float = 60) -> None:
    """Wait until the emulator has answered ``requests`` requests (asked from its own host)."""
    deadline = time.monotonic() + timeout_s
    while len(json.loads(emulator.get(f"http://{emulator.address}:{EMULATOR_PORT}/emulator/truth"))) < requests:
        assert time.monotonic() < deadline, f"fewer than {requests} requests reached the emulator in {timeout_s} s"
        time.sleep(0.5)


def test_two_workers_on_other_hosts_ship_every_record_and_show_in_the_web_ui(net: Lan, tmp_path: Path) -> None:
    emu, master_host = net.add_host("emu", 10), net.add_host("master", 11)
    worker_hosts = [net.add_host("w1", 12), net.add_host("w2", 13)]
    procs = [_emulator(emu)]
    try:
        # The web UI (on the master's loopback, as tokenstorm binds it) starts the run once both workers are in.
        master = _master(master_host, emu, tmp_path, 4, "8s", web_ui=True)
        procs.append(master)
        procs += [_worker(h, master_host, tmp_path / h.namespace) for h in worker_hosts]
        listed: list[dict] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and master.poll() is None:
            try:
                stats = json.loads(master_host.get("http://127.0.0.1:8089/stats/requests", timeout_s=5))
            except OSError:
                stats = {}  # not up yet
            listed = stats.get("workers", [])
            if len(listed) == 2 and all(w["state"] == "running" and w["user_count"] > 0 for w in listed):
                break
            time.sleep(0.5)
        out, _ = master.communicate(timeout=90)
    finally:
        _stop(procs)
    assert master.returncode == 0, out[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = [r.as_row() for r in read_records(run_dir)]
    shipped = {r["worker_id"] for r in records}
    assert len(shipped) == 2, out[-3000:]  # both remote workers' records are in the master's run directory
    assert {w["id"] for w in listed} == shipped, listed  # and the web UI listed those two workers, running
    assert sum(w["user_count"] for w in listed) == 4
    assert all(r["ok"] for r in records if r["error_category"] != "cancelled"), records[:3]


def test_a_worker_cut_off_mid_run_is_named_and_its_shipped_records_kept(net: Lan, tmp_path: Path) -> None:
    emu, master_host = net.add_host("emu", 10), net.add_host("master", 11)
    kept, cut = net.add_host("w1", 12), net.add_host("w2", 13)
    procs = [_emulator(emu)]
    try:
        master = _master(master_host, emu, tmp_path, 6, "24s")
        procs.append(master)
        kept_worker = _worker(kept, master_host, tmp_path / "kept")
        cut_worker = _worker(cut, master_host, tmp_path / "cut")
        procs += [kept_worker, cut_worker]
        _load_seen(emu, 20)  # both workers connected (the run waits for them) and sending
        time.sleep(4)  # several record batches shipped: ~10 s into the 24 s run
        net.cut(cut)
        cut_epoch_s = time.time()
        out, _ = master.communicate(timeout=90)
        cut_out, _ = cut_worker.communicate(timeout=60)
    finally:
        _stop(procs)
    assert master.returncode == 4, out[-3000:]  # half the load lost: the run is incomplete
    (run_dir,) = (p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    meta = json.loads((run_dir / "run.json").read_text())
    (lost_id,) = meta["workers_lost"]
    assert f"worker {lost_id} vanished" in out, out[-3000:]
    # The lost worker is the one on the cut host: it wrote what never reached the master under its id (in the
    # master's --run-dir, as its own machine names it: here the same file system).
    assert f"lost the master at {master_host.address}:5557" in cut_out, cut_out[-2000:]
    assert f"unsent-{lost_id}.jsonl" in cut_out, cut_out[-2000:]
    records = [r.as_row() for r in read_records(run_dir)]
    from_lost = [r for r in records if r["worker_id"] == lost_id]
    lost = meta["workers_lost"][lost_id]
    assert cut_epoch_s < lost["detected_epoch_s"] < cut_epoch_s + 15, (cut_epoch_s, lost)
    assert len(from_lost) > 0  # what it shipped before the cut is kept
    assert max(r["start_epoch_s"] for r in from_lost) < cut_epoch_s
    # The other worker carried the run on to its end.
    others = [r for r in records if r["worker_id"] != lost_id]
    assert others and max(r["start_epoch_s"] for r in others) > cut_epoch_s + 5
