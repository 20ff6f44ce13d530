"""Timing truth against a real vLLM server: the records beside vLLM's own server-side means.

    .venv/bin/python benchmarks/bench_truth.py --host http://127.0.0.1:8000 [--users 8]
        [--max-tokens 64] [--run-time 12s] [--stop-timeout 30] [--processes 2] [--no-server-metrics]
        [--repeat 3] [--vllm-bench --tokenizer MODEL_DIR]

Drives the server with ``locustfiles/chat.py`` exactly as a user would (headless, single-turn
chat from a ShareGPT file of 128 prompts of ~45 words, ``--wait-time 0``, ``--ignore-eos``),
scrapes vLLM's ``/metrics`` before and after, and prints, per run:

* the records' mean TTFT and TPOT (successful, non-cancelled requests) beside vLLM's own
  ``_sum``/``_count`` deltas of ``vllm:time_to_first_token_seconds`` and
  ``vllm:request_time_per_output_token_seconds`` (and ``vllm:inter_token_latency_seconds``
  beside the records' mean ITL gap) — the buckets are too coarse at CPU speeds for medians;
* "bunched" records (more than half of their ITL gaps are exactly 0: the stream was read
  at once, not as it arrived) and records breaking ``ttfc <= ttft <= e2e <= done``;
* the client's own account of its timing (issue #19): the share of token events and of TTFTs it
  flagged as read late, the p99 read lag, and the run's verdict (``unreliable`` when not trustworthy);
* where the time went (issue #29; vLLM started with ``--enable-per-request-metrics``), after the runs, one
  line per run: the records' mean overhead, server queue, server TTFT and decode, and their gap-weighted mean
  server ITL, beside vLLM's ``vllm:request_queue_time_seconds``, ``vllm:request_prefill_time_seconds``,
  ``vllm:request_decode_time_seconds`` and ``vllm:inter_token_latency_seconds`` means over the same run, with
  the difference of the records' summed queue time from vLLM's. The run ends with ``--stop-timeout`` (30 s),
  so every request vLLM counted was read to its end: a stream cut mid-answer is one vLLM aborts and leaves out
  of its per-request histograms (not out of its inter-token one).

``--vllm-bench`` alternates each run with ``vllm bench serve`` (``.venv-vllm``, openai-chat, random
prompts, the same concurrency, output length and ``ignore_eos``, as many prompts as the previous
tokenstorm run completed) against the same server, and prints the same columns for it from its
detailed result (per-request TTFT and ITLs) beside vLLM's ``/metrics`` over its run.

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

from tokenstorm.workloads.rundir import RequestRecord, read_records  # noqa: E402 (a script run from anywhere)

HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
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
    """vLLM's mean of each histogram over the interval between two scrapes (and ``queue_sum``, its total)."""
    out: dict[str, float | None] = {}
    for key, name in HISTOGRAMS.items():
        count = after[f"{name}_count"] - before[f"{name}_count"]
        out[key] = (after[f"{name}_sum"] - before[f"{name}_sum"]) / count if count > 0 else None
    name = HISTOGRAMS["queue"]
    out["queue_sum"] = after[f"{name}_sum"] - before[f"{name}_sum"]
    return out


