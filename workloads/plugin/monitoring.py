"""Watching the run from the load generator's side: the monitor process (GPU and vLLM server
samples), ``load.jsonl`` (users and each load generator's own CPU), lost workers and
client-bound generators.

Each load generator measures its own CPU (``psutil``, the share of one core since its last
reading): a local runner every sample, a worker with every report it sends the master — so
``load.jsonl`` has real figures from the first second, not Locust's value, which reads 0 for
the first ~20 s.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import gevent
import psutil
from locust.env import Environment

from ..rundir import CLIENT_BOUND_CPU_PCT, GPU_FILE, SERVER_FILE, LoadSample, LoadWriter
from . import locust_compat
from .context import RunContext

__all__ = ["CpuMeter", "start_monitor", "stop_monitor", "track_workers"]

log = logging.getLogger("tokenstorm")


class CpuMeter:
    """This process's CPU % (100 = one core) since the previous :meth:`read`."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._proc.cpu_percent(None)  # the first reading only starts the clock

    def read(self) -> float:
        """CPU % since the last reading."""
        return float(self._proc.cpu_percent(None))


def start_monitor(environment: Environment, ctx: RunContext, run_dir: Path) -> None:
    """Start the monitor process (when asked for) and the ``load.jsonl`` sampler."""
    from monitors import MonitorProcess  # only the master / a local runner needs it

    opts = ctx.options
    interval = max(0.1, opts.monitor_interval_s)
    scrape: list[tuple[str, str]] = []
    if opts.server_metrics and environment.host:
        scrape = list(opts.targets) or [("", environment.host)]  # A/B: each target's /metrics
    for name in (GPU_FILE, SERVER_FILE):  # every run directory has both, empty when off
        (run_dir / name).touch()
    if scrape or opts.gpu_monitor:
        # GPU sampling and /metrics parsing run in their own process: in this one they would
        # stall the event loop that reads the streams (measured in monitors/_process.py).
        ctx.monitor = MonitorProcess(run_dir, target_url=None, targets=scrape, gpu_monitor=opts.gpu_monitor or None,
                                     interval_s=interval, api_key=opts.api_key or None)  # fmt: skip
    writer = LoadWriter(run_dir)
    meter = CpuMeter()

    def loop() -> None:
        next_t = time.monotonic()
        while True:
            runner = environment.runner
            if not locust_compat.is_master(runner):
                ctx.cpu_by_worker["local"] = meter.read()
            cpu = track_workers(runner, ctx)
            writer.write(LoadSample(time.time(), runner.user_count if runner is not None else 0, cpu))
            next_t += interval
            gevent.sleep(max(0.0, next_t - time.monotonic()))

    ctx.monitor_greenlet = gevent.spawn(loop)
    ctx.monitor_greenlet.link(lambda _g: writer.close())


def track_workers(runner: Any, ctx: RunContext) -> dict[str, float]:
    """Each load generator's CPU now; notes workers that went missing and generators that are CPU-bound."""
    now = time.time()
    if locust_compat.is_master(runner):
        live = locust_compat.live_workers(runner)
        for worker in sorted(locust_compat.missing_workers(runner) - set(ctx.workers_lost)):
            last = ctx.last_heard.get(worker)
            ctx.workers_lost[worker] = {"detected_epoch_s": now, "last_heard_epoch_s": last}
            log.error("tokenstorm: worker %s vanished (last heard %s s ago); its records until then are kept",
                      worker, f"{now - last:.0f}" if last else "?")  # fmt: skip
        cpu = {w: ctx.cpu_by_worker[w] for w in sorted(live) if w in ctx.cpu_by_worker}
    else:
        cpu = {"local": ctx.cpu_by_worker.get("local", 0.0)}
    for worker, pct in cpu.items():
        if pct > CLIENT_BOUND_CPU_PCT and worker not in ctx.client_bound:
            ctx.client_bound.add(worker)
            log.warning("tokenstorm: load generator %s at %.0f%% CPU — the run is client-bound: latencies include "
                        "the client's own queueing; add workers (--processes / --worker)", worker, pct)  # fmt: skip
    return cpu


def stop_monitor(ctx: RunContext) -> None:
    """Stop the sampler and the monitor process (which takes one last sample first)."""
    monitor, ctx.monitor = ctx.monitor, None
    if ctx.monitor_greenlet is not None:
        ctx.monitor_greenlet.kill(block=True)
        ctx.monitor_greenlet = None
    if monitor is not None:
        monitor.stop()
