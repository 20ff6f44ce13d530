"""Trace replay (``--trace FILE``): a recorded trace's requests sent open-loop at their recorded offsets.

:class:`TraceUser` — one per load-generating process, like :class:`~.steps.OpenLoopUser` — reads the
Mooncake JSONL trace (:mod:`workloads.traffic.trace`), builds each request a little ahead of its time and
sends it at ``offset / --trace-speed`` after the replay's start, whether or not earlier ones finished.
Each record's ``send_lag_s`` says how late it went against the trace (shown as for open loop), and its
``request_id`` ends with the trace line it replays. The run ends when the last request has finished (or at
``-t``). Distributed: one user per worker (``--expect-workers N`` or ``--processes N``), worker i of n
replays rows i, i+n, ... on one timeline (the master's start + 1 s, handed out with the options); the
master ends the run when every worker has finished.
"""

from __future__ import annotations

import collections
import logging
import sys
import time
import uuid
import weakref
from typing import Any, ClassVar

import gevent
from gevent.pool import Pool
from locust import events, task
from locust.env import Environment
from locust.event import Events

from ...client import CompletionRequest, LlmClient
from ...rundir import EXIT_RUN_FAILED
from ...traffic.trace import TRACE_WORKLOAD, TraceError, TracePrompts, TraceRow, read_trace
from ..core import locust_compat
from ..core.context import context
from .steps import ScheduledSender

__all__ = ["ZERO_OPTION", "TraceUser", "install_trace", "worker_share"]

log = logging.getLogger("tokenstorm")

#: a worker tells the master it has sent its share and every reply is in
_DONE_MESSAGE = "tokenstorm_trace_done"
#: the option (not a flag) by which a master hands its workers the replay's zero (epoch seconds)
ZERO_OPTION = "trace_zero_epoch_s"
#: seconds from a distributed run's start to its replay's zero: the workers' own start-up (their first
#: requests would be late otherwise)
_WORKERS_LEAD_S = 1.0


def worker_share(rows: list[TraceRow], index: int, workers: int) -> list[TraceRow]:
    """The rows worker ``index`` of ``workers`` replays: every ``workers``-th from its index."""
    return rows[index :: max(1, workers)]


def _expected_workers(environment: Environment) -> int:
    opts = environment.parsed_options
    return max(1, int(getattr(opts, "expect_workers", 1) or 1)) if not _local(environment) else 1


def _local(environment: Environment) -> bool:
    return not (locust_compat.is_worker(environment.runner) or locust_compat.is_master(environment.runner))


def _end_run(environment: Environment) -> None:
    """The replay is over here: a worker tells its master; a master or local runner ends the run."""
    runner = environment.runner
    if runner is None:
        return
    if locust_compat.is_worker(runner):
        runner.send_message(_DONE_MESSAGE, {"worker": locust_compat.worker_client_id(runner)})
        return
    headless = bool(getattr(environment.parsed_options, "headless", False))
    gevent.spawn(runner.quit if headless else runner.stop)


