"""Events per client CPU-second: a whole tokenstorm Locust process beside `vllm bench serve`'s client.

    .venv/bin/python benchmarks/bench_events.py [--streams 200] [--window 15] [--itl-ms 10] [--repeat 2]

Both clients stream from the same emulator, in the same run, one after the other (alternating
when repeated), each pinned to core 0 with the emulator on core 1 (on a machine with 2+ cores):

* tokenstorm: ``locust -f locustfiles/chat.py --headless`` — the full path users run: Locust's
  runner and stats, records written to the run directory, the /metrics monitor process;
* vLLM's: ``vllm bench serve --backend openai-chat`` (aiohttp + asyncio), from ``.venv-vllm``.

The figure is token events per client CPU-second over a steady window (start-up, ramp-up and
the report at the end left out): events are the emulator's ``vllm:generation_tokens_total``
delta over the window (one token per SSE event here; requests are counted when they end, so a
window of N seconds is off by at most the tokens in flight, ~3% at 15 s), CPU is the client
process's user+system time over the same window (psutil). Issue #9's target: >= 1.5x vLLM's.

``--before REF`` adds tokenstorm as it was at git commit ``REF`` (a temporary worktree), run in turn with
today's in the same emulator set-up: the ratio of the two says what a change cost per event (issue #23's
target: answer checks within 3%). ``--skip-vllm`` leaves vLLM's client out (no ``.venv-vllm`` needed); then
the CPU counted is the load generator's and its children's (the monitor, the answer checks' process).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tokenstorm.emulator import EmulatorProcess  # noqa: E402

VLLM_PYTHON = Path(os.environ.get("TOKENSTORM_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
VLLM_BENCH = """
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""


def _metric(url: str, name: str) -> float:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=60).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def _generated(url: str) -> float:
    return _metric(url, "vllm:generation_tokens_total")


def _pin(core: int):  # type: ignore[no-untyped-def]
    def pin() -> None:
        if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, {core})

    return pin


