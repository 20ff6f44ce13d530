"""One line, once per run, when the server sends no timing of its own.

The records' server parts (``server_queue_s``, ``server_ttft_s``, ``server_decode_s``, ``server_itl_s``, and the
``overhead_s`` they make known) come from vLLM's per-request metrics, which it sends only when started with
``--enable-per-request-metrics``. When the first :data:`SAMPLE` successful streamed answers of a run carry none —
or a shorter run's every one — the master (or a local runner) says so once, naming the flag, and the other way
(``--otlp-port``: its spans). Not said when ``--otlp-port`` is on: the spans may fill the parts after the run.
Records from workers count as they reach the master (:mod:`.ingest`).
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["SAMPLE", "TIMING_FIELDS", "ServerTimingHint"]

log = logging.getLogger("tokenstorm")

#: successful streamed answers without server timing before it is said
SAMPLE = 20
#: the record fields only the server's own timing fills
TIMING_FIELDS = ("server_queue_s", "server_ttft_s", "server_decode_s", "server_itl_s")
_VLLM = "start vLLM with --enable-per-request-metrics, or send its traces to --otlp-port"
_EMULATOR = "start the emulator with --enable-per-request-metrics"
_BUILT_IN = "leave --no-enable-per-request-metrics out of --emulator-args"


class ServerTimingHint:
    """Watches a run's records until one carries server timing (then stops looking) or :data:`SAMPLE`
    successful streamed ones did not (then says it, once)."""

    def __init__(self) -> None:
        self._armed = False
        self._how = _VLLM
        self._streamed = 0
        #: the line, once said (None: not said)
        self.said: str | None = None

    def reset(self, armed: bool, simulated: bool = False, built_in: bool = False) -> None:
        """A new run (``RunContext.start``: a master or local runner): watch its records when ``armed`` (no
        ``--otlp-port``); ``simulated``: on the emulator (``built_in``: the one the run started), whose flag is
        named instead of vLLM's."""
        self._armed, self._streamed, self.said = armed, 0, None
        self._how = (_BUILT_IN if built_in else _EMULATOR) if simulated else _VLLM

    @property
    def watching(self) -> bool:
        """Still looking at the run's records (none had server timing yet, nothing said)."""
        return self._armed

    def observe(self, row: dict[str, Any]) -> None:
        """Look at one record (``RequestRecord`` fields, as written); says the line at the :data:`SAMPLE`-th
        successful streamed record while none carried server timing."""
        if not self._armed or not row.get("ok") or not row.get("stream"):
            return
        if any(row.get(name) is not None for name in TIMING_FIELDS):
            self._armed = False  # the server sends its timing: nothing to say this run
            return
        self._streamed += 1
        if self._streamed >= SAMPLE:
            self._say()

    def at_end(self) -> None:
        """The run ended, every record in (before its report): say it if a shorter run's every successful
        streamed record lacked server timing."""
        if self._armed and self._streamed:
            self._say()

    def _say(self) -> None:
        self._armed = False
        self.said = (
            f"tokenstorm: the server sent no timing of its own with {self._streamed} streamed answers (no queue, "
            f"server TTFT or decode on the records): {self._how}"
        )
        log.warning("%s", self.said)
