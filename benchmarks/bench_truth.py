"""Timing truth against a real vLLM server: the records beside vLLM's own server-side means.

    .venv/bin/python benchmarks/bench_truth.py --host http://127.0.0.1:8000 [--users 8]
        [--max-tokens 64] [--run-time 12s] [--processes 2] [--no-server-metrics] [--repeat 3]

Drives the server with ``locustfiles/chat.py`` exactly as a user would (headless, single-turn
chat from a ShareGPT file of 128 prompts of ~45 words, ``--wait-time 0``, ``--ignore-eos``),
scrapes vLLM's ``/metrics`` before and after, and prints, per run:

* the records' mean TTFT and TPOT (successful, non-cancelled requests) beside vLLM's own
  ``_sum``/``_count`` deltas of ``vllm:time_to_first_token_seconds`` and
  ``vllm:request_time_per_output_token_seconds`` (and ``vllm:inter_token_latency_seconds``
  beside the records' mean ITL gap) — the buckets are too coarse at CPU speeds for medians;
* "bunched" records (more than half of their ITL gaps are exactly 0: the stream was read
  at once, not as it arrived) and records breaking ``ttfc <= ttft <= e2e <= done``.

What to expect: the client's TTFT includes the HTTP request's trip through the API server
(tokenising, scheduling) that vLLM's TTFT starts after, so it sits a few ms above vLLM's;
TPOT is measured between the same two tokens on both sides, so it agrees within a few %.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workloads.rundir import RequestRecord, read_records  # noqa: E402 (a script run from anywhere)

HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
}
_PROSE = (
    "the supplier shall deliver goods within thirty days of order date buyer may terminate agreement notice "
    "writing party liable damages arising breach confidential information services fees invoice payment "
    "warranty period software license term renewal clause schedule"
)
WORDS = _PROSE.split()


def scrape_histogram_totals(host: str) -> dict[str, float]:
    """``_sum`` and ``_count`` of each histogram above, summed over label sets."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"{host.rstrip('/')}/metrics", timeout=10).read().decode()
    wanted = {f"{name}{suffix}" for name in HISTOGRAMS.values() for suffix in ("_sum", "_count")}
    totals: dict[str, float] = dict.fromkeys(wanted, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                totals[sample.name] += sample.value
    return totals


def server_means(before: dict[str, float], after: dict[str, float]) -> dict[str, float | None]:
    """vLLM's mean of each histogram over the interval between two scrapes."""
    out: dict[str, float | None] = {}
    for key, name in HISTOGRAMS.items():
        count = after[f"{name}_count"] - before[f"{name}_count"]
        out[key] = (after[f"{name}_sum"] - before[f"{name}_sum"]) / count if count > 0 else None
    return out


def record_figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over the successful records, and the two timing-defect counts."""
    done = [r for r in records if r["ok"]]
    gaps = [g for r in done for g in r["itl_gaps_s"]]
    bunched = [r for r in done if r["itl_gaps_s"] and sum(g == 0 for g in r["itl_gaps_s"]) > len(r["itl_gaps_s"]) / 2]
    broken = [r for r in records if timing_violation(r)]
    return {
        "records": len(done),
        "ttft": statistics.fmean(r["ttft_s"] for r in done) if done else None,
        "tpot": statistics.fmean(r["tpot_s"] for r in done if r["tpot_s"] is not None) if done else None,
        "itl": statistics.fmean(gaps) if gaps else None,
        "ttft_median": statistics.median(r["ttft_s"] for r in done) if done else None,
        "bunched": len(bunched),
        "zero_gap_pct": 100.0 * sum(g == 0 for g in gaps) / len(gaps) if gaps else 0.0,
        "itl_p99": statistics.quantiles(gaps, n=100)[98] if len(gaps) > 100 else None,
        "order_violations": len(broken),
    }


def timing_violation(r: dict[str, Any]) -> bool:
    """Whether a record breaks ``ttfc <= ttft <= e2e <= done`` or has a negative gap."""
    return RequestRecord.from_dict(r).check_timing() is not None


def write_sharegpt(path: Path, n: int = 128, words: int = 45, seed: int = 7) -> None:
    """A ShareGPT file of ``n`` single-turn prompts of about ``words`` words."""
    rng = random.Random(seed)
    data = [
        {"conversations": [{"from": "human", "value": " ".join(rng.choice(WORDS) for _ in range(words))}]}
        for _ in range(n)
    ]
    path.write_text(json.dumps(data))


def run_once(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    dataset = workdir / "prompts.json"
    write_sharegpt(dataset)
    cmd = [
        sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless", "--only-summary",
        "-u", str(args.users), "-r", str(args.users), "-t", args.run_time, "--host", args.host, "--model", args.model,
        "--dataset", str(dataset), "--chat-turns", "1", "--chat-think-time", "0-0", "--wait-time", "0",
        "--max-tokens", str(args.max_tokens), "--ignore-eos", "--run-dir", str(workdir / "runs"),
    ]  # fmt: skip
    if args.processes:
        cmd += ["--processes", str(args.processes)]
    if args.monitor_interval:
        cmd += ["--monitor-interval", str(args.monitor_interval)]
    if args.no_server_metrics:
        cmd.append("--no-server-metrics")
    before = scrape_histogram_totals(args.host)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=600)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = scrape_histogram_totals(args.host)
    cpu_s = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-2000:])
    run_dir = sorted((workdir / "runs").glob("*"))[-1]
    records = [r.as_row() for r in read_records(run_dir)]
    figures = record_figures(records)
    figures["cpu_s"] = cpu_s
    return {"client": figures, "server": server_means(before, after), "exit": proc.returncode}


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1000:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", required=True, help="a real vLLM server, e.g. http://127.0.0.1:8000")
    ap.add_argument("--model", default="", help="served model name (default: the first of /v1/models)")
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--run-time", default="12s")
    ap.add_argument("--processes", type=int, default=0)
    ap.add_argument("--no-server-metrics", action="store_true")
    ap.add_argument("--monitor-interval", type=float, default=0.0, help="seconds between /metrics scrapes")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    columns = ("run", "recs", "TTFT cli", "TTFT vllm", "diff", "TPOT cli", "TPOT vllm", "ratio", "ITL cli",
               "ITL vllm", "bunched", "order", "cli CPU s", "0-gaps", "ITL p99")  # fmt: skip
    print(" ".join(f"{c:>9}" for c in columns))
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-truth-") as tmp:
            res = run_once(args, Path(tmp))
        c, s = res["client"], res["server"]
        diff = None if c["ttft"] is None or s["ttft"] is None else c["ttft"] - s["ttft"]
        ratio = f"{c['tpot'] / s['tpot']:.3f}" if c["tpot"] and s["tpot"] else "n/a"
        cells = (
            i + 1, c["records"], _ms(c["ttft"]), _ms(s["ttft"]), _ms(diff), _ms(c["tpot"]), _ms(s["tpot"]), ratio,
            _ms(c["itl"]), _ms(s["itl"]), c["bunched"], c["order_violations"], f"{c['cpu_s']:.2f}",
            f"{c['zero_gap_pct']:.1f}%", _ms(c["itl_p99"]),
        )  # fmt: skip
        tail = "" if res["exit"] == 0 else f"  (locust exit {res['exit']})"
        print(" ".join(f"{v:>9}" for v in cells) + tail, flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