class TraceUser(ScheduledSender):
    """One per process: sends the trace's requests at their recorded times, never waiting for replies."""

    fixed_count = 1  # the master of a distributed run makes it one per worker (install_trace)
    workload = TRACE_WORKLOAD
    trace_replay = True
    #: requests built ahead of their send time (each a prompt of up to the trace's longest)
    _ahead: ClassVar[int] = 32

    def on_start(self) -> None:
        env = self.environment
        self.ctx = context(env)
        opts = self.ctx.options
        self.rows: list[TraceRow] = []
        self.pool = Pool(1)
        self.idle: dict[str, list[LlmClient]] = {}
        try:
            if not opts.trace:
                raise TraceError("trace_replay.py needs --trace FILE (a Mooncake JSONL trace)")
            rows = read_trace(opts.trace)
            self.prompts = TracePrompts(self.ctx.token_counter, opts.trace_block_size, opts.seed)
        except ValueError as exc:  # TraceError, a tokenizer that cannot size the prompts
            self.ctx.problem = str(exc)
            log.error("tokenstorm: %s", exc)
            env.process_exit_code = EXIT_RUN_FAILED
            return
        workers = _expected_workers(env)
        self.rows = worker_share(rows, locust_compat.worker_index(env.runner) % workers, workers)
        self.open_targets()
        self._nonce = uuid.uuid4().hex[:8]
        log.info("tokenstorm: replaying %d of the trace's %d requests over %.1f s (--trace-speed %g)",
                 len(self.rows), len(rows), rows[-1].offset_s / opts.trace_speed, opts.trace_speed)  # fmt: skip

    @task
    def replay(self) -> None:
        """Send every row of this process's share at its time, wait for the replies, end the run."""
        if self.rows:
            self._replay(self.ctx.options.trace_speed)
            self.pool.join()
        _end_run(self.environment)
        gevent.sleep(sys.float_info.max / 2)  # until the run stops this user

    def _replay(self, speed: float) -> None:
        ahead: collections.deque[tuple[TraceRow, CompletionRequest]] = collections.deque()
        rows = iter(self.rows)
        t0 = time.perf_counter()
        zero = getattr(self.environment.parsed_options, ZERO_OPTION, None)
        if locust_compat.is_worker(self.environment.runner) and isinstance(zero, float):
            t0 += zero - time.time()  # the master's zero, the same instant for every worker

        def build_until(deadline: float, most: int = self._ahead) -> None:
            """Build upcoming requests while there is time (one at a time: streams are read in between)."""
            while len(ahead) < most and time.perf_counter() < deadline:
                row = next(rows, None)
                if row is None:
                    return
                ahead.append((row, self.prompts.request(row)))
                gevent.sleep(0)

        while True:
            if not ahead:
                build_until(float("inf"), most=1)  # the next one only: it may be due now (none left: done)
                if not ahead:
                    return
            row, req = ahead.popleft()
            scheduled = t0 + row.offset_s / speed
            build_until(scheduled - 0.002)
            delay = scheduled - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
            req.request_id = f"trace-{self._nonce}-{row.line}"  # the trace line it replays (A/B twins share it)
            self.send_to_all(req, scheduled)


def _check_trace(environment: Environment, **_kw: Any) -> None:
    """``init``: a headless run has a readable trace before any traffic (one line, exit 3); a
    distributed master runs one :class:`TraceUser` per worker and ends the run when all have finished."""
    opts = environment.parsed_options
    if opts is None or locust_compat.is_worker(environment.runner):
        return
    path = str(getattr(opts, "trace", "") or "")
    try:
        if path:
            read_trace(path)
        elif getattr(opts, "headless", False):
            raise TraceError("trace_replay.py needs --trace FILE (a Mooncake JSONL trace)")
    except TraceError as exc:
        sys.stderr.write(f"tokenstorm: {exc}\n")
        raise SystemExit(EXIT_RUN_FAILED) from None
    runner = environment.runner
    if not locust_compat.is_master(runner):
        return
    workers = _expected_workers(environment)
    TraceUser.fixed_count = workers
    if int(getattr(opts, "num_users", 0) or 0) < workers:
        opts.num_users = workers  # fixed-count users are spawned only up to the run's user count
    opts.spawn_rate = max(float(getattr(opts, "spawn_rate", 1) or 1), float(workers))  # all within the lead
    finished: set[str] = set()

    def on_done(msg: Any, **_kw: Any) -> None:
        finished.add(str((msg.data or {}).get("worker", msg.node_id)))
        if len(finished) >= workers:
            finished.clear()
            _end_run(environment)

    def on_test_start(**_kw: Any) -> None:
        finished.clear()
        # After tokenstorm's own test_start work, before the spawn messages that carry the options.
        setattr(environment.parsed_options, ZERO_OPTION, time.time() + _WORKERS_LEAD_S)

    runner.register_message(_DONE_MESSAGE, on_done)  # type: ignore[union-attr]
    environment.events.test_start.add_listener(on_test_start)


_INSTALLED: weakref.WeakSet[Events] = weakref.WeakSet()


def install_trace(event_hooks: Events | None = None) -> None:
    """Register the trace check and the distributed finish (idempotent; before :func:`install`, so a bad
    trace is said before the built-in emulator starts)."""
    ev = event_hooks or events
    if ev not in _INSTALLED:
        _INSTALLED.add(ev)
        ev.init.add_listener(_check_trace)
