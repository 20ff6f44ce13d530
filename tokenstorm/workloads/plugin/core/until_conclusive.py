"""``--until-conclusive``: keep the load on until every SLO is held or failed, then end the run.

Every few seconds (:data:`CHECK_EVERY_S`, longer when a check took long: a check may take a third of the time
at most) the records so far are flushed and a child process (``python -m tokenstorm.reports.judging.conclusive``,
started
once per run) judges the run directory exactly as the final report will — the warm-up left out, each A/B
target on its own, at the run's ``--confidence``. Once none is inconclusive the run ends by itself as a
planned end: a headless run quits (its exit code from the verdict, never 4 "incomplete"), a web UI run stops.
``-t`` stays the cap: a run still inconclusive then ends INCONCLUSIVE (exit code 6) with the requests an
answer needs. A distributed run judges what its workers have shipped to the master (every ~3 s).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
import weakref
from typing import Any

import gevent
from gevent import subprocess
from locust.env import Environment

from ...rundir import EXIT_RUN_FAILED
from ...rundir.procs import child_env
from . import locust_compat
from .context import RunContext, context

__all__ = ["CHECK_EVERY_S", "ConclusiveWatch", "conflict", "install", "refuse_a_shape", "start", "stop", "stop_line"]

log = logging.getLogger("tokenstorm")

#: seconds between two checks of a run (at the least)
CHECK_EVERY_S = 5.0
#: how long one check may take before it is given up (the run goes on; the next check asks again)
CHECK_TIMEOUT_S = 120.0


def stop_line(answer: dict[str, Any], elapsed_s: float) -> str:
    """``every SLO conclusive after 412 requests (38 s): ttft_ms p50 ... : held; ...``."""
    words = [*answer.get("failed", []), *answer.get("held", [])]
    return (
        f"tokenstorm: every SLO conclusive after {int(answer.get('requests') or 0):,} requests "
        f"({elapsed_s:.0f} s): {'; '.join(words)}"
    )


class ConclusiveWatch:
    """Watches one run (master or local runner) and ends it once every SLO is answered."""

    def __init__(self, environment: Environment, ctx: RunContext) -> None:
        self.environment = environment
        self.ctx = ctx
        self._proc: Any = None
        self._greenlet: gevent.Greenlet | None = None
        self.last: dict[str, Any] = {}  # the latest answer (the progress display may show it)
        self._said_error = False

    def start(self) -> None:
        """Start checking (once the run's directory is open)."""
        self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        """Stop checking and end the child (the run is stopping)."""
        greenlet, self._greenlet = self._greenlet, None
        if greenlet is not None and greenlet is not gevent.getcurrent():
            greenlet.kill(block=False)
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            if proc.poll() is None:
                proc.terminate()

    def _loop(self) -> None:
        wait_s = CHECK_EVERY_S
        while True:
            gevent.sleep(wait_s)
            if not locust_compat.is_running(self.environment.runner) or self.ctx.run_dir is None:
                continue
            started = time.monotonic()
            answer = self._check()
            took_s = time.monotonic() - started
            wait_s = max(CHECK_EVERY_S, 2 * took_s)  # the child busy a third of the time at most
            if answer is None:
                continue
            self.last = answer
            if answer.get("answered"):
                self._end(answer)
                return

    def _check(self) -> dict[str, Any] | None:
        """Flush the records so far and ask the child; None when it could not answer (said once)."""
        self.ctx.flush()
        if self._proc is None or self._proc.poll() is not None:
            cmd = [sys.executable, "-m", "tokenstorm.reports.judging.conclusive"]
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env())
        asked = {"run_dir": str(self.ctx.run_dir), "slo": self.ctx.options.slo, "slo_text": self.ctx.slo_spec_text}
        try:
            self._proc.stdin.write((json.dumps(asked) + "\n").encode())
            self._proc.stdin.flush()
            with gevent.Timeout(CHECK_TIMEOUT_S):
                line = self._proc.stdout.readline()
            answer: dict[str, Any] = json.loads(line)
        except (OSError, ValueError, gevent.Timeout) as exc:
            self._say_error(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            self._restart()
            return None
        if "error" in answer:
            self._say_error(str(answer["error"]))
            return None
        return answer

    def _restart(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()

    def _say_error(self, what: str) -> None:
        if not self._said_error:
            self._said_error = True
            log.warning(
                "tokenstorm: --until-conclusive could not judge the run so far (%s); it tries again, "
                "and -t still ends the run",
                what,
            )

    def _end(self, answer: dict[str, Any]) -> None:
        """Every SLO answered: say so and end the run as planned."""
        started = self.ctx.started_epoch_s or time.time()
        log.info("%s", stop_line(answer, time.time() - started))
        runner = self.environment.runner
        if runner is None:
            return
        # As -t ends one: a headless run quits (its outputs, then the exit code), a web UI run stops.
        gevent.spawn(runner.quit if getattr(self.environment.parsed_options, "headless", False) else runner.stop)


#: the watch of each environment's current run
_WATCHES: weakref.WeakKeyDictionary[Environment, ConclusiveWatch] = weakref.WeakKeyDictionary()


def conflict(environment: Environment, ctx: RunContext) -> str | None:
    """Why ``--until-conclusive`` cannot run here, in one line (None: it can): ``--confidence 0`` (nothing is
    ever inconclusive), or a load shape, which plans the run's
    end itself (steps, a sweep, a capacity search — each judges its own levels), and stopping it once the
    pooled SLOs are answered would cut that plan short."""
    if not ctx.options.until_conclusive:
        return None
    if not ctx.options.confidence:  # point estimates are never inconclusive: it would stop at its first check
        return "--until-conclusive needs intervals to wait for: drop --confidence 0 (or give e.g. 0.95)"
    if environment.shape_class is None:
        return None
    shape = type(environment.shape_class).__name__
    return (
        f"--until-conclusive: the {shape} plans the run's end itself (a sweep and a capacity search judge each "
        "level by its intervals); run --until-conclusive with plain users (-u, -t as the cap)"
    )


def refuse_a_shape(environment: Environment, **_kw: Any) -> None:
    """``init``: ``--until-conclusive`` with a load shape ends the run before any traffic, in one line (exit 3)."""
    ctx = context(environment)
    if environment.parsed_options is not None and not ctx.is_worker and (why := conflict(environment, ctx)):
        sys.stderr.write(f"tokenstorm: {why}\n")
        raise SystemExit(EXIT_RUN_FAILED)


def start(environment: Environment, **_kw: Any) -> None:
    """``test_start`` (master or local runner, the run directory open): watch the run if it asked to be."""
    stop(environment)
    ctx = context(environment)
    if ctx.is_worker or environment.parsed_options is None or ctx.run_dir is None:
        return
    if why := conflict(environment, ctx):  # the web UI form's option (the command line's is refused at start-up)
        log.error("tokenstorm: %s — the run goes on to its planned end", why)
        return
    if ctx.options.until_conclusive:
        watch = ConclusiveWatch(environment, ctx)
        _WATCHES[environment] = watch
        watch.start()


def stop(environment: Environment, **_kw: Any) -> None:
    """``test_stopping`` (a quit stops the users first: it fires then too): stop watching."""
    watch = _WATCHES.pop(environment, None)
    if watch is not None:
        watch.stop()


def install(events: Any) -> None:
    """Register the listeners, after the lifecycle's own: when they run, the options are checked and the
    run directory is open."""
    events.init.add_listener(refuse_a_shape)
    events.test_start.add_listener(start)
    events.test_stopping.add_listener(stop)
