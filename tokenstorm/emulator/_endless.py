"""The ``endless`` fault: an answer that never ends, as a server that ignores ``max_tokens`` (or loops) sends.

A stream is token events forever — no ``finish_reason``, no ``[DONE]`` — each with its cumulative usage when
the request asked for ``continuous_usage_stats``; a non-streamed answer is a body announced as a terabyte and
written forever. Events are paced at ``--itl-ms`` after ``--ttft-ms`` (0: as fast as the client reads); it
ends only when the client closes the connection, which is what a client-side cap on a response must do.
The Messages and Responses APIs (:class:`EndlessFrames`) send their own opening events, then text deltas forever.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._config import EmulatorConfig
from ._http import chunk

__all__ = ["EndlessFrames", "endless"]

_BLOCK = 65536
_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


@dataclass(frozen=True, slots=True)
class EndlessFrames:
    """An API's endless answer: a stream's opening events, its ``n``-th text event (from 1), and the start of a
    whole body (written, then filler, forever)."""

    opening: bytes
    event: Callable[[int], bytes]
    whole_start: bytes


async def endless(
    writer: asyncio.StreamWriter,
    config: EmulatorConfig,
    body: dict[str, Any],
    chat: bool,
    prompt_tokens: int,
    frames: EndlessFrames | None = None,
) -> bool:
    """Answer forever; return ``False`` (the connection is not reused) once the client has gone. ``frames``: the
    API's own events (None: chat's, or a completion's when ``chat`` is False)."""
    await asyncio.sleep(config.ttft_s)
    try:
        if frames is not None and body.get("stream"):
            writer.write(_HEAD + chunk(frames.opening))
            await _forever(writer, config, frames.event)
        elif body.get("stream"):
            await _stream(writer, config, body, chat, prompt_tokens)
        else:
            await _whole(writer, chat, frames.whole_start if frames is not None else None)
    except ConnectionError:
        pass
    return False


async def _stream(
    writer: asyncio.StreamWriter, config: EmulatorConfig, body: dict[str, Any], chat: bool, prompt_tokens: int
) -> None:
    opts = body.get("stream_options")
    continuous = isinstance(opts, dict) and bool(opts.get("continuous_usage_stats"))
    writer.write(_HEAD)
    kind = "chat.completion.chunk" if chat else "text_completion"
    head = {
        "id": "chatcmpl-endless" if chat else "cmpl-endless",
        "object": kind,
        "created": int(time.time()),
        "model": str(body.get("model", config.model)),
    }
    choice = {"index": 0, "delta": {"content": " tok"}} if chat else {"index": 0, "text": " tok"}
    choice["finish_reason"] = None

    def event(sent: int) -> bytes:
        event: dict[str, Any] = {**head, "choices": [choice]}
        if continuous:
            event["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": sent,
                "total_tokens": prompt_tokens + sent,
            }
        return b"data: " + json.dumps(event).encode() + b"\n\n"

    await _forever(writer, config, event)


async def _forever(writer: asyncio.StreamWriter, config: EmulatorConfig, event: Callable[[int], bytes]) -> None:
    """Write ``event(1)``, ``event(2)``... at the ITL pace until the client has gone."""
    deadline = time.perf_counter()
    sent = 0
    while not writer.transport.is_closing():
        sent += 1
        writer.write(chunk(event(sent)))
        if config.itl_s > 0:
            deadline += config.itl_s
            await asyncio.sleep(max(0.0, deadline - time.perf_counter()))
        if writer.transport.get_write_buffer_size() > _BLOCK or sent % 64 == 0:
            await writer.drain()  # waits for the client to read, and lets the loop see it close


async def _whole(writer: asyncio.StreamWriter, chat: bool, start: bytes | None) -> None:
    if start is None:
        start = b'{"id": "cmpl-endless", "choices": [{"index": 0, '
        start += b'"message": {"role": "assistant", "content": "' if chat else b'"text": "'
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%b" % (1 << 40, start)
    )
    block = b"tok " * (_BLOCK // 4)
    while not writer.transport.is_closing():
        writer.write(block)
        await writer.drain()
