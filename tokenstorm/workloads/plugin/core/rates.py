"""Live rates for the console and web UI: sliding windows that never grow with the run."""

from __future__ import annotations

import threading
import time
from collections import deque

__all__ = ["TokenRate"]


class TokenRate:
    """Output tokens per second over a sliding window (for the live view)."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._events: deque[tuple[float, int]] = deque()
        self.total_tokens = 0
        self._lock = threading.Lock()

    def add(self, tokens: int, now: float | None = None) -> None:
        """Count ``tokens`` output tokens finished at ``now`` (monotonic seconds)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._events.append((now, tokens))
            self.total_tokens += tokens
            # Trimmed here too, not only when read: a rate nobody reads (a workload's, with no web UI
            # open) once kept every request of a run — ~80 bytes each, a 72-hour run's gigabytes.
            while self._events[0][0] < now - self.window_s:
                self._events.popleft()

    def rate(self, now: float | None = None) -> float:
        """Tokens per second over the last window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            while self._events and self._events[0][0] < now - self.window_s:
                self._events.popleft()
            return sum(n for _, n in self._events) / self.window_s

    def reset(self) -> None:
        """Forget everything (a new test started)."""
        with self._lock:
            self._events.clear()
            self.total_tokens = 0
