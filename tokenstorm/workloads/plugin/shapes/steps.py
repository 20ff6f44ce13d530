"""Load shapes: steps and open-loop arrivals (the capacity search is in :mod:`.capacity`).

* :class:`StepShape` — ``--steps 8x60,16x60,32x120`` (users x seconds, ramped at
  ``--spawn-rate``): the classic ramp.
* :class:`OpenLoopUser` — requests arrive at ``--arrival-rate`` per second (``--arrival
  constant`` or ``poisson``) whether or not earlier ones finished, so a slow server does not
  slow the offered load (no coordinated omission). The rate is the run's: a distributed run's
  workers share one schedule (:mod:`..core.arrivals`). Each record's ``send_lag_s`` says how late
  the client sent it against its schedule. Requests go through the same :func:`send` path as
  closed-loop users' (the run's options, records, live stats).
"""

from __future__ import annotations

import copy
import random
import sys
import time
import uuid
import weakref
from typing import ClassVar

import gevent
from gevent.pool import Pool
from locust import LoadTestShape, User, task
from locust.env import Environment

from ...client import CompletionRequest, LlmClient
from ...rundir import ErrorCategory
from ...traffic.arrivals import arrival_offsets
from ..core import arrivals, locust_compat
from ..core.context import context, current_options
from ..core.options import parse_steps
from ..users.workload import resolve_model, run_client, run_targets, send

__all__ = ["OpenLoopUser", "ScheduledSender", "StepShape", "parse_steps"]


class StepShape(LoadTestShape):
    """Users in steps (``--steps``); the test ends after the last step."""

    def tick(self) -> tuple[int, float] | None:
        if self.runner is None:
            return None
        opts = current_options(self.runner.environment)
        elapsed = self.get_run_time()
        for users, secs in opts.steps or ((1, 60.0),):
            if elapsed < secs:
                return users, opts.spawn_rate
            elapsed -= secs
        return None

    def progress(self) -> tuple[str | None, float | None]:
        """The progress display's stage (``step 2 of 3``) and the seconds left of the plan."""
        if self.runner is None:
            return None, None
        steps = current_options(self.runner.environment).steps or ((1, 60.0),)
        elapsed = self.get_run_time()
        total, ends = 0.0, []
        for _users, secs in steps:
            total += secs
            ends.append(total)
        index = next((i for i, end in enumerate(ends) if elapsed < end), len(steps) - 1)
        return f"step {index + 1} of {len(steps)}", max(0.0, total - elapsed)


class ScheduledSender(User):
    """What users that send at scheduled times share (open-loop arrivals, trace replay): every request goes to
    each target at the same instant from a pool of idle clients per target, never waiting for replies, its
    ``send_lag_s`` measured against the schedule."""

    abstract = True
    one_per_process = True  # a distributed master spawns one per worker (core.arrivals)
    _max_in_flight: ClassVar[int] = 10_000

    def open_targets(self) -> None:
        """The run's targets (A/B: each), their models, and one idle client each to start with."""
        env = self.environment
        self.targets = run_targets(env, self.host)
        self.pool = Pool(self._max_in_flight * len(self.targets))
        self.idle: dict[str, list[LlmClient]] = {label: [] for label, _ in self.targets}
        self.models: dict[str, str] = {}
        for label, url in self.targets:
            probe = run_client(env, url, target=label)
            self.models[label] = resolve_model(env, probe)
            self.idle[label].append(probe)

    def send_to_all(self, req: CompletionRequest, scheduled: float) -> None:
        """Send ``req`` (scheduled at ``scheduled``, a perf_counter time) to every target, each in its own greenlet."""
        for label, url in self.targets:
            self.pool.spawn(
                self._send, copy.deepcopy(req) if label != self.targets[-1][0] else req, scheduled, label, url
            )

    def _send(self, req: CompletionRequest, scheduled: float, label: str = "", url: str = "") -> None:
        idle = self.idle[label]
        client = idle.pop() if idle else run_client(self.environment, url, target=label)
        record = send(self.environment, client, req, self.models[label], scheduled=scheduled)
        if record.error_category != ErrorCategory.CANCELLED:
            idle.append(client)
        else:
            client.close()

    def announce(self) -> bool:
        """Tell the master this process sends its share of the schedule (``False``: another user of this process
        already does — Locust moved one here — and this one stays idle)."""
        env = self.environment
        if _SENDING.get(env) not in (None, self):
            return False
        _SENDING[env] = self
        arrivals.sender_up(env)
        return True

    def on_stop(self) -> None:
        if _SENDING.get(self.environment) is self:
            del _SENDING[self.environment]
            arrivals.sender_down(self.environment)
        self.pool.kill(block=True, timeout=5)
        for clients in self.idle.values():
            for c in clients:
                c.close()


#: the scheduled sender of each process's environment (one sends; another Locust puts there idles)
_SENDING: weakref.WeakKeyDictionary[Environment, ScheduledSender] = weakref.WeakKeyDictionary()


class OpenLoopUser(ScheduledSender):
    """One per process: sends requests at scheduled arrival times, never waiting for replies."""

    fixed_count = 1
    open_loop = True  # its workloads are all the weighted ones (checked at start-up)

    def on_start(self) -> None:
        self.ctx = context(self.environment)
        self.open_targets()
        self._nonce = uuid.uuid4().hex[:12]

    @task
    def dispatch(self) -> None:
        """Send this process's share of the run's arrivals, forever (until the run stops)."""
        env = self.environment
        if not self.announce():
            gevent.sleep(sys.float_info.max / 2)  # until the run stops this user
        opts = self.ctx.options
        settings = self.ctx.workload_settings
        names = [n for n, s in settings.items() if s.weight > 0]
        weights = [settings[n].weight for n in names]
        shares = arrivals.shares(env)
        t0 = arrivals.schedule_zero(env)
        zero = arrivals.zero_epoch(env, t0)
        shared = locust_compat.is_worker(env.runner)  # its shares may change: decide each arrival late
        for j, offset in enumerate(arrival_offsets(opts.arrival_rate, opts.poisson, opts.seed)):
            scheduled = t0 + offset
            if shared and (wait := scheduled - arrivals.DECIDE_S - time.perf_counter()) > 0:
                gevent.sleep(wait)
            if not shares.owns(j, zero + offset):
                continue
            delay = scheduled - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
            rng = random.Random(f"{opts.seed}/open-loop/{j}")  # arrival j's request, however many workers
            req = self.ctx.builder(rng.choices(names, weights)[0]).next(rng)  # a new session's first request
            req.request_id = f"{self._nonce}-{j:x}"  # arrival j of the run (A/B: the twins' shared id)
            self.send_to_all(req, scheduled)
