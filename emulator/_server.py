"""The emulated vLLM OpenAI-compatible server (asyncio, HTTP/1.1 keep-alive, chunked SSE).

It runs in its own process so that the load generator's gevent scheduling never leaks into
the timings it imposes. Every chunk is written at an absolute deadline on the event loop's
monotonic clock, and the times it was really written are kept per request (``/emulator/truth``
and the optional truth log) so tests can compare the client's measurements with the truth.
The OpenAI-compatible JSON bodies live in ``_payloads``, what it says of itself (version, model
list, engine configuration) in ``_about``, the HTTP/1.1 framing in ``_http``; this module holds the
routes, the pacing and capacity model, fault injection and the truth record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import secrets
import socket
import time
import uuid
from collections import deque
from typing import Any, TextIO

from ._about import cache_config_labels, models_body, server_version
from ._config import FAULT_KINDS, EmulatorConfig
from ._http import Request, chunk, read_request, reset, send, send_json
from ._metrics import EmulatorMetrics
from ._payloads import (
    ERROR_FAULTS,
    Plan,
    estimate_prompt_tokens,
    fault_error,
    filler_text,
    sse_event,
    tagged_text,
    usage_event,
    whole_response,
)
from ._truth import Truth, prompt_digest, truth_dict

__all__ = ["EmulatorServer"]


class EmulatorServer:
    """Serves ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``, ``/health``, ``/version``, ``/metrics``."""

    def __init__(self, config: EmulatorConfig) -> None:
        config.validate()
        self.config = config
        self.metrics = EmulatorMetrics(config.model, cache_config_labels(config))
        #: the seed of this server's draws: ``config.seed``, or a fresh one so runs differ (``--seed`` replays)
        self.seed = config.seed if config.seed is not None else secrets.randbits(32)
        self._rng = random.Random(self.seed)
        self._slots = asyncio.Semaphore(config.max_num_seqs)
        self._running = 0
        self._waiting = 0
        self._kv_tokens = 0
        self._truths: deque[Truth] = deque(maxlen=20000)
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
            return await send_json(
                writer,
                200,
                {
                    "ttft_s": self.config.ttft_s,
                    "itl_s": self.config.itl_s,
                    "max_num_seqs": self.config.max_num_seqs,
                    "seed": self.seed,
                },
            )
        if req.method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            return await self._completion(req, writer, chat=path.endswith("chat/completions"))
        return await send_json(writer, 404, {"error": {"message": f"no route {path}", "code": 404}})

    # -- completions --------------------------------------------------------------------
    async def _completion(self, req: Request, writer: asyncio.StreamWriter, chat: bool) -> bool:
        arrived = time.perf_counter()
        try:
            body = json.loads(req.body)
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except ValueError as exc:
            return await send_json(
                writer, 400, {"error": {"message": f"invalid JSON body: {exc}", "type": "BadRequestError", "code": 400}}
            )
        fault = self._pick_fault(req.headers.get("x-emulator-fault"))
        if fault == "refuse":
            reset(writer)
            return False
        if fault in ERROR_FAULTS:
            return await send_json(writer, *fault_error(fault, req.headers))
        prompt_tokens = estimate_prompt_tokens(body, chat)
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            max_tokens = max(1, self.config.max_model_len - prompt_tokens)
        if body.get("ignore_eos"):
            output_tokens, finish = max_tokens, "length"
        else:
            natural = max(1, int(self._rng.lognormvariate(math.log(self.config.natural_output_tokens), 0.5)))
            output_tokens, finish = (natural, "stop") if natural < max_tokens else (max_tokens, "length")
        ctk = body.get("chat_template_kwargs") or {}
        thinking = chat and isinstance(ctk, dict) and bool(ctk.get("enable_thinking"))
        reasoning_tokens = int(output_tokens * self.config.reasoning_share) if thinking else 0
        if self.config.reasoning_format == "tags" and reasoning_tokens == 1:
            reasoning_tokens = 2 if output_tokens > 2 else 0  # "<think>" and "</think>" are a token each
        truth = Truth(
            req.headers.get("x-request-id", uuid.uuid4().hex),
            fault,
            prompt_tokens,
            output_tokens,
            self.config.ttft_s + self.config.prefill_s_per_token * prompt_tokens,
            self.config.itl_s,
            reasoning_tokens=reasoning_tokens,
            prompt_sha=prompt_digest(body),
        )
        stream = bool(body.get("stream"))
        opts = body.get("stream_options") or {}
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        continuous = isinstance(opts, dict) and bool(opts.get("continuous_usage_stats"))
        plan = Plan(
            chat,
            str(body.get("model", self.config.model)),
            prompt_tokens,
            output_tokens,
            finish,
            reasoning_tokens,
            include_usage,
            continuous,
        )

        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        self._running += 1
        self._kv_tokens += prompt_tokens
        start = time.perf_counter()
        truth.queue_s = start - arrived
        self.metrics.prompt_tokens.labels(**self.metrics.lab()).inc(prompt_tokens)
        generated = 0
        try:
            if stream:
                keep, generated = await self._stream(writer, plan, truth, arrived, start, fault)
            else:
                await _sleep_until(start + truth.imposed_ttft_s + self.config.itl_s * (output_tokens - 1))
                generated = output_tokens
                keep = await send_json(writer, 200, whole_response(plan, filler_text(self._rng, output_tokens)))
            if keep or fault is None:
                e2e = time.perf_counter() - arrived
                self.metrics.e2e.labels(**self.metrics.lab()).observe(e2e)
                self.metrics.success.labels(**self.metrics.lab(), finished_reason=finish).inc()
            return keep
        finally:
            self._running -= 1
            self._kv_tokens -= prompt_tokens
            self.metrics.generation_tokens.labels(**self.metrics.lab()).inc(generated)
            self._slots.release()
            self._record_truth(truth)

    async def _stream(
        self, writer: asyncio.StreamWriter, plan: Plan, truth: Truth, arrived: float, start: float, fault: str | None
    ) -> tuple[bool, int]:
        cfg = self.config
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        writer.write(head)
        rid = ("chatcmpl-" if plan.chat else "cmpl-") + truth.request_id[:24]
        created = int(time.time())
        if plan.chat:
            writer.write(
                chunk(
                    sse_event(
                        plan, rid, created, {"role": "assistant", "content": ""}, None, 0 if plan.continuous else None
                    )
                )
            )
        n_chunks = math.ceil(plan.output_tokens / cfg.tokens_per_chunk)
        fault_at = max(1, n_chunks // 2)
        first_deadline = start + truth.imposed_ttft_s
        sent_tokens = 0
        prev_t: float | None = None
        lab = self.metrics.lab()
        for i in range(n_chunks):
            k = min(cfg.tokens_per_chunk, plan.output_tokens - sent_tokens)
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
                    writer.write(chunk(b'data: {"id": "broken", "choices": [\n\n'))
                if fault == "stall":
                    await asyncio.sleep(cfg.stall_s)
            finish = plan.finish if sent_tokens + k == plan.output_tokens else None
            text = filler_text(self._rng, k)
            if cfg.empty_chunk_share and self._rng.random() < cfg.empty_chunk_share:
                text = ""
            answer_begins = plan.reasoning_tokens and sent_tokens <= plan.reasoning_tokens < sent_tokens + k
            if plan.chat and plan.reasoning_tokens and cfg.reasoning_format != "field":
                delta: dict[str, Any] = {"content": tagged_text(self._rng, plan, sent_tokens, k, text,
                                                                cfg.reasoning_format == "tags")}  # fmt: skip
            elif plan.chat:
                if cfg.reasoning_format == "field" and plan.reasoning_tokens:
                    answer_begins = sent_tokens >= plan.reasoning_tokens and truth.ttft_answer_s is None
                key = "reasoning_content" if sent_tokens < plan.reasoning_tokens else "content"
                delta = {key: text}
            else:
                delta = {"text": text}
            sent_tokens += k
            writer.write(chunk(sse_event(plan, rid, created, delta, finish, sent_tokens if plan.continuous else None)))
            now = time.perf_counter()
            if answer_begins:
                truth.ttft_answer_s = now - arrived
            if prev_t is None:
                truth.ttft_s = now - arrived
                self.metrics.ttft.labels(**lab).observe(now - arrived)
            else:
                truth.itl_s.append(now - prev_t)
                self.metrics.itl.labels(**lab).observe(now - prev_t)
            prev_t = now
            self._kv_tokens += k
            if writer.transport.get_write_buffer_size() > 65536:
                await writer.drain()
        self._kv_tokens -= sent_tokens
        if plan.include_usage:
            writer.write(chunk(usage_event(plan, rid, created, sent_tokens)))
        if fault != "no_done":
            writer.write(chunk(b"data: [DONE]\n\n"))
        writer.write(b"0\r\n\r\n")
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
