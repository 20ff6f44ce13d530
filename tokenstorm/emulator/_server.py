"""The emulated vLLM OpenAI-compatible server (asyncio, HTTP/1.1 keep-alive, chunked SSE).

It runs in its own process so that the load generator's gevent scheduling never leaks into
the timings it imposes. Every chunk is written at an absolute deadline on the event loop's
monotonic clock, and the times it was really written are kept per request (``/emulator/truth``: the newest
:data:`TRUTHS_KEPT`; the optional truth log: every one) so tests can compare the client's measurements with the truth.
The OpenAI-compatible JSON bodies live in ``_payloads``, what it answers in ``_answers`` (``_wrong``: wrong
on purpose), what it says of itself (version, model list, engine configuration) in ``_about``, the HTTP/1.1
framing in ``_http``. Four APIs answer with tokens — chat and completions (``_framing``), Anthropic Messages
(``_messages``) and OpenAI Responses (``_responses``) — each request read into the chat route's terms and each
engine step's chat delta framed in its API's events; this module holds the routes, the pacing and capacity
model, fault injection and the truth record (the times of the events that carry tokens on the API's wire).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import secrets
import socket
import time
import uuid
from collections import deque
from typing import Any, TextIO

from ._about import cache_config_labels, config_body, models_body, server_version
from ._answers import Answered, answer_for
from ._config import FAULT_KINDS, EmulatorConfig
from ._endless import endless
from ._framing import CHAT, COMPLETIONS, Api, Converted, Framing, RequestRefused, content_delta, whole_answer
from ._http import Request, chunk, read_request, reset, send, send_json
from ._messages import MESSAGES
from ._metrics import EmulatorMetrics
from ._payloads import ERROR_FAULTS, Plan, chunk_sizes, fault_error, prompt_text, prompt_tokens_of
from ._prefix_cache import PrefixCache
from ._responses import RESPONSES
from ._tools import ToolCall, tool_delta
from ._truth import Truth, per_request_metrics, prompt_digest, trace_id_of, truth_dict

__all__ = ["TRUTHS_KEPT", "EmulatorServer"]

#: requests whose truth ``/emulator/truth`` keeps (the newest); ``--truth-log`` writes every one
TRUTHS_KEPT = 20_000
#: the routes that answer with tokens, and their APIs
_ROUTES = {
    "/v1/chat/completions": CHAT,
    "/v1/completions": COMPLETIONS,
    "/v1/messages": MESSAGES,
    "/v1/responses": RESPONSES,
}
#: what vLLM's FastAPI app answers a route it does not have (an API left out by ``--endpoints``)
_NOT_FOUND = b'{"detail":"Not Found"}'
_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


class EmulatorServer:
    """Serves ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``, ``/v1/messages``, ``/v1/responses``,
    ``/health``, ``/version``, ``/metrics``."""

    def __init__(self, config: EmulatorConfig) -> None:
        config.validate()
        self.config = config
        self.metrics = EmulatorMetrics(config.model, cache_config_labels(config))
        #: the seed of this server's draws: ``config.seed``, or a fresh one so runs differ (``--seed`` replays)
        self.seed = config.seed if config.seed is not None else secrets.randbits(32)
        self._rng = random.Random(self.seed)
        #: the --wrong-* draws: their own generator, so that they leave the other draws of a seed as they were
        self._wrong_rng = random.Random(f"wrong/{self.seed}")
        self._slots = asyncio.Semaphore(config.max_num_seqs)
        self._running = 0
        self._waiting = 0
        self._kv_tokens = 0
        self._prefix_cache = PrefixCache(config.prefix_cache_blocks, config.block_size)
        self._truths: deque[Truth] = deque(maxlen=TRUTHS_KEPT)
        self._truth_fh: TextIO | None = open(config.truth_log, "a") if config.truth_log else None  # noqa: SIM115
        self._server: asyncio.Server | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Start listening; return the bound port."""
        self._server = await asyncio.start_server(self._serve_connection, host, port, backlog=4096)
        return int(self._server.sockets[0].getsockname()[1])

    async def serve_forever(self) -> None:
        """Run until cancelled."""
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    # -- HTTP plumbing ------------------------------------------------------------------
    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                req = await read_request(reader)
                if req is None:
                    break
                keep_alive = await self._dispatch(req, writer)
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()

    async def _dispatch(self, req: Request, writer: asyncio.StreamWriter) -> bool:
        path = req.path.split("?", 1)[0]
        if req.method == "GET" and path == "/health":
            return await send(writer, 200, b"", "text/plain")
        key = self.config.api_key
        if key and path.startswith("/v1/") and req.headers.get("authorization") != f"Bearer {key}":
            return await send_json(writer, 401, {"error": {"message": "Unauthorized", "code": 401}})
        if req.method == "GET" and path == "/v1/models":
            return await send_json(writer, 200, models_body(self.config))
        if req.method == "GET" and path == "/version":
            return await send_json(writer, 200, {"version": server_version()})
        if req.method == "GET" and path == "/metrics":
            self._refresh_gauges()
            return await send(writer, 200, self.metrics.render(), "text/plain; version=0.0.4")
        if req.method == "GET" and path == "/emulator/truth":
            return await send_json(writer, 200, [truth_dict(t) for t in self._truths])
        if req.method == "GET" and path == "/emulator/config":
            return await send_json(writer, 200, config_body(self.config, self.seed))
        api = _ROUTES.get(path)
        if api is not None and api.name not in self.config.endpoints:
            return await send(writer, 404, _NOT_FOUND, "application/json")
        if req.method == "POST" and api is not None:
            return await self._completion(req, writer, api)
        return await send_json(writer, 404, {"error": {"message": f"no route {path}", "code": 404}})

    # -- completions --------------------------------------------------------------------
    async def _completion(self, req: Request, writer: asyncio.StreamWriter, api: Api) -> bool:
        arrived = time.perf_counter()
        try:
            raw = json.loads(req.body)
            if not isinstance(raw, dict):
                raise ValueError("body is not an object")
        except ValueError as exc:
            return await send_json(
                writer, 400, {"error": {"message": f"invalid JSON body: {exc}", "type": "BadRequestError", "code": 400}}
            )
        try:
            asked = api.convert(raw, self.config)
        except RequestRefused as exc:
            return await send(writer, exc.status, api.encode(exc.body), "application/json")
        fault = self._pick_fault(req.headers.get("x-emulator-fault"))
        if fault == "refuse":
            reset(writer)
            return False
        if fault in ERROR_FAULTS:
            status, error = fault_error(fault, req.headers)
            return await send(writer, status, api.encode(api.error(error)), "application/json")
        body, chat = asked.body, asked.chat
        text = prompt_text(body, chat)
        prompt = text.encode("utf-8")
        prompt_tokens = prompt_tokens_of(prompt)
        model = str(body.get("model", self.config.model))
        if fault == "endless":
            frames = api.endless(model) if api.endless is not None else None
            return await endless(writer, self.config, body, chat, prompt_tokens, frames)
        truth, plan, call = self._plan(req, asked, api, fault, text, prompt, prompt_tokens, model)
        start = await self._admit(plan, truth, prompt, prompt_tokens, arrived)
        lab = self.metrics.lab()
        output_tokens, finish = plan.output_tokens, plan.finish
        framing = api.framing(plan, asked, api.id_prefix + truth.request_id[:24], int(time.time()), self.config)
        generated = 0
        try:
            if body.get("stream"):
                keep, generated = await self._stream(writer, framing, plan, call, truth, arrived, start, fault)
            else:
                await _sleep_until(start + truth.imposed_ttft_s + self.config.itl_s * (output_tokens - 1))
                generated = output_tokens
                truth.server_ttft_s = truth.imposed_ttft_s  # the whole answer at once: its parts as imposed
                truth.decoded(time.perf_counter() - start - truth.imposed_ttft_s, output_tokens)
                metrics = per_request_metrics(truth) if self.config.per_request_metrics else None
                whole = framing.whole(whole_answer(plan, call, truth, self.config.reasoning_format), metrics)
                keep = await send(writer, 200, whole, "application/json")
            if keep or fault is None:
                e2e = time.perf_counter() - arrived
                self.metrics.e2e.labels(**lab).observe(e2e)
                self.metrics.success.labels(**lab, finished_reason=finish).inc()
            return keep
        finally:
            self._running -= 1
            self._kv_tokens -= prompt_tokens
            self.metrics.generation_tokens.labels(**lab).inc(generated)
            self._slots.release()
            self._record_truth(truth)

    def _plan(
        self,
        req: Request,
        asked: Converted,
        api: Api,
        fault: str | None,
        text: str,
        prompt: bytes,
        prompt_tokens: int,
        model: str,
    ) -> tuple[Truth, Plan, ToolCall | None]:
        """What the request gets: its answer planned token by token, and the truth log's entry for it."""
        body, chat = asked.body, asked.chat
        answered = self._answer(body, chat, text, prompt, prompt_tokens, asked.tool_choice, asked.functions)
        output_tokens, reasoning_tokens = answered.output_tokens, answered.reasoning_tokens
        truth = Truth(
            req.headers.get("x-request-id", uuid.uuid4().hex),
            fault,
            prompt_tokens,
            output_tokens,
            self.config.ttft_s + self.config.prefill_s_per_token * prompt_tokens,
            self.config.itl_s,
            reasoning_tokens=reasoning_tokens,
            prompt_sha=prompt_digest(body),
            wrong=sorted(answered.wrong),
            trace_id=trace_id_of(req.headers.get("traceparent")),
            api=api.name,
        )
        opts = body.get("stream_options") or {}
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        continuous = isinstance(opts, dict) and bool(opts.get("continuous_usage_stats"))
        plan = Plan(
            chat, model, prompt_tokens, output_tokens, answered.finish, reasoning_tokens, include_usage, continuous
        )
        plan.pieces, plan.thinking, plan.more = answered.pieces, answered.thinking, answered.more
        return truth, plan, answered.call

    async def _admit(self, plan: Plan, truth: Truth, prompt: bytes, prompt_tokens: int, arrived: float) -> float:
        """The front end's time, then a ``--max-num-seqs`` slot (queued until one is free) and the prefix cache's
        look-up; returns when the request was scheduled (its prefill starts)."""
        if self.config.frontend_s:
            await _sleep_until(arrived + self.config.frontend_s)  # the front end, before the request is queued
        queued = time.perf_counter()
        truth.frontend_s = queued - arrived
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        self._running += 1
        self._kv_tokens += prompt_tokens
        start = time.perf_counter()
        truth.queue_s = start - queued
        lab = self.metrics.lab()
        self.metrics.prompt_tokens.labels(**lab).inc(prompt_tokens)
        # Looked up when the request is scheduled (a slot free), as vLLM's scheduler does: only the
        # prompt tokens not cached are prefilled.
        plan.cached_tokens = truth.cached_tokens = self._prefix_cache.admit(prompt, prompt_tokens)
        plan.created_tokens = self._prefix_cache.created(prompt_tokens, plan.cached_tokens)
        if self._prefix_cache.enabled:
            self.metrics.prefix_queries.labels(**lab).inc(prompt_tokens)
            self.metrics.prefix_hits.labels(**lab).inc(plan.cached_tokens)
        prefilled = prompt_tokens - plan.cached_tokens
        truth.imposed_ttft_s = self.config.ttft_s + self.config.prefill_s_per_token * prefilled
        return start

    def _answer(
        self,
        body: dict[str, Any],
        chat: bool,
        text: str,
        prompt: bytes,
        prompt_tokens: int,
        tool_choice: str,
        functions: list[dict[str, Any]],
    ) -> Answered:
        """What the request is answered with (``_answers``), spoiled by the ``--wrong-*`` knobs drawn for it."""
        answered = answer_for(
            self.config,
            body,
            chat,
            text,
            prompt,
            prompt_tokens,
            tool_choice,
            functions,
            self._rng,
            self._wrong_rng,
            self._running,
        )
        if answered.call is not None and body.get("temperature") == 0:  # the same call, but an id of its own
            answered.call.call_id = f"chatcmpl-tool-{self._rng.getrandbits(64):016x}"
        return answered

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        framing: Framing,
        plan: Plan,
        call: ToolCall | None,
        truth: Truth,
        arrived: float,
        start: float,
        fault: str | None,
    ) -> tuple[bool, int]:
        cfg = self.config
        opening = framing.opening()
        writer.write(_STREAM_HEAD + (chunk(opening) if opening else b""))
        if opening:
            truth.ttfc_s = time.perf_counter() - arrived
        # A tool call, or the answer after reasoning in its own field, starts an event of its own.
        r = plan.reasoning_tokens
        split = r if call or cfg.reasoning_format == "field" else 0
        sizes = chunk_sizes(plan.output_tokens, cfg.tokens_per_chunk, split)
        fault_at = max(1, len(sizes) // 2)
        first_deadline = start + truth.imposed_ttft_s
        sent_tokens = 0
        prev_t = first_t = token_t = 0.0
        lab = self.metrics.lab()
        for i, k in enumerate(sizes):
            deadline = first_deadline + (sent_tokens + k - 1) * cfg.itl_s
            if cfg.jitter_s and i > 0:
                deadline += self._rng.uniform(-cfg.jitter_s, cfg.jitter_s)
            await _sleep_until(deadline)
            if writer.transport.is_closing():
                # The client went away (a run stopped mid-stream): stop generating, as vLLM
                # aborts a request whose client disconnected. Writing on would only make asyncio
                # log a warning per write.
                self._kv_tokens -= sent_tokens
                return False, sent_tokens
            if fault is not None and i == fault_at:
                if fault == "drop":
                    writer.transport.abort()
                    return False, sent_tokens
                if fault == "malformed":
                    writer.write(chunk(framing.malformed()))
                if fault == "stall":
                    await asyncio.sleep(cfg.stall_s)
            finish = plan.finish if sent_tokens + k == plan.output_tokens else None
            tool_event = call is not None and sent_tokens >= r
            if call is not None and tool_event:
                delta = tool_delta(call, sent_tokens - r, k)
                if sent_tokens == r:
                    truth.tool_calls, truth.tool_call_ids, truth.tool_call_tokens = 1, [call.call_id], 0
            else:
                delta = content_delta(plan, sent_tokens, k, cfg, self._rng)
            sent_tokens += k
            data, token_event = framing.step(delta, finish, sent_tokens)
            if token_event and truth.ttft_s is None:
                truth.ttft_before_write_s = time.perf_counter() - arrived
            if data:  # an API may send nothing for a step (Messages drops an empty text delta)
                writer.write(chunk(data))
            now = time.perf_counter()
            token_t = truth.note_event(now, arrived, token_t, bool(data), token_event, tool_event, k)
            if token_event and r and truth.ttft_answer_s is None and sent_tokens > r:
                truth.ttft_answer_s = now - arrived
            if i == 0:  # the engine's own times: a step's tokens, whatever its API sent of them
                first_t = now
                self.metrics.ttft.labels(**lab).observe(now - arrived)
            else:
                self.metrics.itl.labels(**lab).observe(now - prev_t)
            prev_t = now
            self._kv_tokens += k
            if writer.transport.get_write_buffer_size() > 65536:
                await writer.drain()
        self._kv_tokens -= sent_tokens
        if sizes:
            truth.server_ttft_s = first_t - start
            truth.decoded(prev_t - first_t, sent_tokens)
        metrics = per_request_metrics(truth) if cfg.per_request_metrics else None
        closing = framing.closing(sent_tokens, metrics, fault != "no_done")
        writer.write((chunk(closing) if closing else b"") + b"0\r\n\r\n")
        await writer.drain()
        return True, sent_tokens

    # -- helpers ------------------------------------------------------------------------
    def _pick_fault(self, requested: str | None) -> str | None:
        if requested:
            return requested if requested in FAULT_KINDS else None
        for kind, prob in self.config.faults.items():
            if prob > 0 and self._rng.random() < prob:
                return kind
        return None

    def _refresh_gauges(self) -> None:
        lab = self.metrics.lab()
        self.metrics.running.labels(**lab).set(self._running)
        self.metrics.waiting.labels(**lab).set(self._waiting)
        self.metrics.kv_usage.labels(**lab).set(min(1.0, self._kv_tokens / self.config.kv_cache_tokens))

    def _record_truth(self, truth: Truth) -> None:
        self._truths.append(truth)
        if self._truth_fh is not None:
            self._truth_fh.write(json.dumps(truth_dict(truth)) + "\n")
            self._truth_fh.flush()


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
