"""A gevent-friendly client for vLLM's OpenAI-compatible completion endpoints.

One :class:`LlmClient` per simulated user (one keep-alive :class:`~workloads._http.HttpConnection`).
Streams are parsed per SSE event as bytes arrive, each event stamped with the receive time of
the read that completed it (the kernel's, on Linux plain TCP), so a burst of events parsed
together keeps its own arrival times.
Every request ends as a :class:`~tokenstorm.workloads.RequestRecord`, successful or not; failures get
an :class:`~tokenstorm.workloads.ErrorCategory` instead of an exception, and a detail with the client's secrets
masked (:mod:`.failures`). Credentials in the URL (``http://user:password@host``) are sent as Basic
auth and kept out of everything the client stores.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import gevent
import orjson

from ..rundir.records import LATE_EVENT_S, ErrorCategory, RequestRecord
from ..rundir.secrets import authorization_header, redact, split_credentials
from .api_bodies import ANTHROPIC_VERSION, request_body
from .api_streams import MessagesStream, ResponsesStream
from .failures import STALL, describe, error_text, fail, http_category, secrets_of
from .http import HttpConnection, HttpResponse, ProtocolError
from .limits import ResponseCap
from .reading import fill_from_timer, read_stream, read_whole
from .request import CompletionRequest
from .server_timing import trace_id_of, traceparent
from .stall import Stalled, StallWatch
from .timing import THINK_TAGS, StreamError, StreamTimer

__all__ = ["Answer", "CompletionRequest", "LlmClient", "TargetError"]

_MAX_ERROR_BODY = 2048
#: the readers of the streams that are not OpenAI chunks (chat and completions: the timer itself)
_READERS = {"messages": MessagesStream, "responses": ResponsesStream}


class TargetError(Exception):
    """The target could not be used at all (unreachable, no models); the message is for users."""


@dataclass(slots=True)
class Answer:
    """What a streamed answer said, kept for a request that asked for ``collect_text``: its text (after any
    reasoning) and its tool calls in the form a chat history carries them back (``{"id", "type": "function",
    "function": {"name", "arguments"}}``, the arguments the concatenated string the server streamed)."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def message(self) -> dict[str, Any]:
        """The assistant message this answer adds to a chat history."""
        if self.tool_calls:
            return {"role": "assistant", "content": self.text or None, "tool_calls": self.tool_calls}
        return {"role": "assistant", "content": self.text}


def may_think(req: CompletionRequest) -> bool:
    """False when the request turned thinking off (``chat_template_kwargs.enable_thinking: false``):
    then a ``</think>`` in the answer is text about the tags, never the end of reasoning."""
    ctk = req.extra_body.get("chat_template_kwargs") if req.extra_body else None
    return not (isinstance(ctk, dict) and ctk.get("enable_thinking") is False)