def _measure(
    cmd: list[str], url: str, streams: int, warmup_s: float, window_s: float, cwd: Path, pythonpath: str = "",
    with_children: bool = False,
) -> tuple[float, float, float]:
    """Run ``cmd``; once all its streams run (+ ``warmup_s``), over ``window_s`` return
    (events, client CPU s, wall s). Start-up (vLLM's imports take ~15 s) is left out."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    log = (cwd / "client.log").open("w")  # a file, not a pipe: a full pipe would stall the client
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            preexec_fn=_pin(0), start_new_session=True)  # fmt: skip
    try:
        ps = psutil.Process(proc.pid)
        deadline = time.monotonic() + 180
        while _metric(url, "vllm:num_requests_running") < 0.9 * streams and time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        time.sleep(warmup_s)
        if proc.poll() is not None:
            raise SystemExit(f"{cmd[:3]} ended early: {(cwd / 'client.log').read_text()[-2000:]}")
        c0, e0, w0 = _cpu(ps, with_children), _generated(url), time.perf_counter()
        time.sleep(window_s)
        c1, e1, w1 = _cpu(ps, with_children), _generated(url), time.perf_counter()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    return e1 - e0, c1 - c0, w1 - w0


def _cpu(ps: psutil.Process, with_children: bool) -> float:
    """User + system CPU seconds of ``ps`` (and, ``with_children``, of every process it started that still
    runs: the monitor, the answer checks' process)."""
    procs = [ps, *ps.children(recursive=True)] if with_children else [ps]
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds after all streams run before the window")
    ap.add_argument("--window", type=float, default=15.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--before", metavar="REF", help="also run tokenstorm as of git commit REF, in turn")
    ap.add_argument("--skip-vllm", action="store_true", help="leave vLLM's client out")
    args = ap.parse_args()
    if args.skip_vllm:
        _ours_only(args)
        return
    if not VLLM_PYTHON.exists():
        raise SystemExit(f"no vLLM venv at {VLLM_PYTHON} (scripts/test.sh makes it) — `vllm bench serve` is needed")
    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp_s:
        tmp = Path(tmp_s)
        # vllm bench serve needs a tokenizer to make its prompts: the tests' offline tiny one.
        subprocess.run([str(VLLM_PYTHON), str(ROOT / "tests" / "e2e" / "make_tiny_model.py"), str(tmp / "tok")],
                       check=True, capture_output=True)  # fmt: skip
        (tmp / "vllm_bench.py").write_text(VLLM_BENCH)
        emu_args = ("--ttft-ms", "50", "--itl-ms", f"{args.itl_ms:g}", "--prefill-us-per-token", "0",
                    "--max-num-seqs", str(args.streams * 2))  # fmt: skip
        run_s = args.warmup + args.window + 30
        print(f"{args.streams} streams of {args.tokens} tokens at {args.itl_ms:g} ms/token from the emulator; "
              f"window {args.window:g} s, {args.warmup:g} s after all streams run")  # fmt: skip
        for i in range(args.repeat):
            rates = {}
            for name in ("tokenstorm (Locust)", "vllm bench serve"):
                with EmulatorProcess(*emu_args) as emu:  # a fresh one each: nothing left from the last client
                    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
                        os.sched_setaffinity(emu._proc.pid, {1})
                    ours = [
                        sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless",
                        "--only-summary", "--host", emu.url, "-u", str(args.streams), "-r", str(args.streams),
                        "-t", f"{run_s:.0f}s", "--chat-turns", "1", "--chat-think-time", "0-0", "--wait-time", "0",
                        "--max-tokens", str(args.tokens), "--ignore-eos", "--run-dir", str(tmp / "runs"),
                    ]  # fmt: skip
                    theirs = [
                        str(VLLM_PYTHON), str(tmp / "vllm_bench.py"), "--backend", "openai-chat", "--base-url",
                        emu.url, "--endpoint", "/v1/chat/completions", "--model", "tokenstorm-emulated",
                        "--tokenizer", str(tmp / "tok"), "--dataset-name", "random", "--random-input-len", "32",
                        "--random-output-len", str(args.tokens), "--ignore-eos", "--max-concurrency",
                        str(args.streams), "--num-prompts", str(args.streams * 60),
                    ]  # fmt: skip
                    cmd = ours if name.startswith("tokenstorm") else theirs
                    events, cpu, wall = _measure(cmd, emu.url, args.streams, args.warmup, args.window, tmp)
                rates[name] = events / cpu
                print(f"  run {i + 1} {name:20} {events / wall:9,.0f} events/s, client CPU {cpu / wall:5.0%} "
                      f"of a core, {events / cpu:9,.0f} events per CPU-second", flush=True)  # fmt: skip
            ratio = rates["tokenstorm (Locust)"] / rates["vllm bench serve"]
            print(f"  run {i + 1} ratio tokenstorm / vllm bench serve: {ratio:.2f}x", flush=True)


def _locust(root: Path, url: str, args: argparse.Namespace, run_dir: Path) -> list[str]:
    run_s = args.warmup + args.window + 30
    return [
        sys.executable, "-m", "locust", "-f", str(root / "locustfiles" / "chat.py"), "--headless",
        "--only-summary", "--host", url, "-u", str(args.streams), "-r", str(args.streams),
        "-t", f"{run_s:.0f}s", "--chat-turns", "1", "--chat-think-time", "0-0", "--wait-time", "0",
        "--max-tokens", str(args.tokens), "--ignore-eos", "--run-dir", str(run_dir),
    ]  # fmt: skip


def _ours_only(args: argparse.Namespace) -> None:
    """Today's tokenstorm, and (``--before``) the one at REF, alternating, with no vLLM client."""
    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp_s:
        tmp = Path(tmp_s)
        clients = [("tokenstorm now", ROOT)]
        if args.before:
            tree = tmp / "before"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.before],
                           check=True, capture_output=True)  # fmt: skip
            clients.append((f"tokenstorm {args.before[:10]}", tree))
        emu_args = ("--ttft-ms", "50", "--itl-ms", f"{args.itl_ms:g}", "--prefill-us-per-token", "0",
                    "--max-num-seqs", str(args.streams * 2))  # fmt: skip
        print(f"{args.streams} streams of {args.tokens} tokens at {args.itl_ms:g} ms/token from the emulator; "
              f"window {args.window:g} s, {args.warmup:g} s after all streams run")  # fmt: skip
        rates: dict[str, list[float]] = {name: [] for name, _ in clients}
        try:
            for i in range(args.repeat):
                for name, root in clients if i % 2 == 0 else clients[::-1]:
                    with EmulatorProcess(*emu_args) as emu:
                        if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
                            os.sched_setaffinity(emu._proc.pid, {1})
                        cmd = _locust(root, emu.url, args, tmp / "runs")
                        events, cpu, wall = _measure(cmd, emu.url, args.streams, args.warmup, args.window, tmp,
                                                     pythonpath=str(root), with_children=True)  # fmt: skip
                    rates[name].append(events / cpu)
                    print(f"  run {i + 1} {name:22} {events / wall:9,.0f} events/s, client CPU {cpu / wall:5.0%} "
                          f"of a core, {events / cpu:9,.0f} events per CPU-second", flush=True)  # fmt: skip
        finally:
            if args.before:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp / "before")],
                               capture_output=True)  # fmt: skip
        if args.before:
            now, before = (sorted(rates[n])[len(rates[n]) // 2] for n, _ in clients)
            print(f"  median events per CPU-second, now / {args.before[:10]}: {now / before:.3f}", flush=True)


if __name__ == "__main__":
    main()
