"""SLO capacity search: raise the users step by step and judge each step with the reports'
own SLO evaluation (every latency target — TTFT, ITL, TPOT, E2E — and the error rate); stop at
the first step that breaks and write ``capacity.json`` with the highest load that held.

Each step's requests come from the record writer's tail (what it took since the previous
step), so the judgement uses exactly the records the report will, whatever the on-disk format,
and memory stays bounded however long the search runs.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from locust import LoadTestShape

from ..rundir import CapacityResult, CapacityStep, ErrorCategory, RecordTail, RunMeta, write_capacity
from .context import context, current_options

__all__ = ["CapacitySearchShape"]

log = logging.getLogger("tokenstorm")


class CapacitySearchShape(LoadTestShape):
    """Raise users from ``--capacity-start`` by ``--capacity-step`` every ``--capacity-step-time``
    seconds until a step breaks an SLO (or ``--capacity-max`` users); report the last that held."""

    def __init__(self) -> None:
        super().__init__()
        self.verdicts: list[CapacityStep] = []
        self._step_started = 0.0
        self._users = 0
        self._done = False
        self._tail: RecordTail | None = None
        self._tail_of: object = None  # the writer the tail is fed by (one per run)
        self._pending: list[dict[str, Any]] = []

    def tick(self) -> tuple[int, float] | None:
        if self._done or self.runner is None:
            return None
        opts = current_options(self.runner.environment)
        now = self.get_run_time()
        self._follow(context(self.runner.environment).writer)  # from the first tick: no record missed
        if self._users == 0:
            self._users, self._step_started = opts.capacity_start, now
        elif now - self._step_started >= opts.capacity_step_time_s:
            verdict = self._judge(self._step_started, now)
            self.verdicts.append(verdict)
            log.info("tokenstorm: capacity step %d users: %s (%s)", verdict.users,
                     "held" if verdict.held else "BROKE", _fmt(verdict.measured))  # fmt: skip
            if not verdict.held or self._users + opts.capacity_step > opts.capacity_max:
                self._finish(verdict)
                return None
            self._users, self._step_started = self._users + opts.capacity_step, now
        return self._users, float(max(self._users, 1))  # reach each step at once

    def _step_records(self, lo: float, hi: float) -> list[dict[str, Any]]:
        """This step's records started in ``[lo, hi)`` (epoch seconds), cancelled ones left out."""
        assert self.runner is not None
        ctx = context(self.runner.environment)
        if ctx.run_dir is None:
            return []
        ctx.flush()
        self._follow(ctx.writer)
        if self._tail is None:
            return []
        self._pending = [r for r in (*self._pending, *self._tail.read_new())
                         if float(r.get("start_epoch_s") or 0.0) >= lo]  # fmt: skip
        return [r for r in self._pending if float(r.get("start_epoch_s") or 0.0) < hi
                and r.get("error_category") != ErrorCategory.CANCELLED]  # fmt: skip

    def _follow(self, writer: Any) -> None:
        """Tail ``writer`` (the run's record writer; a new run has a new one)."""
        if writer is not None and self._tail_of is not writer:
            self._tail, self._tail_of, self._pending = writer.tail(), writer, []

    def _judge(self, t_from: float, t_to: float) -> CapacityStep:
        from reports import evaluate_each_target, load_slo_spec, per_request_spec, run_from_records

        assert self.runner is not None
        ctx = context(self.runner.environment)
        wall_start = time.time() - self.get_run_time()
        # Judge the second half of the step: the first half is the queue settling.
        rows = self._step_records(wall_start + t_from + (t_to - t_from) / 2, wall_start + t_to)
        spec = per_request_spec(ctx.slo_spec if ctx.slo_spec is not None else load_slo_spec())
        # A step has its own settling time (its first half); --warmup flags do not take its requests away.
        rows = [{**r, "warmup": False} for r in rows]
        # A/B runs: a step holds only if it holds on every target.
        labels = [label for label, _ in ctx.options.targets]  # a target with no record here breaks the step
        results = evaluate_each_target(run_from_records(rows, RunMeta(status="running")), spec, labels) if rows else []
        measured = {f"{r.target + ' ' if r.target else ''}{r.scope} {r.metric} {r.stat}": r.measured for r in results}
        return CapacityStep(self._users, len(rows), bool(rows) and all(r.passed for r in results), measured)

    def _finish(self, last: CapacityStep) -> None:
        self._done = True
        best = max((v.users for v in self.verdicts if v.held), default=None)
        assert self.runner is not None
        ctx = context(self.runner.environment)
        if ctx.run_dir is not None:
            write_capacity(ctx.run_dir, CapacityResult(best, None if last.held else last.users, self.verdicts))
        log.info("tokenstorm: capacity — highest load that held: %s users%s", best,
                 "" if last.held else f"; SLOs broke at {last.users} users")  # fmt: skip


def _fmt(measured: dict[str, float | None]) -> str:
    return ", ".join(f"{k} {'—' if v is None else f'{v:.0f}'}" for k, v in measured.items()) or "no SLO targets"
