"""Incremental Server-Sent Events parser.

Network reads and SSE events do not line up: one read may hold half an event, or several.
The parser is fed whatever bytes arrived and hands back only complete events, each the
joined ``data:`` lines of one blank-line-terminated block (the SSE spec). Comment lines
(``: keep-alive``) and fields other than ``data`` are dropped; CRLF, LF and CR line ends
are all accepted, even when a CRLF pair is split across two reads.
"""

from __future__ import annotations

__all__ = ["SseParser"]


class SseParser:
    """Turns a byte stream into SSE ``data`` payloads, one per complete event."""

    __slots__ = ("_data_lines", "_pending")

    def __init__(self) -> None:
        self._pending = b""
        self._data_lines: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """Consume ``chunk`` and return the payloads of every event it completed."""
        if self._pending or self._data_lines or chunk[-2:] != b"\n\n" or b"\r" in chunk:
            return self._feed_lines(chunk)
        # The common read: whole events and nothing held from the last one. Split it by event, not by line
        # (measured: half the time of the line loop), each block ended by its blank line; most often one event.
        end = len(chunk) - 2
        if chunk.find(b"\n") == end and chunk[:5] == b"data:":
            return [chunk[6:end] if chunk[5:6] == b" " else chunk[5:end]]
        events: list[bytes] = []
        for block in chunk[:-2].split(b"\n\n"):
            if block.startswith(b"data:") and b"\n" not in block:
                events.append(block[6:] if block[5:6] == b" " else block[5:])
                continue
            data = [line[6:] if line[5:6] == b" " else line[5:] for line in block.split(b"\n") if line[:5] == b"data:"]
            if data:
                events.append(data[0] if len(data) == 1 else b"\n".join(data))
        return events

    def _feed_lines(self, chunk: bytes) -> list[bytes]:
        """The general case, line by line: an event cut across reads, CR line ends, a read ending mid-event."""
        buf = self._pending + chunk if self._pending else chunk
        if b"\r" in buf:
            # Hold back a trailing CR: it may be the first half of a CRLF split across reads.
            hold = buf.endswith(b"\r")
            if hold:
                buf = buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if hold:
                buf += b"\r"
        lines = buf.split(b"\n")
        self._pending = lines.pop()
        events: list[bytes] = []
        data_lines = self._data_lines
        for line in lines:
            if not line:
                if data_lines:
                    events.append(data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines))
                    data_lines.clear()
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                data_lines.append(value[1:] if value.startswith(b" ") else value)
            # Comments (":..."), "event:", "id:" and "retry:" carry nothing we time.
        return events

    @property
    def pending(self) -> bool:
        """Whether bytes of an event not yet complete are held (more of it is to come)."""
        return bool(self._pending or self._data_lines)

    def flush(self) -> list[bytes]:
        """Return an event left unterminated when the stream ended (for diagnostics)."""
        if self._pending.startswith(b"data:"):
            self._data_lines.append(self._pending[5:].lstrip(b" "))
        self._pending = b""
        events = [b"\n".join(self._data_lines)] if self._data_lines else []
        self._data_lines = []
        return events
