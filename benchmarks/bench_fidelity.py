"""Timing fidelity under contention, against the wire: what the run says of its own clock, and whether it is right.

    sudo .venv/bin/python benchmarks/bench_fidelity.py [--neighbours 0,3,4] [--repeat 3] [--seconds 10]
        [--users 8] [--tokens 64] [--ttft-ms 20] [--itl-ms 3]

Issue #19's recipe: the emulator (TTFT 20 ms, ITL 3 ms) and a loopback capture (tcpdump) on one core,
``locust -f locustfiles/chat.py`` (8 users, 64 tokens, ``--ignore-eos``, wait 0) on the other, next
to N processes that each spin 4 ms and sleep 0.3 ms. Runs alternate over the neighbour counts. Per
run it prints what the run itself reports — records (the offered load falls with the client's share
of the CPU), the verdict, the share of token events and TTFTs it flagged as read late, run-queue
wait and loop lag — beside what the wire says: mean TTFT − the wire's (POST packet → first token
packet), mean TPOT / the wire's, the share of events whose stamp is more than 1 ms off their packet,
and how many of those the records counted as late. A run whose TTFT is off by more than 10 ms or
TPOT by more than 5% must not say PASSED.

``--users 1000 --tokens 32 --ttft-ms 300 --itl-ms 50 --neighbours 0`` is issue #32's bound, the whole Locust
path at 1,000 streams on one core (~20,000 token events/s): ``ttft_err_p99_ms`` is |TTFT − the wire's| at p99.

Needs root (tcpdump) and two cores; see ``tests/wire``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.wire import capture_unavailable  # noqa: E402 (a script run from anywhere)
from tests.wire.run import WireRun, captured_run  # noqa: E402
from tokenstorm.workloads.rundir import LATE_EVENT_S, read_load  # noqa: E402


def figures(run: WireRun, neighbours: int) -> dict[str, object]:
    """One row: the run's own account beside the wire's."""
    by_id = {r.request_id: r for r in run.records}
    events = off = flagged = 0
    ttft_err, tpot_rec, tpot_wire = [], [], []
    for e in run.errors:
        rec = by_id[e.request_id]
        events += len(e.errors_s)
        n_off = sum(x > LATE_EVENT_S for x in e.errors_s)
        off += n_off
        flagged += min(n_off, rec.late_events)
        ttft_err.append(e.ttft_error_s)
        if rec.tpot_s is not None and rec.output_tokens and rec.output_tokens > 1:
            tpot_rec.append(rec.tpot_s)
            tpot_wire.append(rec.tpot_s - (e.errors_s[-1] - e.errors_s[0]) / (rec.output_tokens - 1))
    summary = run.summary()
    fid = summary.get("timing_fidelity") or {}
    assert isinstance(fid, dict)
    clocks = [s.clock.get("local") or {} for s in read_load(run.run_dir)]
    runq = [c["runq_wait_ms_per_s"] for c in clocks if c.get("runq_wait_ms_per_s") is not None]
    lag = [c["loop_lag_p99_ms"] for c in clocks if c.get("loop_lag_p99_ms") is not None]
    return {
        "neighbours": neighbours,
        "records": len(run.records),
        "verdict": summary.get("verdict"),
        "late_pct": 100 * (fid.get("late_share") or 0.0),
        "ttft_late_pct": 100 * (fid.get("ttft_late_share") or 0.0),
        "runq_ms_s": statistics.fmean(runq) if runq else None,
        "loop_lag_p99_ms": statistics.fmean(lag) if lag else None,
        "ttft_err_ms": 1000 * statistics.fmean(ttft_err) if ttft_err else None,
        "ttft_err_p99_ms": 1000 * sorted(map(abs, ttft_err))[int(0.99 * (len(ttft_err) - 1))] if ttft_err else None,
        "tpot_ratio": statistics.fmean(tpot_rec) / statistics.fmean(tpot_wire) if tpot_wire else None,
        "off_pct": 100 * off / events if events else 0.0,
        "off_flagged_pct": 100 * flagged / off if off else 100.0,
    }


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return "-" if v is None else str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--neighbours", default="0,3", help="busy neighbours on the client's core, per run, alternating")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--users", type=int, default=8, help="Locust users (streams at once); 1000: issue #32's bound")
    ap.add_argument("--tokens", type=int, default=64, help="output tokens a request")
    ap.add_argument("--ttft-ms", type=int, default=20, help="the emulator's TTFT")
    ap.add_argument("--itl-ms", type=int, default=3, help="the emulator's ITL")
    args = ap.parse_args()
    why = capture_unavailable()
    if why:
        raise SystemExit(f"bench_fidelity: {why}")
    counts = [int(x) for x in args.neighbours.split(",")]
    columns = ("neighbours", "records", "verdict", "late_pct", "ttft_late_pct", "runq_ms_s", "loop_lag_p99_ms",
               "ttft_err_ms", "ttft_err_p99_ms", "tpot_ratio", "off_pct", "off_flagged_pct")  # fmt: skip
    print(" ".join(f"{c:>15}" for c in columns), flush=True)
    for _ in range(args.repeat):
        for n in counts:
            with tempfile.TemporaryDirectory(prefix="bench-fidelity-") as tmp:
                pace = {"ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms, "max_num_seqs": max(256, 2 * args.users)}
                run = captured_run(
                    Path(tmp), users=args.users, tokens=args.tokens, seconds=args.seconds, neighbours=n, **pace
                )
                row = figures(run, n)
            print(" ".join(f"{_cell(row[c]):>15}" for c in columns), flush=True)
            print(json.dumps(row), file=sys.stderr)


if __name__ == "__main__":
    main()