def breakdown(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the time went, from the server's own timing on the successful records: mean overhead, server
    queue, server TTFT, decode; the gap-weighted mean server ITL (vLLM's inter-token mean); the queue's sum."""
    done = [r for r in records if r["ok"]]
    out: dict[str, Any] = {"records": len(done), "timed": sum(r.get("server_queue_s") is not None for r in done)}
    parts = (("overhead", "overhead_s"), ("queue", "server_queue_s"), ("prefill", "server_ttft_s"))
    for key, field in (*parts, ("decode", "server_decode_s")):
        values = [r[field] for r in done if r.get(field) is not None]
        out[key] = statistics.fmean(values) if values else None
    out["queue_sum"] = sum(r["server_queue_s"] for r in done if r.get("server_queue_s") is not None)
    weighted = [(r["server_itl_s"], r["output_tokens"] - 1) for r in done if r.get("server_itl_s") is not None]
    weighted = [(v, n) for v, n in weighted if n > 0]
    gaps = sum(n for _, n in weighted)
    out["itl"] = sum(v * n for v, n in weighted) / gaps if gaps else None
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
        "small_gap_pct": 100.0 * sum(g < 100e-6 for g in gaps) / len(gaps) if gaps else 0.0,
        # the client's own account of its timing: events it knows were stamped late, TTFTs among them
        "late_pct": 100.0 * sum(r.get("late_events") or 0 for r in done) / max(1, sum(r["token_events"] for r in done)),
        "ttft_late_pct": 100.0 * sum(bool(r.get("ttft_late")) for r in done) / len(done) if done else 0.0,
        "read_lag_p99": _p99([r["read_lag_max_s"] for r in done if r.get("read_lag_max_s") is not None]),
    }


def _p99(values: list[float]) -> float | None:
    return statistics.quantiles(values, n=100)[98] if len(values) > 100 else (max(values) if values else None)


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
    cmd += ["--stop-timeout", f"{args.stop_timeout:g}s"]
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
    figures["breakdown"] = breakdown(records)
    summary_path = run_dir / "summary.json"
    verdict = json.loads(summary_path.read_text()).get("verdict", "?") if summary_path.exists() else "?"
    return {"client": figures, "server": server_means(before, after), "exit": proc.returncode, "verdict": verdict}


VLLM_PYTHON = Path(os.environ.get("TOKENSTORM_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
VLLM_BENCH = """
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""


def run_vllm_bench(args: argparse.Namespace, workdir: Path, prompts: int) -> dict[str, Any]:
    """One ``vllm bench serve`` run against the same server; its figures in the columns above."""
    cmd = [
        str(VLLM_PYTHON), "-c", VLLM_BENCH, "--backend", "openai-chat", "--base-url", args.host,
        "--endpoint", "/v1/chat/completions", "--model", args.model or "tiny", "--tokenizer", args.tokenizer,
        "--dataset-name", "random", "--random-input-len", "60", "--random-output-len", str(args.max_tokens),
        "--ignore-eos", "--num-prompts", str(prompts), "--max-concurrency", str(args.users),
        "--save-result", "--save-detailed", "--result-dir", str(workdir), "--result-filename", "vllm.json",
        "--disable-tqdm",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    before = scrape_histogram_totals(args.host)
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=600, env=env)
    after = scrape_histogram_totals(args.host)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-2000:])
        return {"client": None, "server": server_means(before, after), "exit": proc.returncode, "verdict": "-"}
    doc = json.loads((workdir / "vllm.json").read_text())
    ok = [i for i, e in enumerate(doc.get("errors") or []) if not e]
    itls = [doc["itls"][i] for i in ok if doc["itls"][i]]
    gaps = [g for per in itls for g in per]
    figures = {
        "records": len(ok),
        "ttft": statistics.fmean(doc["ttfts"][i] for i in ok) if ok else None,
        "tpot": statistics.fmean(sum(per) / len(per) for per in itls) if itls else None,
        "itl": statistics.fmean(gaps) if gaps else None,
        "bunched": sum(1 for per in itls if sum(g < 100e-6 for g in per) > len(per) / 2),
        "order_violations": 0,
        "cpu_s": 0.0,
        "zero_gap_pct": 100.0 * sum(g == 0 for g in gaps) / len(gaps) if gaps else 0.0,
        "small_gap_pct": 100.0 * sum(g < 100e-6 for g in gaps) / len(gaps) if gaps else 0.0,
        "itl_p99": statistics.quantiles(gaps, n=100)[98] if len(gaps) > 100 else None,
        "late_pct": None,
        "ttft_late_pct": None,
        "read_lag_p99": None,
    }
    return {"client": figures, "server": server_means(before, after), "exit": 0, "verdict": "-"}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1000:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", required=True, help="a real vLLM server, e.g. http://127.0.0.1:8000")
    ap.add_argument("--model", default="", help="served model name (default: the first of /v1/models)")
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--run-time", default="12s")
    ap.add_argument("--stop-timeout", type=float, default=30.0, help="seconds the run's last requests may finish in")
    ap.add_argument("--processes", type=int, default=0)
    ap.add_argument("--no-server-metrics", action="store_true")
    ap.add_argument("--monitor-interval", type=float, default=0.0, help="seconds between /metrics scrapes")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--vllm-bench", action="store_true", help="alternate each run with `vllm bench serve`")
    ap.add_argument("--tokenizer", default="", help="the served model's directory (for --vllm-bench's prompts)")
    args = ap.parse_args()
    if args.vllm_bench and not args.tokenizer:
        ap.error("--vllm-bench needs --tokenizer MODEL_DIR (vllm bench serve makes its prompts with it)")
    columns = ("run", "recs", "TTFT cli", "TTFT vllm", "diff", "TPOT cli", "TPOT vllm", "ratio", "ITL cli",
               "ITL vllm", "bunched", "order", "cli CPU s", "0-gaps", "<100us", "ITL p99", "late ev", "late TTFT",
               "lag p99", "verdict")  # fmt: skip
    print(" ".join(f"{c:>9}" for c in columns))
    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-truth-") as tmp:
            res = run_once(args, Path(tmp))
        _print_row(f"{i + 1}", res)
        runs.append(res)
        if args.vllm_bench:
            with tempfile.TemporaryDirectory(prefix="bench-truth-vllm-") as tmp:
                res = run_vllm_bench(args, Path(tmp), max(50, res["client"]["records"]))
            if res["client"] is not None:
                _print_row(f"{i + 1}-vllm", res)
    _print_breakdown(runs)


