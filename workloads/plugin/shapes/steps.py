"""Load shapes: steps and open-loop arrivals (the capacity search is in :mod:`.capacity`).

* :class:`StepShape` — ``--steps 8x60,16x60,32x120`` (users x seconds, ramped at
  ``--spawn-rate``): the classic ramp.
* :class:`OpenLoopUser` — requests arrive at ``--arrival-rate`` per second (``--arrival
  constant`` or ``poisson``) whether or not earlier ones finished, so a slow server does not
  slow the offered load (no coordinated omission). Each record's ``send_lag_s`` says how late
  the client sent it against its schedule. Requests go through the same :func:`send` path as
  closed-loop users' (the run's options, records, live stats).
"""

from __future__ import annotations

import copy
import itertools
import random
import time
import uuid
from typing import ClassVar

import gevent
from gevent.pool import Pool
from locust import LoadTestShape, User, task

from ...client import CompletionRequest, LlmClient
from ...rundir import ErrorCategory
from ..core import locust_compat
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
            self.pool.spawn(self._send, copy.deepcopy(req) if label != self.targets[-1][0] else req,
                            scheduled, label, url)  # fmt: skip

    def _send(self, req: CompletionRequest, scheduled: float, label: str = "", url: str = "") -> None:
        idle = self.idle[label]
        client = idle.pop() if idle else run_client(self.environment, url, target=label)
        record = send(self.environment, client, req, self.models[label], send_lag_s=time.perf_counter() - scheduled)
        if record.error_category != ErrorCategory.CANCELLED:
            idle.append(client)
        else:
            client.close()

    def on_stop(self) -> None:
        self.pool.kill(block=True, timeout=5)
        for clients in self.idle.values():
            for c in clients:
                c.close()


class OpenLoopUser(ScheduledSender):
    """One per process: sends requests at scheduled arrival times, never waiting for replies."""

    fixed_count = 1
    open_loop = True  # its workloads are all the weighted ones (checked at start-up)

    def on_start(self) -> None:
        env = self.environment
        self.ctx = context(env)
        worker = locust_compat.worker_index(env.runner)
        self.rng = random.Random(f"{self.ctx.options.seed}/open-loop/{worker}")
        self.open_targets()
        self._nonce = uuid.uuid4().hex[:12]
        self._ids = itertools.count()

    @task
    def dispatch(self) -> None:
        """Schedule arrivals forever (until the run stops)."""
        opts = self.ctx.options
        rate = opts.arrival_rate  # distributed runs: the rate is per worker process (documented)
        settings = self.ctx.workload_settings
        names = [n for n, s in settings.items() if s.weight > 0]
        weights = [settings[n].weight for n in names]
        t0 = time.perf_counter()
        next_t = 0.0
        while True:
            next_t += self.rng.expovariate(rate) if opts.poisson else 1.0 / rate
            delay = t0 + next_t - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
            workload = self.rng.choices(names, weights)[0]
            req = self.ctx.builder(workload).next(self.rng)  # the first request of a new session
            if len(self.targets) > 1:
                req.request_id = f"{self._nonce}-{next(self._ids):x}"  # the twins' shared id
            self.send_to_all(req, t0 + next_t)
