"""Does ``reports compare`` tell noise from a real change? Issue 30's experiment on the built-in emulator.

    .venv/bin/python benchmarks/bench_compare_noise.py [--pairs 10] [--run-time 20] [--users 8]
        [--confidence 0.95] [--dir DIR] [--reuse]

Runs ``chat.py`` (``--users`` users, ``--run-time`` s) ``--pairs`` times against the built-in emulator as it
starts, and as many times with the emulator's time to first token raised by 50% (``--ttft-ms 375
--prefill-us-per-token 150`` against its 250 and 100), alternating the two so that whatever else the machine
does falls on both alike. Then:

- *identical pairs*: each plain run against the next (the last against the first): how many report any
  regression (target: at most 1 of 10);
- *TTFT +50% pairs*: each plain run against its slow twin: how many report a TTFT regression (target: at
  least 9 of 10);

each with the changes judged by their intervals at ``--confidence`` and, beside it, on the point estimates
(``--confidence 0``, what ``reports compare`` did before). ``--reuse``: compare the runs already in ``--dir``
(from an earlier call) instead of running them again.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tokenstorm.reports.compare.runs import Comparison, compare_runs  # noqa: E402
from tokenstorm.reports.compare.uncertainty import stat_of_key  # noqa: E402

#: the emulator's defaults (tokenstorm/emulator/_config.py: ttft_s 0.25, prefill_s_per_token 0.0001) raised by 50%
SLOW_TTFT = "--ttft-ms 375 --prefill-us-per-token 150"


def run_chat(run_dir: Path, users: int, run_time_s: int, emulator_args: str) -> Path:
    """One ``chat.py`` run against the built-in emulator; its run directory."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless",
           "--only-summary", "-u", str(users), "-r", str(users), "-t", f"{run_time_s}s", "--run-dir", str(run_dir),
           "--timing-verdict", "warn"]  # fmt: skip
    if emulator_args:
        cmd += ["--emulator-args", emulator_args]
    proc = subprocess.run(cmd, cwd=run_dir, capture_output=True, text=True, timeout=run_time_s + 120)
    found = sorted(p for p in run_dir.iterdir() if p.is_dir())
    if not found:
        raise SystemExit(f"no run directory in {run_dir}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return found[-1]


def regressed(c: Comparison, ttft_only: bool = False) -> list[str]:
    """The whole run's figures that regressed in the second column (TTFT ones only: ``ttft_only``)."""
    out = []
    for row in c.rows:
        if not row["regressed"][1]:
            continue
        stat = stat_of_key(row["key"])
        if ttft_only and not (stat is not None and stat[1] == "ttft"):
            continue
        out.append(f"{row['scope']}:{row['label']} {row['deltas'][1]:+.1f}%")
    return out


def main() -> int:
    """Run (or reuse) the runs, compare the pairs, print the counts."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--run-time", type=int, default=20, help="seconds per run (default 20)")
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--dir", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    p.add_argument("--reuse", action="store_true", help="compare the runs already in --dir")
    args = p.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="bench-compare-noise-"))
    plain, slow = [], []
    started = time.monotonic()
    for i in range(args.pairs):
        for kind, extra, into in (("plain", "", plain), ("slow", SLOW_TTFT, slow)):
            where = base / f"{kind}-{i:02d}"
            if args.reuse:
                into.append(sorted(d for d in where.iterdir() if d.is_dir())[-1])
                continue
            into.append(run_chat(where, args.users, args.run_time, extra))
            print(f"  run {kind} {i}: {into[-1].name} ({time.monotonic() - started:.0f} s)", flush=True)
    print(f"runs in {base}: {args.pairs} plain, {args.pairs} with TTFT +50%; chat.py, {args.users} users, "
          f"{args.run_time} s each")  # fmt: skip
    for confidence in (args.confidence, 0.0):
        said = f"at {confidence:.0%} confidence" if confidence else "on point estimates (--confidence 0)"
        noise, found = 0, 0
        for i in range(args.pairs):
            c = compare_runs([plain[i], plain[(i + 1) % args.pairs]], confidence=confidence)
            worse = regressed(c)
            noise += bool(worse)
            print(f"  identical pair {i}: {'REGRESSION ' + ', '.join(worse) if worse else 'no regression'}")
        for i in range(args.pairs):
            c = compare_runs([plain[i], slow[i]], confidence=confidence)
            worse = regressed(c, ttft_only=True)
            found += bool(worse)
            print(f"  TTFT +50% pair {i}: {'TTFT regression ' + ', '.join(worse) if worse else 'no TTFT regression'}")
        print(f"{said}: identical pairs reporting a regression: {noise} of {args.pairs} (target <= 1); "
              f"TTFT +50% pairs reporting a TTFT regression: {found} of {args.pairs} (target >= 9)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
