"""Records per master CPU-second: a distributed run's master, with two local workers, against the emulator.

    .venv/bin/python benchmarks/bench_master.py [--seconds 20] [--users 64] [--max-tokens 4] [--repeat 3]

Starts the built-in emulator (no TTFT, no ITL: many small requests), a master
(``locust -f locustfiles/chat.py --master --expect-workers 2 --headless``) and two workers
(``--worker``), each a process of its own, for a short chat load (``--wait-time 0``, a few output
tokens a request). It prints the records in the master's run directory, the master process's own
CPU seconds (user + system, read from ``/proc/PID/stat`` until it exits: start-up and the report
included; its children — the server monitor, a segment compactor — left out) and records per
master CPU-second — and the same over the steady window (5 s after the test starts to 1 s before its
end: records on disk and the master's CPU read at both ends), which leaves the start-up (Locust, the
report's imports) and the report out. With ``--repeat N`` it runs N times and prints the medians;
``--before DIR`` runs another checkout (a ``git worktree`` of an earlier commit) in turn with this one.
Issue #32's target: ≥ 20,000 records per master CPU-second.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tokenstorm.emulator import EmulatorProcess  # noqa: E402

#: the steady window: from this long after the test starts to a second before its end (records on disk are
#: pushed every 2 s: both ends lag alike)
STEADY_FROM_S = 5.0
_TICK_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _own_cpu_s(pid: int) -> float | None:
    """``pid``'s own user + system CPU seconds (its children's not counted); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK_S  # utime, stime (fields 14 and 15 of stat)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _records(runs: Path) -> int:
    from tokenstorm.workloads.rundir import iter_batches

    dirs = [d for d in runs.iterdir() if d.is_dir()]
    if not dirs:
        return 0
    return sum(b.num_rows for b in iter_batches(dirs[0], columns=["request_id"]))


def run_once(
    url: str, seconds: int, users: int, max_tokens: int, cwd: Path, tree: Path = ROOT
) -> tuple[int, float, float, float]:
    """One distributed run; returns (records stored, master CPU s, master wall s, steady records per CPU s)."""
    runs = cwd / "runs"
    port = _free_port()
    locustfile = str(tree / "locustfiles" / "chat.py")
    env = {**os.environ, "PYTHONPATH": str(tree)}  # that checkout's tokenstorm, not the one installed
    common = ["--wait-time", "0", "--max-tokens", str(max_tokens), "--chat-think-time", "0"]
    profile = (
        ["-m", "cProfile", "-o", os.environ["BENCH_MASTER_PROFILE"]] if os.environ.get("BENCH_MASTER_PROFILE") else []
    )
    master_cmd = [
        sys.executable,
        *profile,
        "-m",
        "locust",
        "-f",
        locustfile,
        "--master",
        "--expect-workers",
        "2",
        "--master-bind-host",
        "127.0.0.1",
        "--master-bind-port",
        str(port),
        "--headless",
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{seconds}s",
        "--host",
        url,
        "--run-dir",
        str(runs),
        "--only-summary",
        *common,
    ]
    worker_cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        locustfile,
        "--worker",
        "--master-host",
        "127.0.0.1",
        "--master-port",
        str(port),
        *common,
    ]
    log = (cwd / "master.log").open("w")
    started = time.monotonic()
    master = subprocess.Popen(master_cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)
    workers = [
        subprocess.Popen(worker_cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        for _ in range(2)
    ]
    cpu_s = 0.0
    marks: list[tuple[int, float]] = []  # (records on disk, master CPU s) at the steady window's ends
    startup_cpu_s = 0.0
    run_start: float | None = None
    while master.poll() is None:
        cpu_s = _own_cpu_s(master.pid) or cpu_s  # the last reading before it is reaped
        if run_start is None and runs.is_dir() and any(runs.iterdir()):
            run_start = time.monotonic()  # the run directory is made as the test starts
            startup_cpu_s = cpu_s
        if run_start is not None and len(marks) < 2:
            due = run_start + (STEADY_FROM_S if not marks else seconds - 1)
            if time.monotonic() >= due:
                marks.append((_records(runs), cpu_s))
        time.sleep(0.02)
    wall_s = time.monotonic() - started
    for w in workers:
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()
    log.close()
    if master.returncode not in (0, 1, 3, 5):  # a verdict on the run (5: timing untrusted, busy box), no crash
        tail = (cwd / "master.log").read_text()[-3000:]
        raise SystemExit(f"master exited {master.returncode}:\n{tail}")
    steady = 0.0
    if len(marks) == 2 and marks[1][1] > marks[0][1]:
        steady = (marks[1][0] - marks[0][0]) / (marks[1][1] - marks[0][1])
    # where the master's CPU went: before the test started (imports, Locust), and the rest (the load, the report)
    print(f"  master CPU: start-up {startup_cpu_s:.2f} s, the load and the report {cpu_s - startup_cpu_s:.2f} s")
    return _records(runs), cpu_s, wall_s, steady


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--users", type=int, default=64, help="users over both workers")
    p.add_argument("--max-tokens", type=int, default=4)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument(
        "--before",
        type=Path,
        default=None,
        help="another checkout (a git worktree of an earlier commit), run in turn with this one",
    )
    args = p.parse_args()
    trees = {"this": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    with EmulatorProcess(
        "--ttft-ms", "0", "--itl-ms", "0", "--prefill-us-per-token", "0", "--max-num-seqs", str(max(256, args.users))
    ) as emu:
        for n in range(args.repeat):
            for name, tree in trees.items():  # in turn: the box's other load falls on both alike
                with tempfile.TemporaryDirectory() as tmp:
                    records, cpu_s, wall_s, steady = run_once(
                        emu.url, args.seconds, args.users, args.max_tokens, Path(tmp), tree
                    )
                rate = records / cpu_s if cpu_s else 0.0
                figures[name].append((rate, steady))
                print(
                    f"{name} run {n + 1}: {records:,} records, master CPU {cpu_s:.2f} s (wall {wall_s:.1f} s): "
                    f"{rate:,.0f} records per master CPU-second; while the load ran: {steady:,.0f}",
                    flush=True,
                )
    if args.repeat > 1:
        for name, runs in figures.items():
            print(
                f"{name}: median of {args.repeat}: {statistics.median(r for r, _ in runs):,.0f} records per master "
                f"CPU-second (start-up and report included); while the load ran: "
                f"{statistics.median(s for _, s in runs):,.0f}"
            )


if __name__ == "__main__":
    main()
