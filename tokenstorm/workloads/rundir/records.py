"""Typed request records, and the JSON-lines writer of format 1.

A :class:`RequestRecord` is the one fact tokenstorm keeps per request; SLOs and reports are
computed from these records, never from Locust's rounded live stats. A run stores them as
compact segments by default (:mod:`.segments`, :class:`~.writer.SegmentWriter`) or as
``requests.jsonl`` (:class:`RecordWriter`, ``--records jsonl``); :func:`~.reading.read_records`
reads either back.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import orjson

from .faults import AppendFile, WriteFailed

__all__ = [
    "CHECK_NAMES",
    "LATE_EVENT_S",
    "RECORD_SCHEMA_VERSION",
    "ErrorCategory",
    "RecordTail",
    "RecordWriter",
    "RequestRecord",
]

RECORD_SCHEMA_VERSION = 1

#: the built-in answer checks (``tokenstorm.workloads.traffic.checks``), by the names records (``check``,
#: ``check_results``)
#: and SLOs (``quality_<name>``) use, in the order reports list them
CHECK_NAMES = (
    "needle",
    "code_language",
    "python_parses",
    "script",
    "repetition",
    "complete",
    "tool_exists",
    "tool_args",
)

#: A token event whose stamp may be off by more than this is *late* (``RequestRecord.late_events``).
LATE_EVENT_S = 0.001


class ErrorCategory:
    """The failure categories a request can end in (``RequestRecord.error_category``)."""

    RATE_LIMITED = "http_429"
    CLIENT_ERROR = "http_4xx"
    SERVER_ERROR = "http_5xx"
    CONNECT = "connect_error"
    TIMEOUT = "timeout"
    #: no byte for --stall-timeout seconds (before the headers or mid-stream)
    STALL = "stall"
    STREAM_DROPPED = "stream_dropped"
    MALFORMED_CHUNK = "malformed_chunk"
    MISSING_DONE = "missing_done"
    NO_FINISH_REASON = "no_finish_reason"
    ERROR_EVENT = "error_event"
    NO_TOKENS = "no_tokens"
    #: the response went past the client's cap (a multiple of max_tokens, see tokenstorm.workloads.client.limits): cut
    OVERSIZED = "oversized"
    #: Stopped by the load test itself (run ended, user stopped) — kept, but not a server failure.
    CANCELLED = "cancelled"

    ALL = (
        RATE_LIMITED,
        CLIENT_ERROR,
        SERVER_ERROR,
        CONNECT,
        TIMEOUT,
        STALL,
        STREAM_DROPPED,
        MALFORMED_CHUNK,
        MISSING_DONE,
        NO_FINISH_REASON,
        ERROR_EVENT,
        NO_TOKENS,
        OVERSIZED,
        CANCELLED,
    )


@dataclass(slots=True)
class RequestRecord:
    """One request as the client saw it. Durations are seconds from the request being sent."""

    workload: str
    endpoint: str
    model: str
    stream: bool
    start_epoch_s: float
    request_id: str = ""
    response_id: str | None = None
    user_id: int = 0
    worker_id: str = "local"
    ok: bool = False
    status_code: int | None = None
    error_category: str | None = None
    error_detail: str | None = None
    prompt_tokens: int | None = None
    requested_prompt_tokens: int | None = None
    output_tokens: int | None = None
    requested_max_tokens: int | None = None
    ttfc_s: float | None = None
    ttft_s: float | None = None
    ttft_visible_s: float | None = None
    ttft_answer_s: float | None = None
    e2e_s: float | None = None
    done_s: float | None = None
    tpot_s: float | None = None
    itl_gaps_s: list[float] = field(default_factory=list)
    token_events: int = 0
    reasoning_events: int = 0
    #: output tokens of the reasoning (reasoning fields, or content inside think markers)
    reasoning_tokens: int | None = None
    finish_reason: str | None = None
    warmup: bool = False
    #: the A/B target's label (``--targets``); empty in a one-target run
    target: str = ""
    #: open-loop runs: how late the request was sent after its scheduled arrival time
    send_lag_s: float | None = None
    #: the time it took to open the connection the request went on, before its clock started (None:
    #: it reused one); connecting is never inside TTFT or E2E
    connect_s: float | None = None
    #: token events whose stamp may be off by more than ``LATE_EVENT_S``: they came in one read
    #: together with a later token event (or part of one), and that read's bytes may have waited in
    #: the socket for longer (its kernel stamp is more than ``LATE_EVENT_S`` after the previous read
    #: returned).
    #: Linux then keeps one stamp, the newest packet's, for all of them: their own is lost.
    late_events: int = 0
    #: the first token event is one of the late ones, or ``sendall`` took over ``LATE_EVENT_S`` (the
    #: request left somewhere in that span): TTFT may read high (and TPOT low)
    ttft_late: bool = False
    #: the response's worst read lag: a read's return time − the kernel receive stamp of its newest
    #: packet; ``None`` when its reads were not stamped by the kernel (TLS, non-Linux)
    read_lag_max_s: float | None = None
    #: the session (agent or chat) this request is a step of, unique in the run; empty: not part of one
    session_id: str = ""
    #: the 0-based step (turn) of its session
    step: int | None = None
    #: no step follows this one: its session's last by the traffic model's plan, or it offered tools,
    #: succeeded and the answer called none (the agent loop ended with an answer)
    session_end: bool = False
    #: tool calls the response streamed (distinct ``delta.tool_calls[].index``)
    tool_calls: int = 0
    #: sent → the first token event carrying ``delta.tool_calls`` (the call's id and name)
    ttft_tool_s: float | None = None
    #: sent → the last event carrying ``delta.tool_calls`` (the complete call, its last argument fragment)
    tool_call_s: float | None = None
    #: output tokens that came in tool-call events (the calls' arguments), from the usage deltas
    tool_call_tokens: int | None = None
    #: prompt tokens the server found in its prefix cache (``usage.prompt_tokens_details.cached_tokens``;
    #: vLLM needs ``--enable-prompt-tokens-details``); ``None``: not reported
    cached_tokens: int | None = None
    # The server's own timing of this request — what the engine did, never what the user saw: vLLM's
    # ``--enable-per-request-metrics`` (``metrics`` of the stream's final usage chunk), else its OpenTelemetry
    # ``llm_request`` span joined by ``trace_id`` (``--otlp-port``). ``None``: the server said nothing.
    #: queued → scheduled (``queue_time_ms``): the wait in the scheduler's queue
    server_queue_s: float | None = None
    #: scheduled → first token (``time_to_first_token_ms``, vLLM's definition): prefill
    server_ttft_s: float | None = None
    #: first → last token (``generation_time_ms``): decode
    server_decode_s: float | None = None
    #: the server's mean gap between output tokens (``mean_itl_ms``)
    server_itl_s: float | None = None
    #: ``ttft_s − server_queue_s − server_ttft_s``: everything outside the engine — the HTTP and chat-template
    #: front end, tokenisation, the network and the client's own reading (a late read makes it grow)
    overhead_s: float | None = None
    #: arrival → queued, the server's front end (HTTP, chat template, tokenisation): part of ``overhead_s``, known
    #: only from the request's span
    server_frontend_s: float | None = None
    #: the W3C trace id this request's ``traceparent`` header carried (32 hex digits): where to find it in the
    #: user's own tracing (Jaeger, Tempo), and the key its server span is joined by
    trace_id: str = ""
    #: the answer's checks (``tokenstorm.workloads.traffic.checks``): ``None`` none applied (or the request failed),
    #: ``"pass"``, else the name of the first check that failed
    check: str | None = None
    #: every check that applied, ``name:pass`` or ``name:fail``, comma-separated
    check_results: str = ""
    #: why the first failed check failed (at most 200 characters)
    check_detail: str | None = None
    #: contract: where the needle fact sat in the document, 0 (start) to 1 (end)
    needle_depth: float | None = None
    #: a failed answer's text (up to 2,000 characters; secrets masked), kept for a bounded sample of the failed
    #: records per workload and check so that a report can show what went wrong
    answer_sample: str | None = None
    #: set only when the record breaks ``ttfc <= ttft <= e2e <= done`` or has a negative gap —
    #: a measurement bug, counted in run.json (``timing_violations``), never expected
    timing_violation: str | None = None
    schema: int = RECORD_SCHEMA_VERSION

    def check_timing(self) -> str | None:
        """Say how this record breaks the one-clock invariant, or ``None`` when it holds."""
        chain = [
            (n, v)
            for n, v in (
                ("ttfc_s", self.ttfc_s),
                ("ttft_s", self.ttft_s),
                ("e2e_s", self.e2e_s),
                ("done_s", self.done_s),
            )
            if v is not None
        ]
        if chain and chain[0][1] < 0:
            return f"{chain[0][0]} < 0"
        for (name_a, a), (name_b, b) in itertools.pairwise(chain):
            if a > b:
                return f"{name_a} {a:.6f} > {name_b} {b:.6f}"
        if self.itl_gaps_s and min(self.itl_gaps_s) < 0:  # min() walks the gaps in C
            return "negative ITL gap"
        return None

    def as_row(self) -> dict[str, Any]:
        """The record as a dict of its fields (shallow: the ITL list is shared, not copied)."""
        # dataclasses.asdict deep-copies every ITL gap (measured: ~1 ms per record).
        return {name: getattr(self, name) for name in _FIELD_ORDER}

    def to_json(self) -> str:
        """Serialise as one compact JSON line (no trailing newline)."""
        return orjson.dumps(self.as_row()).decode()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        """Build a record from a decoded JSON line, ignoring fields a newer writer added."""
        known = _FIELD_NAMES
        return cls(**{k: v for k, v in data.items() if k in known})


_FIELD_ORDER = tuple(f.name for f in fields(RequestRecord))
_FIELD_NAMES = frozenset(_FIELD_ORDER)


class TailedWriter:
    """What every record writer shares: ``write`` one record, and tails for live judges."""

    def __init__(self) -> None:
        self._tails: list[RecordTail] = []
        #: records taken and on disk (or on their way there)
        self.count = 0
        #: the first write that failed (the writer takes nothing after it); None: none failed
        self.failure: WriteFailed | None = None
        #: called once with that failure (the plugin stops the run)
        self.on_failure: Callable[[WriteFailed], None] | None = None
        #: records taken but not on disk because a write failed
        self.lost = 0

    def tail(self) -> RecordTail:
        """A :class:`RecordTail` fed every record this writer takes from now on."""
        t = RecordTail()
        self._tails.append(t)
        return t

    def write(self, record: RequestRecord) -> None:
        """Append one record."""
        self.write_rows([record.as_row()])

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def _feed_tails(self, rows: list[dict[str, Any]]) -> None:
        for t in self._tails:
            t.feed(rows)

    def _failed(self, failure: WriteFailed, lost: int) -> None:
        """A write failed: ``lost`` records taken are not on disk; say it once (``on_failure``)."""
        self.lost += lost
        self.count -= lost
        if self.failure is None:
            self.failure = failure
            if self.on_failure is not None:
                self.on_failure(failure)


class RecordWriter(TailedWriter):
    """Appends records to ``requests.jsonl`` (format 1, ``--records jsonl``); flushes at least
    every ``flush_interval_s``. :class:`~tokenstorm.workloads.rundir.segments.SegmentWriter` is the
    compact default with the same methods.

    Safe to call from many greenlets; the file is flushed on a timer rather than per record
    so high request rates do not pay a syscall each, yet a crash loses seconds, not the run.
    Whole lines only: a flush that fails (disk full) leaves the file ending on the last line
    written before it, and the writer takes no more (``failure``, ``on_failure``).
    """

    #: pushed to the OS before the timer when this much is buffered
    PUSH_BYTES = 1 << 20
    #: what one record takes on disk, roughly (2–6 KB: a long answer's ITL gaps are most of it)
    record_bytes_estimate = 3000

    def __init__(self, path: Path, flush_interval_s: float = 2.0) -> None:
        super().__init__()
        self.path = self.location = path
        self._fh = AppendFile(path, "records")
        self._lock = threading.Lock()
        self._flush_interval_s = flush_interval_s
        self._last_flush = time.monotonic()
        self._pending_lines = 0
        self.count = 0

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        """Append decoded records (``RequestRecord`` fields)."""
        self.write_lines([orjson.dumps(r).decode() for r in rows])

    def write_lines(self, lines: list[str]) -> None:
        """Append already-serialised records (a batch from a worker)."""
        if not lines:
            return
        if self._tails:
            self._feed_tails([orjson.loads(line) for line in lines])
        with self._lock:
            if self.failure is not None:
                self.lost += len(lines)
                return
            if self._fh.closed:  # a straggler after the run closed the file: keep it anyway
                self._fh = AppendFile(self.path, "records")
            self._fh.write(("\n".join(lines) + "\n").encode())
            self._fh.mark(len(lines))
            self.count += len(lines)
            self._pending_lines += len(lines)
            now = time.monotonic()
            if now - self._last_flush >= self._flush_interval_s or self._fh.pending_bytes >= self.PUSH_BYTES:
                self._push_locked()

    def _push_locked(self) -> None:
        self._last_flush = time.monotonic()
        try:
            self._fh.push()
        except WriteFailed as exc:
            lost, self._pending_lines = self._pending_lines - self._fh.kept_records, 0
            self._failed(exc, lost)
            return
        self._pending_lines = 0

    def flush(self) -> None:
        """Push buffered records to the OS (called by the periodic flusher too)."""
        with self._lock:
            self._push_locked()

    def close(self) -> None:
        """Flush and close the file."""
        with self._lock:
            self._push_locked()
            self._fh.close()


class RecordTail:
    """The records a writer took since the last call — what a live judge (capacity search) reads.

    Fed by the writer itself (:meth:`RecordWriter.tail`), so it works for every on-disk format
    and never re-reads the disk.
    """

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def feed(self, rows: list[dict[str, Any]]) -> None:
        """Called by the writer with each batch it takes."""
        with self._lock:
            self._rows.extend(rows)

    def read_new(self) -> list[dict[str, Any]]:
        """The decoded records written since the previous call."""
        with self._lock:
            out, self._rows = self._rows, []
        return out
