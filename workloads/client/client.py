"""A gevent-friendly client for vLLM's OpenAI-compatible completion endpoints.

One :class:`LlmClient` per simulated user (one keep-alive :class:`~workloads._http.HttpConnection`).
Streams are parsed per SSE event as bytes arrive, each event stamped with the receive time of
the read that completed it (the kernel's, on Linux plain TCP), so a burst of events parsed
together keeps its own arrival times.
Every request ends as a :class:`~workloads.RequestRecord`, successful or not; failures get
an :class:`~workloads.ErrorCategory` instead of an exception.
"""

from __future__ import annotations

import socket
import ssl
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import gevent
import orjson

from ..rundir.records import ErrorCategory, RequestRecord
from .http import HttpConnection, HttpResponse, ProtocolError
from .sse import SseParser
from .timing import THINK_TAGS, StreamError, StreamTimer

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
    #: the record's id (A/B twins share one); empty: a fresh random one
    request_id: str = ""

    @property
    def path(self) -> str:
        """The API path (without any base-URL prefix)."""
        return "/v1/chat/completions" if self.endpoint == "chat" else "/v1/completions"


def may_think(req: CompletionRequest) -> bool:
    """False when the request turned thinking off (``chat_template_kwargs.enable_thinking: false``):
    then a ``</think>`` in the answer is text about the tags, never the end of reasoning."""
    ctk = req.extra_body.get("chat_template_kwargs") if req.extra_body else None
    return not (isinstance(ctk, dict) and ctk.get("enable_thinking") is False)


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
        think_tags: tuple[str, str] | None = THINK_TAGS,
        target: str = "",
    ) -> None:
        parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TargetError(f"host {base_url!r} is not an http(s) URL like http://gpu-host:8000")
        self._host = parts.hostname
        #: the target as given (no trailing '/'): the key of per-target state (its model)
        self.base_url = base_url.rstrip("/")
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = parts.scheme == "https"
        prefix = parts.path.rstrip("/")
        self._prefix = prefix[: -len("/v1")] if prefix.endswith("/v1") else prefix
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        self._get_headers = {"Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = self._get_headers["Authorization"] = f"Bearer {api_key}"
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._continuous_usage = continuous_usage
        self._user_id = user_id
        self._worker_id = worker_id
        # Plain TCP on Linux: time events by the kernel's packet receive stamps, so a busy
        # client (many streams on one core) does not add its own scheduling delay to them.
        self._kernel_stamps = kernel_timestamps
        #: markers of reasoning inside ``content`` (servers without a reasoning parser); None: off
        self._think_tags = think_tags
        #: the A/B target's label its records carry (``--targets``)
        self._target = target
        self._conn: HttpConnection | None = None
        #: the answer of the last request that asked for ``collect_text`` (chat history)
        self.last_text = ""
        #: model id -> owned_by, from the last /v1/models ("tokenstorm" means the emulator)
        self.models_owned_by: dict[str, str] = {}

    # -- connection ---------------------------------------------------------------------
    def _connection(self) -> HttpConnection:
        if self._conn is None:
            self._conn = HttpConnection(
                self._host,
                self._port,
                use_ssl=self._ssl,
                connect_timeout_s=self._connect_timeout_s,
                # No per-read socket timeout: each request runs under one gevent.Timeout, and a
                # socket timeout would arm a timer on every read (measured: ~5% of client CPU).
                read_timeout_s=None,
                kernel_timestamps=self._kernel_stamps,
            )
        return self._conn

    def _wire_id(self, request_id: str) -> str:
        """The X-Request-Id sent: A/B twins share the record's id, and each server gets it with
        the target's label, so two labels on one server never reuse an id in flight."""
        return f"{request_id}.{self._target}" if self._target else request_id

    @property
    def worker_id(self) -> str:
        """The load-generator process its records name (``local`` outside distributed runs)."""
        return self._worker_id

    @property
    def connects(self) -> int:
        """TCP connections opened so far (keep-alive: one per user unless the server closes it)."""
        return self._conn.connects if self._conn is not None else 0

    def close(self) -> None:
        """Close the connection (also how an abandoned stream's bytes are discarded)."""
        if self._conn is not None:
            self._conn.close()

    def __enter__(self) -> LlmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- discovery ----------------------------------------------------------------------
    def list_models(self) -> list[str]:
        """Return the ids served at ``/v1/models``; raise :class:`TargetError` if unusable."""
        try:
            with gevent.Timeout(self._connect_timeout_s + 20):
                resp = self._connection().request("GET", f"{self._prefix}/v1/models", self._get_headers)
                body = resp.read()
        except (gevent.Timeout, OSError, ProtocolError) as exc:
            self.close()
            raise TargetError(f"cannot reach {self._host}:{self._port} ({_describe(exc)}); check --host") from exc
        if resp.status != 200:
            raise TargetError(f"GET /v1/models answered HTTP {resp.status}; check --host and --api-key")
        try:
            data = orjson.loads(body)
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
            request_id=req.request_id or uuid.uuid4().hex,
            user_id=self._user_id,
            target=self._target,
            worker_id=self._worker_id,
            requested_max_tokens=req.max_tokens,
            requested_prompt_tokens=req.requested_prompt_tokens,
        )
        payload = orjson.dumps(self.build_body(req, model))
        headers = {**self._headers, **req.headers, "X-Request-Id": self._wire_id(record.request_id)}
        timer = StreamTimer(collect_text=req.collect_text, think_tags=self._think_tags if may_think(req) else None)
        self.last_text = ""
        conn = self._connection()
        resp: HttpResponse | None = None
        t0 = time.perf_counter()
        try:
            with gevent.Timeout(self._timeout_s):
                resp = conn.request("POST", f"{self._prefix}{req.path}", headers, payload, t_sent=t0)
                record.status_code = resp.status
                if resp.status != 200:
                    body = resp.read(_MAX_ERROR_BODY)
                    record.e2e_s = time.perf_counter() - t0
                    _fail(record, _http_category(resp.status), _error_text(resp.status, body))
                    return record
                if req.stream:
                    _read_stream(resp, timer, t0)
                    if timer.texts is not None:
                        self.last_text = "".join(timer.texts)
                    timer.finish()
                    _fill_from_timer(record, timer)
                else:
                    _read_whole(resp, record, t0)
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
            record.e2e_s = time.perf_counter() - t0  # when the client gave up, not its last token
            _fail(record, ErrorCategory.TIMEOUT, f"no complete response within {self._timeout_s:g} s")
        except (OSError, ProtocolError) as exc:
            _fill_from_timer(record, timer)
            if isinstance(exc, socket.timeout):
                # Reads have no socket timeout (the whole request has one): this is the connect.
                _fail(record, ErrorCategory.CONNECT,
                      f"no connection to {self._host}:{self._port} within {self._connect_timeout_s:g} s")  # fmt: skip
            elif resp is not None:
                _fail(record, ErrorCategory.STREAM_DROPPED, f"connection lost mid-response ({_describe(exc)})")
            else:
                _fail(record, ErrorCategory.CONNECT, f"no response from {self._host}:{self._port} ({_describe(exc)})")
        finally:
            # Keep-alive only after a response read to its end; otherwise its unread bytes go
            # with the socket, so the next request starts on a clean connection.
            if resp is None or not resp.complete:
                conn.close()
        record.timing_violation = record.check_timing()
        return record


def _read_stream(resp: HttpResponse, timer: StreamTimer, t0: float) -> None:
    """Feed SSE events to the timer, each stamped with the read that completed it (kernel
    receive time where available, see :mod:`workloads._http`), as seconds since ``t0``."""
    parser = SseParser()
    on_event = timer.on_event
    feed = parser.feed
    t = t0
    for piece, t in resp.body():
        for payload in feed(piece):
            on_event(payload, t - t0)
    for payload in parser.flush():
        on_event(payload, t - t0)


def _read_whole(resp: HttpResponse, record: RequestRecord, t0: float) -> None:
    body = resp.read()
    record.e2e_s = time.perf_counter() - t0
    try:
        data = orjson.loads(body)
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
    record.reasoning_tokens = timer.reasoning_tokens if timer.reasoning_events else 0
    record.finish_reason = timer.finish_reason
    record.prompt_tokens = timer.prompt_tokens
    record.output_tokens = timer.output_tokens
    record.response_id = timer.response_id
    record.tpot_s = timer.tpot_s


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
        data = orjson.loads(body)
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
