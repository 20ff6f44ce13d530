"""A sweep's levels: where an automatic sweep puts them, when it may stop, and which level is the knee."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tokenstorm.workloads.plugin.core.options import OptionError, RunOptions
from tokenstorm.workloads.plugin.shapes.levels import auto_levels, plateau_reason
from tokenstorm.workloads.rundir import SweepLevel, SweepResult, read_sweep, sweep_knee, write_sweep


def level(users: int, rps: float, held: bool, kind: str = "level") -> SweepLevel:
    return SweepLevel(users, kind, 0.0, 0.0, 1.0, 10, rps, rps * 20, held)


def test_levels_follow_littles_law_up_to_saturation_then_spread_past_it() -> None:
    # 1 user: 3 req/s; 64 users: 12 req/s — the server saturates at 4 sequences. Rates spread
    # evenly over (3, 12] need 1.75, 2.5, 3.25 and 4 users: 2, 3, 3, 4 (half rounds up); the slot
    # the repeated 3 leaves goes past saturation, halfway (geometrically) to the probe.
    assert auto_levels(3.0, 12.0, 6, 64) == [2, 3, 4, 16]
    # GuideLLM's default of 10 levels on a server that scales to 40 users
    assert auto_levels(1.0, 40.0, 10, 256) == [6, 11, 16, 21, 25, 30, 35, 40]


def test_levels_when_the_probes_cannot_say() -> None:
    # Nothing finished at 1 user, or no more at 256 than at 1: geometric from 1 to the probe.
    assert auto_levels(0.0, 5.0, 5, 64) == [3, 8, 23]
    assert auto_levels(2.0, 2.0, 5, 64) == [3, 8, 23]
    assert auto_levels(2.0, 9.0, 2, 64) == []  # only the two probes were asked for
    assert all(1 < u < 8 for u in auto_levels(1.0, 100.0, 12, 8))  # never a probe's users again


def test_the_sweep_goes_on_past_a_broken_level_while_throughput_rises() -> None:
    levels = [level(1, 3, True), level(2, 6, True), level(4, 12, False), level(8, 12.2, False)]
    assert plateau_reason(levels[:3]) is None  # one broken level: go on
    assert plateau_reason(levels) is None  # two broke, but 4 users beat 2 users' 6 req/s by far
    # 8 and 16 users broke and neither beat 4 users' 12 req/s by 5%: a closed loop only queues now.
    reason = plateau_reason([*levels, level(16, 12.1, False)])
    assert reason is not None and "stopped after 16 users: 8 and 16 users broke" in reason
    # Flat but held (lax SLOs): every level is run.
    assert plateau_reason([level(1, 3, True), level(2, 3, True), level(4, 3, True)]) is None


def test_the_saturating_probe_does_not_count_as_the_level_below() -> None:
    # Strict SLOs break at 2 and 3 users while throughput still rises: the probe's 12 req/s (64
    # users) must not make them look flat.
    levels = [level(1, 3, True, "synchronous"), level(64, 12, False, "throughput"), level(2, 5.9, False),
              level(3, 8.8, False)]  # fmt: skip
    assert plateau_reason(levels) is None


def test_the_knee_is_the_highest_level_below_the_first_that_broke(tmp_path: Path) -> None:
    levels = [level(1, 3, True, "synchronous"), level(64, 12, False, "throughput"), level(2, 6, True),
              level(3, 9, True), level(4, 11.9, True), level(16, 12, False)]  # fmt: skip
    knee = sweep_knee(levels)
    assert knee is not None and knee.users == 4
    assert sweep_knee([level(1, 3, False)]) is None
    # A level that held above one that broke is not capacity: the knee is below the first break.
    noisy = sweep_knee([level(1, 3, True), level(2, 6, False), level(3, 9, True)])
    assert noisy is not None and noisy.users == 1
    write_sweep(tmp_path, SweepResult(5.0, levels))
    back = read_sweep(tmp_path)
    assert back is not None and back.levels == levels and back.knee_users == 4
    assert (back.knee_requests_per_s, back.complete) == (11.9, False)
    assert read_sweep(tmp_path / "nowhere") is None


def test_sweep_options() -> None:
    opts = RunOptions.parse(SimpleNamespace(sweep_levels="1,2,4,8", sweep_level_time="5", sweep_count=6))
    assert (opts.sweep_levels, opts.sweep_level_time_s, opts.sweep_count) == ((1, 2, 4, 8), 5.0, 6)
    assert RunOptions.parse(None).sweep_levels == ()  # found automatically
    for bad in ("1,x", "4,2", "0,1", "2,2"):
        with pytest.raises(OptionError, match=r"--sweep-levels .*expected users >= 1, increasing"):
            RunOptions.parse(SimpleNamespace(sweep_levels=bad))
    with pytest.raises(OptionError, match=r"--sweep-level-time 0: must be > 0"):
        RunOptions.parse(SimpleNamespace(sweep_level_time=0))
    with pytest.raises(OptionError, match=r"--sweep-max-users 1: must be >= 2"):
        RunOptions.parse(SimpleNamespace(sweep_max_users=1))
