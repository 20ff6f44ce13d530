"""A recording TCP proxy: what a client sent and was sent, read in between (tests against real servers)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from typing import Any

__all__ = ["RecordingProxy"]


class RecordingProxy:
    """A loopback TCP proxy in front of a server that keeps every HTTP request body it forwards, by its
    X-Request-Id (``bodies``), and the SSE data payloads of each response (``events``): what the client really
    sent and was sent, read where it passed — no root needed, unlike a packet capture."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        self.bodies: dict[str, dict[str, Any]] = {}
        #: X-Request-Id -> the response's raw bytes as forwarded (headers and chunked body)
        self.responses: dict[str, bytearray] = {}
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._open: list[socket.socket] = []
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            self._open += [client, server]
            current: list[str] = [""]  # the request id the server is answering on this connection
            for args in ((server, client, None, current), (client, server, bytearray(), current)):
                self._threads.append(threading.Thread(target=self._pipe, args=args, daemon=True))
                self._threads[-1].start()

    def _pipe(self, src: socket.socket, dst: socket.socket, requests: bytearray | None, current: list[str]) -> None:
        try:
            while data := src.recv(65536):
                if requests is None:  # kept before the client can see it (and send its next request)
                    self.responses.setdefault(current[0], bytearray()).extend(data)
                else:  # read before the server can see it (and answer under the previous request's id)
                    requests += data
                    self._take(requests, current)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):  # one side done: so is the other
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _take(self, buf: bytearray, current: list[str]) -> None:
        """Every complete request at the front of ``buf`` (Content-Length bodies, as the client sends them)."""
        while (end := buf.find(b"\r\n\r\n")) >= 0:
            head = buf[:end].decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:])}
            length = int(headers.get("content-length", "0"))
            if len(buf) < end + 4 + length:
                return
            body = bytes(buf[end + 4 : end + 4 + length])
            del buf[: end + 4 + length]
            current[0] = headers.get("x-request-id", "")
            if head[0].startswith("POST") and "x-request-id" in headers:
                self.bodies[headers["x-request-id"]] = json.loads(body)

    def close(self) -> None:
        """Stop accepting, end every connection, wait for the threads."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for s in self._open:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for t in self._threads:
            t.join(timeout=5)
        for s in self._open:
            s.close()

    def events(self, request_id: str) -> list[dict[str, Any]]:
        """The JSON data payloads of the streamed response to ``request_id``, in order (``[DONE]`` left out)."""
        raw = bytes(self.responses.get(request_id, b""))
        rest = raw.partition(b"\r\n\r\n")[2]
        body = bytearray()
        while rest:  # chunked: size line, data, CRLF; a 0-size chunk ends it
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            body += rest[:size]
            rest = rest[size + 2 :]
        out = []
        for block in bytes(body).replace(b"\r\n", b"\n").split(b"\n\n"):
            data = b"\n".join(line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:"))
            if data and data != b"[DONE]":
                out.append(json.loads(data))
        return out
