"""A raw HTTP/1.1 client for the emulator's tests: each chunk of a chunked answer as it arrived (the emulator
writes one chunk a write, so a chunk is what went out at one deadline) and the SSE events in it, with no
tokenstorm client code in between; and the vLLM 0.32 captures the framing is compared with."""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
#: the project's own captures of a real vLLM 0.32 (tests/fixtures/vllm/README.md says how each was made)
FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm"


@dataclass
class Event:
    """One SSE event: its ``event:`` name (None: chat's, which has none), its data (parsed, or the raw text
    when it is not JSON), the chunk it came in and when that chunk arrived (seconds after the request was sent)."""

    name: str | None
    data: Any
    chunk: int
    t: float


@dataclass
class Reply:
    """An answer as it came: status, headers, the chunks of a chunked body or the whole body, and whether the
    body ended as HTTP says it should (a terminating chunk; False when the connection was cut)."""

    status: int
    headers: dict[str, str]
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    body: bytes = b""
    complete: bool = True

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)

    def events(self) -> list[Event]:
        """The SSE events of every chunk, in order."""
        out = []
        for i, (t, data) in enumerate(self.chunks):
            for block in data.split(b"\n\n"):
                if block.strip():
                    out.append(_event(block.decode(), i, t))
        return out

    def names(self) -> list[str | None]:
        """The events' names, in order."""
        return [e.name for e in self.events()]


def _event(block: str, chunk: int, t: float) -> Event:
    name = None
    data = ""
    for line in block.split("\n"):
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
    try:
        return Event(name, json.loads(data), chunk, t)
    except ValueError:
        return Event(name, data, chunk, t)


def post(
    url: str,
    path: str,
    body: Any,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    max_chunks: int | None = None,
    max_bytes: int = 1 << 24,
) -> Reply:
    """POST ``body`` (JSON, or bytes as they are) and read the whole answer (``max_chunks``, ``max_bytes``: close
    after that many chunks, or bytes of a whole body, for an answer that never ends). A connection closed before
    any answer raises ``ConnectionError``."""
    parts = urllib.parse.urlsplit(url)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nhost: {parts.netloc}\r\ncontent-type: application/json\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head += f"content-length: {len(data)}\r\nconnection: close\r\n\r\n"
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s) as sock:
        sent = time.perf_counter()
        sock.sendall(head.encode() + data)
        with sock.makefile("rb") as f:
            line = f.readline()
            if not line:
                raise ConnectionError("closed before an answer")
            status = int(line.split()[1])
            found = {}
            while (line := f.readline().strip()) != b"":
                name, _, value = line.decode().partition(":")
                found[name.lower()] = value.strip()
            reply = Reply(status, found)
            if found.get("transfer-encoding") != "chunked":
                reply.body = f.read(min(max_bytes, int(found.get("content-length", "0"))))
                return reply
            while max_chunks is None or len(reply.chunks) < max_chunks:
                size = f.readline()
                if not size.strip():
                    reply.complete = False  # cut before the terminating chunk
                    return reply
                n = int(size, 16)
                if n == 0:
                    return reply
                reply.chunks.append((time.perf_counter() - sent, f.read(n)))
                f.readline()
            reply.complete = False
            return reply


def get_json(url: str, path: str) -> Any:
    """GET ``path`` as JSON."""
    with urllib.request.urlopen(url + path, timeout=10) as resp:
        return json.loads(resp.read())


def truth(url: str, request_id: str) -> dict[str, Any]:
    """The emulator's truth of the request sent with ``X-Request-Id: request_id``."""
    return next(t for t in get_json(url, "/emulator/truth") if t["request_id"] == request_id)


def capture(name: str, folder: Path = DATA) -> list[Event]:
    """The events of a vLLM 0.32 capture in ``folder`` (``data/`` by default), all in one chunk."""
    return Reply(200, {}, [(0.0, (folder / name).read_bytes())]).events()


def shape(value: Any) -> Any:
    """The keys of ``value`` in order, recursively (lists by their first item): what must match vLLM's."""
    if isinstance(value, dict):
        return [(k, shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None
