"""HTTP/1.1 exchanges read back from a capture: each request, its response's token events, and when.

The client→server stream of a keep-alive connection is split at request boundaries (headers, then
``Content-Length`` bytes of body); the server→client stream at response boundaries (chunked,
``Content-Length`` or closed). Responses pair with requests in order (the client never pipelines).
A chunked body is decoded and cut into SSE events (``\\n\\n``-ended blocks of ``data:`` lines, any
line ending); each event is timed by the packet that carried its last byte — the moment a reader
could first have parsed it. Which events are *token events* is decided by the client's own
definition (``workloads.client.timing.StreamTimer``), fed the same payloads.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from workloads.client.timing import StreamError, StreamTimer

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
    timer = StreamTimer(think_tags=None)  # markers decide reasoning vs answer, never what is a token event
    data_lines: list[bytes] = []
    line_start = 0
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
        last = m.end() - 1
        i = bisect.bisect_right(starts, last) - 1
        t_ns = stream.time_ns(pieces[i][0] + last - starts[i])
        events, gaps = timer.token_events, len(timer.itl_gaps)
        try:
            timer.on_event(payload, (t_ns - ex.sent_ns) / 1e9)
        except StreamError:
            return
        if payload == b"[DONE]" and ex.done_ns is None:
            ex.done_ns = t_ns
        if timer.token_events > events:
            ex.token_ns.append(t_ns)
            ex.token_k.append(len(timer.itl_gaps) - gaps + (1 if events == 0 else 0))


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
