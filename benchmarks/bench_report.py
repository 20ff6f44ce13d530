"""Report scale: build report.html/junit/summary from 1,000,000 request records on one core.

    .venv/bin/python benchmarks/bench_report.py [--records 1000000] [--itl-per-request 64]

Writes a synthetic run directory (two workloads, 2% failures, realistic ITL lists, 1 GPU
sampled at 1 Hz, server metrics at 1 Hz), then times ``build_report`` in a fresh process
pinned to one core and prints its wall time and peak RSS. Target: < 30 s and < 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def write_run(path: Path, n: int, itl_n: int) -> None:
    rng = np.random.default_rng(0)
    path.mkdir(parents=True, exist_ok=True)
    duration = max(60.0, n / 1000)
    starts = np.sort(rng.uniform(0, duration, n)) + 1_800_000_000.0
    ttft = rng.lognormal(np.log(0.3), 0.4, n)
    itl = rng.lognormal(np.log(0.02), 0.2, (n, itl_n)).round(6)
    ok = rng.random(n) > 0.02
    with (path / "requests.jsonl").open("w") as fh:
        for i in range(n):
            w = "chat" if i % 3 else "code"
            if ok[i]:
                e2e = ttft[i] + itl[i].sum()
                gaps = ",".join(map(str, itl[i]))
                fh.write(
                    f'{{"workload":"{w}","endpoint":"/v1/chat/completions","model":"m","stream":true,'
                    f'"start_epoch_s":{starts[i]:.6f},"request_id":"{i:032x}","user_id":{i % 500},'
                    f'"worker_id":"w{i % 4}","ok":true,"status_code":200,"error_category":null,"error_detail":null,'
                    f'"prompt_tokens":512,"output_tokens":{itl_n + 1},"requested_max_tokens":{itl_n + 1},'
                    f'"ttfc_s":{ttft[i] * 0.9:.6f},"ttft_s":{ttft[i]:.6f},"ttft_visible_s":{ttft[i]:.6f},'
                    f'"e2e_s":{e2e:.6f},"done_s":{e2e + 0.0001:.6f},"tpot_s":{(e2e - ttft[i]) / itl_n:.6f},'
                    f'"itl_gaps_s":[{gaps}],"token_events":{itl_n + 1},"reasoning_events":0,'
                    f'"finish_reason":"length","warmup":false,"schema":1}}\n'
                )
            else:
                fh.write(
                    f'{{"workload":"{w}","endpoint":"/v1/chat/completions","model":"m","stream":true,'
                    f'"start_epoch_s":{starts[i]:.6f},"ok":false,"status_code":503,"error_category":"http_5xx",'
                    f'"error_detail":"HTTP 503: overloaded","itl_gaps_s":[],"warmup":false,"schema":1}}\n'
                )
    t0 = starts[0]
    with (path / "gpu.jsonl").open("w") as fh, (path / "server.jsonl").open("w") as sh:
        for s in range(int(duration) + 1):
            fh.write(
                json.dumps(
                    {
                        "epoch_s": t0 + s,
                        "gpu": 0,
                        "uuid": "GPU-0",
                        "name": "H200",
                        "source": "nvml",
                        "util_gpu_pct": 95.0,
                        "mem_used_mib": 60000.0,
                        "power_w": 650.0,
                    }
                )
                + "\n"
            )
            sh.write(json.dumps({"epoch_s": t0 + s, "running": 250.0, "waiting": 10.0, "kv_cache_usage": 0.8}) + "\n")
    (path / "run.json").write_text(
        json.dumps(
            {
                "target": "http://gpu:8000",
                "model": "m",
                "simulated": False,
                "started_epoch_s": float(t0),
                "options": {},
                "records": n,
            }
        )
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--itl-per-request", type=int, default=64)
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {0})
        os.environ["OMP_NUM_THREADS"] = "1"
        import pyarrow as pa

        pa.set_cpu_count(1)
        pa.set_io_thread_count(1)
        sys.path.insert(0, str(ROOT))
        from reports import build_report

        t0 = time.perf_counter()
        result = build_report(args.child)
        wall = time.perf_counter() - t0
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"report: {args.records:,} records built in {wall:.1f} s on one core, peak RSS {peak_mib:,.0f} MiB; "
            f"verdict {result.summary.verdict}; report.html {result.report.stat().st_size / 1e3:.0f} kB"
        )
        return
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        t0 = time.perf_counter()
        write_run(run, args.records, args.itl_per_request)
        size = (run / "requests.jsonl").stat().st_size / 1e6
        print(f"report: wrote {args.records:,} records ({size:,.0f} MB JSONL) in {time.perf_counter() - t0:.0f} s")
        subprocess.run([sys.executable, __file__, "--records", str(args.records), "--child", str(run)], check=True)


if __name__ == "__main__":
    main()
