"""HTTP/1.1 exchanges read back from a capture: each request, its response's token events, and when.

The client→server stream of a keep-alive connection is split at request boundaries (headers, then
``Content-Length`` bytes of body); the server→client stream at response boundaries (chunked,
``Content-Length`` or closed). Responses pair with requests in order (the client never pipelines).
A chunked body is decoded and cut into SSE events (``\\n\\n``-ended blocks of ``data:`` lines, any
line ending); each event is timed by the packet that carried its last byte — the moment a reader
could first have parsed it. Which events are *token events*, and how many tokens each carried, is read here
from the payloads by docs/metrics.md's definition, not by the client's own code (``StreamTimer``): a reference
that shared the product's reading would share its mistakes.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .pcap import ByteStream, TcpConnection

__all__ = ["WireExchange", "exchanges"]

_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(slots=True)
class WireExchange:
    """One request and its response as the wire carried them (times: capture clock, ns since the epoch)."""

    method: str
    path: str
    request_id: str | None
    #: the packet that carried the request's last byte: when it was sent, as the server could see it
    sent_ns: int
    #: the connection's SYN, when this request opened it (the client counts its TTFT from before connecting)
    connect_ns: int | None = None
    status: int | None = None
    #: per token event: the packet that completed it
    token_ns: list[int] = field(default_factory=list)
    #: per token event: the output tokens it carried (``continuous_usage_stats``; 1 without it)
    token_k: list[int] = field(default_factory=list)
    #: the packet that completed ``data: [DONE]``
    done_ns: int | None = None
    #: the response's framing ended (last chunk, all of Content-Length, or the connection closed)
    complete: bool = False

    @property
    def ttft_s(self) -> float | None:
        """POST packet → first token packet, in seconds."""
        return (self.token_ns[0] - self.sent_ns) / 1e9 if self.token_ns else None


@dataclass(slots=True)
class _Head:
    start_line: str
    headers: dict[str, str]
    body_at: int


def _head(data: bytearray, pos: int) -> _Head | None:
    end = data.find(b"\r\n\r\n", pos)
    if end < 0:
        return None
    lines = bytes(data[pos:end]).decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return _Head(lines[0], headers, end + 4)


def _requests(stream: ByteStream) -> list[WireExchange]:
    data, pos, out = stream.data, 0, []
    while (head := _head(data, pos)) is not None:
        end = head.body_at + int(head.headers.get("content-length", "0") or 0)
        if end > len(data):
            break  # cut off by the end of the capture
        method, path, *_ = head.start_line.split(" ")
        out.append(WireExchange(method, path, head.headers.get("x-request-id"), stream.time_ns(end - 1)))
        pos = end
    return out


def _body(data: bytearray, head: _Head) -> tuple[list[tuple[int, int]], int, bool]:
    """The body's pieces as (stream offset, length), where the next message starts, and whether it ended."""
    if "chunked" in head.headers.get("transfer-encoding", "").lower():
        pieces: list[tuple[int, int]] = []
        pos = head.body_at
        while (line_end := data.find(b"\r\n", pos)) >= 0:
            size = int(bytes(data[pos:line_end]).split(b";")[0], 16)
            if size == 0:
                trailer_end = data.find(b"\r\n\r\n", line_end)
                return pieces, trailer_end + 4, trailer_end >= 0
            start = line_end + 2
            if start + size + 2 > len(data):
                break
            pieces.append((start, size))
            pos = start + size + 2
        return pieces, len(data), False
    if "content-length" in head.headers:
        end = head.body_at + int(head.headers["content-length"])
        return [(head.body_at, min(end, len(data)) - head.body_at)], end, end <= len(data)
    return [(head.body_at, len(data) - head.body_at)], len(data), True  # ends when the server closes


def _read_events(stream: ByteStream, pieces: list[tuple[int, int]], ex: WireExchange) -> None:
    """Cut the body into SSE events and keep the token events' packet times."""
    body = b"".join(bytes(stream.data[s : s + n]) for s, n in pieces)
    starts, acc = [], 0
    for _s, n in pieces:
        starts.append(acc)
        acc += n
    data_lines: list[bytes] = []
    line_start = 0
    done = False
    completion: int | None = None  # the server's running usage.completion_tokens (continuous usage stats)
    for m in _LINE_END.finditer(body):
        line = body[line_start : m.start()]
        line_start = m.end()
        if line.startswith(b"data:"):
            value = line[5:]
            data_lines.append(value[1:] if value.startswith(b" ") else value)
            continue
        if line or not data_lines:
            continue
        payload = b"\n".join(data_lines)
        data_lines = []
        if done:
            continue  # nothing after [DONE] is timed
        last = m.end() - 1
        i = bisect.bisect_right(starts, last) - 1
        t_ns = stream.time_ns(pieces[i][0] + last - starts[i])
        if payload == b"[DONE]":
            ex.done_ns, done = t_ns, True
            continue
        try:
            chunk = json.loads(payload)
        except ValueError:
            return
        tokens, completion = _tokens(chunk, completion)
        if tokens:
            ex.token_ns.append(t_ns)
            ex.token_k.append(tokens)


def _tokens(chunk: Any, completion: int | None) -> tuple[int, int | None]:
    """How many tokens one chunk of a chat or completions stream carried (0: it is no token event), and the
    server's running count after it. docs/metrics.md: a token event's ``choices[0].delta`` carries ``content``,
    ``reasoning_content``/``reasoning`` (an empty string too) or tool calls — a role-only announcement does
    not; a completions chunk carries ``text``. With usage on each chunk, an event carries the count's increase
    (none: not a token event; no usage: one); tokens held back to the finish come as an empty finishing delta."""
    if not isinstance(chunk, dict):
        return 0, completion
    usage = chunk.get("usage")
    count = usage.get("completion_tokens") if isinstance(usage, dict) else None
    new = count - (completion or 0) if isinstance(count, int) else None
    completion = count if isinstance(count, int) else completion
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return 0, completion
    choice = choices[0]
    delta = choice.get("delta")
    if isinstance(delta, dict):
        text = [delta.get(key) for key in ("content", "reasoning_content", "reasoning")]
        calls = delta.get("tool_calls")
        generated = any(isinstance(t, str) for t in text) or bool(calls)
        if "role" in delta and not any(text) and not calls:
            generated = False  # the announcement that opens a chat stream (its content "" or none)
    else:
        generated = isinstance(choice.get("text"), str)
    if not generated:
        held_back = choice.get("finish_reason") is not None and bool(new)
        return (new or 0) if held_back else 0, completion
    if new == 0:
        return 0, completion
    return new or 1, completion


def exchanges(conn: TcpConnection) -> list[WireExchange]:
    """The request/response exchanges of one connection, in order."""
    out = _requests(conn.to_server)
    if out and conn.syn_ns is not None:
        out[0].connect_ns = conn.syn_ns
    data, pos = conn.to_client.data, 0
    for ex in out:
        head = _head(data, pos)
        if head is None:
            break
        parts = head.start_line.split(" ")
        ex.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        pieces, pos, ex.complete = _body(data, head)
        if "text/event-stream" in head.headers.get("content-type", ""):
            _read_events(conn.to_client, pieces, ex)
        if not ex.complete:
            break
    return out
