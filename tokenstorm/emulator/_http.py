"""The emulator's HTTP/1.1 plumbing: reading a request, sending a whole response, chunked framing,
and closing with a reset. Which route answers what is the server's business (``_server``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from typing import Any

__all__ = ["Request", "chunk", "read_request", "reset", "send", "send_json"]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Request:
    """One HTTP request: method, path (with its query), lower-cased headers, body."""

    __slots__ = ("body", "headers", "method", "path")

    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n%b\r\n" % (len(data), data)


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on a keep-alive connection; ``None`` when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(length) if length else b""
    return Request(method.upper(), target, headers, body)


async def send(writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str) -> bool:
    """A whole response with a Content-Length; ``True``: the connection stays open."""
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: {ctype}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await writer.drain()
    return True


async def send_json(writer: asyncio.StreamWriter, status: int, obj: Any) -> bool:
    """``obj`` as a JSON response."""
    return await send(writer, status, json.dumps(obj).encode(), "application/json")


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST, as a server that refuses or crashes does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
