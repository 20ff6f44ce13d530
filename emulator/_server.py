"""The emulated vLLM OpenAI-compatible server (asyncio, HTTP/1.1 keep-alive, chunked SSE).

It runs in its own process so that the load generator's gevent scheduling never leaks into
the timings it imposes. Every chunk is written at an absolute deadline on the event loop's
monotonic clock, and the times it was really written are kept per request (``/emulator/truth``: the newest
:data:`TRUTHS_KEPT`; the optional truth log: every one) so tests can compare the client's measurements with the truth.
The OpenAI-compatible JSON bodies live in ``_payloads``, what it answers in ``_answers`` (``_wrong``: wrong
on purpose), what it says of itself (version, model list, engine configuration) in ``_about``, the HTTP/1.1
framing in ``_http``; this module holds the routes, the pacing and capacity model, fault injection and the
truth record.
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
from ._answers import Answered, answer_for, token_text, whole_text
from ._config import FAULT_KINDS, EmulatorConfig
from ._endless import endless
from ._http import Request, chunk, read_request, reset, send, send_json
from ._metrics import EmulatorMetrics
from ._payloads import (
    ERROR_FAULTS,
    Plan,
    fault_error,
    prompt_text,
    prompt_tokens_of,
    sse_event,
    usage_event,
    whole_response,
)
from ._prefix_cache import PrefixCache
from ._tools import ToolCall, ToolRequestError, tool_delta, tool_mode
from ._truth import Truth, per_request_metrics, prompt_digest, trace_id_of, truth_dict

__all__ = ["TRUTHS_KEPT", "EmulatorServer"]

#: requests whose truth ``/emulator/truth`` keeps (the newest); ``--truth-log`` writes every one
TRUTHS_KEPT = 20_000


class EmulatorServer:
    """Serves ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``, ``/health``, ``/version``, ``/metrics``."""

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
        try:
            tool_choice, functions = tool_mode(body, self.config.tool_calls) if chat else ("none", [])
        except ToolRequestError as exc:
            return await send_json(writer, 400, exc.body())
        fault = self._pick_fault(req.headers.get("x-emulator-fault"))
        if fault == "refuse":
            reset(writer)
            return False
        if fault in ERROR_FAULTS:
            return await send_json(writer, *fault_error(fault, req.headers))
        text = prompt_text(body, chat)
        prompt = text.encode("utf-8")
        prompt_tokens = prompt_tokens_of(prompt)
        if fault == "endless":
            return await endless(writer, self.config, body, chat, prompt_tokens)
        answered = self._answer(body, chat, text, prompt, prompt_tokens, tool_choice, functions)
        output_tokens, finish, reasoning_tokens, call = (answered.output_tokens, answered.finish,
                                                         answered.reasoning_tokens, answered.call)  # fmt: skip
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
            pieces=answered.pieces,
            thinking=answered.thinking,
            more=answered.more,
        )

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
        if self._prefix_cache.enabled:
            self.metrics.prefix_queries.labels(**lab).inc(prompt_tokens)
            self.metrics.prefix_hits.labels(**lab).inc(plan.cached_tokens)
        prefilled = prompt_tokens - plan.cached_tokens
        truth.imposed_ttft_s = self.config.ttft_s + self.config.prefill_s_per_token * prefilled
        generated = 0
        try:
            if stream:
                keep, generated = await self._stream(writer, plan, call, truth, arrived, start, fault)
            else:
                await _sleep_until(start + truth.imposed_ttft_s + self.config.itl_s * (output_tokens - 1))
                generated = output_tokens
                truth.server_ttft_s = truth.imposed_ttft_s  # the whole answer at once: its parts as imposed
                truth.decoded(time.perf_counter() - start - truth.imposed_ttft_s, output_tokens)
                if call is None:
                    answer = whole_response(plan, whole_text(plan, self.config.reasoning_format))
                else:
                    n = output_tokens - reasoning_tokens
                    truth.tool_calls, truth.tool_call_ids, truth.tool_call_tokens = 1, [call.call_id], n
                    answer = whole_response(plan, "", call.history_entry(n))
                if self.config.per_request_metrics:
                    answer["metrics"] = per_request_metrics(truth)
                keep = await send_json(writer, 200, answer)
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

    def _answer(self, body: dict[str, Any], chat: bool, text: str, prompt: bytes, prompt_tokens: int,
                tool_choice: str, functions: list[dict[str, Any]]) -> Answered:  # fmt: skip
        """What the request is answered with (``_answers``), spoiled by the ``--wrong-*`` knobs drawn for it."""
        answered = answer_for(self.config, body, chat, text, prompt, prompt_tokens, tool_choice, functions,
                              self._rng, self._wrong_rng, self._running)  # fmt: skip
        if answered.call is not None and body.get("temperature") == 0:  # the same call, but an id of its own
            answered.call.call_id = f"chatcmpl-tool-{self._rng.getrandbits(64):016x}"
        return answered

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        plan: Plan,
        call: ToolCall | None,
        truth: Truth,
        arrived: float,
        start: float,
        fault: str | None,
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
        # A tool call, or the answer after reasoning in its own field, starts an event of its own.
        split = plan.reasoning_tokens if call or cfg.reasoning_format == "field" else 0
        sizes = _chunk_sizes(plan.output_tokens, cfg.tokens_per_chunk, split)
        fault_at = max(1, len(sizes) // 2)
        first_deadline = start + truth.imposed_ttft_s
        sent_tokens = 0
        prev_t = first_t = 0.0
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
                    writer.write(chunk(b'data: {"id": "broken", "choices": [\n\n'))
                if fault == "stall":
                    await asyncio.sleep(cfg.stall_s)
            finish = plan.finish if sent_tokens + k == plan.output_tokens else None
            tool_event = call is not None and sent_tokens >= plan.reasoning_tokens
            if tool_event and call is not None:
                delta = tool_delta(call, sent_tokens - plan.reasoning_tokens, k)
                answer_begins = plan.reasoning_tokens > 0 and sent_tokens == plan.reasoning_tokens
                if sent_tokens == plan.reasoning_tokens:
                    truth.tool_calls, truth.tool_call_ids, truth.tool_call_tokens = 1, [call.call_id], 0
            else:
                delta, answer_begins = self._content_delta(plan, truth, sent_tokens, k)
            sent_tokens += k
            if i == 0:
                truth.ttft_before_write_s = time.perf_counter() - arrived
            writer.write(chunk(sse_event(plan, rid, created, delta, finish, sent_tokens if plan.continuous else None)))
            now = time.perf_counter()
            if answer_begins:
                truth.ttft_answer_s = now - arrived
            if tool_event:
                if truth.ttft_tool_s is None:
                    truth.ttft_tool_s = now - arrived
                truth.tool_call_s = now - arrived
                truth.tool_call_tokens = (truth.tool_call_tokens or 0) + k
            if i == 0:
                first_t = now
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
        if sizes:
            truth.server_ttft_s = first_t - start
            truth.decoded(prev_t - first_t, sent_tokens)
        if plan.include_usage:
            metrics = per_request_metrics(truth) if cfg.per_request_metrics else None
            writer.write(chunk(usage_event(plan, rid, created, sent_tokens, metrics)))
        if fault != "no_done":
            writer.write(chunk(b"data: [DONE]\n\n"))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True, sent_tokens

    def _content_delta(self, plan: Plan, truth: Truth, sent_tokens: int, k: int) -> tuple[dict[str, Any], bool]:
        """The delta of an event of text tokens ``sent_tokens .. +k-1``, and whether the answer begins in it."""
        cfg = self.config
        r = plan.reasoning_tokens
        tags = cfg.reasoning_format if plan.chat and r and cfg.reasoning_format != "field" else None
        text = "".join(token_text(plan, j, tags) for j in range(sent_tokens, sent_tokens + k))
        end = sent_tokens + k
        # An empty event (partial UTF-8) holds its text back for the next event of the same field.
        more = end < plan.output_tokens and not (tags is None and r and end == r)
        if more and cfg.empty_chunk_share and self._rng.random() < cfg.empty_chunk_share:
            plan.held, text = plan.held + text, ""
        else:
            plan.held, text = "", plan.held + text
        answer_begins = bool(r) and sent_tokens <= r < end
        if plan.chat and tags is None and r:
            answer_begins = sent_tokens >= r and truth.ttft_answer_s is None
            return {"reasoning_content" if sent_tokens < r else "content": text}, answer_begins
        if plan.chat:
            return {"content": text}, answer_begins
        return {"text": text}, answer_begins

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


def _chunk_sizes(tokens: int, per_chunk: int, split: int) -> list[int]:
    """Tokens per event: ``per_chunk`` at a time, an event ending at token ``split`` (0: none) before the rest."""
    sizes: list[int] = []
    for begin, end in ((0, split), (split, tokens)) if 0 < split < tokens else ((0, tokens),):
        sizes.extend(min(per_chunk, end - t) for t in range(begin, end, per_chunk))
    return sizes


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
