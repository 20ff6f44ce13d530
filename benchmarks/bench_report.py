"""Report scale: build report.html/junit/summary from millions of request records on one core.

    .venv/bin/python benchmarks/bench_report.py [--records 20000000] [--itl-per-request 64]
        [--format parquet|jsonl] [--run-dir DIR]

Writes a synthetic run directory (two workloads, 2% failures, realistic ITL lists, 1 GPU
sampled at 1 Hz, server metrics at 1 Hz) in the records format asked for (``parquet``: the
segments a run writes by default, 100,000 records each; ``jsonl``: 0.1's ``requests.jsonl``),
then times ``build_report`` in a fresh process pinned to one core and prints its wall time and
peak RSS. Targets (issue #11): 20 million records in < 3 min and < 2 GB; 5 million < 700 MiB (issue #32).
``--run-dir DIR`` keeps the synthetic run there and reuses it when it is already written (two versions of
the report side by side on the same records: ``--child DIR`` of each checkout).
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


def write_segments(path: Path, n: int, itl_n: int, per_segment: int = 100_000) -> float:
    """Format-2 segments, written with the writer's own Parquet settings; returns the duration."""
    import pyarrow as pa

    from tokenstorm.workloads.rundir import SEGMENTS_DIR
    from tokenstorm.workloads.rundir.segments import SCHEMA, filled_columns, write_parquet_segment

    rng = np.random.default_rng(0)
    directory = path / SEGMENTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    duration = max(60.0, n / 1000)
    t0 = 1_800_000_000.0
    for seg, lo in enumerate(range(0, n, per_segment), start=1):
        m = min(per_segment, n - lo)
        ok = rng.random(m) > 0.02
        starts = t0 + np.sort(rng.uniform(lo, lo + m, m)) * duration / n
        ttft = rng.lognormal(np.log(0.3), 0.4, m)
        lens = np.where(ok, itl_n, 0)
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        gaps_us = np.round(rng.lognormal(np.log(0.02), 0.2, int(lens.sum())) * 1e6).astype(np.int32)
        e2e_all = np.full(m, np.nan)
        e2e_all[ok] = ttft[ok] + gaps_us.reshape(-1, itl_n).sum(axis=1) / 1e6 if itl_n else ttft[ok]
        cols = {
            "workload": np.where(np.arange(lo, lo + m) % 3, "chat", "code"), "endpoint": ["/v1/chat/completions"] * m,
            "model": ["m"] * m, "stream": np.ones(m, bool), "start_epoch_s": starts,
            "request_id": [f"{i:032x}" for i in range(lo, lo + m)], "user_id": np.arange(lo, lo + m) % 500,
            "worker_id": [f"w{i % 4}" for i in range(m)], "ok": ok, "status_code": np.where(ok, 200, 503),
            "error_category": pa.array(np.where(ok, None, "http_5xx"), pa.string()),
            "error_detail": pa.array(np.where(ok, None, "HTTP 503: overloaded"), pa.string()),
            "prompt_tokens": np.full(m, 512), "output_tokens": pa.array(np.where(ok, itl_n + 1, 0), mask=~ok),
            "ttfc_s": pa.array(ttft * 0.9, mask=~ok), "ttft_s": pa.array(ttft, mask=~ok),
            "e2e_s": pa.array(e2e_all, mask=~ok), "done_s": pa.array(e2e_all + 1e-4, mask=~ok),
            "tpot_s": pa.array((e2e_all - ttft) / itl_n, mask=~ok),
            "itl_gaps_us": pa.ListArray.from_arrays(offsets, gaps_us), "token_events": np.where(ok, itl_n + 1, 0),
            "finish_reason": pa.array(np.where(ok, "length", None), pa.string()), "warmup": np.zeros(m, bool),
            "schema": np.ones(m, np.int64),
        }  # fmt: skip
        arrays = [pa.array(cols[f.name], f.type) if f.name in cols and not isinstance(cols[f.name], pa.Array)
                  else cols.get(f.name, pa.nulls(m, f.type)) for f in SCHEMA]  # fmt: skip
        arrays = [a.cast(f.type) for a, f in zip(arrays, SCHEMA, strict=True)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)
        write_parquet_segment(directory / f"seg-{seg:06d}.parquet", iter([batch]), filled_columns([batch]))
    return duration


def write_run(path: Path, n: int, itl_n: int, fmt: str = "parquet") -> None:
    path.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        duration = write_segments(path, n, itl_n)
        _write_monitors(path, n, duration, 1_800_000_000.0)
        return
    rng = np.random.default_rng(0)
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
    _write_monitors(path, n, duration, float(starts[0]))


def _write_monitors(path: Path, n: int, duration: float, t0: float) -> None:
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
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    p.add_argument("--run-dir", type=Path, help="keep the synthetic run here; reuse it if already written")
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
        from tokenstorm.reports import build_report

        t0 = time.perf_counter()
        result = build_report(args.child)
        wall = time.perf_counter() - t0
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"report: {args.records:,} records built in {wall:.1f} s on one core, peak RSS {peak_mib:,.0f} MiB; "
            f"verdict {result.summary.verdict}; report.html {result.report.stat().st_size / 1e3:.0f} kB"
        )
        return
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        run = args.run_dir or Path(tmp) / "run"
        if not (run / "run.json").is_file():  # written last: a run dir with it is complete
            t0 = time.perf_counter()
            write_run(run, args.records, args.itl_per_request, args.format)
            size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file() and "requests" in str(p)) / 1e6
            print(
                f"report: wrote {args.records:,} records ({size:,.0f} MB {args.format}, "
                f"{size * 1e6 / args.records:.0f} B/record) in {time.perf_counter() - t0:.0f} s"
            )
        subprocess.run([sys.executable, __file__, "--records", str(args.records), "--child", str(run)], check=True)


if __name__ == "__main__":
    main()