def _print_breakdown(runs: list[dict[str, Any]]) -> None:
    """Where the time went in each tokenstorm run (ms): the records' parts beside vLLM's means."""
    print("\nwhere the time went (ms; records beside vLLM's /metrics over the same run):")
    columns = (
        "run",
        "timed",
        "overhead",
        "queue",
        "queue vllm",
        "queue Σ %",
        "srv TTFT",
        "prefill vllm",
        "decode",
        "decode vllm",
        "srv ITL",
        "ITL vllm",
        "ITL %",
    )
    print(" ".join(f"{c:>12}" for c in columns))
    for i, res in enumerate(runs):
        b, s = res["client"]["breakdown"], res["server"]
        queue_diff = 100 * (b["queue_sum"] / s["queue_sum"] - 1) if b["timed"] and s["queue_sum"] else None
        itl_diff = 100 * (b["itl"] / s["itl"] - 1) if b["itl"] and s["itl"] else None
        cells = (
            f"{i + 1}",
            f"{b['timed']}/{b['records']}",
            _ms(b["overhead"]),
            _ms(b["queue"]),
            _ms(s["queue"]),
            _signed(queue_diff),
            _ms(b["prefill"]),
            _ms(s["prefill"]),
            _ms(b["decode"]),
            _ms(s["decode"]),
            _ms(b["itl"]),
            _ms(s["itl"]),
            _signed(itl_diff),
        )
        print(" ".join(f"{v:>12}" for v in cells), flush=True)
    if runs and not any(res["client"]["breakdown"]["timed"] for res in runs):
        print("the server sent no per-request timing: start vLLM with --enable-per-request-metrics")


def _signed(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.2f}%"


def _print_row(name: str, res: dict[str, Any]) -> None:
    c, s = res["client"], res["server"]
    diff = None if c["ttft"] is None or s["ttft"] is None else c["ttft"] - s["ttft"]
    ratio = f"{c['tpot'] / s['tpot']:.3f}" if c["tpot"] and s["tpot"] else "n/a"
    cells = (
        name, c["records"], _ms(c["ttft"]), _ms(s["ttft"]), _ms(diff), _ms(c["tpot"]), _ms(s["tpot"]), ratio,
        _ms(c["itl"]), _ms(s["itl"]), c["bunched"], c["order_violations"], f"{c['cpu_s']:.2f}",
        _pct(c["zero_gap_pct"]), _pct(c["small_gap_pct"]), _ms(c["itl_p99"]), _pct(c["late_pct"]),
        _pct(c["ttft_late_pct"]), _ms(c["read_lag_p99"]), res["verdict"],
    )  # fmt: skip
    tail = "" if res["exit"] in (0, 5) else f"  (exit {res['exit']})"
    print(" ".join(f"{v:>9}" for v in cells) + tail, flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
