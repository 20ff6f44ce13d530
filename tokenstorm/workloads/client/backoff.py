"""Back-off after connection errors: a user whose server refuses, resets or cannot be reached waits before
its next attempt, so that a restarting server is not flooded (measured before: 4 users with ``--wait-time 0``
made ~450 connect errors each in the 2.5 s a server was down; 12,511 in 5 s in issue #28).

One :class:`Backoff` per user and target (the user's connection). The first connection error of a run of
them costs no wait: a single refused connection among answers (a server shedding load) does not slow the
user. From the second in a row the user waits :data:`FIRST_S`, doubling to :data:`CAP_S`, each wait
jittered to between half and all of it, so users that failed together do not come back together. Any
answer — a success or an HTTP error, anything but a connection error — ends the back-off: a user that is
getting answers is never delayed. The waits are not requests; every attempt made is recorded as it ended.
"""

from __future__ import annotations

import random
import time

import gevent

from ..rundir.records import ErrorCategory, RequestRecord

__all__ = ["CAP_S", "FIRST_S", "Backoff"]

#: the first wait (after the second connection error in a row), and the longest
FIRST_S = 0.1
CAP_S = 5.0


class Backoff:
    """When the next attempt may go, after the connection errors so far (see the module's docstring)."""

    __slots__ = ("_errors", "_ready_t", "_rng", "cap_s", "first_s")

    def __init__(self, first_s: float = FIRST_S, cap_s: float = CAP_S, rng: random.Random | None = None) -> None:
        self.first_s = first_s
        self.cap_s = cap_s
        self._rng = rng or random.Random()
        #: connection errors in a row
        self._errors = 0
        #: perf_counter time before which no attempt goes
        self._ready_t = 0.0

    @property
    def errors(self) -> int:
        """Connection errors in a row so far (0: not backing off)."""
        return self._errors

    def delay_s(self) -> float:
        """How long the next attempt has still to wait (0: it may go now)."""
        return max(0.0, self._ready_t - time.perf_counter())

    def wait(self) -> None:
        """Sleep (this greenlet only) until the next attempt may go."""
        delay = self.delay_s()
        if delay > 0:
            gevent.sleep(delay)

    def note(self, record: RequestRecord) -> None:
        """Account for an attempt's record: a connection error backs off further, an answer ends the back-off
        (a request the load test cancelled says nothing of the server)."""
        if record.error_category == ErrorCategory.CONNECT:
            self.failed()
        elif record.error_category != ErrorCategory.CANCELLED:
            self.succeeded()

    def failed(self) -> float:
        """A connection error: return the wait it sets before the next attempt (seconds)."""
        self._errors += 1
        if self._errors == 1:
            return 0.0
        full = min(self.cap_s, self.first_s * 2.0 ** min(self._errors - 2, 64))
        wait = full * (0.5 + 0.5 * self._rng.random())
        self._ready_t = time.perf_counter() + wait
        return wait

    def succeeded(self) -> None:
        """An answer came: no wait before the next attempt."""
        self._errors = 0
        self._ready_t = 0.0
