"""Intervals at scale: time and extra memory of each interval over 20 million latencies.

    .venv/bin/python benchmarks/bench_intervals.py [--values 20000000] [--session-turns 5]

Draws the values once (lognormal, float64: 160 MB at 20M), then times each call of
:mod:`tokenstorm.reports.judging.intervals` and samples the process's RSS every millisecond while it runs: the peak
above the RSS before the call is the call's extra memory. Target (issue #30): no second full copy of the
values (< 160 MB extra at 20M; the clustered interval's codes, 8 bytes a value, are its own cost).
``numpy.percentile`` (which copies) is timed alongside for scale.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil

from tokenstorm.reports.judging import intervals as iv

MIB = 1 << 20


def measured(label: str, call: Callable[[], Any]) -> Any:
    """Run ``call``, print its wall time and the peak RSS above the RSS before it."""
    proc = psutil.Process()
    before = proc.memory_info().rss
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    result = call()
    elapsed_s = time.perf_counter() - start
    done.set()
    sampler.join()
    peak[0] = max(peak[0], proc.memory_info().rss)
    print(f"{label:<52} {elapsed_s:7.2f} s   peak RSS +{(peak[0] - before) / MIB:7.1f} MiB   {result}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=20_000_000)
    parser.add_argument("--session-turns", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    values = rng.lognormal(np.log(0.3), 0.5, args.values)
    values[:: args.values // 1000] = np.nan  # some unanswered requests
    sessions = np.arange(args.values, dtype=np.int64) // args.session_turns
    pairs = rng.lognormal(np.log(0.3), 0.5, args.values)
    rss_mib = psutil.Process().memory_info().rss / MIB
    print(f"{args.values:,} values ({values.nbytes / MIB:.0f} MiB), RSS {rss_mib:.0f} MiB")

    def interval(q_pct: float, clusters: np.ndarray | None = None) -> Callable[[], Any]:
        return lambda: iv.quantile_interval(values, q_pct, 0.95, clusters)

    # the clustered calls first, the mean before: the percentiles reorder the values in place (as documented)
    measured(
        "paired_change_interval_pct p99 (200k of the pairs)",
        lambda: iv.paired_change_interval_pct(values, pairs, "p99", 0.95),
    )
    measured(f"mean_interval, sessions of {args.session_turns}", lambda: iv.mean_interval(values, 0.95, sessions))
    measured(f"quantile_interval p99, sessions of {args.session_turns}", interval(99, sessions))
    measured("numpy.nanpercentile p99 (copies; for scale)", lambda: float(np.nanpercentile(values, 99)))
    measured("quantile_interval p50", interval(50))
    measured("quantile_interval p99", interval(99))
    measured("quantile_interval p99.9", interval(99.9))
    measured("mean_interval", lambda: iv.mean_interval(values, 0.95))
    measured("needed_samples_quantile p99 ≤ 1 s", lambda: iv.needed_samples_quantile(values, 99, 1.0, 0.95))


if __name__ == "__main__":
    main()
