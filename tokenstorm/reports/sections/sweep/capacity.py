"""A capacity search (``capacity.json``) as the report leads with it: the highest load that held and each step's
row — its TTFT, ITL and E2E percentiles, its SLOs as the search judged them on the step's own requests — and the
run's verdict, which comes from the steps, never from SLOs pooled over them (the search stops at the step that
broke: pooled, that step would fail every search that found its capacity).

A step's percentiles are over the successful requests that started in its second half (the first half is the
queue settling) and had ended when the search judged the step at its end — the requests the search judged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.formats import slo_value
from tokenstorm.reports.judging.slo import per_request_spec
from tokenstorm.reports.judging.slo_spec import SloSpec
from tokenstorm.reports.sections.sweep.model import knee_range_words, percentiles_ms
from tokenstorm.workloads.rundir import SWEEP_MIN_REQUESTS, CapacityResult, CapacityStep, read_capacity, read_load
from tokenstorm.workloads.rundir.sweep import HELD, INCONCLUSIVE

__all__ = ["CapacityRow", "CapacityView", "capacity_block", "capacity_verdict", "capacity_view", "step_windows"]

log = logging.getLogger("tokenstorm")


@dataclass
class CapacityRow:
    """One step of the search as its row shows it."""

    step: CapacityStep
    latency_ms: dict[str, dict[str, float | None]]  # ttft/itl/e2e -> p50/p95/p99 (ms)
    requests: int  # the successful requests of the step's second half behind the percentiles
    #: each SLO in words, and whether it held (inconclusive: not held, not broken: ``unsure`` names it)
    slos: list[tuple[str, bool]] = field(default_factory=list)
    highest: bool = False  # the highest load that held
    unsure: list[str] = field(default_factory=list)  # the SLOs inconclusive at this step, in words

    @property
    def low(self) -> list[str]:
        """The percentiles from too few requests to be a tail (``["p99"]``)."""
        return [f"p{p}" for p, least in SWEEP_MIN_REQUESTS.items() if self.requests < least]

    def broken(self) -> list[str]:
        """What the step broke (its timing, or each SLO with its figure in its unit)."""
        out = [] if self.step.timing_trustworthy else [self.step.timing_reason or "timing not trustworthy"]
        out += [words for words, held in self.slos if not held and words not in self.unsure]
        if not out and self.step.outcome() == INCONCLUSIVE:
            return list(self.unsure)
        return out if out or self.step.requests else ["no judged requests"]

    @property
    def word(self) -> str:
        """The step's outcome as its SLO cell says it."""
        if not self.step.timing_trustworthy:
            return "timing not trustworthy"
        word = {HELD: "held", INCONCLUSIVE: "inconclusive"}.get(self.step.outcome(), "BROKE")
        return word + (" (held twice its time)" if self.step.extended else "")

    @property
    def css(self) -> str:
        """The SLO cell's class: ``pass``, ``undecided`` (inconclusive) or ``fail``."""
        return {HELD: "pass", INCONCLUSIVE: "undecided"}.get(self.step.outcome(), "fail")


@dataclass
class CapacityView:
    """What the report's capacity section shows."""

    result: CapacityResult
    rows: list[CapacityRow]

    @property
    def uncertainty(self) -> str:
        """How high the capacity may be above the highest step held (``between 8 and 16 users: 12, 16
        inconclusive``); "" when no step above it was inconclusive."""
        return knee_range_words(self.result.highest_users_that_held, self.result.inconclusive_users)


def capacity_view(run: RunData, spec: SloSpec) -> CapacityView | None:
    """The capacity section of ``run``'s report; ``None`` when the run was no capacity search."""
    result = _read(run)
    if result is None or not result.steps:
        return None
    windows = step_windows(run, result)
    targets = per_request_spec(spec).targets
    rows = []
    for step in result.steps:
        lo, hi = windows.get(step.users, (0.0, 0.0))
        df = run.requests
        start = df["start_epoch_s"].to_numpy(dtype=float) if len(df) else np.zeros(0)
        ok = df["ok"].fillna(False).astype(bool).to_numpy() if len(df) else np.zeros(0, dtype=bool)
        ended = start + df["e2e_s"].to_numpy(dtype=float) if len(df) else np.zeros(0)
        # as the search judged the step: its second half's requests that had ended when it was judged
        sel = ok & (start >= lo) & (start < hi) & (ended <= hi)
        slos = [_slo_words(key, value, targets, step.results.get(key)) for key, value in step.measured.items()]
        unsure = [
            words for (words, _), key in zip(slos, step.measured, strict=True) if step.results.get(key) == INCONCLUSIVE
        ]
        highest = step.users == result.highest_users_that_held
        rows.append(CapacityRow(step, percentiles_ms(run, sel), int(sel.sum()), slos, highest, unsure))
    return CapacityView(result, rows)


