"""The OTLP/HTTP receiver (``--otlp-port``): the server's own ``llm_request`` spans, kept in the run directory.

vLLM started with ``--otlp-traces-endpoint http://HOST:PORT/v1/traces`` (and
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``) POSTs protobuf ``ExportTraceServiceRequest`` batches here.
Each ``llm_request`` span is written to the run's ``spans.jsonl`` (:mod:`tokenstorm.workloads.rundir.spans`) as it
arrives;
a report joins them to the records by trace id. The receiver runs on the master or a local runner only, as a
gevent WSGI server on the load generator's loop (decoding a batch takes a millisecond or two); it stays up across
the runs of a web UI session, each run writing its own file. A run's end waits briefly (at most
:data:`LAST_SPANS_WAIT_S`) for the spans vLLM still holds: its exporter sends a batch every 5 s.

Answers: 200 with an empty ``ExportTraceServiceResponse``; 415 for OTLP/JSON (protobuf only) or an unknown
encoding; 400 for a body that is not a protobuf ``ExportTraceServiceRequest``; 404 / 405 / 413 as HTTP says.
"""

from __future__ import annotations

import logging
import sys
import time
import weakref
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent
from gevent.pywsgi import WSGIServer
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ...rundir import EXIT_RUN_FAILED, SPANS_FILE
from ...rundir.faults import WriteFailed
from ...rundir.spans import LLM_REQUEST_SPAN, SPAN_ATTRIBUTES, ServerSpan, SpanWriter

if TYPE_CHECKING:  # importing Locust patches the process: the decoding is usable without it
    from locust.env import Environment

    from .context import RunContext

__all__ = ["LAST_SPANS_WAIT_S", "OTLP_PATH", "OtlpReceiver", "await_last_spans", "decode_spans", "start", "stop"]

log = logging.getLogger("tokenstorm")

