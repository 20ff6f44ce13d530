"""The clock probe's figures: what a run's ``load.jsonl`` says about how well its load generator kept time."""

from __future__ import annotations

import time
from pathlib import Path

import gevent
import pytest

from tokenstorm.workloads.client.clock import (
    MIN_INTERVAL_S,
    ClockProbe,
    cpu_stat_paths,
    parse_cpu_stat,
    parse_schedstat,
)

V2_CPU_STAT = """usage_usec 8512390
user_usec 6000000
system_usec 2512390
nr_periods 400
nr_throttled 37
throttled_usec 912000
nr_bursts 0
burst_usec 0
"""
V1_CPU_STAT = "nr_periods 400\nnr_throttled 12\nthrottled_time 345000000\n"


class FakeClocks:
    """Wall (monotonic) and CPU seconds a test moves by hand."""

    def __init__(self) -> None:
        self.wall_s = 100.0
        self.cpu_s = 3.0

    def probe(self, tmp_path: Path, cpu_stat_files: list[Path] | None = None) -> ClockProbe:
        schedstat = tmp_path / "schedstat"
        if not schedstat.exists():
            schedstat.write_text("1000 0 1\n")
        return ClockProbe(schedstat_path=schedstat, cpu_stat_files=cpu_stat_files or [],
                          wall_clock=lambda: self.wall_s, cpu_clock=lambda: self.cpu_s, linux=True)  # fmt: skip


def test_schedstat_gives_the_run_queue_wait_and_none_where_the_kernel_keeps_none() -> None:
    assert parse_schedstat("24927604 40127949 16\n") == 40127949
    assert parse_schedstat("0 0 1\n") is None  # schedstats off: a thread that ran shows 0 ns on cpu
    assert parse_schedstat("") is None
    assert parse_schedstat("x y z") is None


def test_cpu_stat_of_both_cgroup_versions() -> None:
    assert parse_cpu_stat(V2_CPU_STAT) == (37, 912_000_000)  # usec -> ns
    assert parse_cpu_stat(V1_CPU_STAT) == (12, 345_000_000)  # already ns
    # v2 without the cpu controller: usage only, no throttling figures
    assert parse_cpu_stat("usage_usec 10\nuser_usec 5\nsystem_usec 5\n") is None


def test_cgroup_files_are_found_for_v2_v1_and_a_container_that_sees_its_group_at_the_root(tmp_path: Path) -> None:
    v2 = cpu_stat_paths("0::/system.slice/runner.service\n", tmp_path)
    assert v2[:3] == [tmp_path / "system.slice/runner.service/cpu.stat", tmp_path / "system.slice/cpu.stat",
                      tmp_path / "cpu.stat"]  # fmt: skip
    v1 = cpu_stat_paths("4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n", tmp_path)
    assert v1[0] == tmp_path / "cpu,cpuacct/docker/abc/cpu.stat"
    assert tmp_path / "cpu,cpuacct/cpu.stat" in v1 and tmp_path / "cpu/docker/abc/cpu.stat" in v1
    assert not any("memory" in str(p) or "systemd" in str(p) for p in v1)


def test_throttling_and_run_queue_wait_per_second_from_injected_files(tmp_path: Path) -> None:
    (tmp_path / "proc_cgroup").write_text("0::/ci/job\n")
    own = tmp_path / "cg" / "ci" / "job"
    own.mkdir(parents=True)
    (own / "cpu.stat").write_text(V2_CPU_STAT)
    (tmp_path / "cg" / "cpu.stat").write_text("usage_usec 1\n")  # the root: no throttling figures
    clocks = FakeClocks()
    (tmp_path / "schedstat").write_text("5000000 1000000 10\n")
    probe = ClockProbe(schedstat_path=tmp_path / "schedstat", proc_cgroup_path=tmp_path / "proc_cgroup",
                       cgroup_root=tmp_path / "cg", wall_clock=lambda: clocks.wall_s, cpu_clock=lambda: clocks.cpu_s,
                       linux=True)  # fmt: skip
    probe.start()
    try:
        clocks.wall_s += 2.0
        (tmp_path / "schedstat").write_text("6000000 61000000 30\n")  # +60 ms waiting
        (own / "cpu.stat").write_text(V2_CPU_STAT.replace("nr_throttled 37", "nr_throttled 41")
                                      .replace("throttled_usec 912000", "throttled_usec 1012000"))  # fmt: skip
        s = probe.sample()
    finally:
        probe.stop()
    assert s.interval_s == pytest.approx(2.0)
    assert s.runq_wait_ms_per_s == pytest.approx(30.0)  # 60 ms over 2 s
    assert s.throttled_ms_per_s == pytest.approx(50.0)  # 100 ms over 2 s
    assert s.nr_throttled == 4


def test_v1_throttled_time_is_nanoseconds(tmp_path: Path) -> None:
    stat = tmp_path / "cpu.stat"
    stat.write_text(V1_CPU_STAT)
    clocks = FakeClocks()
    probe = clocks.probe(tmp_path, cpu_stat_files=[stat])
    probe.start()
    try:
        clocks.wall_s += 1.0
        stat.write_text(V1_CPU_STAT.replace("345000000", "370000000").replace("nr_throttled 12", "nr_throttled 15"))
        s = probe.sample()
    finally:
        probe.stop()
    assert (s.throttled_ms_per_s, s.nr_throttled) == (pytest.approx(25.0), 3)


