"""Keeps Python's cyclic garbage collector from stalling stream reads, and measures what is left.

A full (generation-2) collection walks every tracked object in the process: Locust, Flask,
pandas, the bundled corpora, a tokenizer. In a load generator that is an event-loop stall
during which no socket is read (seen: up to 57 ms), i.e. late reads, bunched events and
inflated ITL. At test start everything that exists is moved to the permanent generation
(``gc.freeze``), so the collections during the run only walk what the run itself creates.
The pauses that remain are measured (``gc.callbacks``) and written to run.json — the local
process's, or in a distributed run the master's (workers' pauses are not shipped yet).
"""

from __future__ import annotations

import gc
import time
from typing import Any

__all__ = ["GcWatch"]


class GcWatch:
    """Freeze the start-up heap and time every collection until :meth:`stop`."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.max_pause_s = 0.0
        self.total_pause_s = 0.0
        self._t = 0.0
        self._active = False

    def start(self) -> None:
        """Collect once, freeze what survived, and start timing collections (counts start at 0)."""
        self.collections = [0, 0, 0]
        self.max_pause_s = self.total_pause_s = 0.0
        gc.collect()
        gc.freeze()
        if not self._active:
            gc.callbacks.append(self._on_gc)
            self._active = True

    def stop(self) -> None:
        """Stop timing (the frozen objects stay frozen: they live until the process ends)."""
        if self._active:
            gc.callbacks.remove(self._on_gc)
            self._active = False

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
            return
        pause = time.perf_counter() - self._t
        self.collections[int(info.get("generation", 0))] += 1
        self.total_pause_s += pause
        if pause > self.max_pause_s:
            self.max_pause_s = pause

    def as_dict(self) -> dict[str, Any]:
        """For run.json: collections per generation and the pauses they caused."""
        return {
            "collections": list(self.collections),
            "max_pause_ms": round(self.max_pause_s * 1000, 3),
            "total_pause_ms": round(self.total_pause_s * 1000, 3),
        }