OTLP_PATH = "/v1/traces"
#: the longest wait at a run's end for the spans the server still holds (vLLM's exporter: a batch every 5 s)
LAST_SPANS_WAIT_S = 8.0
#: the wait ends sooner once a batch came after the run ended and none followed for this long
_QUIET_S = 0.5
#: the largest body taken (after gzip): a batch of 512 spans is ~0.3 MB
MAX_BODY_BYTES = 32 << 20
_PROTOBUF = ("application/x-protobuf", "application/protobuf")
_RECEIVERS: weakref.WeakKeyDictionary[Environment, OtlpReceiver] = weakref.WeakKeyDictionary()
_StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class BadRequest(ValueError):
    """A POST this receiver cannot take: ``status`` (the HTTP status line) and the one-line reason."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def decode_spans(body: bytes) -> list[ServerSpan]:
    """The ``llm_request`` spans of a protobuf ``ExportTraceServiceRequest`` (:class:`BadRequest` when it is not
    one); spans of other names are left out."""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError:
        raise BadRequest("400 Bad Request", "not a protobuf OTLP ExportTraceServiceRequest") from None
    out: list[ServerSpan] = []
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if span.name != LLM_REQUEST_SPAN or len(span.trace_id) != 16:
                    continue
                attrs = {kv.key: kv.value for kv in span.attributes}
                values = {field: _value(attrs[name]) for field, name in SPAN_ATTRIBUTES.items() if name in attrs}
                out.append(
                    ServerSpan(
                        trace_id=span.trace_id.hex(),
                        start_epoch_s=span.start_time_unix_nano / 1e9,
                        end_epoch_s=span.end_time_unix_nano / 1e9,
                        queue_s=_seconds(values.get("queue_s")),
                        ttft_s=_seconds(values.get("ttft_s")),
                        prefill_s=_seconds(values.get("prefill_s")),
                        decode_s=_seconds(values.get("decode_s")),
                        e2e_s=_seconds(values.get("e2e_s")),
                        prompt_tokens=_count(values.get("prompt_tokens")),
                        output_tokens=_count(values.get("output_tokens")),
                        request_id=str(values.get("request_id") or ""),
                    )
                )
    return out


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind in ("double_value", "int_value", "string_value", "bool_value") else None


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _body(environ: dict[str, Any]) -> bytes:
    """The request's body, un-gzipped, at most :data:`MAX_BODY_BYTES` (:class:`BadRequest` otherwise)."""
    media = str(environ.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
    if media == "application/json":
        raise BadRequest(
            "415 Unsupported Media Type",
            "OTLP/JSON is not taken here: send protobuf (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)",
        )
    if media and media not in _PROTOBUF:
        raise BadRequest("415 Unsupported Media Type", f"Content-Type {media} is not OTLP protobuf")
    length = str(environ.get("CONTENT_LENGTH") or "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise BadRequest("413 Content Too Large", f"a batch over {MAX_BODY_BYTES >> 20} MiB")
    body: bytes = environ["wsgi.input"].read(MAX_BODY_BYTES + 1)
    encoding = str(environ.get("HTTP_CONTENT_ENCODING") or "identity").strip().lower()
    if encoding == "gzip":
        inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            body = inflate.decompress(body, MAX_BODY_BYTES + 1)
        except zlib.error:
            raise BadRequest("400 Bad Request", "the gzip body does not inflate") from None
    elif encoding != "identity":
        raise BadRequest("415 Unsupported Media Type", f"Content-Encoding {encoding} (gzip or none)")
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest("413 Content Too Large", f"a batch over {MAX_BODY_BYTES >> 20} MiB")
    return body


class OtlpReceiver:
    """Listens at ``http://host:port/v1/traces`` (``OSError`` when it cannot) and writes the ``llm_request`` spans
    to the open run's ``spans.jsonl`` (:meth:`open_run`); spans that come while no run is open are dropped."""

    def __init__(self, host: str, port: int) -> None:
        self.writer: SpanWriter | None = None
        #: llm_request spans taken by the open run, and when its last POST came (monotonic seconds; None: none)
        self.spans = 0
        self.last_post_s: float | None = None
        self._said: set[str] = set()  # problems logged once each
        self._server = WSGIServer((host, port), self._app, log=None, error_log=None)
        self._server.start()
        self.port: int = self._server.server_port

    def open_run(self, run_dir: Path) -> None:
        """From now on write to ``run_dir``'s ``spans.jsonl``."""
        self.close_run()
        self.writer = SpanWriter(run_dir / SPANS_FILE)
        self.spans = 0
        self.last_post_s = None

    def close_run(self) -> None:
        """Close the open run's file (spans that come later go to no run)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            except WriteFailed as exc:
                self._say_once("write", f"tokenstorm: the server's spans: {exc}")

    def stop(self) -> None:
        """Stop listening and close the file."""
        self._server.stop(timeout=1)
        self.close_run()

    def _app(self, environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != OTLP_PATH:
            return _answer(start_response, "404 Not Found", f"OTLP traces are taken at {OTLP_PATH}")
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start_response, "405 Method Not Allowed", "POST", [("Allow", "POST")])
        try:
            spans = decode_spans(_body(environ))
        except BadRequest as exc:
            if exc.status.startswith("415"):
                self._say_once(exc.status, f"tokenstorm: --otlp-port refused a POST: {exc}")
            return _answer(start_response, exc.status, str(exc))
        self._take(spans)
        body = ExportTraceServiceResponse().SerializeToString()
        start_response("200 OK", [("Content-Type", "application/x-protobuf"), ("Content-Length", str(len(body)))])
        return [body]

    def _take(self, spans: list[ServerSpan]) -> None:
        writer = self.writer
        if writer is None:
            return
        self.last_post_s = time.monotonic()
        try:
            writer.write(spans)
        except WriteFailed as exc:  # the records matter more: the run goes on without the spans
            self._say_once("write", f"tokenstorm: the server's spans are not kept: {exc}")
            return
        self.spans += len(spans)

    def _say_once(self, key: str, line: str) -> None:
        if key not in self._said:
            self._said.add(key)
            log.warning("%s", line)


def _answer(
    start_response: _StartResponse, status: str, text: str, headers: list[tuple[str, str]] | None = None
) -> list[bytes]:
    body = (text + "\n").encode()
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))), *(headers or [])]
    )
    return [body]


def start(environment: Environment, ctx: RunContext) -> OtlpReceiver | None:
    """Start ``environment``'s receiver (``--otlp-port``; 0: none), writing to each run's directory from its start
    on and stopped when the process quits; when it cannot listen, one line and exit 3."""
    host, port = ctx.options.otlp_host, ctx.options.otlp_port
    if not port or environment in _RECEIVERS:
        return _RECEIVERS.get(environment)
    try:
        receiver = _RECEIVERS[environment] = OtlpReceiver(host, port)
    except OSError as exc:
        sys.stderr.write(f"tokenstorm: --otlp-port {port}: cannot listen on {host} ({exc.strerror or exc})\n")
        raise SystemExit(EXIT_RUN_FAILED) from None
    log.info("tokenstorm: OTLP/HTTP traces taken at http://%s:%d%s", host, receiver.port, OTLP_PATH)

    def run_started(**_kw: Any) -> None:  # after the plugin's own test_start listener opened the run directory
        if ctx.run_dir is not None:
            receiver.open_run(ctx.run_dir)

    environment.events.test_start.add_listener(run_started)
    environment.events.quitting.add_listener(lambda **_kw: stop(environment))
    return receiver


def await_last_spans(environment: Environment, records: int, wait_s: float = LAST_SPANS_WAIT_S) -> None:
    """The run (``records`` request records) has ended: wait (at most ``wait_s``) for the spans the server still
    holds — until a batch came after this call and none followed for half a second. Says in one line when the run
    got no span at all. No wait for a run without records."""
    try:
        receiver = _RECEIVERS.get(environment)
    except TypeError:  # an environment that cannot be weakly referenced (a stand-in) started none
        return
    if receiver is None or receiver.writer is None or records == 0:
        return
    since = time.monotonic()
    while (waited := time.monotonic() - since) < wait_s:
        last = receiver.last_post_s
        if last is not None and last > since and time.monotonic() - last >= _QUIET_S:
            break
        gevent.sleep(min(0.1, max(0.0, wait_s - waited)))
    if receiver.spans == 0:
        log.warning(
            "tokenstorm: --otlp-port %d got no llm_request span in this run: start vLLM with "
            "--otlp-traces-endpoint http://THIS-HOST:%d%s and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
            receiver.port,
            receiver.port,
            OTLP_PATH,
        )


def stop(environment: Environment) -> None:
    """Stop ``environment``'s receiver (the process quits)."""
    receiver = _RECEIVERS.pop(environment, None)
    if receiver is not None:
        receiver.stop()
