"""How well this process can keep time: the figures that say whether its stamps can be trusted.

A stamp is only as good as the loop that takes it. A process that waits for a CPU (other work
on its cores), is throttled by its cgroup's CPU limit, or whose event loop is busy reads its
sockets late, and what arrived meanwhile comes back as one read with one stamp. A
:class:`ClockProbe` measures, per interval (one ``load.jsonl`` line, one worker report):

* ``cpu_pct`` — this process's CPU time over the interval (100 = one core), all threads;
  ``None`` for an interval under :data:`MIN_INTERVAL_S` (a rate over a few milliseconds is noise).
* ``runq_wait_ms_per_s`` — how long the thread running the event loop waited on a run queue,
  runnable but not running (``/proc/self/task/TID/schedstat``, its 2nd field), per second.
* ``throttled_ms_per_s`` / ``nr_throttled`` — the cgroup's CPU throttling (``cpu.stat``:
  ``throttled_usec`` in cgroup v2, ``throttled_time`` in ns in v1; ``nr_throttled`` periods in
  the interval): the worst of this process's cgroup and the ancestors that are readable, as
  the kernel counts it (summed over that group's CPUs). ``None`` where none is readable.
* ``loop_lag_p99_ms`` / ``loop_lag_max_ms`` — how late the gevent loop ran a timer armed
  every :data:`LAG_PERIOD_S` (wake time − deadline; p99 nearest-rank). A loop blocked for B
  shows a lag between B − period and B; a quiet loop reads 0, not the 1 ms rounding of epoll's timeouts.

Linux gives the first three; elsewhere they are ``None``, never an error. The loop-lag timer is
a bare loop callback (no greenlet), its figures kept in a fixed array: a wake costs a timer
watcher and a float. No Locust here.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gevent

__all__ = [
    "LAG_PERIOD_S",
    "MIN_INTERVAL_S",
    "ClockProbe",
    "ClockSample",
    "cpu_stat_paths",
    "parse_cpu_stat",
    "parse_schedstat",
]

#: A sample covering less than this reports no rates (CPU %, waits per second): too short to mean much.
MIN_INTERVAL_S = 0.2
#: The loop-lag timer's period: a block of the loop shorter than this may go unseen.
LAG_PERIOD_S = 0.02
#: The timer is armed this much before its deadline: epoll counts timeouts in whole milliseconds,
#: rounded up, so a quiet loop would otherwise read 0–1 ms of lag that is only that rounding (a wake
#: before the deadline counts as no lag; a lag from waiting for a CPU reads up to this much low).
_EARLY_S = 0.001
#: Lag figures kept per interval (the newest; the maximum is exact beyond them): 5 s at 20 ms.
_LAG_SLOTS = 256

_PROC = Path("/proc")
_CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class ClockSample:
    """One interval's figures (see the module docstring); ``None``: not measurable here."""

    interval_s: float
    cpu_pct: float | None = None
    runq_wait_ms_per_s: float | None = None
    throttled_ms_per_s: float | None = None
    nr_throttled: float | None = None
    loop_lag_p99_ms: float | None = None
    loop_lag_max_ms: float | None = None

    def as_dict(self) -> dict[str, float | None]:
        """The figures as written to ``load.jsonl`` and shipped to the master (µs / 0.001 % resolution)."""
        return {k: None if v is None else round(v, 3) for k, v in asdict(self).items()}


def parse_schedstat(text: str) -> int | None:
    """Nanoseconds spent waiting on a run queue, from a ``schedstat`` line (on-cpu ns, wait ns,
    timeslices); ``None`` when the kernel does not keep these figures (on-cpu time 0)."""
    parts = text.split()
    if len(parts) < 2:
        return None
    try:
        on_cpu_ns, wait_ns = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return wait_ns if on_cpu_ns > 0 else None  # a running thread has run: 0 means not counted


