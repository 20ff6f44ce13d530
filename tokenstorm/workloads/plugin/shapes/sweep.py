"""Load sweep: hold closed-loop concurrency levels one after another, measure each, and name the
goodput knee — the highest level whose achieved load met every per-request SLO.

* ``--sweep-levels 1,2,4,8,16`` runs those users; without it the levels are found as GuideLLM's
  sweep finds its rates: a synchronous probe (1 user) and a saturating probe
  (``--sweep-max-users``) measure the lowest and highest achievable requests/s, and
  ``--sweep-count`` − 2 rates are spread evenly between them (the last at the saturating rate).
  Each rate becomes the users that offer it at the synchronous probe's per-user rate (Little's
  law: in a closed loop a user sends one request per unloaded round trip until the server
  saturates). Closed-loop load cannot be raised past the saturating rate, so levels that rounding
  merges are spent past it — spread geometrically up to the saturating probe — where queueing shows.
* Each level is held ``--sweep-level-time`` seconds and judged on the requests that started in its
  second half (the first is the queue settling), with the reports' own SLO evaluation — see
  :func:`tokenstorm.reports.measure_sweep_level`. The users then stay at the level for half as long again (the
  drain): the judged requests finish at the load they started under, however long they take up to
  then, and a distributed run's workers have shipped them (every ~3 s) before the level is judged.
* Each SLO is judged by its interval (``--confidence``): a level is held, broken (an SLO failed) or
  inconclusive (none failed, one's interval straddles its target — too few requests to tell: noise is
  no break). The knee is the highest held level below the first broken one; the inconclusive levels
  between them are its uncertainty (``knee 16 users (between 16 and 24 users: 24 inconclusive)``).
* Unlike the capacity search a broken level does not end the sweep. It ends early only once two
  levels in a row broke an SLO without raising achieved requests/s 5% over the best level before
  them: at a flat throughput, more closed-loop users only lengthen the queue (latency = users /
  throughput), so every higher level would break too.
* A level whose timing was not trustworthy (the load generator read its judged requests' streams
  late: the reports' ``evaluate_fidelity``) is not held and ends the sweep at once: its figures, and
  those of any higher level, measure the client's own queueing. The knee is then below it. The
  saturating probe is the exception: it only sizes the levels, so the levels are still tried.

``sweep.json`` is rewritten after every level, so a run stopped half-way keeps what it measured.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from locust import LoadTestShape

from ...rundir import SweepLevel, SweepResult, knee_span, sweep_knee, write_sweep
from ..core.context import context, current_options
from ..core.options import RunOptions
from .levels import RunRecords, auto_levels, judged_load, level_line, plateau_reason, untrusted_reason, with_timing

__all__ = ["SweepShape"]

log = logging.getLogger("tokenstorm")


class SweepShape(LoadTestShape):
    """Hold each sweep level ``--sweep-level-time`` seconds, judge it, and write ``sweep.json``."""

    def __init__(self) -> None:
        super().__init__()
        self._reset()

    def reset_time(self) -> None:
        """A new test starts (Locust calls this then): a new sweep, from its first level."""
        super().reset_time()
        self._reset()

    def _reset(self) -> None:
        self.levels: list[SweepLevel] = []
        self._plan: list[tuple[int, str]] = []  # (users, kind), in the order run
        self._index = 0
        self._started_s = 0.0  # run time the current level started
        self._started_epoch_s = 0.0
        self._ended: tuple[float, float] | None = None  # (run time, epoch) the level's judged half ended
        self._done = False
        self._records = RunRecords()

    def tick(self) -> tuple[int, float] | None:
        if self._done or self.runner is None:
            return None
        opts = current_options(self.runner.environment)
        now = self.get_run_time()
        self._records.follow(context(self.runner.environment).writer)
        if not self._plan:
            probes = [(1, "synchronous"), (opts.sweep_max_users, "throughput")]
            self._plan = [(u, "level") for u in opts.sweep_levels] or probes
            self._write(SweepResult(opts.sweep_level_time_s, []))  # a sweep stopped in its first level says so
            self._start(now)
        elif self._ended is None and now - self._started_s >= opts.sweep_level_time_s:
            self._ended = (now, time.time())  # the judged half ends; its requests finish at this load
        elif self._ended is not None and now - self._ended[0] >= opts.sweep_level_time_s / 2:
            level = self._judge(self._ended[1])
            self._ended = None
            self.levels.append(level)
            log.info("tokenstorm: %s", level_line(level))
            if level.kind == "throughput":
                self._plan += [(u, "level") for u in self._auto_levels(opts)]
            self._index += 1
            # The saturating probe only sizes the levels (its throughput); it is judged, but a client
            # that could not keep up at max users does not end the sweep before the levels are tried.
            untrusted = not level.timing_trustworthy and level.kind != "throughput"
            stopped = untrusted_reason(level.users, level.timing_reason) if untrusted else plateau_reason(self.levels)
            if stopped or self._index >= len(self._plan):
                self._finish(stopped)
                return None
            self._write(SweepResult(opts.sweep_level_time_s, self.levels))
            self._start(self.get_run_time())  # after the judging: each level gets its full time
        # Reach each level at once, down as well as up (Locust stops users at the spawn rate too).
        return self._plan[self._index][0], float(max(users for users, _ in self._plan))

    def progress(self) -> tuple[str | None, float | None]:
        """The progress display's stage (``sweep level 3 of 5``); a sweep's length is not known."""
        if not self._plan or self._done:
            return None, None
        _users, kind = self._plan[min(self._index, len(self._plan) - 1)]
        probe = {"synchronous": "sweep probe (synchronous)", "throughput": "sweep probe (throughput)"}.get(kind)
        stage = probe or f"sweep level {self._index + 1 - self._probes()} of {len(self._plan) - self._probes()}"
        return stage + (", draining" if self._ended is not None else ""), None

    def _probes(self) -> int:
        return sum(1 for _, kind in self._plan if kind != "level")

    def _auto_levels(self, opts: RunOptions) -> list[int]:
        sync = next((v.requests_per_s for v in self.levels if v.kind == "synchronous"), 0.0)
        top = self.levels[-1].requests_per_s
        levels = auto_levels(sync, top, opts.sweep_count, opts.sweep_max_users)
        log.info(
            "tokenstorm: sweep probes: %.3g req/s at 1 user, %.3g at %d users; levels: %s users",
            sync,
            top,
            opts.sweep_max_users,
            ", ".join(map(str, levels)) or "none between the probes",
        )
        return levels

    def _start(self, now: float) -> None:
        self._started_s, self._started_epoch_s = now, time.time()

    def _level_rows(self, since_epoch_s: float) -> list[dict[str, Any]]:
        """Records that started or ended since ``since_epoch_s``, cancelled ones included (the judge drops them)."""
        assert self.runner is not None
        ctx = context(self.runner.environment)
        return self._records.kept(
            ctx, lambda r: float(r.get("start_epoch_s") or 0) + float(r.get("e2e_s") or 0) >= since_epoch_s
        )

    def _judge(self, end: float) -> SweepLevel:
        from tokenstorm.reports import load_slo_spec, measure_sweep_level  # pandas, scipy.special: on the master only

        assert self.runner is not None
        ctx = context(self.runner.environment)
        mid = self._started_epoch_s + (end - self._started_epoch_s) / 2
        users, kind = self._plan[self._index]
        spec = ctx.slo_spec if ctx.slo_spec is not None else load_slo_spec()
        labels = [label for label, _ in ctx.options.targets]  # A/B: a target with no request here breaks the level
        rows = self._level_rows(self._started_epoch_s)
        level = measure_sweep_level(
            rows,
            spec,
            users=users,
            kind=kind,
            started_epoch_s=self._started_epoch_s,
            judged_from_epoch_s=mid,
            judged_to_epoch_s=end,
            targets=labels,
            confidence=ctx.options.confidence,
        )
        # The clock samples from the judged part's start to now: while its requests were read.
        counts = getattr(self.runner.environment.parsed_options, "timing_verdict", "fail") != "warn"
        return with_timing(level, rows, judged_load(ctx.run_dir, mid, time.time()), counts)

    def _write(self, result: SweepResult) -> None:
        assert self.runner is not None
        run_dir = context(self.runner.environment).run_dir
        if run_dir is not None:
            write_sweep(run_dir, result)

    def _finish(self, stopped: str | None) -> None:
        self._done = True
        assert self.runner is not None
        opts = current_options(self.runner.environment)
        self._write(SweepResult(opts.sweep_level_time_s, self.levels, complete=True, stopped_early=stopped))
        knee = sweep_knee(self.levels)
        untrusted = any(not level.timing_trustworthy and level.kind != "throughput" for level in self.levels)
        if stopped:
            log.log(logging.ERROR if untrusted else logging.INFO, "tokenstorm: sweep %s", stopped)
        if knee is None:
            which = "below that one held" if untrusted else "met every SLO for sure"
            log.info("tokenstorm: sweep — no level %s (goodput knee: none)%s", which, _uncertainty(self.levels))
        else:
            log.info(
                "tokenstorm: sweep — goodput knee: %d users (%.3g req/s, %.0f output tok/s)%s",
                knee.users,
                knee.requests_per_s,
                knee.output_tokens_per_s,
                _uncertainty(self.levels),
            )


def _uncertainty(levels: list[SweepLevel]) -> str:
    """`` (between 16 and 24 users: 24 inconclusive)``: the inconclusive levels above the knee; "" when none."""
    knee, uncertain, _broke = knee_span([(level.users, level.outcome()) for level in levels])
    if not uncertain:
        return ""
    which = ", ".join(map(str, uncertain))
    if knee is None:
        return f" ({which} users inconclusive)"
    return f" (between {knee} and {uncertain[-1]} users: {which} inconclusive)"