def test_nothing_readable_gives_none_not_zero(tmp_path: Path) -> None:
    clocks = FakeClocks()
    probe = ClockProbe(schedstat_path=tmp_path / "absent", proc_cgroup_path=tmp_path / "absent-too",
                       cgroup_root=tmp_path, wall_clock=lambda: clocks.wall_s, cpu_clock=lambda: clocks.cpu_s,
                       linux=True)  # fmt: skip
    probe.start()
    clocks.wall_s += 1.0
    s = probe.sample()
    probe.stop()
    assert (s.runq_wait_ms_per_s, s.throttled_ms_per_s, s.nr_throttled) == (None, None, None)
    assert s.cpu_pct is not None  # CPU % needs no /proc


def test_off_linux_the_linux_figures_are_none_and_nothing_breaks() -> None:
    probe = ClockProbe(linux=False)
    probe.start()
    gevent.sleep(MIN_INTERVAL_S + 0.05)
    s = probe.sample()
    probe.stop()
    assert (s.runq_wait_ms_per_s, s.throttled_ms_per_s, s.nr_throttled) == (None, None, None)
    assert s.cpu_pct is not None and s.loop_lag_max_ms is not None
    assert set(s.as_dict()) == {"interval_s", "cpu_pct", "runq_wait_ms_per_s", "throttled_ms_per_s", "nr_throttled",
                                "loop_lag_p99_ms", "loop_lag_max_ms"}  # fmt: skip


def test_cpu_is_a_share_of_the_interval_the_sample_covers(tmp_path: Path) -> None:
    clocks = FakeClocks()
    probe = clocks.probe(tmp_path)
    probe.start()
    clocks.wall_s += 2.0
    clocks.cpu_s += 1.5
    first = probe.sample()
    clocks.wall_s += 0.5
    clocks.cpu_s += 0.5
    second = probe.sample()  # covers only the half second since the first
    probe.stop()
    assert (first.cpu_pct, second.cpu_pct) == (pytest.approx(75.0), pytest.approx(100.0))


def test_a_first_sample_right_after_a_long_idle_start_is_not_inflated(tmp_path: Path) -> None:
    # Issue 19: a web-UI run started 46 s after launch read 704.6% CPU in its first load.jsonl line —
    # the start-up burst divided by an interval of a few milliseconds.
    clocks = FakeClocks()
    probe = clocks.probe(tmp_path)  # made at launch
    clocks.wall_s += 46.0  # idle until the user presses start
    clocks.cpu_s += 0.5  # start-up work (imports, the emulator) before it
    probe.start()
    clocks.wall_s += 0.01
    clocks.cpu_s += 0.07  # the run's start burst: 700% over those 10 ms
    early = probe.sample()
    assert early.cpu_pct is None and early.runq_wait_ms_per_s is None  # no figure rather than a wild one
    clocks.wall_s += 0.99
    clocks.cpu_s += 0.03
    first = probe.sample()  # the short sample is folded into this one: the run's first second
    probe.stop()
    assert first.interval_s == pytest.approx(1.0)
    assert first.cpu_pct == pytest.approx(10.0)  # neither the idle 46 s nor the work before the start


def test_cpu_of_real_work_is_counted() -> None:
    probe = ClockProbe()
    probe.start()
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        sum(range(1000))  # busy: this process's CPU
    s = probe.sample()
    probe.stop()
    assert s.cpu_pct is not None and 20.0 < s.cpu_pct <= 200.0


def test_loop_lag_reads_a_blocked_loop() -> None:
    probe = ClockProbe(lag_period_s=0.005)  # a block of B shows a lag above B - period
    probe.start()
    try:
        gevent.sleep(0.25)
        quiet = probe.sample()
        gevent.spawn(time.sleep, 0.05).join()  # a greenlet that blocks the hub for 50 ms
        gevent.sleep(0.2)
        blocked = probe.sample()
    finally:
        probe.stop()
    assert quiet.loop_lag_max_ms is not None and blocked.loop_lag_max_ms is not None
    assert blocked.loop_lag_max_ms >= 40.0
    assert quiet.loop_lag_max_ms < blocked.loop_lag_max_ms  # the figure is the block's, not the timer's own
    assert blocked.loop_lag_p99_ms is not None and blocked.loop_lag_p99_ms <= blocked.loop_lag_max_ms


def test_a_loop_still_blocked_when_sampled_shows_the_lag_so_far() -> None:
    probe = ClockProbe()
    probe.start()
    try:
        gevent.sleep(0.05)
        time.sleep(0.3)  # this greenlet holds the loop; the sample runs before the timer can
        s = probe.sample()
    finally:
        probe.stop()
    assert s.loop_lag_max_ms is not None and s.loop_lag_max_ms >= 250.0


def test_the_probe_never_keeps_a_process_up_and_stops_ticking_when_stopped() -> None:
    probe = ClockProbe()
    probe.start()
    t0 = time.monotonic()
    gevent.wait(timeout=2.0)  # returns once nothing else is left to run: the probe's timer does not count
    assert time.monotonic() - t0 < 1.0
    probe.sample()
    probe.stop()
    assert not probe.running
    gevent.sleep(0.25)
    assert probe.sample().loop_lag_max_ms is None  # no tick since the stop
