"""Soak, accelerated: a long multi-process run against the emulator, watching disk and memory.

    .venv/bin/python benchmarks/bench_soak.py [--minutes 20] [--processes 2] [--users 64]
        [--max-tokens 250] [--itl-ms 2] [--ttft-ms 20] [--sample-s 30]

Runs ``mixed.py`` headless (``--processes N``, ``--wait-time 0``, ``--ignore-eos``) against the
built-in emulator and prints, every ``--sample-s`` and at the end: requests per second, bytes per
record on disk (the run's ``requests/`` segments) and the RSS of every process of the run
(master, each worker, the emulator, the monitor process, a segment compactor while it runs).
Targets (issue #11): ≥ 200 requests/s for ≥ 20 minutes, ≤ 400 B per record for 250-token
answers, RSS flat within 10% from the first sample to the last one taken while traffic runs (the
master builds the final report after that). The
report's time and peak memory at scale are ``bench_report.py --records N``'s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _tree(pid: int) -> dict[str, float]:
    """RSS in MiB of ``pid`` and its descendants, named by role."""
    out: dict[str, float] = {}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for n, p in enumerate(procs):
        try:
            cmd = " ".join(p.cmdline())
            rss = p.memory_info().rss / 2**20
        except psutil.Error:
            continue
        role = ("emulator" if "-m tokenstorm.emulator" in cmd else "monitor" if "monitors" in cmd
                else "compactor" if "rundir.segments" in cmd
                else "master" if p.pid == pid else f"worker{n}")  # fmt: skip
        out[role] = rss
    return out


def _records(runs: Path) -> tuple[int, int]:
    """(bytes on disk, records) of the run's request records so far, whatever their format."""
    from tokenstorm.workloads.rundir import SEGMENTS_DIR, iter_batches

    dirs = [d for d in runs.glob("*") if d.is_dir()]
    if not dirs:
        return 0, 0
    files = [p for p in (dirs[0] / SEGMENTS_DIR).glob("seg-*")] + list(dirs[0].glob("requests.jsonl"))
    size = sum(p.stat().st_size for p in files if p.exists())
    try:
        n = sum(b.num_rows for b in iter_batches(dirs[0], columns=["ok"]))
    except (OSError, RuntimeError):
        n = 0
    return size, n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--users", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=250)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--itl-ms", type=float, default=2.0)
    p.add_argument("--sample-s", type=float, default=30.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tokenstorm-soak-") as tmp:
        runs = Path(tmp) / "runs"
        cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "mixed.py"), "--headless",
               "--processes", str(args.processes), "-u", str(args.users), "-r", str(args.users),
               "-t", f"{int(args.minutes * 60)}s", "--wait-time", "0", "--max-tokens", str(args.max_tokens),
               "--ignore-eos", "--chat-think-time", "0", "--contract-prompt-tokens", "uniform:500-2000",
               "--report-every", "0", "--run-dir", str(runs), "--only-summary",
               "--emulator-args", f"--ttft-ms {args.ttft_ms} --itl-ms {args.itl_ms} --prefill-us-per-token 0 "
               f"--max-num-seqs {max(256, args.users)}"]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        first: dict[str, float] = {}
        last: dict[str, float] = {}
        print(f"{'t s':>6} {'records':>9} {'req/s':>7} {'B/record':>9}  RSS MiB by process")
        prev_n, prev_t = 0, t0
        while proc.poll() is None:
            time.sleep(args.sample_s)
            size, n = _records(runs)
            now = time.monotonic()
            rss = _tree(proc.pid)
            if rss and now - t0 < args.minutes * 60:  # not once the run has ended: the final report is built
                first = first or rss
                last = rss
            rate = (n - prev_n) / (now - prev_t)
            prev_n, prev_t = n, now
            print(f"{now - t0:6.0f} {n:9d} {rate:7.1f} {size / max(n, 1):9.0f}  "
                  + ", ".join(f"{k} {v:.0f}" for k, v in sorted(rss.items())), flush=True)  # fmt: skip
        err = proc.stderr.read() if proc.stderr else ""
        size, n = _records(runs)
        elapsed = time.monotonic() - t0
        print(f"\nrecords {n} in {elapsed:.0f} s: {n / elapsed:.1f} requests/s; {size / max(n, 1):.0f} B per record "
              f"({size / 2**20:.1f} MiB)")  # fmt: skip
        for role in sorted(set(first) & set(last)):
            change = (last[role] / first[role] - 1) * 100
            print(f"RSS {role}: {first[role]:.0f} -> {last[role]:.0f} MiB ({change:+.1f}%)")
        if proc.returncode not in (0, 1):
            print(err[-2000:], file=sys.stderr)
        return 0


if __name__ == "__main__":
    sys.exit(main())
