"""The run's lifecycle, as Locust event listeners: options and files checked at start-up, the built-in emulator
when no host is given, the run directory opened at test start, the outputs built and the exit code set at the end.
:func:`install` registers everything (idempotent)."""

from __future__ import annotations

import logging
import shlex
import sys
import time
import weakref
from pathlib import Path
from typing import Any

import gevent
from locust import events
from locust.env import Environment
from locust.event import Events

from ...rundir import EXIT_RUN_FAILED
from ...rundir.gpus import read_gpus
from ...rundir.secrets import split_credentials
from ..export import prometheus as exporter
from ..quality import probes
from ..shapes import soak
from ..users.workload import WorkloadUser, run_targets
from ..web.webui import extend_web_ui
from . import arrivals, locust_compat, master_watch, otlp, shipping, until_conclusive, write_faults
from .checks import (
    check_run_root,
    load_slo_spec_or_exit,
    load_workloads,
    load_workloads_or_exit,
    preflight,
    say_worker_port,
    slo_spec_for,
)
from .closing import build_outputs, print_closing
from .context import RunContext, context
from .deployment import capture_run_deployment
from .interrupts import watch_signals, write_end
from .monitoring import start_monitor, stop_monitor
from .options import OptionError, add_options, users_problem, warmup_problem
from .progress_display import ProgressPrinter
from .targets import check_url
from .whole_names import whole_option_names

__all__ = ["install"]

log = logging.getLogger("tokenstorm")


def _on_init(environment: Environment, **_kw: Any) -> None:
    from tokenstorm.emulator import EmulatorProcess  # the emulator package is only needed here
    from tokenstorm.emulator import check_args as check_emulator_args

    ctx = context(environment)
    opts = environment.parsed_options
    if opts is None:
        return
    try:
        # Secrets out of Locust's options first: nothing below (nor the spawn messages) may carry them.
        ctx.take_secrets(opts, environment.host)
        if environment.host:
            environment.host = check_url(split_credentials(environment.host)[0], "--host")
        ctx.refresh_options(opts)
        if not ctx.is_worker:
            check_run_root(ctx.options.run_dir)
            starts_itself = bool(getattr(opts, "headless", False) or getattr(opts, "autostart", False))
            users, has_shape = getattr(opts, "num_users", None), environment.shape_class is not None
            if why := users_problem(users, starts_itself=starts_itself, has_shape=has_shape):
                raise OptionError(why)
            if ctx.options.emulator_args and not environment.host:
                emulator_problem = check_emulator_args(shlex.split(ctx.options.emulator_args))
                if emulator_problem:
                    raise OptionError(f"--emulator-args: {emulator_problem}")
    except (OptionError, ValueError) as exc:  # ValueError: shlex's "No closing quotation"
        sys.stderr.write(f"tokenstorm: {exc}\n")
        raise SystemExit(EXIT_RUN_FAILED) from None
    load_workloads_or_exit(environment, ctx)
    if ctx.is_worker:
        return
    say_worker_port(environment)
    load_slo_spec_or_exit(environment, ctx)
    _refuse_warmup_as_long_as_the_run(environment, ctx)
    probes.install(environment)
    _refuse_users_the_options_would_not_drive(environment, ctx)
    if not environment.host and not any(getattr(u, "host", None) for u in environment.user_classes):
        # As a vLLM configured the way the README says: each request's own timing on (--emulator-args can say no)
        emu = EmulatorProcess("--enable-per-request-metrics", *shlex.split(ctx.options.emulator_args))
        ctx.emulator_url = emu.url
        environment.host = emu.url
        ctx.emulator = emu
        ctx.simulated = True  # said from the start page on, before any run
        log.warning("tokenstorm: SIMULATED — no --host given, targeting the built-in emulator at %s", emu.url)
    ctx.key_host = environment.host
    environment.events.quit.add_listener(lambda **_kw: print_closing(ctx))  # after Locust's error report
    _start_exporter(environment, ctx)
    otlp.start(environment, ctx)  # the server's spans (--otlp-port): each run's own file
    if environment.web_ui is not None:
        extend_web_ui(environment)


