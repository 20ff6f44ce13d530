"""SLO capacity search: raise the users step by step and judge each step with the reports'
own SLO evaluation (every latency target — TTFT, ITL, TPOT, E2E — and the error rate); stop at
the first step that breaks and write ``capacity.json`` with the highest load that held. A step
whose timing was not trustworthy (the load generator read its streams late: the reports'
``evaluate_fidelity`` over its judged records) does not hold either, and the search stops there:
what it measured is the client's own queueing, so no capacity is reported at or above it.

A step is judged by the SLOs' intervals (``--confidence``): one that failed none but whose interval straddles
a target is *inconclusive* — too few requests to tell, not broken. It is held once more for another
``--capacity-step-time`` and judged again on its second half and the extension; still inconclusive, it does
not count as held (the highest load that held stays below it, which it may reach: said) and the search goes
on, until a step breaks — or until two steps in a row ended inconclusive: the steps are too short for the
SLOs' percentiles, and the search stops saying so.

Each step's requests come from the record writer's tail (what it took since the previous
step), so the judgement uses exactly the records the report will, whatever the on-disk format,
and memory stays bounded however long the search runs.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from locust import LoadTestShape

from ...rundir import CapacityStep, ErrorCategory, write_capacity
from ...rundir.sweep import BROKEN, INCONCLUSIVE
from ..core.context import context, current_options
from .levels import RunRecords, capacity_result, judge_step, judged_load, untrusted_reason

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
        self._records = RunRecords()
        self._extended = False  # the current step was inconclusive once and is held a second step time

    def tick(self) -> tuple[int, float] | None:
        if self._done or self.runner is None:
            return None
        opts = current_options(self.runner.environment)
        now = self.get_run_time()
        self._records.follow(context(self.runner.environment).writer)
        if self._users == 0:
            self._users, self._step_started = opts.capacity_start, now
        elif now - self._step_started >= opts.capacity_step_time_s * (2 if self._extended else 1):
            # The step's second half is judged (its first is the queue settling); an extended step: from there on.
            verdict = self._judge(self._step_started + opts.capacity_step_time_s / 2, now)
            if verdict.outcome() == INCONCLUSIVE and not self._extended:
                self._extended = True  # too few requests to tell: hold the step once more, then judge it again
                log.info(
                    "tokenstorm: capacity step %d users: inconclusive (%s) — held another %g s",
                    verdict.users,
                    _fmt(verdict.measured),
                    opts.capacity_step_time_s,
                )
                return self._users, float(max(self._users, 1))
            verdict.extended, self._extended = self._extended, False
            self.verdicts.append(verdict)
            log.info(
                "tokenstorm: capacity step %d users: %s (%s)",
                verdict.users,
                _step_word(verdict),
                _fmt(verdict.measured),
            )
            stopped = _inconclusive_run(self.verdicts)
            if verdict.outcome() == BROKEN or stopped or self._users + opts.capacity_step > opts.capacity_max:
                self._finish(verdict, stopped)
                return None
            self._users, self._step_started = self._users + opts.capacity_step, now
        return self._users, float(max(self._users, 1))  # reach each step at once

    def progress(self) -> tuple[str | None, float | None]:
        """The progress display's stage (``capacity step 3, up to 64 users``); its length is not known."""
        if self.runner is None or self._users == 0 or self._done:
            return None, None
        top = current_options(self.runner.environment).capacity_max
        return f"capacity step {len(self.verdicts) + 1}, up to {top} users", None

    def _step_records(self, lo: float, hi: float) -> list[dict[str, Any]]:
        """This step's records started in ``[lo, hi)`` (epoch seconds), cancelled ones left out."""
        assert self.runner is not None
        started = self._records.kept(context(self.runner.environment), lambda r: _started(r) >= lo)
        return [r for r in started if _started(r) < hi and r.get("error_category") != ErrorCategory.CANCELLED]

    def _judge(self, t_from: float, t_to: float) -> CapacityStep:
        """The step judged on the records that started from ``t_from`` to ``t_to`` (run seconds)."""
        from tokenstorm.reports import load_slo_spec

        assert self.runner is not None
        ctx = context(self.runner.environment)
        wall_start = time.time() - self.get_run_time()
        lo = wall_start + t_from
        rows = self._step_records(lo, wall_start + t_to)
        spec = ctx.slo_spec if ctx.slo_spec is not None else load_slo_spec()
        labels = [label for label, _ in ctx.options.targets]  # a target with no record here breaks the step
        counts = getattr(self.runner.environment.parsed_options, "timing_verdict", "fail") != "warn"
        load = judged_load(ctx.run_dir, lo, time.time())
        return judge_step(rows, spec, self._users, labels, load, counts, ctx.options.confidence)

    def _finish(self, last: CapacityStep, stopped: str | None = None) -> None:
        self._done = True
        result = capacity_result(self.verdicts, stopped)
        assert self.runner is not None
        ctx = context(self.runner.environment)
        if ctx.run_dir is not None:
            write_capacity(ctx.run_dir, result)
        if result.untrustworthy_at_users is not None:
            stopped = "; " + untrusted_reason(last.users, last.timing_reason)
        else:
            said = "" if result.broke_at_users is None else f"; SLOs broke at {result.broke_at_users} users"
            if result.inconclusive_users:
                said += f"; {_users(result.inconclusive_users)} inconclusive (the capacity may be that high)"
            stopped = said + (f"; {result.stopped}" if result.stopped else "")
        log.log(
            logging.ERROR if result.untrustworthy_at_users is not None else logging.INFO,
            "tokenstorm: capacity — highest load that held: %s users%s",
            result.highest_users_that_held,
            stopped,
        )


def _step_word(step: CapacityStep) -> str:
    if not step.timing_trustworthy:
        return f"TIMING NOT TRUSTWORTHY — {step.timing_reason}"
    if step.outcome() == INCONCLUSIVE:
        return "inconclusive (not held for sure, not broken: too few requests to tell)"
    return "held" if step.held else "BROKE"


def _users(users: list[int]) -> str:
    return f"{', '.join(map(str, users))} user{'s' if users[-1] != 1 else ''}"


#: inconclusive steps in a row (each held twice its step time) that end a search: more users would only
#: add more of them — the steps are too short for the SLOs' percentiles
INCONCLUSIVE_IN_A_ROW = 2


def _inconclusive_run(steps: list[CapacityStep]) -> str | None:
    """Why the search stops after its last step (None: it goes on): :data:`INCONCLUSIVE_IN_A_ROW` in a row."""
    last = steps[-INCONCLUSIVE_IN_A_ROW:]
    if len(last) < INCONCLUSIVE_IN_A_ROW or any(s.outcome() != INCONCLUSIVE for s in last):
        return None
    return (
        f"stopped: {INCONCLUSIVE_IN_A_ROW} steps in a row inconclusive after twice --capacity-step-time — "
        "too few requests per step for the SLOs' percentiles; a longer --capacity-step-time answers"
    )


def _fmt(measured: dict[str, float | None]) -> str:
    return ", ".join(f"{k} {'—' if v is None else f'{v:.0f}'}" for k, v in measured.items()) or "no SLO targets"


def _started(record: dict[str, Any]) -> float:
    return float(record.get("start_epoch_s") or 0.0)