def step_windows(run: RunData, result: CapacityResult) -> dict[int, tuple[float, float]]:
    """users -> the epoch seconds of the step's second half: the steps follow one another every
    ``--capacity-step-time`` from the run's start (``load.jsonl``'s users over time when that is unknown)."""
    step_s, t0 = run.meta.option("capacity_step_time"), run.meta.started_epoch_s
    length = _seconds(step_s)
    out: dict[int, tuple[float, float]] = {}
    if length and t0:  # an inconclusive step was held twice its time: judged from its middle to its end
        start = float(t0)
        for s in result.steps:
            end = start + length * (2 if s.extended else 1)
            out[s.users] = (start + length / 2, end)
            start = end
        return out
    load = read_load(run.path)
    for step in result.steps:
        times = [s.epoch_s for s in load if s.users == step.users]
        if not times:
            continue
        later = [s.epoch_s for s in load if s.epoch_s > times[0] and s.users != step.users]
        end = min(later) if later else max(times) + 1.0
        half = length / 2 if length else (end - times[0]) / (4 if step.extended else 2)
        out[step.users] = (times[0] + half, end)
    return out


def _seconds(value: Any) -> float:
    """``--capacity-step-time`` as run.json keeps it (seconds); 0 when unknown or unreadable."""
    try:
        return float(value) if value not in (None, "") else 0.0
    except (ValueError, TypeError):
        return 0.0


def _slo_words(key: str, measured: float | None, targets: list[Any], result: str | None = None) -> tuple[str, bool]:
    """``("code ttft_ms p95 390 ms vs <= 250 ms", False)`` for one of a step's measured SLOs (``result``: as
    the search judged it by its interval; None, in older files: judged here on the figure)."""
    words = key.split()
    metric, stat, scope = words[-2], words[-1], words[-3] if len(words) >= 3 else "run"
    target = next((t for t in targets if t.metric == metric and t.stat == stat and t.scope in (scope, "*")), None)
    if target is None:
        return f"{key} {slo_value(metric, measured)}", True
    held = measured is not None and (
        measured <= target.threshold if target.op == "<=" else measured >= target.threshold
    )
    held = held if result is None else result == HELD
    bound = slo_value(metric, target.threshold, threshold=True)
    unsure = " inconclusive" if result == INCONCLUSIVE else ""
    return f"{key} {slo_value(metric, measured)} vs {target.op} {bound}{unsure}", held


def _read(run: RunData) -> CapacityResult | None:
    try:
        return read_capacity(run.path)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # unreadable: the rest of the report still comes
        log.warning("tokenstorm: capacity.json not used: %s", exc)
        return None


def capacity_block(run: RunData) -> dict[str, Any] | None:
    """``summary.json``'s ``capacity`` block: the highest load that held and where the search stopped."""
    result = _read(run)
    if result is None:
        return None
    steps = [
        {
            "users": s.users,
            "requests": s.requests,
            "held": s.held,
            "result": s.outcome(),  # held, broken or inconclusive (too few requests to tell)
            "timing_trustworthy": s.timing_trustworthy,
            "measured": s.measured,
            "results": s.results,  # each SLO: held, failed or inconclusive
            "extended": s.extended,  # held a second --capacity-step-time: inconclusive after the first
        }
        for s in result.steps
    ]
    return {
        "highest_users_that_held": result.highest_users_that_held,
        "broke_at_users": result.broke_at_users,
        "untrustworthy_at_users": result.untrustworthy_at_users,
        # the inconclusive steps above the highest held: the capacity may be that high
        "inconclusive_users": result.inconclusive_users,
        "stopped": result.stopped,
        "steps": steps,
    }


def capacity_verdict(block: dict[str, Any]) -> tuple[str, str]:
    """A capacity search's verdict, from its steps: it passes when a step held (every step below it too), fails
    when its first step broke a per-request SLO, and is unreliable when that first step's timing was not
    trustworthy (nothing it measured says anything of the server)."""
    best, broke, untrusted = (
        block.get("highest_users_that_held"),
        block.get("broke_at_users"),
        block.get("untrustworthy_at_users"),
    )
    uncertain = [int(u) for u in block.get("inconclusive_users") or []]
    span = knee_range_words(best, uncertain)
    if best is None and uncertain:  # the first step inconclusive, and none held above it
        return "inconclusive", (
            f"capacity search: no step held for sure — {span}: too few requests per step "
            "to tell (a longer --capacity-step-time answers)"
        )
    if best is None:
        if untrusted is not None:
            return "unreliable", (
                f"capacity search: no step held — the load generator's timing was not trustworthy "
                f"at {untrusted} users, its first step"
            )
        first = (block.get("steps") or [{}])[0].get("users")
        return "failed", f"capacity search: no step met every per-request SLO, not even {first} user(s)"
    where = (
        f"; broke at {broke} users"
        if broke is not None
        else f"; stopped at {untrusted} users: timing not trustworthy (a lower bound)"
        if untrusted is not None
        else f"; stopped at {uncertain[-1]} users, too few requests to tell (the capacity is at least {best})"
        if uncertain and (block.get("steps") or [{}])[-1].get("result") == "inconclusive"
        else "; the last step held: the capacity is at least this"
    )
    if span:
        where += f"; {span} (the capacity may be that high)"
    return "passed", (
        f"capacity search: highest load that held every per-request SLO: {best} users "
        f"(each step judged on its own requests){where}"
    )