def _refuse_users_the_options_would_not_drive(environment: Environment, ctx: RunContext) -> None:
    """Stop before any traffic when the locustfile's users cannot do what the options ask: a sweep of
    open-loop users, a trace with users that would not replay it, A/B targets with users that drive one host.
    With ``--targets``, the first target becomes Locust's host and the API key is given for all of them."""
    shape = type(environment.shape_class).__name__ if environment.shape_class is not None else ""
    if shape in ("SweepShape", "CapacitySearchShape") and any(
        getattr(u, "open_loop", False) for u in environment.user_classes
    ):
        sys.stderr.write(
            f"tokenstorm: {shape} steps closed-loop users; open-loop arrivals (open_loop.py) keep "
            "their --arrival-rate — sweep or search with a closed-loop locustfile\n"
        )
        raise SystemExit(EXIT_RUN_FAILED)
    if ctx.options.trace and not any(getattr(u, "trace_replay", False) for u in environment.user_classes):
        sys.stderr.write(
            "tokenstorm: --trace replays with locustfiles/trace_replay.py (tokenstorm run trace); "
            "this locustfile's users would not send it\n"
        )
        raise SystemExit(EXIT_RUN_FAILED)
    targets = ctx.options.targets
    if targets:
        urls = [url for _, url in targets]
        if environment.host and environment.host.rstrip("/") not in urls:
            sys.stderr.write(
                f"tokenstorm: --host {environment.host} is not one of --targets ({', '.join(urls)}); "
                "give every endpoint in --targets\n"
            )
            raise SystemExit(EXIT_RUN_FAILED)
        plain = sorted(
            u.__name__
            for u in environment.user_classes
            if not issubclass(u, WorkloadUser) and not getattr(u, "open_loop", False)
        )
        if plain:
            sys.stderr.write(
                f"tokenstorm: --targets: user class(es) {', '.join(plain)} drive only their host; an A/B "
                "run needs tokenstorm's workload or open-loop users (locustfiles/*.py)\n"
            )
            raise SystemExit(EXIT_RUN_FAILED)
        environment.host = urls[0]  # what Locust shows; the users drive every target
        ctx.key_targets = frozenset(urls)  # the key was given with these endpoints


def _warmup_problem(environment: Environment, ctx: RunContext) -> str | None:
    """A warm-up (``--warmup`` or the SLO file's) as long as ``-t`` or longer, in one line (None: fine)."""
    spec = ctx.slo_spec
    slo_warmup_s = float(getattr(spec, "warmup_s", 0.0) or 0.0)
    run_time_s = getattr(environment.parsed_options, "run_time", None)
    return warmup_problem(ctx.options.warmup_s, slo_warmup_s, str(getattr(spec, "source", "")), run_time_s)


def _refuse_warmup_as_long_as_the_run(environment: Environment, ctx: RunContext) -> None:
    """Such a warm-up ends the run before any traffic with one line and exit 3 (it would judge no request)."""
    problem = _warmup_problem(environment, ctx)
    if problem:
        sys.stderr.write(f"tokenstorm: {problem}\n")
        raise SystemExit(EXIT_RUN_FAILED)


def _start_exporter(environment: Environment, ctx: RunContext) -> None:
    port = ctx.options.metrics_port
    if not port or ctx.metrics is not None:
        return

    def users() -> int:
        runner = environment.runner
        return runner.user_count if runner is not None else 0

    ctx.metrics = exporter.ClientMetrics(users=users, cpu=lambda: dict(ctx.cpu_by_worker))
    try:
        ctx.metrics_server = exporter.serve(ctx.metrics, port, ctx.options.metrics_host)
    except OSError as exc:
        sys.stderr.write(f"tokenstorm: --metrics-port {port}: cannot listen ({exc.strerror})\n")
        raise SystemExit(EXIT_RUN_FAILED) from None
    log.info("tokenstorm: Prometheus metrics on http://%s:%d/metrics", ctx.options.metrics_host, port)


