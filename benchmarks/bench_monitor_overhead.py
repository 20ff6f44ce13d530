"""Monitor overhead: CPU cost of GPU sampling at 1 Hz (target: < 1% of one core).

    python benchmarks/bench_monitor_overhead.py [--fake] [--samples 50] [--pcie-every 10]

Takes --samples NVML samples back to back, then prints the CPU time per sample, the share
of one core that costs at 1 Hz, and the slowest call's wall time. --fake uses the recorded
H200 stand-in (tests/fakes) to measure tokenstorm's own Python overhead without a GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fake", action="store_true")
    p.add_argument("--samples", type=int, default=50)
    p.add_argument("--pcie-every", type=int, default=10)
    args = p.parse_args()
    if args.fake:
        sys.path.insert(0, os.path.join(ROOT, "tests", "fakes"))
    from tokenstorm.monitors import NvmlSampler, ServerSample, parse_vllm_metrics  # noqa: F401

    sampler = NvmlSampler(pcie_every=args.pcie_every)
    sampler.sample()  # warm-up
    cpu, wall = [], []
    for _ in range(args.samples):
        c0, w0 = time.thread_time(), time.perf_counter()
        sampler.sample()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
    sampler.close()
    med_cpu = statistics.median(cpu)
    mean_cpu = statistics.fmean(cpu)  # PCIe reads every Nth sample make the mean the honest figure
    print(
        f"gpu sampling ({'fake NVML' if args.fake else 'NVML'}, {sampler.gpu_count} GPU(s), PCIe every "
        f"{args.pcie_every}): CPU per sample median {med_cpu * 1e3:.3f} ms, mean {mean_cpu * 1e3:.3f} ms; "
        f"wall median {statistics.median(wall) * 1e3:.2f} ms, max {max(wall) * 1e3:.2f} ms"
    )
    print(f"gpu sampling at 1 Hz: {mean_cpu:.3%} of one core (target < 1%)")


if __name__ == "__main__":
    main()
