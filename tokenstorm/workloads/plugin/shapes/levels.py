"""A load sweep's levels and a capacity search's steps: which users an automatic sweep runs between
its probes, how a step or level is judged (its SLOs, and whether the load generator's own timing was
trustworthy: a level read late is not held), and when a sweep or search stops. Functions of what
the levels measured (no Locust: unit-tested alone); the shapes that run them are :mod:`.sweep` and
:mod:`.capacity`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...rundir import (
    CapacityResult,
    CapacityStep,
    ErrorCategory,
    LoadSample,
    RecordTail,
    RunMeta,
    SweepLevel,
    knee_span,
    level_outcome,
    read_load,
)
from ...rundir.sweep import BROKEN, HELD, INCONCLUSIVE

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RISING_SHARE",
    "RunRecords",
    "auto_levels",
    "capacity_result",
    "judge_step",
    "judged_load",
    "level_line",
    "plateau_reason",
    "timing_of",
    "untrusted_reason",
    "with_timing",
]

#: achieved requests/s a level must add over the best level before it to count as still rising
RISING_SHARE = 0.05


class RunRecords:
    """The records a shape judges, from the run's record writer's tail (a new run has a new writer): the
    ones kept last time and those written since, so that memory stays bounded however long the run."""

    def __init__(self) -> None:
        self._tail: RecordTail | None = None
        self._tail_of: object = None  # the writer the tail is fed by
        self._kept: list[dict[str, Any]] = []

    def follow(self, writer: Any) -> None:
        """Tail ``writer`` (from a run's first tick: no record missed)."""
        if writer is not None and self._tail_of is not writer:
            self._tail, self._tail_of, self._kept = writer.tail(), writer, []

    def kept(self, ctx: Any, keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """The records so far (``ctx``'s writer flushed first) that ``keep`` keeps; the next call starts from
        them. None without a run directory."""
        if ctx.run_dir is None:
            return []
        ctx.flush()
        self.follow(ctx.writer)
        if self._tail is None:
            return []
        self._kept = [r for r in (*self._kept, *self._tail.read_new()) if keep(r)]
        return self._kept


def auto_levels(sync_rps: float, max_rps: float, count: int, max_users: int) -> list[int]:
    """The users of an automatic sweep's levels between its probes (1 user and ``max_users``).

    ``count`` − 2 request rates spread evenly over (``sync_rps``, ``max_rps``], each turned into the
    users that offer it at the synchronous per-user rate; rates that round to the same users (or to a
    probe's) leave their slots to levels spread geometrically from the last of them to ``max_users``."""
    wanted = max(0, count - 2)
    little: list[int] = []
    if sync_rps > 0 and max_rps > sync_rps:
        for k in range(1, wanted + 1):
            rate = sync_rps + (max_rps - sync_rps) * k / wanted
            users = math.floor(rate / sync_rps + 0.5)
            if 1 < users < max_users and users not in little:
                little.append(users)
    spare = wanted - len(little)
    low = little[-1] if little else 1
    beyond: list[int] = []
    for k in range(1, spare + 1):  # geometric between the last level and the saturating probe
        users = math.floor(low * (max_users / low) ** (k / (spare + 1)) + 0.5)
        if low < users < max_users and users not in beyond:
            beyond.append(users)
    return little + beyond


def level_line(level: SweepLevel, most: int = 3) -> str:
    """The console's line for a judged sweep level: held, or which SLOs it BROKE (each target with its
    measured value, the first ``most`` of them), or why its timing was not trustworthy; its achieved
    throughput; and the percentiles that came from too few requests to mean much."""
    if not level.timing_trustworthy:
        word = f"TIMING NOT TRUSTWORTHY ({level.timing_reason})" if level.timing_reason else "TIMING NOT TRUSTWORTHY"
    elif level.outcome() == HELD:
        word = "held"
    elif level.outcome() == INCONCLUSIVE:
        unsure = [
            f"{v.target} (measured {_measured(v.measured)}{_needs(v.needed_requests)})"
            for v in level.slos
            if v.outcome() == INCONCLUSIVE
        ]
        more = f"; +{len(unsure) - most} more" if len(unsure) > most else ""
        word = f"inconclusive (not broken: too few requests to tell) {'; '.join(unsure[:most])}{more}"
    else:
        broken = [f"{v.target} (measured {_measured(v.measured)})" for v in level.slos if v.outcome() == "failed"]
        more = f"; +{len(broken) - most} more" if len(broken) > most else ""
        word = f"BROKE {'; '.join(broken[:most])}{more}" if broken else "BROKE: no judged requests"
    low = "; ".join(
        f"{w or 'all'} {'/'.join(f'p{p}' for p in ps)} of {level.latency_requests.get(w, level.requests)}"
        for w, ps in level.low_sample().items()
    )
    return (
        f"sweep level {level.users} users ({level.kind}): {word} — {level.requests_per_s:.3g} req/s, "
        f"{level.output_tokens_per_s:.0f} output tok/s" + (f" [low sample: {low} requests]" if low else "")
    )


def _measured(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}"


def _needs(requests: int | None) -> str:
    return f", needs about {requests:,} requests" if requests else ""


def plateau_reason(levels: list[SweepLevel]) -> str | None:
    """Why the sweep may stop now (``None``: go on): the last two levels (by users, the saturating probe
    left out) both broke an SLO and neither achieved :data:`RISING_SHARE` more requests/s than the best
    level below them."""
    ascending = [level for level in levels if level.kind != "throughput"]  # run in increasing users
    if len(ascending) < 3:
        return None
    best = max(level.requests_per_s for level in ascending[:-2])
    last = ascending[-2:]
    if all(level.outcome() == BROKEN and level.requests_per_s <= best * (1 + RISING_SHARE) for level in last):
        return (
            f"stopped after {last[1].users} users: {last[0].users} and {last[1].users} users broke an SLO "
            f"and achieved no more than {best:.3g} req/s (+{RISING_SHARE:.0%}); more users would only queue"
        )
    return None


def untrusted_reason(users: int, reason: str) -> str:
    """Why a sweep or capacity search stopped at ``users``: its timing was not trustworthy."""
    return f"stopped: the load generator's timing was not trustworthy at {users} users ({reason})"


def judged_load(run_dir: Path | None, from_epoch_s: float, to_epoch_s: float) -> list[LoadSample]:
    """The ``load.jsonl`` samples (each load generator's clock figures) taken while a level's judged
    requests were being read: from the start of its judged part up to ``to_epoch_s`` (now)."""
    if run_dir is None:
        return []
    return [s for s in read_load(run_dir) if from_epoch_s <= s.epoch_s <= to_epoch_s]


def timing_of(requests: pd.DataFrame, load: list[LoadSample], counts: bool = True) -> tuple[bool, str]:
    """Whether the load generator read the requests of ``requests`` (a level's or step's judged
    records, as a report's table) on time — the reports' own :func:`tokenstorm.reports.evaluate_fidelity` —
    and its one-line reason. ``counts`` False (``--timing-verdict warn``): said, never distrusted."""
    from tokenstorm.reports import evaluate_fidelity  # pandas, pyarrow: only on the master, when a level is judged

    fidelity = evaluate_fidelity(requests, load)
    if not counts and not fidelity.trustworthy:
        return True, f"--timing-verdict warn: {fidelity.reason}"
    return fidelity.trustworthy, fidelity.reason


def with_timing(
    level: SweepLevel, rows: list[dict[str, Any]], load: list[LoadSample], counts: bool = True
) -> SweepLevel:
    """``level`` with the fidelity of its judged requests (those of ``rows`` that started in its
    judged part, not cancelled): a level whose timing is not trustworthy is not held."""
    lo, hi = level.judged_from_epoch_s, level.judged_to_epoch_s
    judged = [
        r
        for r in rows
        if r.get("error_category") != ErrorCategory.CANCELLED and lo <= float(r.get("start_epoch_s") or 0.0) < hi
    ]
    if not judged:
        return level  # nothing was read: nothing to distrust (and the level did not hold anyway)
    from ...rundir import frame_from_rows  # pyarrow: only on the master

    trustworthy, reason = timing_of(frame_from_rows(judged)[0], load, counts)
    result = level.outcome() if trustworthy else BROKEN
    return dataclasses.replace(
        level, held=result == HELD, timing_trustworthy=trustworthy, timing_reason=reason, result=result
    )


def judge_step(
    rows: list[dict[str, Any]],
    spec: Any,
    users: int,
    labels: list[str],
    load: list[LoadSample],
    counts: bool = True,
    confidence: float = 0.95,
) -> CapacityStep:
    """One step judged on ``rows`` (its judged records, cancelled ones left out): every per-request
    SLO of ``spec`` on every A/B target in ``labels``, and the timing's fidelity (``load``: the
    load generators' samples meanwhile). It holds only if both do; it is inconclusive when no SLO
    failed but one's interval straddles its target at ``confidence`` (the run's ``--confidence``;
    :func:`level_outcome`)."""
    from tokenstorm.reports import evaluate_each_target, per_request_spec, run_from_records

    # A step has its own settling time (its first half); --warmup flags do not take its requests away.
    rows = [{**r, "warmup": False} for r in rows]
    run = run_from_records(rows, RunMeta(status="running", options={"confidence": confidence}))
    results = evaluate_each_target(run, per_request_spec(spec), labels) if rows else []  # A/B: each must hold
    keys = [f"{r.target + ' ' if r.target else ''}{r.scope} {r.metric} {r.stat}" for r in results]
    measured = {key: r.measured for key, r in zip(keys, results, strict=True)}
    outcomes = {key: _slo_outcome(r) for key, r in zip(keys, results, strict=True)}
    trustworthy, reason = timing_of(run.requests, load, counts) if rows else (True, "")
    result = level_outcome(list(outcomes.values()), len(rows), trustworthy)
    return CapacityStep(users, len(rows), result == HELD, measured, trustworthy, reason, result, outcomes)


def _slo_outcome(result: Any) -> str:
    """``held`` / ``failed`` / ``inconclusive`` of one SLO result (not judged: held)."""
    if not getattr(result, "judged", True):
        return HELD
    return str(getattr(result, "result", "") or (HELD if result.passed else "failed"))


def capacity_result(steps: list[CapacityStep], stopped: str | None = None) -> CapacityResult:
    """``capacity.json`` of the steps run, in order: the highest users held with no step below broken
    (an inconclusive one below is noise, not a break), the inconclusive steps above it, and where the search
    stopped — an SLO broke, the timing was not trustworthy (then no SLO verdict of that step counts: it
    is not said to have broken), or ``stopped`` says why (inconclusive steps in a row)."""
    best, uncertain, _broke = knee_span([(step.users, step.outcome()) for step in steps])
    last = steps[-1] if steps else None
    untrusted = last.users if last is not None and not last.timing_trustworthy else None
    broke = last.users if last is not None and last.outcome() == BROKEN and untrusted is None else None
    return CapacityResult(
        best, broke, list(steps), untrustworthy_at_users=untrusted, inconclusive_users=uncertain, stopped=stopped
    )