def _on_test_start(environment: Environment, **_kw: Any) -> None:
    ctx = context(environment)
    opts = environment.parsed_options
    ctx.gc_watch.start()  # every process that reads streams: workers too
    if opts is None:
        return
    if ctx.is_worker:
        _start_worker(environment, ctx)
        return
    ctx.problem = None
    ctx.simulated = bool(ctx.emulator_url) and environment.host == ctx.emulator_url
    try:
        ctx.refresh_options(opts)  # options may have changed in the web UI form
        ctx.slo_spec, ctx.slo_spec_text = slo_spec_for(environment, ctx.options.slo)  # the form's --slo too
        urls = [url for _, url in run_targets(environment, environment.host)]
        ctx.simulated = bool(ctx.emulator_url) and ctx.emulator_url in urls
        ctx.warmup_s = ctx.options.warmup_s
        if why := _warmup_problem(environment, ctx):  # the web UI form's -t and --warmup: as at start-up
            raise OptionError(why)
        ctx.model = ctx.options.model or None
        ctx.models.clear()
        load_workloads(environment, ctx)
        problem = preflight(environment, ctx)
    except ValueError as exc:  # OptionError, WorkloadFileError, DatasetError...
        problem = str(exc)
    # What served the run, read before any traffic (its /metrics parse would stall the streams) and
    # before the run's clock starts; the GPUs come from the monitor at the end.
    ctx.deployment = capture_run_deployment(environment, ctx) if not problem else {}
    ctx.gpus = []
    if not problem:  # the answers to compare with those under load, before any user and the run's clock
        probes.probes_before_load(environment, ctx)
    label = Path(ctx.options.locustfile).stem
    run_dir = ctx.start(Path(ctx.options.run_dir), label + ("_SIMULATED" if ctx.simulated else ""))
    ctx.problem = problem
    ctx.report_built = False
    if not write_faults.start_run(environment, ctx, "running" if not problem else "failed"):
        return  # run.json could not be written: the run stops (said in one line)
    log.info("tokenstorm: run directory %s%s", run_dir, " (SIMULATED)" if ctx.simulated else "")
    if problem:
        log.error("tokenstorm: %s", problem)
        environment.process_exit_code = EXIT_RUN_FAILED
        runner = environment.runner
        if runner is not None:
            gevent.spawn_later(0.1, runner.quit if opts.headless else runner.stop)
        return
    probes.probes_kept(environment, run_dir)
    gevent.spawn(_flush_loop, environment, ctx)
    if ctx.options.headless:
        _on_test_stopping_progress(ctx)
        ctx.progress = ProgressPrinter(environment, ctx)
        ctx.progress.start()
    start_monitor(environment, ctx, run_dir)


def _start_worker(environment: Environment, ctx: RunContext) -> None:
    """A worker takes the options the master sent with the spawn message (its command line,
    plus the web UI form): Locust has copied them into ``parsed_options`` before this event."""
    ctx.problem = None
    ctx.started_epoch_s = time.time()  # for --warmup flags; within a few ms of the master's start
    ctx.failed_answers.clear()  # a new run keeps its own sample of failed answers
    try:
        ctx.refresh_options(environment.parsed_options)
        ctx.warmup_s = ctx.options.warmup_s
        ctx.model = ctx.options.model or None
        ctx.models.clear()
        load_workloads(environment, ctx)
    except ValueError as exc:  # a file the master has and this worker's machine has not
        ctx.problem = f"worker cannot use the run's options: {exc}"
        log.error("tokenstorm: %s", ctx.problem)


def _flush_loop(environment: Environment, ctx: RunContext) -> None:
    writer = ctx.writer
    assert ctx.run_dir is not None
    disk = soak.DiskWatch(ctx.run_dir, writer=writer)
    ctx.snapshots = soak.Snapshots(ctx.run_dir, ctx.options.report_every_s)
    while ctx.writer is writer and writer is not None and writer.failure is None:
        gevent.sleep(2.0)
        ctx.flush()
        disk.check()
        ctx.snapshots.tick()


def _on_test_stopping_progress(ctx: RunContext) -> None:
    printer, ctx.progress = ctx.progress, None
    if printer is not None:
        printer.stop()


def _on_test_stopping(environment: Environment, **_kw: Any) -> None:
    ctx = context(environment)
    _on_test_stopping_progress(ctx)  # the display ends before the closing block and its verdict
    ctx.stopping = True
    ctx.flushed_workers.clear()
    probes.stop_probes(environment)  # a pass under load not finished: not measured


