"""Watching the run from the load generator's side: the monitor process (GPU and vLLM server
samples), ``load.jsonl`` (users and each load generator's timekeeping) and lost workers.

Each load generator measures how well it keeps time (:class:`tokenstorm.workloads.client.clock.ClockProbe`:
CPU %, run-queue wait, cgroup throttling, event-loop lag) over the interval each figure covers:
a local runner once a ``load.jsonl`` line, from the run's start (the first line comes one
interval in, covering it); a worker with every report it sends the master, whose lines carry each
worker's latest. Idle time before a start is never in a figure.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import gevent
from locust.env import Environment

from ...client.clock import ClockProbe
from ...rundir import GPU_FILE, SERVER_FILE, LoadSample, LoadWriter
from ...rundir.faults import WriteFailed
from . import locust_compat, write_faults
from .context import RunContext

__all__ = ["start_monitor", "stop_monitor", "track_workers"]

log = logging.getLogger("tokenstorm")


def _scrape_auth(ctx: RunContext, scrape: list[tuple[str, str]]) -> dict[str, str]:
    """Each scraped target's Authorization value (only those the key or URL credentials were given for)."""
    return {url.rstrip("/"): auth for _, url in scrape if (auth := ctx.authorization_for(url))}


def start_monitor(environment: Environment, ctx: RunContext, run_dir: Path) -> None:
    """Start the monitor process (when asked for) and the ``load.jsonl`` sampler."""
    from tokenstorm.monitors import MonitorProcess  # only the master / a local runner needs it

    opts = ctx.options
    interval = max(0.1, opts.monitor_interval_s)
    scrape: list[tuple[str, str]] = []
    if opts.server_metrics and environment.host:
        scrape = list(opts.targets) or [("", environment.host)]  # A/B: each target's /metrics
    for name in (GPU_FILE, SERVER_FILE):  # every run directory has both, empty when off
        (run_dir / name).touch()
    if scrape or opts.gpu_monitor:
        # GPU sampling and /metrics parsing run in their own process: in this one they would
        # stall the event loop that reads the streams (measured in tokenstorm/monitors/_process.py).
        ctx.monitor = MonitorProcess(
            run_dir,
            target_url=None,
            targets=scrape,
            gpu_monitor=opts.gpu_monitor or None,
            interval_s=interval,
            authorization=_scrape_auth(ctx, scrape),
        )
        # Its first samples before the first request (this runs before users spawn): counters on /metrics
        # then rise from a baseline that none of the run's traffic is in.
        if not ctx.monitor.wait_ready() and ctx.monitor.write_failure() is None:  # that one: said by the loop
            log.warning(
                "tokenstorm: the monitor took no first sample within 15 s; /metrics counters of the "
                "run's first seconds may be missed"
            )
    writer = LoadWriter(run_dir)
    # A master reads no streams: its lines carry the workers' figures, shipped with their reports.
    probe = None if locust_compat.is_master(environment.runner) else ClockProbe()
    if probe is not None:
        probe.start()

    def loop() -> None:
        next_t = time.monotonic()
        while True:
            # Sample first after one interval: a line at the start would cover no time at all.
            next_t += interval
            gevent.sleep(max(0.0, next_t - time.monotonic()))
            runner = environment.runner
            if probe is not None:
                ctx.clock_by_worker["local"] = probe.sample().as_dict()
            clock = track_workers(runner, ctx)
            cpu = {w: pct for w, c in clock.items() if (pct := c.get("cpu_pct")) is not None}
            users = runner.user_count if runner is not None else 0
            try:  # a sample that cannot be written (here, or by the monitor process) stops the run
                writer.write(LoadSample(time.time(), users, cpu, clock))
                if ctx.monitor is not None and (failed := ctx.monitor.write_failure()) is not None:
                    raise failed
            except WriteFailed as exc:
                write_faults.fail_run(environment, ctx, exc)
                return

    def finished(_g: Any) -> None:
        writer.close()
        if probe is not None:
            probe.stop()

    ctx.monitor_greenlet = gevent.spawn(loop)
    ctx.monitor_greenlet.link(finished)


def track_workers(runner: Any, ctx: RunContext) -> dict[str, dict[str, float | None]]:
    """Each live load generator's latest timekeeping figures; notes workers that went missing."""
    if not locust_compat.is_master(runner):
        local = ctx.clock_by_worker.get("local")
        return {"local": local} if local is not None else {}
    now = time.time()
    live = locust_compat.live_workers(runner)
    for worker in sorted(locust_compat.missing_workers(runner) - set(ctx.workers_lost)):
        last = ctx.last_heard.get(worker)
        ctx.workers_lost[worker] = {"detected_epoch_s": now, "last_heard_epoch_s": last}
        log.error(
            "tokenstorm: worker %s vanished (last heard %s s ago); its records until then are kept",
            worker,
            f"{now - last:.0f}" if last else "?",
        )
    return {w: ctx.clock_by_worker[w] for w in sorted(live) if w in ctx.clock_by_worker}


def stop_monitor(ctx: RunContext) -> None:
    """Stop the sampler and the monitor process (which takes one last sample first)."""
    monitor, ctx.monitor = ctx.monitor, None
    if ctx.monitor_greenlet is not None:
        ctx.monitor_greenlet.kill(block=True)
        ctx.monitor_greenlet = None
    if monitor is not None:
        monitor.stop()
