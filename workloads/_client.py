"""A gevent-friendly client for vLLM's OpenAI-compatible completion endpoints.

One :class:`LlmClient` per simulated user (one keep-alive connection). Streams are read
line by line as bytes arrive (geventhttpclient's ``readline``), so each SSE event is
timestamped when its bytes reach the process rather than when a read buffer fills up.
Every request ends as a :class:`~workloads.RequestRecord`, successful or not; failures get
an :class:`~workloads.ErrorCategory` instead of an exception.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import gevent
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from ._records import ErrorCategory, RequestRecord
from ._sse import SseParser
from ._timing import StreamError, StreamTimer

__all__ = ["CompletionRequest", "LlmClient", "TargetError"]

_MAX_ERROR_BODY = 2048


class TargetError(Exception):
    """The target could not be used at all (unreachable, no models); the message is for users."""


@dataclass(slots=True)
class CompletionRequest:
    """What one simulated user asks the server for."""

    workload: str
    endpoint: Literal["chat", "completions"] = "chat"
    messages: list[dict[str, Any]] | None = None
    prompt: str | None = None
    max_tokens: int | None = 128
    temperature: float | None = None
    ignore_eos: bool = False
    stream: bool = True
    stop: list[str] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    requested_prompt_tokens: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: keep the answer text (``LlmClient.last_text``), e.g. to grow a chat history; never recorded
    collect_text: bool = False

    @property
    def path(self) -> str:
        """The API path (without any base-URL prefix)."""
        return "/v1/chat/completions" if self.endpoint == "chat" else "/v1/completions"


class LlmClient:
    """Sends completion requests and times them; never raises for a failed request."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        continuous_usage: bool = True,
        user_id: int = 0,
        worker_id: str = "local",
        kernel_timestamps: bool = True,
    ) -> None:
        parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TargetError(f"host {base_url!r} is not an http(s) URL like http://gpu-host:8000")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = parts.scheme == "https"
        prefix = parts.path.rstrip("/")
        self._prefix = prefix[: -len("/v1")] if prefix.endswith("/v1") else prefix
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._continuous_usage = continuous_usage
        self._user_id = user_id
        self._worker_id = worker_id
        self._http: HTTPClient | None = None
        # Plain TCP on Linux: time events by the kernel's packet receive stamps, so a busy
        # client (many streams on one core) does not add its own scheduling delay to them.
        self._kernel_stamps = kernel_timestamps and not self._ssl
        self._stamped_sock: Any = None
        #: the answer of the last request that asked for ``collect_text`` (chat history)
        self.last_text = ""
        #: model id -> owned_by, from the last /v1/models ("tokenstorm" means the emulator)
        self.models_owned_by: dict[str, str] = {}

    # -- connection ---------------------------------------------------------------------
    def _client(self) -> HTTPClient:
        if self._http is None:
            self._http = HTTPClient(
                self._host,
                self._port,
                ssl=self._ssl,
                concurrency=1,
                connection_timeout=self._connect_timeout_s,
                network_timeout=self._timeout_s,
                headers=self._headers,
            )
        return self._http

    def close(self) -> None:
        """Close the connection (also how an abandoned stream's socket is discarded)."""
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self) -> LlmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- discovery ----------------------------------------------------------------------
    def list_models(self) -> list[str]:
        """Return the ids served at ``/v1/models``; raise :class:`TargetError` if unusable."""
        try:
            with gevent.Timeout(self._connect_timeout_s + 20):
                resp = self._client().get(f"{self._prefix}/v1/models")
                body = resp.read()
        except (gevent.Timeout, OSError, HTTPConnectionClosed, HTTPParseError) as exc:
            self.close()
            raise TargetError(f"cannot reach {self._host}:{self._port} ({_describe(exc)}); check --host") from exc
        if resp.status_code != 200:
            raise TargetError(f"GET /v1/models answered HTTP {resp.status_code}; check --host and --api-key")
        try:
            data = json.loads(body)
            self.models_owned_by = {str(m["id"]): str(m.get("owned_by", "")) for m in data["data"]}
            return [str(m["id"]) for m in data["data"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise TargetError("GET /v1/models did not return an OpenAI model list") from exc

    # -- requests -----------------------------------------------------------------------
    def build_body(self, req: CompletionRequest, model: str) -> dict[str, Any]:
        """The JSON body sent for ``req`` (extra body parameters win over the defaults)."""
        body: dict[str, Any] = {"model": model, "stream": req.stream}
        if req.endpoint == "chat":
            body["messages"] = req.messages or []
        else:
            body["prompt"] = req.prompt or ""
        if req.max_tokens is not None:
            body["max_tokens"] = req.max_tokens
        if req.temperature is not None:
            body["temperature"] = req.temperature
        if req.ignore_eos:
            body["ignore_eos"] = True
        if req.stop:
            body["stop"] = req.stop
        if req.stream:
            opts: dict[str, Any] = {"include_usage": True}
            if self._continuous_usage:
                opts["continuous_usage_stats"] = True
            body["stream_options"] = opts
        body.update(req.extra_body)
        return body

    def complete(self, req: CompletionRequest, model: str) -> RequestRecord:
        """Send ``req`` and return its record; failures are categorised, not raised.

        A request interrupted by the load test stopping the user (``GreenletExit``) is returned
        with category ``cancelled``; the caller should keep it and then end the greenlet.
        """
        record = RequestRecord(
            workload=req.workload,
            endpoint=req.path,
            model=model,
            stream=req.stream,
            start_epoch_s=time.time(),
            request_id=uuid.uuid4().hex,
            user_id=self._user_id,
            worker_id=self._worker_id,
            requested_max_tokens=req.max_tokens,
            requested_prompt_tokens=req.requested_prompt_tokens,
        )
        payload = json.dumps(self.build_body(req, model), ensure_ascii=False).encode()
        headers = {**req.headers, "X-Request-Id": record.request_id}
        timer = StreamTimer(collect_text=req.collect_text)
        self.last_text = ""
        got_headers = False
        clean = False
        resp: Any = None
        t0 = time.perf_counter()
        try:
            with gevent.Timeout(self._timeout_s):
                resp = self._client().post(f"{self._prefix}{req.path}", body=payload, headers=headers)
                got_headers = True
                record.status_code = resp.status_code
                if resp.status_code != 200:
                    body = resp.read(_MAX_ERROR_BODY)
                    record.e2e_s = time.perf_counter() - t0
                    _fail(record, _http_category(resp.status_code), _error_text(resp.status_code, body))
                    clean = resp.message_complete
                    return record
                if req.stream:
                    sock = resp._sock
                    if sock is not None and self._kernel_stamps and sock is not self._stamped_sock:
                        self._kernel_stamps = _enable_kernel_timestamps(sock)
                        self._stamped_sock = sock
                    _read_stream(resp, timer, t0, self._kernel_stamps)
                    clean = True
                    if timer.texts is not None:
                        self.last_text = "".join(timer.texts)
                    timer.finish()
                    _fill_from_timer(record, timer)
                else:
                    _read_whole(resp, record, t0)
                    clean = True
                record.ok = record.error_category is None
        except StreamError as exc:
            _fill_from_timer(record, timer)
            _fail(record, exc.category, exc.detail)
        except gevent.GreenletExit:
            # The run is stopping this user mid-request: keep what was measured.
            _fill_from_timer(record, timer)
            _fail(record, ErrorCategory.CANCELLED, "stopped by the load test before the response ended")
        except gevent.Timeout:
            _fill_from_timer(record, timer)
            _fail(record, ErrorCategory.TIMEOUT, f"no complete response within {self._timeout_s:g} s")
        except (OSError, HTTPConnectionClosed, HTTPParseError) as exc:
            _fill_from_timer(record, timer)
            if isinstance(exc, socket.timeout):
                _fail(record, ErrorCategory.TIMEOUT, f"read timed out after {self._timeout_s:g} s")
            elif got_headers:
                _fail(record, ErrorCategory.STREAM_DROPPED, f"connection lost mid-response ({_describe(exc)})")
            else:
                _fail(record, ErrorCategory.CONNECT, f"no response from {self._host}:{self._port} ({_describe(exc)})")
        finally:
            if not clean:
                # Never reuse a socket with unread bytes on it: hand it back, then close the pool.
                if resp is not None:
                    resp.release()
                self.close()
        return record


# Linux SO_TIMESTAMPNS (= SCM_TIMESTAMPNS): the kernel stamps each received packet with
# CLOCK_REALTIME. Python's socket module does not export the constant.
_SO_TIMESTAMPNS = 35 if sys.platform.startswith("linux") else None
_TIMESPEC = struct.Struct("qq")


def _enable_kernel_timestamps(sock: Any) -> bool:
    if _SO_TIMESTAMPNS is None or not hasattr(sock, "recvmsg"):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def _read_stream(resp: Any, timer: StreamTimer, t0: float, kernel_stamps: bool) -> None:
    """Read SSE events as they arrive; each event is stamped with the time of the read
    that completed it (taken right after ``recv`` returns, before any parsing), so parsing
    a burst of events never shifts the later ones' timestamps.

    geventhttpclient's HTTP parser decodes the chunked body into ``resp._body_buffer`` as
    bytes are fed to it; reading that buffer per ``recv`` (rather than per ``readline``)
    costs one parser call per network read instead of one per line.
    """
    parser = SseParser()
    perf = time.perf_counter
    on_event = timer.on_event
    buf: bytearray = resp._body_buffer
    sock = resp._sock
    block = 65536
    t_read = perf() - t0
    # Kernel receive stamps are CLOCK_REALTIME; map them onto this request's perf_counter
    # axis with an offset taken now (a clock step mid-request falls back to perf_counter).
    wall_minus_perf_ns = time.time_ns() - time.perf_counter_ns()
    t0_ns = t0 * 1e9
    unpack = _TIMESPEC.unpack
    while True:
        if buf:
            data = bytes(buf)
            del buf[:]
            for payload in parser.feed(data):
                on_event(payload, t_read)
        if resp.message_complete:
            for payload in parser.flush():
                on_event(payload, t_read)
            return
        if sock is None:
            raise HTTPConnectionClosed("connection closed mid-stream")
        if kernel_stamps:
            data, ancdata, _flags, _addr = sock.recvmsg(block, 64)
            t_read = perf() - t0
            for level, kind, cdata in ancdata:
                if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(cdata) >= 16:
                    sec, nsec = unpack(cdata[:16])
                    t_kernel = (sec * 1_000_000_000 + nsec - wall_minus_perf_ns - t0_ns) / 1e9
                    if 0.0 <= t_kernel <= t_read:
                        t_read = t_kernel
        else:
            data = sock.recv(block)
            t_read = perf() - t0
        if not data:
            raise HTTPConnectionClosed("connection closed mid-stream")
        resp.feed(data)


def _read_whole(resp: Any, record: RequestRecord, t0: float) -> None:
    body = resp.read()
    record.e2e_s = time.perf_counter() - t0
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        record.finish_reason = choice.get("finish_reason")
        record.response_id = data.get("id")
        usage = data.get("usage") or {}
        record.prompt_tokens = usage.get("prompt_tokens")
        record.output_tokens = usage.get("completion_tokens")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        _fail(record, ErrorCategory.MALFORMED_CHUNK, "response body is not a completion object")
        return
    if record.output_tokens and record.output_tokens > 1:
        record.token_events = 1


def _fill_from_timer(record: RequestRecord, timer: StreamTimer) -> None:
    record.ttfc_s = timer.first_chunk_t
    record.ttft_s = timer.first_token_t
    record.ttft_visible_s = timer.first_visible_t
    record.ttft_answer_s = timer.first_answer_t
    record.e2e_s = timer.last_token_t
    record.done_s = timer.done_t
    record.itl_gaps_s = timer.itl_gaps
    record.token_events = timer.token_events
    record.reasoning_events = timer.reasoning_events
    record.finish_reason = timer.finish_reason
    record.prompt_tokens = timer.prompt_tokens
    record.output_tokens = timer.output_tokens
    record.response_id = timer.response_id
    if (
        timer.first_token_t is not None
        and timer.last_token_t is not None
        and timer.output_tokens is not None
        and timer.output_tokens > 1
    ):
        record.tpot_s = (timer.last_token_t - timer.first_token_t) / (timer.output_tokens - 1)


def _fail(record: RequestRecord, category: str, detail: str) -> None:
    record.ok = False
    record.error_category = category
    record.error_detail = detail


def _http_category(status: int) -> str:
    if status == 429:
        return ErrorCategory.RATE_LIMITED
    if status >= 500:
        return ErrorCategory.SERVER_ERROR
    return ErrorCategory.CLIENT_ERROR


def _error_text(status: int, body: bytes) -> str:
    try:
        data = json.loads(body)
        err = data.get("error", data) if isinstance(data, dict) else data
        msg = err.get("message", err) if isinstance(err, dict) else err
        text = str(msg)
    except ValueError:
        text = body.decode("utf-8", "replace")
    return f"HTTP {status}: {text[:300]}"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "host name does not resolve"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason}"
    text = str(exc) or type(exc).__name__
    return text[:200]