def _on_test_stop(environment: Environment, **_kw: Any) -> None:
    ctx = context(environment)
    opts = environment.parsed_options
    if ctx.is_worker or opts is None or ctx.run_dir is None:
        return
    runner = environment.runner
    if runner is not None and locust_compat.is_master(runner) and runner.user_count > 0:
        # Locust's quit path: workers are told to quit only after this event, and their last
        # records arrive with their final reports; the outputs are built at "quitting".
        ctx.defer_build = True
        return
    shipping.wait_for_workers_final_records(environment, ctx)
    ctx.stopping = False
    stop_monitor(ctx)
    ctx.gpus = read_gpus(ctx.run_dir)  # written by the monitor process, which has stopped
    ctx.gc_watch.stop()
    ctx.flush()
    write_faults.end_run(environment, ctx, write_end, build_outputs)  # after a failed write: run.json only


def _on_quitting(environment: Environment, **_kw: Any) -> None:
    ctx = context(environment)
    _on_test_stopping_progress(ctx)
    runner = environment.runner
    if not ctx.is_worker and runner is not None and locust_compat.is_running(runner):
        # Locust fires "quitting" before it stops the users (Ctrl-C, SIGTERM, web UI quit):
        # stop them first so their in-flight requests are recorded and the report is final.
        runner.stop()
    if not ctx.is_worker and ctx.run_dir is not None and environment.parsed_options is not None:
        if ctx.defer_build:
            shipping.wait_for_workers_final_records(environment, ctx, timeout_s=10.0)
        if not ctx.report_built:
            stop_monitor(ctx)
            ctx.gpus = read_gpus(ctx.run_dir)
            write_faults.end_run(environment, ctx, write_end, build_outputs)
        if not ctx.records_said:  # Locust may fire "quitting" twice (a signal, then the end of main)
            ctx.records_said = True
            count, where = (ctx.writer.count, ctx.writer.location) if ctx.writer else (0, ctx.run_dir)
            log.info("tokenstorm: %d request records in %s", count, where)
    master_watch.save_unsent_records(environment)
    stop_monitor(ctx)
    if ctx.snapshots is not None:
        ctx.snapshots.stop()
    try:
        ctx.close()
    except Exception:  # a disk that filled up: say so, and still stop the emulator
        log.exception("tokenstorm: closing the request records failed; what was flushed is kept")
    emu = ctx.emulator
    if emu is not None:
        emu.stop()


_INSTALLED: weakref.WeakSet[Events] = weakref.WeakSet()


def _refresh_loop_clock(**_kw: Any) -> None:
    """``init`` listener, the last: bring gevent's cached loop time up to date. Timers count from
    it, and nothing ran the loop during the start-up just done (imports, files, checks): on a busy
    machine (seconds of it) Locust's ``--run-time`` timer, armed next, fired at once and the run
    ended before its first request (measured under issue #19's contention, 2 runs of 3)."""
    gevent.get_hub().loop.update_now()


def install(event_hooks: Events | None = None) -> None:
    """Register tokenstorm's options and listeners (idempotent)."""
    ev = event_hooks or events
    if ev in _INSTALLED:
        return
    _INSTALLED.add(ev)
    master_watch.install_fork_hook()  # before Locust forks its --processes workers
    ev.init.add_listener(master_watch.disarm_fork_hook)  # the first: the workers are forked by now
    ev.init_command_line_parser.add_listener(add_options)
    ev.init_command_line_parser.add_listener(locust_compat.loopback_for_local_workers)
    ev.init_command_line_parser.add_listener(whole_option_names)
    ev.init.add_listener(shipping.remember_environment)
    ev.init.add_listener(_on_init)
    ev.init.add_listener(watch_signals)  # before Locust's own SIGTERM handler, installed after init
    ev.init.add_listener(master_watch.watch_master)
    ev.init.add_listener(_refresh_loop_clock)
    ev.test_start.add_listener(_on_test_start)
    ev.test_stopping.add_listener(_on_test_stopping)
    ev.test_stop.add_listener(_on_test_stop)
    ev.quitting.add_listener(_on_quitting)
    ev.report_to_master.add_listener(shipping.on_report_to_master)
    ev.worker_report.add_listener(shipping.on_worker_report)
    ev.heartbeat_sent.add_listener(shipping.on_heartbeat_sent)
    arrivals.install(ev)  # one arrival schedule for the run's workers (open loop, trace replay)
    until_conclusive.install(ev)  # after _on_init and _on_test_start: the options checked, the run directory open