def parse_cpu_stat(text: str) -> tuple[int, int] | None:
    """``(nr_throttled, throttled_ns)`` from a cgroup ``cpu.stat`` (v2 ``throttled_usec``, v1
    ``throttled_time`` in ns); ``None`` when it has no throttling figures (no CPU controller)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        try:
            values[key] = int(value)
        except ValueError:
            continue
    if "nr_throttled" not in values:
        return None
    if "throttled_usec" in values:
        return values["nr_throttled"], values["throttled_usec"] * 1000
    if "throttled_time" in values:
        return values["nr_throttled"], values["throttled_time"]
    return None


def cpu_stat_paths(proc_cgroup: str, root: Path = _CGROUP_ROOT) -> list[Path]:
    """The ``cpu.stat`` files that may hold this process's throttling, from ``/proc/self/cgroup``:
    its own cgroup's and each ancestor's up to the mount root (a container may see its own group at
    the root), for the v2 hierarchy and the v1 ``cpu`` controller."""
    out: list[Path] = []
    for line in proc_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            bases = [root, root / "unified"]
        elif "cpu" in controllers.split(","):
            bases = [root / controllers, root / "cpu", root / "cpu,cpuacct"]
        else:
            continue
        parts = [p for p in path.strip().split("/") if p]
        for base in bases:
            for depth in range(len(parts), -1, -1):
                candidate = base.joinpath(*parts[:depth], "cpu.stat")
                if candidate not in out:
                    out.append(candidate)
    return out


def _read(path: Path) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


class ClockProbe:
    """Measures this process's timekeeping; :meth:`sample` gives the figures since the last sample.

    :meth:`start` (again at each run's start) begins an interval and arms the loop-lag timer; it
    must be called in the thread that runs the gevent loop reading the streams, whose run-queue wait
    it reads. Paths and the interval's clocks (``wall_clock``: monotonic seconds, ``cpu_clock``:
    this process's CPU seconds) can be given for tests; ``linux=False`` leaves the Linux figures out.
    """

    def __init__(
        self,
        *,
        schedstat_path: Path | None = None,
        cpu_stat_files: list[Path] | None = None,
        proc_cgroup_path: Path = _PROC / "self" / "cgroup",
        cgroup_root: Path = _CGROUP_ROOT,
        lag_period_s: float = LAG_PERIOD_S,
        linux: bool | None = None,
        wall_clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.process_time,
    ) -> None:
        self._linux = sys.platform.startswith("linux") if linux is None else linux
        self._wall = wall_clock
        self._cpu = cpu_clock
        self._schedstat_path = schedstat_path
        self._cpu_stat_given = cpu_stat_files
        self._proc_cgroup_path = proc_cgroup_path
        self._cgroup_root = cgroup_root
        self._cpu_stat_files: list[Path] = []
        self._period_s = lag_period_s
        self._lag_s = array("d", bytes(8 * _LAG_SLOTS))
        self._lag_n = 0
        self._lag_max_s = 0.0
        self._deadline = 0.0
        self._timer: Any = None
        self._spent: Any = None  # the timer that last fired: closed when the next one fires
        self._loop: Any = None
        self._t0 = wall_clock()
        self._cpu0 = cpu_clock()
        self._wait0: int | None = None
        self._throttle0: dict[Path, tuple[int, int]] = {}

    # -- the interval -----------------------------------------------------------------------------
    def start(self) -> None:
        """Begin a fresh interval now (earlier idle time is not in the next sample) and arm the
        loop-lag timer if it is not running."""
        if self._linux:
            if self._schedstat_path is None:
                self._schedstat_path = _PROC / "self" / "task" / str(threading.get_native_id()) / "schedstat"
            if self._cpu_stat_given is not None:
                self._cpu_stat_files = list(self._cpu_stat_given)
            else:
                text = _read(self._proc_cgroup_path) or ""
                found = cpu_stat_paths(text, self._cgroup_root)
                self._cpu_stat_files = [p for p in found if parse_cpu_stat(_read(p) or "") is not None]
        self._reset(self._wall())
        if self._timer is None:
            self._loop = gevent.get_hub().loop
            self._deadline = time.monotonic() + self._period_s
            self._arm()

    @property
    def running(self) -> bool:
        """:meth:`start` was called (and :meth:`stop` not since)."""
        return self._timer is not None

    def stop(self) -> None:
        """Stop the loop-lag timer (figures already taken stay until the next sample)."""
        for timer in (self._timer, self._spent):
            if timer is not None:
                timer.close()
        self._timer = self._spent = None

    def sample(self) -> ClockSample:
        """The figures since the previous sample (or :meth:`start`). An interval shorter than
        :data:`MIN_INTERVAL_S` gives no rates and is folded into the next sample."""
        now = self._wall()
        interval_s = now - self._t0
        lag_p99, lag_max = self._lag_figures(time.monotonic())
        if interval_s < MIN_INTERVAL_S:
            return ClockSample(interval_s, loop_lag_p99_ms=lag_p99, loop_lag_max_ms=lag_max)
        cpu_pct = (self._cpu() - self._cpu0) / interval_s * 100.0
        wait = self._read_wait()
        runq = (wait - self._wait0) / 1e6 / interval_s if wait is not None and self._wait0 is not None else None
        throttle = self._read_throttle()
        throttled_ms_per_s = nr_throttled = None
        for path, (nr, ns) in throttle.items():
            before = self._throttle0.get(path)
            if before is None:
                continue
            ms_per_s = max(0, ns - before[1]) / 1e6 / interval_s
            nr_delta = float(max(0, nr - before[0]))
            throttled_ms_per_s = ms_per_s if throttled_ms_per_s is None else max(throttled_ms_per_s, ms_per_s)
            nr_throttled = nr_delta if nr_throttled is None else max(nr_throttled, nr_delta)
        self._reset(now, wait, throttle)
        return ClockSample(interval_s, cpu_pct, runq, throttled_ms_per_s, nr_throttled, lag_p99, lag_max)

    def _reset(self, now: float, wait: int | None = None, throttle: dict[Path, tuple[int, int]] | None = None) -> None:
        self._t0 = now
        self._cpu0 = self._cpu()
        self._wait0 = wait if wait is not None else self._read_wait()
        self._throttle0 = throttle if throttle is not None else self._read_throttle()
        self._lag_n = 0
        self._lag_max_s = 0.0

    def _read_wait(self) -> int | None:
        if not self._linux or self._schedstat_path is None:
            return None
        text = _read(self._schedstat_path)
        return parse_schedstat(text) if text is not None else None

    def _read_throttle(self) -> dict[Path, tuple[int, int]]:
        out = {}
        for path in self._cpu_stat_files:
            parsed = parse_cpu_stat(_read(path) or "")
            if parsed is not None:
                out[path] = parsed
        return out

    # -- loop lag ------------------------------------------------------------------------------------
    def _arm(self) -> None:
        loop = self._loop
        loop.update_now()  # the timer counts from now, not from the loop's cached time
        timer = loop.timer(max(0.0, self._deadline - _EARLY_S - time.monotonic()), ref=False)  # keeps no process up
        timer.start(self._tick)
        self._timer = timer

    def _tick(self) -> None:
        # Runs in the hub itself: a float and a timer a wake, nothing else.
        now = time.monotonic()
        lag_s = now - self._deadline
        if lag_s < 0.0:
            lag_s = 0.0
        self._lag_s[self._lag_n % _LAG_SLOTS] = lag_s
        self._lag_n += 1
        if lag_s > self._lag_max_s:
            self._lag_max_s = lag_s
        self._deadline += self._period_s
        if self._deadline <= now:  # ticks missed while blocked are not owed: one lag says it
            self._deadline = now + self._period_s
        if self._spent is not None:
            self._spent.close()  # not the one running this callback: that one is closed next time
        self._spent = self._timer
        self._timer = None
        self._arm()

    def _lag_figures(self, now: float) -> tuple[float | None, float | None]:
        n = min(self._lag_n, _LAG_SLOTS)
        values = sorted(self._lag_s[:n])
        if self._timer is not None and now > self._deadline + self._period_s:
            values.append(now - self._deadline)  # the loop is late right now (this sample ran first)
            values.sort()
        if not values:
            return None, None
        p99_s = values[max(0, math.ceil(0.99 * len(values)) - 1)]
        return p99_s * 1000.0, max(self._lag_max_s, values[-1]) * 1000.0
