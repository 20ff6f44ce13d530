"""Load shapes: steps, open-loop arrivals, and an SLO capacity search.

* :class:`StepShape` — ``--steps 8x60,16x60,32x120`` (users x seconds, ramped at
  ``--spawn-rate``): the classic ramp.
* :class:`OpenLoopUser` — requests arrive at ``--arrival-rate`` per second (``--arrival
  constant`` or ``poisson``) whether or not earlier ones finished, so a slow server does not
  slow the offered load (no coordinated omission). Each record's ``send_lag_s`` says how late
  the client sent it against its schedule.
* :class:`CapacitySearchShape` — raises the users step by step and judges each step's
  requests against the run's SLO file (latency percentiles and error rate); stops at the
  first step that breaks and writes ``capacity.json`` with the highest load that held.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import gevent
import numpy as np
from gevent.pool import Pool
from locust import LoadTestShape, User, task
from locust.runners import WorkerRunner

from ._client import LlmClient
from ._locust import _fire_stats, _resolve_model, apply_run_options, context, run_client
from ._records import ErrorCategory

__all__ = ["CapacitySearchShape", "OpenLoopUser", "StepShape", "parse_steps"]

log = logging.getLogger("tokenstorm")


def parse_steps(text: str) -> list[tuple[int, float]]:
    """``8x60,16x60`` -> [(8, 60.0), (16, 60.0)]; raise ``ValueError`` with the syntax."""
    steps = []
    for item in str(text).split(","):
        users, _, secs = item.strip().partition("x")
        try:
            step = (int(users), float(secs))
        except ValueError:
            raise ValueError(f"--steps {text!r}: expected USERSxSECONDS,... e.g. 8x60,16x60") from None
        if step[0] < 0 or step[1] <= 0:
            raise ValueError(f"--steps {text!r}: users >= 0 and seconds > 0")
        steps.append(step)
    return steps


class StepShape(LoadTestShape):
    """Users in steps (``--steps``); the test ends after the last step."""

    def tick(self) -> tuple[int, float] | None:
        opts = self.runner.environment.parsed_options if self.runner else None
        steps = parse_steps(getattr(opts, "steps", "") or "1x60")
        spawn_rate = float(getattr(opts, "spawn_rate", 1.0) or 1.0)
        elapsed = self.get_run_time()
        for users, secs in steps:
            if elapsed < secs:
                return users, spawn_rate
            elapsed -= secs
        return None


@dataclass
class StepVerdict:
    """The judgement of one capacity-search step."""

    users: int
    requests: int
    held: bool
    measured: dict[str, float | None]


class CapacitySearchShape(LoadTestShape):
    """Raise users from ``--capacity-start`` by ``--capacity-step`` every ``--capacity-step-time``
    seconds until a step breaks an SLO (or ``--capacity-max`` users); report the last that held."""

    def __init__(self) -> None:
        super().__init__()
        self.verdicts: list[StepVerdict] = []
        self._step_started = 0.0
        self._users = 0
        self._done = False

    def _opts(self) -> Any:
        return self.runner.environment.parsed_options if self.runner else None

    def tick(self) -> tuple[int, float] | None:
        if self._done:
            return None
        opts = self._opts()
        start = int(getattr(opts, "capacity_start", 4) or 4)
        step = int(getattr(opts, "capacity_step", 4) or 4)
        step_s = float(getattr(opts, "capacity_step_time", 30) or 30)
        max_users = int(getattr(opts, "capacity_max", 1024) or 1024)
        now = self.get_run_time()
        if self._users == 0:
            self._users, self._step_started = start, now
        elif now - self._step_started >= step_s:
            verdict = self._judge(self._step_started, now)
            self.verdicts.append(verdict)
            log.info("tokenstorm: capacity step %d users: %s (%s)", verdict.users,
                     "held" if verdict.held else "BROKE", _fmt(verdict.measured))  # fmt: skip
            if not verdict.held or self._users + step > max_users:
                self._finish(verdict)
                return None
            self._users, self._step_started = self._users + step, now
        return self._users, float(max(self._users, 1))  # reach each step at once

    def _judge(self, t_from: float, t_to: float) -> StepVerdict:
        assert self.runner is not None
        env = self.runner.environment
        ctx = context(env)
        wall_start = time.time() - self.get_run_time()
        # Judge the second half of the step: the first half is the queue settling.
        lo = wall_start + t_from + (t_to - t_from) / 2
        hi = wall_start + t_to
        rows = [r for r in ctx.recent if lo <= r[0] < hi and r[3] != ErrorCategory.CANCELLED]
        measured: dict[str, float | None] = {}
        held = bool(rows)
        spec = ctx.slo_spec
        for t in spec.targets if spec is not None else []:
            sel = rows if t.scope in ("run", "*") else [r for r in rows if r[1] == t.scope]
            if t.metric == "error_rate" and sel:
                value: float | None = 1 - sum(r[2] for r in sel) / len(sel)
            elif t.metric in ("ttft_ms", "e2e_ms"):
                idx = 4 if t.metric == "ttft_ms" else 5
                vals = np.array([r[idx] for r in sel if r[2] and r[idx] is not None], dtype=float) * 1000
                if not vals.size:
                    value = None
                elif t.stat == "mean":
                    value = float(vals.mean())
                elif t.stat == "max":
                    value = float(vals.max())
                else:
                    value = float(np.percentile(vals, float(t.stat[1:])))
            else:
                continue  # throughput and GPU targets are judged on the whole run, not per step
            measured[f"{t.scope} {t.metric} {t.stat}"] = value
            if value is None or value > t.threshold:
                held = False
        return StepVerdict(self._users, len(rows), held, measured)

    def _finish(self, last: StepVerdict) -> None:
        self._done = True
        held = [v for v in self.verdicts if v.held]
        best = max((v.users for v in held), default=None)
        doc = {"highest_users_that_held": best, "broke_at_users": None if last.held else last.users,
               "steps": [v.__dict__ for v in self.verdicts]}  # fmt: skip
        assert self.runner is not None
        ctx = context(self.runner.environment)
        if ctx.run_dir is not None:
            (ctx.run_dir / "capacity.json").write_text(json.dumps(doc, indent=2))
        log.info("tokenstorm: capacity — highest load that held: %s users%s", best,
                 "" if last.held else f"; SLOs broke at {last.users} users")  # fmt: skip


def _fmt(measured: dict[str, float | None]) -> str:
    return ", ".join(f"{k} {'—' if v is None else f'{v:.0f}'}" for k, v in measured.items()) or "no SLO targets"


class OpenLoopUser(User):
    """One per process: sends requests at scheduled arrival times, never waiting for replies."""

    fixed_count = 1
    _max_in_flight: ClassVar[int] = 10_000

    def on_start(self) -> None:
        env = self.environment
        opts = env.parsed_options
        runner = env.runner
        worker = runner.worker_index if isinstance(runner, WorkerRunner) else 0
        self.rng = random.Random(f"{getattr(opts, 'seed', 0)}/open-loop/{worker}")
        self.ctx = context(env)
        self.idle: list[LlmClient] = []
        self.pool = Pool(self._max_in_flight)
        probe = self._client()
        self.model = _resolve_model(env, probe)
        self.idle.append(probe)

    def _client(self) -> LlmClient:
        return run_client(self.environment, self.host or "")

    @task
    def dispatch(self) -> None:
        """Schedule arrivals forever (until the run stops)."""
        opts = self.environment.parsed_options
        rate = float(getattr(opts, "arrival_rate", 1.0) or 1.0)
        poisson = (getattr(opts, "arrival", "poisson") or "poisson") == "poisson"
        per_process = rate  # distributed runs: the rate is per worker process (documented)
        settings = self.ctx.workload_settings
        names = [n for n, s in settings.items() if s.weight > 0]
        weights = [settings[n].weight for n in names]
        t0 = time.perf_counter()
        next_t = 0.0
        while True:
            next_t += self.rng.expovariate(per_process) if poisson else 1.0 / per_process
            delay = t0 + next_t - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
            workload = self.rng.choices(names, weights)[0]
            req = self._request(workload)
            self.pool.spawn(self._send, req, t0 + next_t)

    def _request(self, workload: str) -> Any:
        builder = self.ctx.builder(workload)
        if workload == "chat":
            turns = builder.session(self.rng)
            return builder.request(self.rng, [{"role": "user", "content": turns[0]}])
        return builder.next(self.rng)

    def _send(self, req: Any, scheduled: float) -> None:
        client = self.idle.pop() if self.idle else self._client()
        lag = time.perf_counter() - scheduled
        record = client.complete(apply_run_options(self.environment.parsed_options, req), self.model)
        record.send_lag_s = max(0.0, lag)
        self.ctx.emit(record)
        if record.error_category != ErrorCategory.CANCELLED:
            _fire_stats(self.environment, record)
            self.idle.append(client)
        else:
            client.close()

    def on_stop(self) -> None:
        self.pool.kill(block=True, timeout=5)
        for c in self.idle:
            c.close()
