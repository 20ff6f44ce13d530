"""``python -m tokenstorm.monitors``: the GPU sidecar and a one-shot vLLM /metrics reader.

    python -m tokenstorm.monitors gpu [--interval 1] [--out gpu.jsonl] [--host 127.0.0.1] [--port 9400]
    python -m tokenstorm.monitors server-metrics http://gpu-host:8000
    python -m tokenstorm.monitors collect --run-dir RUN_DIR [--target [LABEL=]URL ...] [--gpu-monitor URL|local]
    [--interval 1]
      (started by the load test itself: the in-run monitor, in its own process)

Exit codes: 0 ok; 4 no GPU (one line says why); 5 the server has no usable /metrics;
2 bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from ._gpu import open_gpu_sampler
from ._nvml import NoGpuError
from ._process import run_collector
from ._sidecar import Sidecar
from ._vllm_metrics import MetricsUnavailable, ServerMetricsScraper

EXIT_NO_GPU = 4
EXIT_NO_METRICS = 5


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    p = _parser()
    args = p.parse_args(argv)

    if args.cmd == "collect":
        if args.interval <= 0:
            p.error("--interval must be > 0")
        targets = [
            (t.partition("=")[0], t.partition("=")[2]) if "=" in t.split("://")[0] else ("", t) for t in args.target
        ]
        return run_collector(
            args.run_dir, target_url=None, targets=targets, gpu_monitor=args.gpu_monitor, interval_s=args.interval
        )

    if args.cmd == "server-metrics":
        try:
            sample = ServerMetricsScraper(args.url).scrape()
        except MetricsUnavailable as exc:
            print(f"monitors: {exc}", file=sys.stderr)
            return EXIT_NO_METRICS
        print(json.dumps(asdict(sample), indent=2))
        return 0

    if args.interval <= 0:
        p.error("--interval must be > 0")
    return _gpu_sidecar(args)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tokenstorm.monitors",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # whole option names only: --int is not --interval
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gpu", help="run the GPU sidecar", allow_abbrev=False)
    g.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    g.add_argument("--out", type=Path, default=Path("gpu.jsonl"), help="JSONL file samples are appended to")
    g.add_argument("--host", default="127.0.0.1", help="listen address; 0.0.0.0 to let other hosts poll")
    g.add_argument("--port", type=int, default=9400)
    g.add_argument("--backend", choices=("auto", "nvml", "nvidia-smi"), default="auto")
    g.add_argument("--pcie-every", type=int, default=10, help="read PCIe throughput every Nth sample (slow)")
    g.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0: run until killed)")
    s = sub.add_parser("server-metrics", help="read a vLLM server's /metrics once and print it", allow_abbrev=False)
    s.add_argument("url")
    c = sub.add_parser(
        "collect",
        help="the in-run monitor (started by the load test; API key from the environment)",
        allow_abbrev=False,
    )
    c.add_argument("--run-dir", type=Path, required=True)
    c.add_argument(
        "--target",
        action="append",
        default=[],
        help="[LABEL=]base URL whose /metrics is scraped (repeat for A/B targets)",
    )
    c.add_argument("--gpu-monitor", default=None, help="a GPU sidecar URL, or 'local'")
    c.add_argument("--interval", type=float, default=1.0)
    return p


def _gpu_sidecar(args: argparse.Namespace) -> int:
    """``gpu``: sample the GPUs into ``--out`` and serve the samples until killed or ``--duration`` ends."""
    try:
        sampler = open_gpu_sampler(args.backend, pcie_every=args.pcie_every)
    except NoGpuError as exc:
        print(f"monitors: {exc}", file=sys.stderr)
        return EXIT_NO_GPU
    try:
        sidecar = Sidecar(sampler, interval_s=args.interval, out_path=args.out, host=args.host, port=args.port)
    except OSError as exc:
        print(f"monitors: cannot listen on {args.host}:{args.port} ({exc.strerror})", file=sys.stderr)
        return 2
    sidecar.start()
    print(
        f"monitors: sampling {sampler.source} every {args.interval:g} s into {args.out}; "
        f"serving http://{args.host}:{sidecar.port}/samples",
        flush=True,
    )
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    t0 = time.monotonic()
    with contextlib.suppress(KeyboardInterrupt):
        done.wait(args.duration if args.duration > 0 else None)
    sidecar.stop()
    wall = time.monotonic() - t0
    print(
        f"monitors: stopped after {wall:.0f} s; sampler CPU {sidecar.cpu_s / max(wall, 1e-9):.3%} of one core",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
