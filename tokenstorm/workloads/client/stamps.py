"""Putting kernel receive stamps on each request's clock: they are CLOCK_REALTIME, the requests'
clock is ``time.perf_counter``; :data:`WALL_TO_PERF` maps one onto the other."""

from __future__ import annotations

import time

__all__ = ["WALL_TO_PERF", "WallToPerf"]


class WallToPerf:
    """CLOCK_REALTIME − ``perf_counter`` in ns, to put kernel receive stamps on the requests' clock.

    Measured at every kernel-stamped read, not once: the wall clock is slewed by NTP (measured on
    this project's VMs: 5 ms per second against CLOCK_MONOTONIC), so an offset a second old put
    stamps after the read's own return (they were thrown away). Read as (perf, wall, perf), keeping
    the tightest of up to ``TRIES`` brackets: a process preempted between two reads (a busy CPU, the
    very case the stamps are for) would otherwise move every stamp by the time it waited."""

    TRIES = 3
    #: a bracket this tight is not improved on (the reads take ~0.1 µs each when not preempted)
    TIGHT_NS = 5_000

    def offset_ns(self) -> int:
        """The offset now."""
        best_width, best = 1 << 62, 0
        for _ in range(self.TRIES):
            p1 = time.perf_counter_ns()
            wall = time.time_ns()
            p2 = time.perf_counter_ns()
            if p2 - p1 < best_width:
                best_width, best = p2 - p1, wall - (p1 + p2) // 2
                if best_width <= self.TIGHT_NS:
                    break
        return best


#: one per process: every connection maps kernel stamps the same way
WALL_TO_PERF = WallToPerf()
