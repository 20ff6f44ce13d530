"""Trace replay (``--trace FILE``): a recorded trace's requests sent open-loop at their recorded offsets.

:class:`TraceUser` — one per load-generating process, like :class:`~.steps.OpenLoopUser` — reads the
Mooncake JSONL trace (:mod:`tokenstorm.workloads.traffic.trace`), builds each request a little ahead of its time and
sends it at ``offset / --trace-speed`` after the replay's start, whether or not earlier ones finished.
Each record's ``send_lag_s`` says how late it went against the trace (shown as for open loop), and its
``request_id`` ends with the trace line it replays. The run ends when the last request has finished (or at
``-t``). Distributed: one user per worker (``--expect-workers N`` or ``--processes N``) on one timeline (the
master's start + 1 s, handed out with the options), the rows shared out as the run's one schedule
(:mod:`..core.arrivals`: worker i of n replays rows i, i+n, ..., re-split when one is lost); the master ends
the run when every worker still sending has finished.
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
from ..core import arrivals, locust_compat
from ..core.arrivals import ZERO_OPTION
from ..core.context import context
from .steps import ScheduledSender

__all__ = ["ZERO_OPTION", "TraceUser", "install_trace"]

log = logging.getLogger("tokenstorm")

#: a worker tells the master it has sent its share and every reply is in
_DONE_MESSAGE = "tokenstorm_trace_done"


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

    fixed_count = 1  # the master of a distributed run makes it one per worker (core.arrivals)
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
        self.rows = rows  # this process sends its share of them (core.arrivals)
        self.open_targets()
        self._nonce = uuid.uuid4().hex[:8]
        log.info(
            "tokenstorm: replaying the trace's %d requests over %.1f s (--trace-speed %g)",
            len(rows),
            rows[-1].offset_s / opts.trace_speed,
            opts.trace_speed,
        )

    @task
    def replay(self) -> None:
        """Send every row of this process's share at its time, wait for the replies, end the run."""
        if not self.announce():
            gevent.sleep(sys.float_info.max / 2)  # another user of this process sends its share
        if self.rows:
            self._replay(self.ctx.options.trace_speed)
            self.pool.join()
        _end_run(self.environment)
        gevent.sleep(sys.float_info.max / 2)  # until the run stops this user

    def _replay(self, speed: float) -> None:
        env = self.environment
        ahead: collections.deque[tuple[int, TraceRow, CompletionRequest]] = collections.deque()
        t0 = arrivals.schedule_zero(env)
        owned = _OwnedRows(
            self.rows,
            speed,
            t0,
            arrivals.zero_epoch(env, t0),
            arrivals.shares(env),
            shared=locust_compat.is_worker(env.runner),
        )

        def build_until(deadline: float, most: int = self._ahead) -> None:
            """Build upcoming requests of this process's share while there is time (one at a time: streams are
            read in between)."""
            while len(ahead) < most and time.perf_counter() < deadline:
                got = owned.take()
                if got is None:
                    return
                ahead.append((*got, self.prompts.request(got[1])))
                gevent.sleep(0)

        while True:
            if not ahead:
                got = owned.take()
                if got is None:
                    if not owned.left:
                        return
                    gevent.sleep(max(0.0, owned.decidable_at() - time.perf_counter()))
                    continue
                ahead.append((*got, self.prompts.request(got[1])))
            _j, row, req = ahead.popleft()
            scheduled = t0 + row.offset_s / speed
            build_until(scheduled - 0.002)
            delay = scheduled - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
            req.request_id = f"trace-{self._nonce}-{row.line}"  # the trace line it replays (A/B twins share it)
            self.send_to_all(req, scheduled)


class _OwnedRows:
    """The trace's rows in order, this process's share of them: a row is decided (``arrivals.DECIDE_S`` before its
    time on a worker, whose shares may change) and skipped when another worker's."""

    def __init__(
        self, rows: list[TraceRow], speed: float, t0: float, zero_epoch: float, shares: arrivals.Shares, shared: bool
    ) -> None:
        self._rows, self._speed, self._t0, self._zero = rows, speed, t0, zero_epoch
        self._shares, self._shared = shares, shared
        self._next = 0

    def decidable_at(self) -> float:
        """When the next row can be decided (perf_counter)."""
        return self._t0 + self._rows[self._next].offset_s / self._speed - arrivals.DECIDE_S

    @property
    def left(self) -> bool:
        """Whether rows are left to decide."""
        return self._next < len(self._rows)

    def take(self) -> tuple[int, TraceRow] | None:
        """The next row of this process's share; ``None`` when none is left or the next is not decidable yet."""
        while self._next < len(self._rows):
            if self._shared and time.perf_counter() < self.decidable_at():
                return None
            j, row = self._next, self._rows[self._next]
            self._next += 1
            if self._shares.owns(j, self._zero + row.offset_s / self._speed):
                return j, row
        return None


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
    finished: set[str] = set()
    sending: list[list[str]] = [[]]  # the workers the master last shared the trace between

    def check_done() -> None:
        if sending[0] and finished >= set(sending[0]):
            finished.clear()
            sending[0] = []
            _end_run(environment)

    def on_done(msg: Any, **_kw: Any) -> None:
        finished.add(str((msg.data or {}).get("worker", msg.node_id)))
        check_done()

    def on_senders(active: list[str]) -> None:
        sending[0] = list(active)
        check_done()  # a worker lost after the others finished: the run ends now

    def on_test_start(**_kw: Any) -> None:
        finished.clear()
        sending[0] = []

    runner.register_message(_DONE_MESSAGE, on_done)  # type: ignore[union-attr]
    arrivals.on_senders_change(environment, on_senders)
    environment.events.test_start.add_listener(on_test_start)


_INSTALLED: weakref.WeakSet[Events] = weakref.WeakSet()


def install_trace(event_hooks: Events | None = None) -> None:
    """Register the trace check and the distributed finish (idempotent; before :func:`install`, so a bad
    trace is said before the built-in emulator starts)."""
    ev = event_hooks or events
    if ev not in _INSTALLED:
        _INSTALLED.add(ev)
        ev.init.add_listener(_check_trace)