class LlmClient:
    """Sends completion requests and times them; never raises for a failed request.

    ``timeout_s`` bounds a whole request; ``stall_timeout_s`` fails one that got no byte for that
    long (before its headers or mid-stream: category ``stall``), however long it has been healthy.
    ``api_key`` is sent as ``Bearer KEY``; else ``authorization`` (the whole header value, e.g.
    ``Basic dXNlcjpwYXNz``), else the credentials of a ``user:password@`` URL as Basic auth. These, and
    ``secrets`` (more texts: the run's other keys), are masked in every text stored from a server.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        authorization: str | None = None,
        secrets: Iterable[str] = (),
        timeout_s: float = 600.0,
        stall_timeout_s: float | None = None,
        connect_timeout_s: float = 10.0,
        continuous_usage: bool = True,
        user_id: int = 0,
        worker_id: str = "local",
        kernel_timestamps: bool = True,
        think_tags: tuple[str, str] | None = THINK_TAGS,
        target: str = "",
    ) -> None:
        if stall_timeout_s is not None and stall_timeout_s <= 0:
            raise ValueError(f"stall_timeout_s must be > 0 (None: no stall timeout), not {stall_timeout_s!r}")
        url, credentials = split_credentials(base_url if "://" in base_url else f"http://{base_url}")
        if credentials is not None:
            base_url = url  # the password goes in the header only, never in what is stored or shown
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TargetError(f"host {base_url!r} is not an http(s) URL like http://gpu-host:8000")
        self._host = parts.hostname
        #: the target as given, without credentials or a trailing '/': the key of per-target state (its model)
        self.base_url = base_url.rstrip("/")
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = parts.scheme == "https"
        prefix = parts.path.rstrip("/")
        self._prefix = prefix[: -len("/v1")] if prefix.endswith("/v1") else prefix
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        self._get_headers = {"Accept": "application/json"}
        header = authorization_header(api_key, None) or authorization or authorization_header(None, credentials)
        if header:
            self._headers["Authorization"] = self._get_headers["Authorization"] = header
        #: what Messages requests add: Anthropic's key header (the same key as the Bearer one) and version
        self._messages_headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": api_key} if api_key else {})}
        #: what is masked in every text the client stores from a server (see :mod:`.failures`)
        self._secrets = secrets_of(api_key, credentials, header, secrets)
        self._timeout_s = timeout_s
        self._stall_timeout_s = stall_timeout_s
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
        #: the answer of the last request that asked for ``collect_text`` (chat history): its text, and
        #: text and tool calls together (``last_answer``)
        self.last_text = ""
        self.last_answer = Answer()
        #: when the last request's clock started (``perf_counter``: its bytes left, after any connect)
        self.last_sent = 0.0
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
                # No per-read socket timeout: each request runs under one gevent.Timeout (and one
                # StallWatch timer), and a socket timeout would arm a timer on every read (measured:
                # ~5% of client CPU).
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
            why = redact(describe(exc), self._secrets)[:200]
            raise TargetError(f"cannot reach {self._host}:{self._port} ({why}); check --host") from exc
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
        """The JSON body sent for ``req`` in its API (extra body parameters win over the defaults)."""
        return request_body(req, model, continuous_usage=self._continuous_usage)

    def complete(self, req: CompletionRequest, model: str) -> RequestRecord:
        """Send ``req`` and return its record; failures are categorised, not raised.

        A request interrupted by the load test stopping the user (``GreenletExit``) is returned
        with category ``cancelled``; the caller should keep it and then end the greenlet.
        """
        body = self.build_body(req, model)
        record = self._new_record(req, model, body)
        payload = orjson.dumps(body)
        wire_id = self._wire_id(record.request_id)
        # The trace id is the wire id's: A/B twins (one record id) are two requests, one trace each.
        record.trace_id = trace_id_of(wire_id)
        headers = self._request_headers(req, record.trace_id, wire_id)
        think_tags = self._think_tags if may_think(req) else None
        cap = ResponseCap.of(body, len(payload))
        timer = StreamTimer(collect_text=req.collect_text or bool(req.checks), think_tags=think_tags, cap=cap)
        reader = _READERS[req.endpoint](timer) if req.endpoint in _READERS else timer
        self.last_text, self.last_answer = "", Answer()
        conn = self._connection()
        resp: HttpResponse | None = None
        secrets = self._secrets
        t0 = t_prepare = time.perf_counter()
        try:
            with gevent.Timeout(self._timeout_s), StallWatch(self._stall_timeout_s, conn) as stall:
                # Connecting (or noticing a connection the server closed) is not the request's time:
                # it is done before the clock starts, and the clock starts as the bytes leave.
                opened = conn.connects
                conn.prepare()
                t0 = time.perf_counter()
                stall.start(t0)
                if conn.connects != opened:
                    record.connect_s = t0 - t_prepare
                resp = conn.request("POST", f"{self._prefix}{req.path}", headers, payload, t_sent=t0)
                t0 = resp.t_sent
                if resp.send_wait_s > LATE_EVENT_S:
                    timer.ttft_late = True  # the request left up to send_s after t0 (preempted mid-send)
                # The record's start on the shared timeline is the moment its clock started.
                record.start_epoch_s = time.time() - (time.perf_counter() - t0)
                record.status_code = resp.status
                if resp.status != 200:
                    err_body = resp.read(_MAX_ERROR_BODY)
                    record.e2e_s = time.perf_counter() - t0
                    fail(record, http_category(resp.status), error_text(resp.status, err_body), secrets)
                    return record
                if req.stream:
                    read_stream(resp, timer, t0, cap, reader.on_event)
                    if timer.texts is not None:
                        self.last_text = "".join(timer.texts)
                        self.last_answer = Answer(self.last_text, timer.collected_tool_calls())
                    reader.finish()
                    fill_from_timer(record, timer)
                elif (bad := read_whole(resp, record, t0, cap, req.endpoint)) is not None:
                    fail(record, *bad, secrets)
                record.ok = record.error_category is None
        except StreamError as exc:
            fill_from_timer(record, timer)
            fail(record, exc.category, exc.detail, secrets)
        except gevent.GreenletExit:
            # The run is stopping this user mid-request: keep what was measured.
            fill_from_timer(record, timer)
            fail(record, ErrorCategory.CANCELLED, "stopped by the load test before the response ended", secrets)
        except (gevent.Timeout, Stalled) as exc:
            fill_from_timer(record, timer)
            record.e2e_s = time.perf_counter() - t0  # when the client gave up, not its last token
            fail(record, *self._gave_up(exc, record, resp), secrets)
        except (OSError, ProtocolError) as exc:
            fill_from_timer(record, timer)
            fail(record, *self._io_failure(exc, resp), secrets)
        finally:
            self.last_sent = t0  # every way out, an HTTP error's early return included
            # Keep-alive only after a response read to its end; otherwise its unread bytes go
            # with the socket, so the next request starts on a clean connection.
            if resp is None or not resp.complete:
                conn.close()
        if resp is not None:
            record.read_lag_max_s = resp.read_lag_max_s
        # The agent loop ends with an answer that calls no tool (or where the traffic model planned its end).
        record.session_end = req.final_step or (bool(req.tools) and record.ok and record.tool_calls == 0)
        record.timing_violation = record.check_timing()
        return record

    def _new_record(self, req: CompletionRequest, model: str, body: dict[str, Any]) -> RequestRecord:
        """The request's record before it is sent: what was asked, by whom, of which target."""
        sent_max = body.get("max_completion_tokens", body.get("max_tokens", body.get("max_output_tokens")))
        return RequestRecord(
            workload=req.workload,
            endpoint=req.path,
            model=model,
            stream=req.stream,
            start_epoch_s=time.time(),
            request_id=req.request_id or uuid.uuid4().hex,
            user_id=self._user_id,
            target=self._target,
            worker_id=self._worker_id,
            # what the server was asked for: an --extra-body max_tokens wins over the workload's
            requested_max_tokens=sent_max if isinstance(sent_max, int) else req.max_tokens,
            requested_prompt_tokens=req.requested_prompt_tokens,
            session_id=req.session_id,
            step=req.step,
            needle_depth=req.needle_depth,
        )

    def _request_headers(self, req: CompletionRequest, trace_id: str, wire_id: str) -> dict[str, str]:
        """The request's headers: the client's (auth), the API's, the request's own, its id and trace context."""
        return {
            **self._headers,
            **(self._messages_headers if req.endpoint == "messages" else {}),
            **req.headers,
            "X-Request-Id": wire_id,
            "traceparent": traceparent(trace_id, wire_id),
        }

    def _io_failure(self, exc: OSError | ProtocolError, resp: HttpResponse | None) -> tuple[str, str]:
        """A socket error's category and detail: no connection, no response, or a connection lost mid-response."""
        if isinstance(exc, socket.timeout):
            # Reads have no socket timeout (the whole request has one): this is the connect.
            within = f"within {self._connect_timeout_s:g} s"
            return ErrorCategory.CONNECT, f"no connection to {self._host}:{self._port} {within}"
        if resp is not None:
            return ErrorCategory.STREAM_DROPPED, f"connection lost mid-response ({describe(exc)})"
        return ErrorCategory.CONNECT, f"no response from {self._host}:{self._port} ({describe(exc)})"

    def _gave_up(
        self, exc: gevent.Timeout | Stalled, record: RequestRecord, resp: HttpResponse | None
    ) -> tuple[str, str]:
        """Why the client gave up on the request: the whole request's timeout, or a stall (and where)."""
        if not isinstance(exc, Stalled):
            return ErrorCategory.TIMEOUT, f"no complete response within {self._timeout_s:g} s"
        return STALL, self._stall_detail(record, resp)

    def _stall_detail(self, record: RequestRecord, resp: HttpResponse | None) -> str:
        quiet = f"no byte for {self._stall_timeout_s:g} s (stall timeout)"
        if resp is None:
            return f"{quiet} before the response headers"
        tokens = record.output_tokens if record.output_tokens is not None else record.token_events
        return f"{quiet} after {tokens} tokens"
