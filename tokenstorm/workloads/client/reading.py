"""Reading a response: a stream's SSE events into the :class:`StreamTimer`, each stamped with the read
that completed it, and a whole (non-streamed) answer or the timer's figures into the record. Neither reads
past the request's :class:`~.limits.ResponseCap`: a response that goes on is cut (``oversized``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from ..rundir.records import LATE_EVENT_S, ErrorCategory, RequestRecord
from .api_streams import whole_messages, whole_responses
from .chunks import StreamError, cached_tokens
from .http import HttpResponse
from .limits import ResponseCap
from .server_timing import fill_server_timing
from .sse import SseParser
from .timing import StreamTimer

__all__ = ["fill_from_timer", "read_stream", "read_whole"]


def read_stream(
    resp: HttpResponse,
    timer: StreamTimer,
    t0: float,
    cap: ResponseCap | None = None,
    on_event: Callable[[bytes, float], None] | None = None,
) -> None:
    """Feed SSE events to the timer, each stamped with the read that completed it (kernel
    receive time where available, see :mod:`tokenstorm.workloads.client.http`), as seconds since ``t0``.

    A token event that shares its read with a later token event (or with part of one) may carry
    that later packet's stamp: a late reader finds the packets coalesced under the newest one.
    When the read's window says its bytes may have waited more than ``LATE_EVENT_S``, such events
    are counted as late. Usage-only chunks and ``[DONE]`` after the last token are not: vLLM sends
    them in the same step as that token, so sharing its read says nothing about its stamp.

    ``on_event`` reads each payload (default ``timer.on_event``; the other APIs' readers of :mod:`.api_streams`).
    A body past ``cap.body_bytes`` raises :class:`StreamError` (``oversized``) before its last read is parsed:
    no event, nor the parser's unfinished one, holds more than the cap."""
    parser = SseParser()
    if on_event is None:
        on_event = timer.on_event
    feed = parser.feed
    t = t0
    left = cap.body_bytes if cap is not None else -1
    for piece, t, window in resp.body():
        if left >= 0:
            left -= len(piece)
            if left < 0:
                assert cap is not None
                raise StreamError(ErrorCategory.OVERSIZED, cap.bytes_detail())
        payloads = feed(piece)
        dt = t - t0
        if window <= LATE_EVENT_S or (len(payloads) == 1 and not parser.pending):
            for payload in payloads:  # read on time, or one event alone in its read: its stamp is its own
                on_event(payload, dt)
            continue
        first = timer.token_events
        for payload in payloads:
            on_event(payload, dt)
        k = timer.token_events - first
        # All but the read's last token event came before later bytes; the last too if a later
        # event's first bytes are in the read.
        late = k if parser.pending else k - 1
        if late > 0:
            timer.late_events += late
            if first == 0:
                timer.ttft_late = True
    for payload in parser.flush():
        on_event(payload, t - t0)


def read_whole(
    resp: HttpResponse, record: RequestRecord, t0: float, cap: ResponseCap | None = None, api: str = "chat"
) -> tuple[str, str] | None:
    """Fill ``record`` from a non-streamed answer in ``api``; the failure's category and detail if it is not a
    completion, or is longer than ``cap.body_bytes`` (then the connection is closed, the rest unread)."""
    body = resp.read(None if cap is None else cap.body_bytes + 1)
    record.e2e_s = time.perf_counter() - t0
    if cap is not None and len(body) > cap.body_bytes:
        return ErrorCategory.OVERSIZED, cap.bytes_detail()
    try:
        data = orjson.loads(body)
        if api in ("messages", "responses"):
            return _whole_answer(data, record, api)
        choice = data["choices"][0]
        record.finish_reason = choice.get("finish_reason")
        record.response_id = data.get("id")
        usage = data.get("usage") or {}
        record.prompt_tokens = usage.get("prompt_tokens")
        record.output_tokens = usage.get("completion_tokens")
        record.cached_tokens = cached_tokens(usage)
        fill_server_timing(record, data.get("metrics"))
        calls = (choice.get("message") or {}).get("tool_calls")
        if isinstance(calls, list) and calls:
            record.tool_calls = len(calls)
            record.ttft_tool_s = record.tool_call_s = record.e2e_s
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return ErrorCategory.MALFORMED_CHUNK, "response body is not a completion object"
    if record.output_tokens and record.output_tokens > 1:
        record.token_events = 1
    return None


def _whole_answer(data: Any, record: RequestRecord, api: str) -> tuple[str, str] | None:
    """A non-streamed Messages or Responses answer into ``record`` (no token events: its one read is its time)."""
    timer = StreamTimer()
    calls = (whole_messages if api == "messages" else whole_responses)(data, timer)
    record.finish_reason, record.response_id = timer.finish_reason, timer.response_id
    record.prompt_tokens, record.output_tokens = timer.prompt_tokens, timer.output_tokens
    record.cached_tokens = timer.cached_tokens
    fill_server_timing(record, timer.server_metrics)
    if calls:
        record.tool_calls = calls
        record.ttft_tool_s = record.tool_call_s = record.e2e_s
    if record.output_tokens and record.output_tokens > 1:
        record.token_events = 1
    return None


def fill_from_timer(record: RequestRecord, timer: StreamTimer) -> None:
    record.ttfc_s = timer.first_chunk_t
    record.ttft_s = timer.first_token_t
    record.ttft_visible_s = timer.first_visible_t
    record.ttft_answer_s = timer.first_answer_t
    record.e2e_s = timer.last_token_t
    record.done_s = timer.done_t
    record.itl_gaps_s = timer.itl_gaps
    record.token_events = timer.token_events
    record.late_events = timer.late_events
    record.ttft_late = timer.ttft_late
    record.reasoning_events = timer.reasoning_events
    record.reasoning_tokens = timer.reasoning_tokens if timer.reasoning_events else 0
    record.finish_reason = timer.finish_reason
    record.prompt_tokens = timer.prompt_tokens
    record.output_tokens = timer.output_tokens
    record.response_id = timer.response_id
    record.tpot_s = timer.tpot_s
    record.cached_tokens = timer.cached_tokens
    record.tool_calls = len(timer.tools)
    record.ttft_tool_s = timer.first_tool_t
    record.tool_call_s = timer.last_tool_t
    record.tool_call_tokens = timer.tool_tokens if timer.tools else None
    fill_server_timing(record, timer.server_metrics)
