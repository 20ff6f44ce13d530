"""A slow start-up does not cut the run short: Locust's ``--run-time`` timer counts from now.

gevent timers count from the loop's cached time; after a start-up that never ran the loop (imports,
files, checks — seconds on a busy machine) a timer armed at once fired at once: the run ended before
its first request (seen under issue #19's contention). tokenstorm's last ``init`` listener refreshes
it. In a process of its own: importing the plugin imports Locust, which patches the standard library.
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

_SCRIPT = """
import sys, time
import gevent
from tokenstorm.workloads.plugin.core.lifecycle import _refresh_loop_clock
gevent.get_hub()  # the loop exists but has not run yet, as while Locust starts up...
end = time.monotonic() + 0.3
while time.monotonic() < end:  # ...and the start-up keeps the process busy (nothing yields)
    pass
if sys.argv[1] == "refresh":
    _refresh_loop_clock()
t0 = time.monotonic()
fired = []
gevent.spawn_later(0.2, lambda: fired.append(time.monotonic() - t0))
gevent.sleep(0.4)
print(fired[0])
"""


def _fires_after_s(mode: str) -> float:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, mode], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return float(proc.stdout.strip().splitlines()[-1])


def test_the_run_time_timer_counts_from_when_it_is_armed() -> None:
    assert _fires_after_s("refresh") >= 0.18


def test_without_the_refresh_the_timer_fires_early() -> None:
    # What the refresh is for (gevent's behaviour, checked so that the test above means something).
    assert _fires_after_s("none") < 0.1
