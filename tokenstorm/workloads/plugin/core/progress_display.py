"""A headless run's progress on the console, from its start to its end (:mod:`.progress` has the figures).

* stdout is an interactive terminal: a live display (``rich``), redrawn every ``LIVE_EVERY_S`` seconds,
  with a bar when the run's length is known. Log lines written meanwhile (Locust's, tokenstorm's) are
  printed above it, not through it: the logging handlers that write to the terminal write through
  rich's proxies while the display is up.
* otherwise (CI, a pipe, a file): one plain line every ``PLAIN_EVERY_S`` seconds, through the logger
  Locust prints its own tables with (no log prefix).

The display stops when the run stops (``test_stopping``), before the closing block and its verdict.
Errors show in the next line after they happen; the timing fidelity is judged every ``TIMING_EVERY_S``
seconds on the newest requests, in gevent's thread pool (pandas would hold up the event loop that
reads the streams), as the web UI's live status is.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import gevent
from locust.env import Environment

from ...rundir import LOAD_FILE
from ..web.server_history import LoadHistory
from . import locust_compat
from .context import RunContext
from .progress import (
    SHIP_LAG_S,
    WINDOW_S,
    Progress,
    Timing,
    errors_text,
    judge_timing,
    plain_line,
    time_text,
    timing_text,
    ttft_text,
    window_figures,
)

__all__ = ["LIVE_EVERY_S", "PLAIN_EVERY_S", "TIMING_EVERY_S", "ProgressPrinter", "console_logger", "measure"]

PLAIN_EVERY_S = 5.0
LIVE_EVERY_S = 1.0
TIMING_EVERY_S = 5.0

log = logging.getLogger("tokenstorm")


def console_logger() -> logging.Logger:
    """The logger Locust prints its own tables with: its lines carry no log prefix and go where
    Locust's tables go (the terminal's stderr, and the web UI's log tab)."""
    return logging.getLogger("locust.stats_logger")


def measure(environment: Environment, ctx: RunContext, timing: Timing, now: float | None = None) -> Progress:
    """The run as it stands at ``now`` (epoch s), with the latest timing judgement ``timing``."""
    now = time.time() if now is None else now
    runner = environment.runner
    started = ctx.started_epoch_s
    elapsed = max(0.0, now - started) if started is not None else 0.0
    stage, remaining = None, None
    shape = environment.shape_class
    shape_progress = getattr(shape, "progress", None)  # tokenstorm's shapes say their step or level
    if callable(shape_progress):
        stage, remaining = shape_progress()
    else:
        run_time = getattr(environment.parsed_options, "run_time", None)
        if run_time:
            remaining = max(0.0, float(run_time) - elapsed)
    lag = SHIP_LAG_S if locust_compat.is_master(runner) else 0.0
    window = window_figures(ctx.live.recent_rows(WINDOW_S + lag), now, lag, started)
    requests, errors, top, top_count = ctx.outcomes.snapshot()
    return Progress(
        elapsed_s=elapsed,
        remaining_s=remaining,
        stage=stage,
        warmup=elapsed < ctx.warmup_s,
        users=int(runner.user_count) if runner is not None else 0,
        requests_per_s=window["requests_per_s"],
        output_tokens_per_s=window["output_tokens_per_s"],
        ttft_p50_ms=window["ttft_p50_ms"],
        ttft_p95_ms=window["ttft_p95_ms"],
        requests=requests,
        errors=errors,
        top_error=top,
        top_error_count=top_count,
        recent_errors=int(window["errors"] or 0),
        timing=timing,
        simulated=ctx.simulated,
    )


