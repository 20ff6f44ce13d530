"""The server's own timing of one request, and the W3C trace context that joins it to the user's tracing.

vLLM started with ``--enable-per-request-metrics`` puts a top-level ``metrics`` object on a stream's final
usage chunk (``choices: []``; the client always asks for usage) and on a non-streamed answer's body::

    {"queue_time_ms": ..., "time_to_first_token_ms": ..., "generation_time_ms": ..., "mean_itl_ms": ...,
     "tokens_per_second": ...}

— queued → scheduled, scheduled → first token, first → last token and the mean gap between output tokens,
each in milliseconds, any of them absent or ``null`` (a negative one is no duration: ignored).
:func:`fill_server_timing` turns them into the record's ``server_queue_s``, ``server_ttft_s``, ``server_decode_s``
and ``server_itl_s`` (seconds) and, where the client timed the first token,
``overhead_s = ttft_s − server_queue_s − server_ttft_s``. A server that sends no ``metrics`` leaves them all
``None``.

Every request carries a ``traceparent`` header (:func:`traceparent`): its trace id is the record's
``trace_id``, derived from the request id, so the request can be found in the user's Jaeger or Tempo and the
server's ``llm_request`` span joined to the record.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from ..rundir.records import RequestRecord

__all__ = ["METRICS_FIELDS", "fill_overhead", "fill_server_timing", "span_id_of", "trace_id_of", "traceparent"]

#: ``metrics`` key (milliseconds) → the record's field (seconds)
METRICS_FIELDS = (
    ("queue_time_ms", "server_queue_s"),
    ("time_to_first_token_ms", "server_ttft_s"),
    ("generation_time_ms", "server_decode_s"),
    ("mean_itl_ms", "server_itl_s"),
)
_HEX32 = re.compile(r"[0-9a-f]{32}")


def fill_server_timing(record: RequestRecord, metrics: Any) -> None:
    """Set the record's server timing from a response's ``metrics`` object (ms → s); keys absent, ``null``
    or not a finite number of zero or more (a duration) stay ``None``, and anything but an object is ignored.
    Then :func:`fill_overhead`."""
    if type(metrics) is not dict:
        return
    for key, name in METRICS_FIELDS:
        value = metrics.get(key)
        if (type(value) is float or type(value) is int) and math.isfinite(value) and value >= 0:
            setattr(record, name, value / 1000.0)
    fill_overhead(record)


def fill_overhead(record: RequestRecord) -> None:
    """``overhead_s = ttft_s − server_queue_s − server_ttft_s`` when all three are known (else unchanged)."""
    if record.ttft_s is not None and record.server_queue_s is not None and record.server_ttft_s is not None:
        record.overhead_s = record.ttft_s - record.server_queue_s - record.server_ttft_s


def trace_id_of(request_id: str) -> str:
    """The W3C trace id (32 lowercase hex digits, never all zeros) of a request id: the id itself when it is
    32 lowercase hex digits already (the client's own ids), else the start of its SHA-256."""
    if _HEX32.fullmatch(request_id) and request_id.strip("0"):
        return request_id
    return hashlib.sha256(f"trace/{request_id}".encode()).hexdigest()[:32]


def span_id_of(request_id: str) -> str:
    """The W3C parent span id (16 lowercase hex digits) sent with a request id: the start of a SHA-256 of it."""
    digest = hashlib.sha256(f"span/{request_id}".encode()).hexdigest()
    span = digest[:16]
    return span if span.strip("0") else digest[16:32]


def traceparent(trace_id: str, request_id: str) -> str:
    """The ``traceparent`` header value (version 00, sampled): ``00-<trace id>-<span id>-01``."""
    return f"00-{trace_id}-{span_id_of(request_id)}-01"
