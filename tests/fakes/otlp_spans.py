"""vLLM's ``llm_request`` spans as it exports them: OTLP protobuf built with opentelemetry-proto's own classes."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span


def llm_request_span(
    trace_id: str,
    arrival_epoch_s: float,
    queue_s: float,
    frontend_s: float,
    prefill_s: float,
    decode_s: float,
    output_tokens: int,
    name: str = "llm_request",
) -> Span:
    """A span with vLLM 0.32's attributes: ``time_to_first_token`` counts from arrival (front end + queue +
    prefill), the others as vLLM's output processor sets them; the span starts at arrival."""
    ttft_s = frontend_s + queue_s + prefill_s
    e2e_s = ttft_s + decode_s
    attrs = {
        "gen_ai.latency.time_to_first_token": AnyValue(double_value=ttft_s),
        "gen_ai.latency.e2e": AnyValue(double_value=e2e_s),
        "gen_ai.latency.time_in_queue": AnyValue(double_value=queue_s),
        "gen_ai.usage.prompt_tokens": AnyValue(int_value=12),
        "gen_ai.usage.completion_tokens": AnyValue(int_value=output_tokens),
        "gen_ai.latency.time_in_model_prefill": AnyValue(double_value=prefill_s),
        "gen_ai.latency.time_in_model_decode": AnyValue(double_value=decode_s),
        "gen_ai.latency.time_in_model_inference": AnyValue(double_value=prefill_s + decode_s),
        "gen_ai.request.id": AnyValue(string_value=f"chatcmpl-{trace_id[:8]}"),
    }
    return Span(
        trace_id=bytes.fromhex(trace_id),
        span_id=bytes.fromhex(trace_id[:16]),
        name=name,
        kind=Span.SPAN_KIND_SERVER,
        start_time_unix_nano=int(arrival_epoch_s * 1e9),
        end_time_unix_nano=int((arrival_epoch_s + e2e_s) * 1e9),
        attributes=[KeyValue(key=k, value=v) for k, v in attrs.items()],
    )


def export_body(*spans: Span) -> bytes:
    """An ``ExportTraceServiceRequest`` holding ``spans`` (one resource, one scope), serialised."""
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])])
    return request.SerializeToString()


def post(
    url: str, body: bytes, content_type: str = "application/x-protobuf", gzipped: bool = False, method: str = "POST"
) -> tuple[int, str, bytes]:
    """``(status, content type, body)`` of an OTLP/HTTP export to ``url``, as the OTLP exporter sends it."""
    headers = {"Content-Type": content_type}
    if gzipped:
        body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
    req = urllib.request.Request(url, data=body if method == "POST" else None, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()