class ProgressPrinter:
    """Prints the progress of one headless run until :meth:`stop` (master or local runner)."""

    def __init__(self, environment: Environment, ctx: RunContext, live: bool | None = None) -> None:
        self.environment = environment
        self.ctx = ctx
        self.live = sys.stdout.isatty() if live is None else live
        self.timing = Timing("no data", "")
        self._load = LoadHistory()  # the load generators' clock samples of the window judged
        self._greenlet: gevent.Greenlet[Any, Any] | None = None
        self._display: Any = None  # rich.live.Live while it is up
        self._swapped: list[tuple[logging.StreamHandler[Any], Any]] = []

    def start(self) -> None:
        """Begin: the first plain line after ``PLAIN_EVERY_S`` s, the live display at once."""
        if self.live:
            try:
                self._start_live()
            except Exception as exc:  # a terminal rich cannot drive: plain lines instead
                log.warning("tokenstorm: no live progress display (%r); plain progress lines instead", exc)
                self.live = False
        self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        """End the display (its last state stays on screen); idempotent."""
        greenlet, self._greenlet = self._greenlet, None
        if greenlet is not None and greenlet is not gevent.getcurrent():
            greenlet.kill(block=False)
        if self._display is not None:
            self._draw()
            self._stop_live()

    def _loop(self) -> None:
        every = LIVE_EVERY_S if self.live else PLAIN_EVERY_S
        next_t = time.monotonic()
        timing_at = next_t
        while True:
            next_t += every
            gevent.sleep(max(0.0, next_t - time.monotonic()))
            if time.monotonic() >= timing_at:
                timing_at = time.monotonic() + TIMING_EVERY_S
                self._judge()
            if self.live:
                self._draw()
            else:
                console_logger().info("%s", plain_line(measure(self.environment, self.ctx, self.timing)))

    def _judge(self) -> None:
        ctx = self.ctx
        rows = ctx.live.recent_rows()
        if not rows:
            return
        clock = {worker: dict(figures) for worker, figures in ctx.clock_by_worker.items()}
        now = time.time()
        load = self._load.read(ctx.run_dir / LOAD_FILE if ctx.run_dir is not None else None, now)
        pool = gevent.get_hub().threadpool
        try:
            self.timing = pool.apply(judge_timing, (rows, clock, now, ctx.started_epoch_s, load))
        except Exception as exc:  # the progress goes on; it says why it has no timing verdict
            self.timing = Timing("no data", f"not judged: {exc!r}"[:200])

    # -- the live display ---------------------------------------------------------------------------

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        before = (sys.stdout, sys.stderr)
        display = Live(
            console=Console(file=sys.stdout),
            auto_refresh=False,
            transient=False,
            redirect_stdout=True,
            redirect_stderr=True,
        )
        display.start()
        self._display = display
        # Logging handlers hold the streams they were given: while the display is up, those that write
        # to the terminal write through rich's proxies (their lines go above the display, not through it).
        proxies = {id(before[0]): sys.stdout, id(before[1]): sys.stderr}
        for handler in _stream_handlers():
            proxy = proxies.get(id(handler.stream))
            if proxy is not None and proxy is not handler.stream:
                self._swapped.append((handler, handler.setStream(proxy)))
        self._draw()

    def _stop_live(self) -> None:
        for handler, stream in self._swapped:
            handler.setStream(stream)
        self._swapped = []
        display, self._display = self._display, None
        display.stop()

    def _draw(self) -> None:
        if self._display is not None:
            self._display.update(_renderable(measure(self.environment, self.ctx, self.timing)), refresh=True)


def _stream_handlers() -> list[logging.StreamHandler[Any]]:
    loggers = [
        logging.getLogger(),
        *(lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)),
    ]
    found: list[logging.StreamHandler[Any]] = []
    for logger in loggers:
        for handler in logger.handlers:
            if type(handler) is logging.StreamHandler and handler not in found:  # not FileHandler
                found.append(handler)
    return found


def _renderable(p: Progress) -> Any:
    """The live display: a bar when the run's length is known, the figures, errors and timing."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    head = Table.grid(padding=(0, 1))
    head.add_row(Text("tokenstorm", style="bold"), Text(time_text(p)))
    if p.remaining_s is not None and p.elapsed_s + p.remaining_s > 0:
        head.add_row("", ProgressBar(total=p.elapsed_s + p.remaining_s, completed=p.elapsed_s, width=40))
    rates = (
        f"{p.users:,} user{'' if p.users == 1 else 's'} · "
        f"{'—' if p.requests_per_s is None else f'{p.requests_per_s:,.1f}'} req/s · "
        f"{'—' if p.output_tokens_per_s is None else f'{p.output_tokens_per_s:,.0f}'} output tok/s · "
        f"{ttft_text(p)}  (last {WINDOW_S:g} s)"
    )
    errors = f"{p.requests:,} requests, {errors_text(p)}"
    if p.recent_errors:
        errors += f"; {p.recent_errors:,} in the last {WINDOW_S:g} s"
    timing_style = {"pass": "green", "fail": "bold red", "warn": "yellow"}.get(p.timing.status, "dim")
    lines: list[Any] = [
        head,
        Text(rates, no_wrap=True, overflow="ellipsis"),
        Text(errors, style="bold red" if p.errors else "", no_wrap=True, overflow="ellipsis"),
        Text(_timing_words(p), style=timing_style, no_wrap=True, overflow="ellipsis"),
    ]
    if p.simulated:
        lines.append(Text("SIMULATED — the built-in emulator, not a real server", style="yellow"))
    return Group(*lines)


def _timing_words(p: Progress) -> str:
    """The live display's timing line: the status, and what the judgement says when it says more."""
    note = p.timing.note.removeprefix("timing trustworthy: ")
    if not note or p.timing.status not in ("pass", "warn", "wait"):
        return timing_text(p)
    return f"timing ok: {note}" if p.timing.status == "pass" else f"timing: {note}"
