"""The stall timeout: a request fails when no byte of its response came for ``stall_timeout_s``.

Unlike the whole-request deadline, a long healthy generation is never cut: only silence is. The
check costs nothing per read — the reads already stamp their bytes (:attr:`HttpConnection.last_byte_t`)
— and one libev timer per request: when it fires it looks at how long ago the newest byte came, and
either waits the rest of the period again or throws :class:`Stalled` into the request's greenlet (as
``gevent.Timeout`` does), so a stall is noticed within the period's end, not a period later.
"""

from __future__ import annotations

import time
from typing import Any

import gevent
from gevent.hub import get_hub

from .http import HttpConnection

__all__ = ["StallWatch", "Stalled"]

# A timer that fires a hair early (libev's cached clock against perf_counter) waits at least this.
_MIN_WAIT_S = 0.001


class Stalled(BaseException):
    """No byte came for the stall timeout. A BaseException, as ``gevent.Timeout``: an
    ``except Exception`` on the way up must not swallow it."""


class StallWatch:
    """``with StallWatch(seconds, conn) as watch:`` … ``watch.start(t_sent)`` once the request is about
    to leave; leaving the block stops it, however it is left. ``seconds=None``: it does nothing."""

    __slots__ = ("_conn", "_greenlet", "_seconds", "_t_start", "_timer")

    def __init__(self, seconds: float | None, conn: HttpConnection) -> None:
        self._seconds = seconds
        self._conn = conn
        self._greenlet: Any = None
        self._timer: Any = None
        self._t_start = 0.0

    def __enter__(self) -> StallWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def start(self, t_start: float) -> None:
        """Watch from ``t_start`` (``perf_counter``: when the request leaves) on."""
        if self._seconds is None:
            return
        self._t_start = t_start
        self._greenlet = gevent.getcurrent()
        self._arm(self._seconds)

    def _arm(self, wait_s: float) -> None:
        self._timer = get_hub().loop.timer(wait_s)
        # update: count from now, not from the loop's cached time (stale after a busy stretch)
        self._timer.start(self._expired, update=True)

    def _stop(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.stop()
            timer.close()

    def _expired(self) -> None:
        assert self._seconds is not None
        self._stop()
        last = self._conn.last_byte_t
        # A stamp from before this request (the previous response's), or none yet: count from the send.
        quiet_s = time.perf_counter() - max(last or 0.0, self._t_start)
        if quiet_s < self._seconds:
            self._arm(max(self._seconds - quiet_s, _MIN_WAIT_S))
            return
        self._greenlet.throw(Stalled(quiet_s))
